/* The collectives' C API: one header, for C programs and other languages' bindings. Every call
 * returns ROCE_COLL_SUCCESS or an error code; roce_coll_last_error() gives the message of this
 * thread's last failed call. Semantics are those of communicator.h (C++). */
#ifndef ROCE_COLL_H
#define ROCE_COLL_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct roce_coll_comm roce_coll_comm;
typedef struct roce_coll_request roce_coll_request;

typedef enum {
  ROCE_COLL_SUCCESS = 0,
  ROCE_COLL_INVALID_ARGUMENT = 1,
  ROCE_COLL_TIMEOUT = 2,
  ROCE_COLL_PEER_FAILED = 3,
  ROCE_COLL_SYSTEM_ERROR = 4,
  ROCE_COLL_MISMATCH = 5,
  ROCE_COLL_INTERNAL_ERROR = 6
} roce_coll_result;

/* The same order as roce::coll::DataType and ReduceOp. */
typedef enum {
  ROCE_COLL_INT8,
  ROCE_COLL_UINT8,
  ROCE_COLL_INT32,
  ROCE_COLL_UINT32,
  ROCE_COLL_INT64,
  ROCE_COLL_UINT64,
  ROCE_COLL_FLOAT16,
  ROCE_COLL_BFLOAT16,
  ROCE_COLL_FLOAT32,
  ROCE_COLL_FLOAT64
} roce_coll_datatype;

typedef enum {
  ROCE_COLL_SUM,
  ROCE_COLL_PROD,
  ROCE_COLL_MIN,
  ROCE_COLL_MAX,
  ROCE_COLL_AVG
} roce_coll_op;

/* Rank and size from the launcher's environment (rank < 0 / size < 1: from the environment),
 * the store from ROCE_COLL_STORE (tcp at MASTER_ADDR:MASTER_PORT, or file:DIR). */
roce_coll_result roce_coll_init(roce_coll_comm** comm, int rank, int size);
/* The same through a file store in `dir`, shared by every rank. */
roce_coll_result roce_coll_init_file(roce_coll_comm** comm, int rank, int size, const char* dir);
roce_coll_result roce_coll_destroy(roce_coll_comm* comm);
int roce_coll_rank(const roce_coll_comm* comm);
int roce_coll_size(const roce_coll_comm* comm);
/* The message of this thread's last failed call ("" if none). */
const char* roce_coll_last_error(void);
const char* roce_coll_result_string(roce_coll_result r);

roce_coll_result roce_coll_all_reduce(roce_coll_comm* comm, const void* in, void* out, size_t count,
                                      roce_coll_datatype type, roce_coll_op op);
roce_coll_result roce_coll_reduce_scatter(roce_coll_comm* comm, const void* in, void* out,
                                          size_t recv_count, roce_coll_datatype type,
                                          roce_coll_op op);
roce_coll_result roce_coll_all_gather(roce_coll_comm* comm, const void* in, void* out, size_t count,
                                      roce_coll_datatype type);
roce_coll_result roce_coll_broadcast(roce_coll_comm* comm, const void* in, void* out, size_t count,
                                     roce_coll_datatype type, int root);
roce_coll_result roce_coll_reduce(roce_coll_comm* comm, const void* in, void* out, size_t count,
                                  roce_coll_datatype type, roce_coll_op op, int root);
roce_coll_result roce_coll_all_to_all(roce_coll_comm* comm, const void* in, void* out, size_t count,
                                      roce_coll_datatype type);
roce_coll_result roce_coll_all_to_all_v(roce_coll_comm* comm, const void* in,
                                        const size_t* send_counts, const size_t* send_displs,
                                        void* out, const size_t* recv_counts,
                                        const size_t* recv_displs, roce_coll_datatype type);
roce_coll_result roce_coll_barrier(roce_coll_comm* comm);
roce_coll_result roce_coll_send(roce_coll_comm* comm, const void* buf, size_t count,
                                roce_coll_datatype type, int peer);
roce_coll_result roce_coll_recv(roce_coll_comm* comm, void* buf, size_t count,
                                roce_coll_datatype type, int peer);
roce_coll_result roce_coll_split(roce_coll_comm* comm, int color, int key, roce_coll_comm** out);
roce_coll_result roce_coll_register(roce_coll_comm* comm, const void* p, size_t n);
roce_coll_result roce_coll_deregister(roce_coll_comm* comm, const void* p);

/* Asynchronous AllReduce: start, then test or wait; free the request after it finished. */
roce_coll_result roce_coll_all_reduce_start(roce_coll_comm* comm, const void* in, void* out,
                                            size_t count, roce_coll_datatype type, roce_coll_op op,
                                            roce_coll_request** request);
/* *done = 1 once finished (then its result is returned), 0 while running. */
roce_coll_result roce_coll_test(roce_coll_request* request, int* done);
roce_coll_result roce_coll_wait(roce_coll_request* request);
void roce_coll_request_free(roce_coll_request* request);

#ifdef __cplusplus
}
#endif

#endif /* ROCE_COLL_H */
