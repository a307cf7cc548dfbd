#include "collectives/communicator.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "collectives/algorithms.h"
#include "collectives/launch_env.h"
#include "collectives/transport.h"
#include "collectives/worker.h"

namespace roce::coll {

Communicator::Communicator(std::shared_ptr<Store> store, int rank, int size,
                           const CommOptions& options)
    : store_(std::move(store)), options_(options), rank_(rank), size_(size) {
  transport_ = std::make_unique<Transport>(*store_, rank, size, options_);
  worker_ = std::make_unique<Worker>();
}

std::unique_ptr<Communicator> Communicator::create(std::shared_ptr<Store> store, int rank, int size,
                                                   const CommOptions& options) {
  if (!store) throw Error(ErrorKind::kInvalidArgument, "no rendezvous store");
  return std::unique_ptr<Communicator>(new Communicator(std::move(store), rank, size, options));
}

std::unique_ptr<Communicator> Communicator::from_env(std::optional<int> rank,
                                                     std::optional<int> size) {
  const EnvLookup env = process_env();
  const CommOptions options = CommOptions::from_env(env);
  const LaunchInfo who = launch_info(rank, size, env);
  const std::string kind = env("ROCE_COLL_STORE").value_or("tcp");
  std::shared_ptr<Store> store;
  if (kind.rfind("file:", 0) == 0 && kind.size() > 5) {
    store = std::make_shared<FileStore>(kind.substr(5));
  } else if (kind == "tcp") {
    const MasterAddress at = master_address(env);
    store = std::make_shared<TcpStore>(at.host, at.port, who.rank == 0, options.rendezvous_timeout);
  } else {
    throw Error(ErrorKind::kInvalidArgument,
                "ROCE_COLL_STORE='" + kind + "': takes tcp or file:DIRECTORY");
  }
  return create(std::move(store), who.rank, who.size, options);
}

Communicator::~Communicator() {
  worker_.reset();  // finishes what was started (nothing, after abort())
  // A last barrier, so that no rank tears down its QPs while a peer still waits for the
  // acknowledgement of its last write (a lost ACK would then fail the peer's last operation).
  // Its own errors change nothing now, and none may leave a destructor.
  if (transport_ && !transport_->failure() && size() > 1) {
    try {
      Op op(*transport_, "closing barrier",
            op_signature(OpKind::kBarrier, DataType::kUint8, ReduceOp::kSum, -1, ++collectives_));
      barrier_dissemination(op);
    } catch (...) {
    }
  }
}

int Communicator::rank() const { return rank_; }
int Communicator::size() const { return size_; }

Transport& Communicator::transport() {
  if (!transport_) {
    throw Error(ErrorKind::kInvalidArgument, "the communicator was aborted (abort())");
  }
  return *transport_;
}

void Communicator::abort() {
  worker_.reset();
  transport_.reset();
}

const CommOptions& Communicator::options() const { return options_; }
std::string Communicator::describe() const {
  return transport_ ? transport_->device().describe() : "aborted";
}

std::vector<PeerCounters> Communicator::peer_counters() {
  Transport& t = transport();
  worker_->drain();  // the worker's operations update them
  std::vector<PeerCounters> out(size_);
  for (int q = 0; q < size_; ++q) {
    if (const Peer* p = t.peer_or_null(q)) out[q] = p->counters();
  }
  return out;
}

// --- argument checks: one line saying what is wrong, before anything moves

void Communicator::check_type(DataType type, ReduceOp op, bool reduces) const {
  if (static_cast<int>(type) >= kDataTypeCount) {
    throw Error(ErrorKind::kInvalidArgument, "unknown data type " + std::to_string(int(type)));
  }
  if (reduces && static_cast<int>(op) >= kReduceOpCount) {
    throw Error(ErrorKind::kInvalidArgument, "unknown reduction " + std::to_string(int(op)));
  }
}

void Communicator::check_root(int root, const char* what) const {
  if (root < 0 || root >= size()) {
    throw Error(ErrorKind::kInvalidArgument, std::string(what) + ": root " + std::to_string(root) +
                                                 " is not a rank of " + std::to_string(size()));
  }
}

void Communicator::check_buffer(const void* p, size_t count, DataType type,
                                const char* what) const {
  if (count > SIZE_MAX / 64 / size_of(type)) {
    throw Error(ErrorKind::kInvalidArgument,
                std::string(what) + ": count " + std::to_string(count) + " is too large");
  }
  if (count && !p) {
    throw Error(ErrorKind::kInvalidArgument,
                std::string(what) + ": null buffer for " + std::to_string(count) + " elements");
  }
}

Communicator::Call Communicator::make_call(OpKind kind, const char* name, size_t count,
                                           DataType type, ReduceOp op, int root,
                                           std::function<void(Op&)> body) {
  const uint64_t number = ++collectives_;
  std::string label = std::string(name) + " #" + std::to_string(number) + " (" +
                      std::to_string(count) + " x " + std::string(coll::name(type)) + ")";
  return Call{std::move(label), op_signature(kind, type, op, root, number), std::move(body)};
}

void Communicator::run(Call call) {
  Transport& t = transport();
  worker_->drain();
  Op op(t, std::move(call.label), call.sig);
  call.body(op);
}

Work Communicator::submit(Call call) {
  Transport* t = &transport();
  return Work(worker_->submit([t, call = std::move(call)] {
    Op op(*t, call.label, call.sig);
    call.body(op);
  }));
}

// --- the operations: each builds its Call once (checking its arguments on the caller's
// thread), then runs it here or on the worker.

Communicator::Call Communicator::all_reduce_call(const void* in, void* out, size_t count,
                                                 DataType type, ReduceOp op) {
  check_type(type, op, true);
  check_buffer(in, count, type, "all_reduce");
  check_buffer(out, count, type, "all_reduce");
  const uint64_t bytes = count * size_of(type);
  const bool fits = bytes <= options_.chunk_bytes;
  const bool rd =
      fits && (options_.all_reduce_algo == AllReduceAlgo::kRecursiveDoubling ||
               (options_.all_reduce_algo == AllReduceAlgo::kAuto && bytes <= options_.small_bytes));
  return make_call(OpKind::kAllReduce, "all_reduce", count, type, op, -1, [=](Op& o) {
    if (rd) {
      all_reduce_recursive_doubling(o, in, out, count, type, op);
    } else {
      all_reduce_ring(o, in, out, count, type, op);
    }
  });
}

Communicator::Call Communicator::reduce_scatter_call(const void* in, void* out, size_t recv_count,
                                                     DataType type, ReduceOp op) {
  check_type(type, op, true);
  check_buffer(in, recv_count * size(), type, "reduce_scatter");
  check_buffer(out, recv_count, type, "reduce_scatter");
  return make_call(OpKind::kReduceScatter, "reduce_scatter", recv_count, type, op, -1,
                   [=](Op& o) { reduce_scatter_ring(o, in, out, recv_count, type, op); });
}

Communicator::Call Communicator::all_gather_call(const void* in, void* out, size_t count,
                                                 DataType type) {
  check_type(type, ReduceOp::kSum, false);
  check_buffer(in, count, type, "all_gather");
  check_buffer(out, count * size(), type, "all_gather");
  return make_call(OpKind::kAllGather, "all_gather", count, type, ReduceOp::kSum, -1,
                   [=](Op& o) { all_gather_ring(o, in, out, count, type); });
}

Communicator::Call Communicator::broadcast_call(const void* in, void* out, size_t count,
                                                DataType type, int root) {
  check_type(type, ReduceOp::kSum, false);
  check_root(root, "broadcast");
  if (rank() == root) check_buffer(in, count, type, "broadcast");
  check_buffer(out, count, type, "broadcast");
  return make_call(OpKind::kBroadcast, "broadcast", count, type, ReduceOp::kSum, root,
                   [=](Op& o) { broadcast_chain(o, in, out, count, type, root); });
}

Communicator::Call Communicator::reduce_call(const void* in, void* out, size_t count, DataType type,
                                             ReduceOp op, int root) {
  check_type(type, op, true);
  check_root(root, "reduce");
  check_buffer(in, count, type, "reduce");
  if (rank() == root) check_buffer(out, count, type, "reduce");
  return make_call(OpKind::kReduce, "reduce", count, type, op, root,
                   [=](Op& o) { reduce_chain(o, in, out, count, type, op, root); });
}

Communicator::Call Communicator::all_to_all_call(const void* in, void* out, size_t count,
                                                 DataType type) {
  check_type(type, ReduceOp::kSum, false);
  check_buffer(in, count * size(), type, "all_to_all");
  check_buffer(out, count * size(), type, "all_to_all");
  std::vector<size_t> counts(size(), count), displs(size());
  for (int q = 0; q < size(); ++q) displs[q] = q * count;
  return make_call(OpKind::kAllToAll, "all_to_all", count, type, ReduceOp::kSum, -1, [=](Op& o) {
    coll::all_to_all_v(o, in, counts.data(), displs.data(), out, counts.data(), displs.data(),
                       type);
  });
}

Communicator::Call Communicator::barrier_call() {
  return make_call(OpKind::kBarrier, "barrier", 0, DataType::kUint8, ReduceOp::kSum, -1,
                   [](Op& o) { barrier_dissemination(o); });
}

void Communicator::all_reduce(const void* in, void* out, size_t count, DataType type, ReduceOp op) {
  run(all_reduce_call(in, out, count, type, op));
}
void Communicator::reduce_scatter(const void* in, void* out, size_t recv_count, DataType type,
                                  ReduceOp op) {
  run(reduce_scatter_call(in, out, recv_count, type, op));
}
void Communicator::all_gather(const void* in, void* out, size_t count, DataType type) {
  run(all_gather_call(in, out, count, type));
}
void Communicator::broadcast(const void* in, void* out, size_t count, DataType type, int root) {
  run(broadcast_call(in, out, count, type, root));
}
void Communicator::reduce(const void* in, void* out, size_t count, DataType type, ReduceOp op,
                          int root) {
  run(reduce_call(in, out, count, type, op, root));
}
void Communicator::all_to_all(const void* in, void* out, size_t count, DataType type) {
  run(all_to_all_call(in, out, count, type));
}
void Communicator::barrier() { run(barrier_call()); }

Work Communicator::all_reduce_async(const void* in, void* out, size_t count, DataType type,
                                    ReduceOp op) {
  return submit(all_reduce_call(in, out, count, type, op));
}
Work Communicator::reduce_scatter_async(const void* in, void* out, size_t recv_count, DataType type,
                                        ReduceOp op) {
  return submit(reduce_scatter_call(in, out, recv_count, type, op));
}
Work Communicator::all_gather_async(const void* in, void* out, size_t count, DataType type) {
  return submit(all_gather_call(in, out, count, type));
}
Work Communicator::broadcast_async(const void* in, void* out, size_t count, DataType type,
                                   int root) {
  return submit(broadcast_call(in, out, count, type, root));
}
Work Communicator::reduce_async(const void* in, void* out, size_t count, DataType type, ReduceOp op,
                                int root) {
  return submit(reduce_call(in, out, count, type, op, root));
}
Work Communicator::all_to_all_async(const void* in, void* out, size_t count, DataType type) {
  return submit(all_to_all_call(in, out, count, type));
}
Work Communicator::barrier_async() { return submit(barrier_call()); }

void Communicator::all_to_all_v(const void* in, const size_t* send_counts,
                                const size_t* send_displs, void* out, const size_t* recv_counts,
                                const size_t* recv_displs, DataType type) {
  check_type(type, ReduceOp::kSum, false);
  if (!send_counts || !send_displs || !recv_counts || !recv_displs) {
    throw Error(ErrorKind::kInvalidArgument, "all_to_all_v: null counts or displacements");
  }
  size_t in_n = 0, out_n = 0;
  for (int q = 0; q < size(); ++q) {
    in_n = std::max(in_n, send_displs[q] + send_counts[q]);
    out_n = std::max(out_n, recv_displs[q] + recv_counts[q]);
  }
  check_buffer(in, in_n, type, "all_to_all_v");
  check_buffer(out, out_n, type, "all_to_all_v");
  run(make_call(OpKind::kAllToAll, "all_to_all_v", in_n, type, ReduceOp::kSum, -1, [&](Op& o) {
    coll::all_to_all_v(o, in, send_counts, send_displs, out, recv_counts, recv_displs, type);
  }));
}

// Point to point is not a collective: its signature carries no operation number, so sends and
// receives between two ranks match one for one whatever else each rank does in between.
Communicator::Call Communicator::point_to_point_call(const char* what, const void* buf,
                                                     size_t count, DataType type, int peer,
                                                     std::function<void(Op&)> body) {
  check_type(type, ReduceOp::kSum, false);
  check_buffer(buf, count, type, what);
  check_peer(peer, what);
  return Call{std::string(what) + " rank " + std::to_string(peer),
              op_signature(OpKind::kSendRecv, type, ReduceOp::kSum, -1, 0), std::move(body)};
}

void Communicator::send(const void* buf, size_t count, DataType type, int peer) {
  run(point_to_point_call("send", buf, count, type, peer,
                          [=](Op& o) { send_to(o, buf, count, type, peer); }));
}

void Communicator::recv(void* buf, size_t count, DataType type, int peer) {
  run(point_to_point_call("recv", buf, count, type, peer,
                          [=](Op& o) { recv_from(o, buf, count, type, peer); }));
}

void Communicator::send_recv(const void* send_buf, int to, void* recv_buf, int from, size_t count,
                             DataType type) {
  check_buffer(recv_buf, count, type, "send_recv");
  check_peer(from, "send_recv");
  run(point_to_point_call("send_recv", send_buf, count, type, to, [=](Op& o) {
    coll::send_recv(o, send_buf, to, recv_buf, from, count, type);
  }));
}

void Communicator::check_peer(int peer, const char* what) const {
  if (peer < 0 || peer >= size() || peer == rank()) {
    throw Error(ErrorKind::kInvalidArgument, std::string(what) + ": rank " + std::to_string(peer) +
                                                 " is not another rank of " +
                                                 std::to_string(size()));
  }
}

std::unique_ptr<Communicator> Communicator::split(int color, int key) {
  transport();
  worker_->drain();
  const std::string base = "split" + std::to_string(++splits_) + "/";
  Bytes mine(8);
  std::memcpy(mine.data(), &color, 4);
  std::memcpy(mine.data() + 4, &key, 4);
  store_->set(base + std::to_string(rank()), mine);
  struct Member {
    int key, rank;
    bool operator<(const Member& o) const { return key != o.key ? key < o.key : rank < o.rank; }
  };
  std::vector<Member> group;
  for (int q = 0; q < size(); ++q) {
    const Bytes b = store_->get(base + std::to_string(q), options_.rendezvous_timeout);
    int c = 0, k = 0;
    if (b.size() != 8)
      throw Error(ErrorKind::kMismatch,
                  "split: rank " + std::to_string(q) + " published a bad entry", q);
    std::memcpy(&c, b.data(), 4);
    std::memcpy(&k, b.data() + 4, 4);
    if (c == color && color >= 0) group.push_back({k, q});
  }
  if (color < 0) return nullptr;
  std::sort(group.begin(), group.end());
  int new_rank = 0;
  while (group[new_rank].rank != rank()) ++new_rank;
  auto sub = std::make_shared<PrefixStore>(store_, base + "c" + std::to_string(color) + "/");
  return create(std::move(sub), new_rank, static_cast<int>(group.size()), options_);
}

void Communicator::register_memory(const void* p, size_t n) {
  Transport& t = transport();
  worker_->drain();
  if (!p || !n) throw Error(ErrorKind::kInvalidArgument, "register_memory: empty range");
  t.mrs().register_memory(p, n);
}

void Communicator::deregister_memory(const void* p) {
  Transport& t = transport();
  worker_->drain();
  if (!t.mrs().deregister_memory(p)) {
    throw Error(ErrorKind::kInvalidArgument, "deregister_memory: not a registered buffer");
  }
}

}  // namespace roce::coll
