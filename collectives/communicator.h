// The collectives' C++ API. A Communicator is a group of ranks connected by RC QPs, made from a
// rendezvous store (or the launcher's environment). Every rank must issue the same collectives
// in the same order, with the same counts, type, operation and root, as with NCCL and MPI;
// operations in the same order on every rank are checked (a mismatch is an Error, not a hang).
// One application thread at a time may use a communicator.
//
//   auto comm = roce::coll::Communicator::from_env();     // torchrun / mpirun / srun
//   comm->all_reduce(in, out, count, DataType::kFloat32, ReduceOp::kSum);
//   Work w = comm->all_reduce_async(in, out, count, ...); /* compute */ w.wait();
//
// Errors throw roce::coll::Error (error.h): a dead peer or a QP in error fails the running
// operation on every rank within options().timeout, naming the rank; the communicator is
// unusable afterwards (each later call fails with the same error).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "collectives/config.h"
#include "collectives/error.h"
#include "collectives/peer_counters.h"
#include "collectives/store.h"
#include "collectives/types.h"

namespace roce::coll {

class Op;
enum class OpKind : uint8_t;
class Transport;
class Worker;

// The handle of an asynchronous operation.
class Work {
 public:
  struct State;
  Work() = default;
  explicit Work(std::shared_ptr<State> s) : state_(std::move(s)) {}
  // True once the operation finished; throws its Error if it failed.
  bool test();
  // Blocks until the operation finished; throws its Error if it failed.
  void wait();
  bool valid() const { return state_ != nullptr; }

 private:
  std::shared_ptr<State> state_;
};

class Communicator {
 public:
  // `store` must be fresh for this group (or a PrefixStore of its own); rank in [0, size).
  static std::unique_ptr<Communicator> create(std::shared_ptr<Store> store, int rank, int size,
                                              const CommOptions& options = CommOptions::from_env());
  // Rank and size from the arguments, else the launcher (launch_env.h); the store from
  // ROCE_COLL_STORE: "tcp" (default: rank 0 serves at MASTER_ADDR:MASTER_PORT) or "file:DIR".
  static std::unique_ptr<Communicator> from_env(std::optional<int> rank = {},
                                                std::optional<int> size = {});
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const;
  int size() const;
  const CommOptions& options() const;
  // Device, port, GID and MTU in use (benchmarks print it).
  std::string describe() const;

  // Counts are in elements. in == out is the in-place form (for all_gather: in == out + rank *
  // count; for reduce_scatter: out == in + rank * recv_count).
  void all_reduce(const void* in, void* out, size_t count, DataType type, ReduceOp op);
  void reduce_scatter(const void* in, void* out, size_t recv_count, DataType type, ReduceOp op);
  void all_gather(const void* in, void* out, size_t count, DataType type);
  // `in` matters at the root only; every rank's `out` receives the root's data.
  void broadcast(const void* in, void* out, size_t count, DataType type, int root);
  // `out` matters at the root only.
  void reduce(const void* in, void* out, size_t count, DataType type, ReduceOp op, int root);
  // Block q of `in` (count elements) goes to rank q; block q of `out` comes from rank q.
  void all_to_all(const void* in, void* out, size_t count, DataType type);
  // Per peer counts and displacements, in elements (size() entries each).
  void all_to_all_v(const void* in, const size_t* send_counts, const size_t* send_displs, void* out,
                    const size_t* recv_counts, const size_t* recv_displs, DataType type);
  void barrier();
  // Point to point: each send must meet a recv of the same count and type on `peer`.
  void send(const void* buf, size_t count, DataType type, int peer);
  void recv(void* buf, size_t count, DataType type, int peer);
  // A send to `to` and a receive from `from` at once (as ncclGroupStart / ncclSend / ncclRecv /
  // ncclGroupEnd): ranks in a ring can all call it without waiting on each other.
  void send_recv(const void* send_buf, int to, void* recv_buf, int from, size_t count,
                 DataType type);

  // The same, started on the communicator's worker thread; they run in the order started, and
  // a blocking call first waits for those started before it.
  Work all_reduce_async(const void* in, void* out, size_t count, DataType type, ReduceOp op);
  Work reduce_scatter_async(const void* in, void* out, size_t recv_count, DataType type,
                            ReduceOp op);
  Work all_gather_async(const void* in, void* out, size_t count, DataType type);
  Work broadcast_async(const void* in, void* out, size_t count, DataType type, int root);
  Work reduce_async(const void* in, void* out, size_t count, DataType type, ReduceOp op, int root);
  Work all_to_all_async(const void* in, void* out, size_t count, DataType type);
  Work barrier_async();

  // Sub-groups, as MPI_Comm_split / ncclCommSplit: collective over this communicator; ranks
  // with the same colour form one, ordered by key then rank; a negative colour joins none
  // (nullptr).
  std::unique_ptr<Communicator> split(int color, int key);

  // Keeps [p, p + n) registered for the communicator's life (or until deregistered), so
  // operations on buffers inside it register nothing (as ncclCommRegister).
  void register_memory(const void* p, size_t n);
  void deregister_memory(const void* p);

  // Admission counters toward each rank ([rank()] is all zero): grants, bytes, time spent
  // waiting for a grant, peak bytes in flight and granted (peer.h). Read between operations.
  std::vector<PeerCounters> peer_counters();

  // Tears the communicator down now, without the closing barrier (as ncclCommAbort): for a
  // rank that gives up. Its peers' running and later operations fail, naming this rank. Every
  // later call here throws.
  void abort();

 private:
  struct Call {
    std::string label;
    uint32_t sig;
    std::function<void(Op&)> body;
  };
  Communicator(std::shared_ptr<Store> store, int rank, int size, const CommOptions& options);
  Call make_call(OpKind kind, const char* name, size_t count, DataType type, ReduceOp op, int root,
                 std::function<void(Op&)> body);
  Call all_reduce_call(const void* in, void* out, size_t count, DataType type, ReduceOp op);
  Call reduce_scatter_call(const void* in, void* out, size_t recv_count, DataType type,
                           ReduceOp op);
  Call all_gather_call(const void* in, void* out, size_t count, DataType type);
  Call broadcast_call(const void* in, void* out, size_t count, DataType type, int root);
  Call reduce_call(const void* in, void* out, size_t count, DataType type, ReduceOp op, int root);
  Call all_to_all_call(const void* in, void* out, size_t count, DataType type);
  Call barrier_call();
  Call point_to_point_call(const char* what, const void* buf, size_t count, DataType type, int peer,
                           std::function<void(Op&)> body);
  void run(Call call);
  Work submit(Call call);
  void drain();
  void check_type(DataType type, ReduceOp op, bool reduces) const;
  void check_root(int root, const char* what) const;
  void check_buffer(const void* p, size_t count, DataType type, const char* what) const;
  void check_peer(int peer, const char* what) const;
  Transport& transport();

  std::shared_ptr<Store> store_;
  CommOptions options_;
  int rank_, size_;
  std::unique_ptr<Transport> transport_;
  std::unique_ptr<Worker> worker_;
  uint64_t collectives_ = 0;  // issued so far: each one's number, in its signature
  uint64_t splits_ = 0;
};

}  // namespace roce::coll
