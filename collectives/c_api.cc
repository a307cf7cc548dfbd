// The C API (roce_coll.h) over Communicator: no exception crosses it.
#include "collectives/roce_coll.h"

#include <memory>
#include <new>
#include <string>

#include "collectives/communicator.h"

struct roce_coll_comm {
  std::unique_ptr<roce::coll::Communicator> c;
};
struct roce_coll_request {
  roce::coll::Work work;
};

namespace {

using roce::coll::DataType;
using roce::coll::Error;
using roce::coll::ErrorKind;
using roce::coll::ReduceOp;

thread_local std::string last_error;

roce_coll_result code_of(ErrorKind k) {
  switch (k) {
    case ErrorKind::kInvalidArgument:
      return ROCE_COLL_INVALID_ARGUMENT;
    case ErrorKind::kTimeout:
      return ROCE_COLL_TIMEOUT;
    case ErrorKind::kPeerFailed:
      return ROCE_COLL_PEER_FAILED;
    case ErrorKind::kSystem:
      return ROCE_COLL_SYSTEM_ERROR;
    case ErrorKind::kMismatch:
      return ROCE_COLL_MISMATCH;
  }
  return ROCE_COLL_INTERNAL_ERROR;
}

template <typename F>
roce_coll_result guarded(F&& f) {
  try {
    f();
    return ROCE_COLL_SUCCESS;
  } catch (const Error& e) {
    last_error = e.what();
    return code_of(e.kind());
  } catch (const std::bad_alloc&) {
    last_error = "out of memory";
    return ROCE_COLL_SYSTEM_ERROR;
  } catch (const std::exception& e) {
    last_error = e.what();
    return ROCE_COLL_INTERNAL_ERROR;
  }
}

roce::coll::Communicator& comm_of(roce_coll_comm* c) {
  if (!c || !c->c) throw Error(ErrorKind::kInvalidArgument, "null communicator");
  return *c->c;
}

DataType dt(roce_coll_datatype t) { return static_cast<DataType>(t); }
ReduceOp rop(roce_coll_op op) { return static_cast<ReduceOp>(op); }

}  // namespace

extern "C" {

roce_coll_result roce_coll_init(roce_coll_comm** comm, int rank, int size) {
  return guarded([&] {
    if (!comm) throw Error(ErrorKind::kInvalidArgument, "null communicator pointer");
    *comm = nullptr;
    auto c =
        roce::coll::Communicator::from_env(rank >= 0 ? std::optional<int>(rank) : std::nullopt,
                                           size >= 1 ? std::optional<int>(size) : std::nullopt);
    *comm = new roce_coll_comm{std::move(c)};
  });
}

roce_coll_result roce_coll_init_file(roce_coll_comm** comm, int rank, int size, const char* dir) {
  return guarded([&] {
    if (!comm || !dir) throw Error(ErrorKind::kInvalidArgument, "null argument");
    *comm = nullptr;
    auto store = std::make_shared<roce::coll::FileStore>(dir);
    *comm = new roce_coll_comm{roce::coll::Communicator::create(store, rank, size)};
  });
}

roce_coll_result roce_coll_destroy(roce_coll_comm* comm) {
  return guarded([&] { delete comm; });
}

int roce_coll_rank(const roce_coll_comm* comm) { return comm && comm->c ? comm->c->rank() : -1; }
int roce_coll_size(const roce_coll_comm* comm) { return comm && comm->c ? comm->c->size() : -1; }
const char* roce_coll_last_error(void) { return last_error.c_str(); }

const char* roce_coll_result_string(roce_coll_result r) {
  switch (r) {
    case ROCE_COLL_SUCCESS:
      return "success";
    case ROCE_COLL_INVALID_ARGUMENT:
      return "invalid argument";
    case ROCE_COLL_TIMEOUT:
      return "timeout";
    case ROCE_COLL_PEER_FAILED:
      return "peer failed";
    case ROCE_COLL_SYSTEM_ERROR:
      return "system error";
    case ROCE_COLL_MISMATCH:
      return "ranks disagree";
    case ROCE_COLL_INTERNAL_ERROR:
      return "internal error";
  }
  return "unknown result";
}

roce_coll_result roce_coll_all_reduce(roce_coll_comm* comm, const void* in, void* out, size_t count,
                                      roce_coll_datatype type, roce_coll_op op) {
  return guarded([&] { comm_of(comm).all_reduce(in, out, count, dt(type), rop(op)); });
}
roce_coll_result roce_coll_reduce_scatter(roce_coll_comm* comm, const void* in, void* out,
                                          size_t recv_count, roce_coll_datatype type,
                                          roce_coll_op op) {
  return guarded([&] { comm_of(comm).reduce_scatter(in, out, recv_count, dt(type), rop(op)); });
}
roce_coll_result roce_coll_all_gather(roce_coll_comm* comm, const void* in, void* out, size_t count,
                                      roce_coll_datatype type) {
  return guarded([&] { comm_of(comm).all_gather(in, out, count, dt(type)); });
}
roce_coll_result roce_coll_broadcast(roce_coll_comm* comm, const void* in, void* out, size_t count,
                                     roce_coll_datatype type, int root) {
  return guarded([&] { comm_of(comm).broadcast(in, out, count, dt(type), root); });
}
roce_coll_result roce_coll_reduce(roce_coll_comm* comm, const void* in, void* out, size_t count,
                                  roce_coll_datatype type, roce_coll_op op, int root) {
  return guarded([&] { comm_of(comm).reduce(in, out, count, dt(type), rop(op), root); });
}
roce_coll_result roce_coll_all_to_all(roce_coll_comm* comm, const void* in, void* out, size_t count,
                                      roce_coll_datatype type) {
  return guarded([&] { comm_of(comm).all_to_all(in, out, count, dt(type)); });
}
roce_coll_result roce_coll_all_to_all_v(roce_coll_comm* comm, const void* in,
                                        const size_t* send_counts, const size_t* send_displs,
                                        void* out, const size_t* recv_counts,
                                        const size_t* recv_displs, roce_coll_datatype type) {
  return guarded([&] {
    comm_of(comm).all_to_all_v(in, send_counts, send_displs, out, recv_counts, recv_displs,
                               dt(type));
  });
}
roce_coll_result roce_coll_barrier(roce_coll_comm* comm) {
  return guarded([&] { comm_of(comm).barrier(); });
}
roce_coll_result roce_coll_send(roce_coll_comm* comm, const void* buf, size_t count,
                                roce_coll_datatype type, int peer) {
  return guarded([&] { comm_of(comm).send(buf, count, dt(type), peer); });
}
roce_coll_result roce_coll_recv(roce_coll_comm* comm, void* buf, size_t count,
                                roce_coll_datatype type, int peer) {
  return guarded([&] { comm_of(comm).recv(buf, count, dt(type), peer); });
}
roce_coll_result roce_coll_split(roce_coll_comm* comm, int color, int key, roce_coll_comm** out) {
  return guarded([&] {
    if (!out) throw Error(ErrorKind::kInvalidArgument, "null result pointer");
    *out = nullptr;
    auto sub = comm_of(comm).split(color, key);
    if (sub) *out = new roce_coll_comm{std::move(sub)};
  });
}
roce_coll_result roce_coll_register(roce_coll_comm* comm, const void* p, size_t n) {
  return guarded([&] { comm_of(comm).register_memory(p, n); });
}
roce_coll_result roce_coll_deregister(roce_coll_comm* comm, const void* p) {
  return guarded([&] { comm_of(comm).deregister_memory(p); });
}

roce_coll_result roce_coll_all_reduce_start(roce_coll_comm* comm, const void* in, void* out,
                                            size_t count, roce_coll_datatype type, roce_coll_op op,
                                            roce_coll_request** request) {
  return guarded([&] {
    if (!request) throw Error(ErrorKind::kInvalidArgument, "null request pointer");
    *request = nullptr;
    auto w = comm_of(comm).all_reduce_async(in, out, count, dt(type), rop(op));
    *request = new roce_coll_request{std::move(w)};
  });
}
roce_coll_result roce_coll_test(roce_coll_request* request, int* done) {
  return guarded([&] {
    if (!request || !done) throw Error(ErrorKind::kInvalidArgument, "null argument");
    *done = 0;
    *done = request->work.test() ? 1 : 0;
  });
}
roce_coll_result roce_coll_wait(roce_coll_request* request) {
  return guarded([&] {
    if (!request) throw Error(ErrorKind::kInvalidArgument, "null request");
    request->work.wait();
  });
}
void roce_coll_request_free(roce_coll_request* request) { delete request; }

}  // extern "C"
