// rdma-core keeps the libibverbs 1.0 ABI (2006, different struct layouts) as symbols versioned
// IBVERBS_1.0 beside the current IBVERBS_1.1 ones. Nothing built in the last fifteen years
// binds to them, but they are part of libibverbs.so.1's interface: here they exist and fail
// cleanly (NULL / ENOSYS) instead of running current code on old structs.
#include <cerrno>
#include <cstdint>

// Each old symbol is a small function of its own, given its version by .symver (the version
// script hides the function's own name).
#define ROCE_COMPAT_1_0(sym, kind)                                                          \
  extern "C" __attribute__((visibility("default"))) kind##_type sym##_1_0() { kind##_body } \
  __asm__(".symver " #sym "_1_0, " #sym "@IBVERBS_1.0");

// Pointer-returning verbs: NULL with errno.
using null_type = void*;
#define null_body \
  errno = ENOSYS; \
  return nullptr;
// int-returning verbs: ENOSYS (a failure also for those that return -1 on error).
using enosys_type = int;
#define enosys_body \
  errno = ENOSYS;   \
  return ENOSYS;
using void_type = void;
#define void_body
using zero_type = uint64_t;
#define zero_body return 0;

ROCE_COMPAT_1_0(ibv_get_device_list, null)
ROCE_COMPAT_1_0(ibv_get_device_name, null)
ROCE_COMPAT_1_0(ibv_open_device, null)
ROCE_COMPAT_1_0(ibv_alloc_pd, null)
ROCE_COMPAT_1_0(ibv_reg_mr, null)
ROCE_COMPAT_1_0(ibv_create_cq, null)
ROCE_COMPAT_1_0(ibv_create_srq, null)
ROCE_COMPAT_1_0(ibv_create_qp, null)
ROCE_COMPAT_1_0(ibv_create_ah, null)
ROCE_COMPAT_1_0(ibv_free_device_list, void)
ROCE_COMPAT_1_0(ibv_ack_async_event, void)
ROCE_COMPAT_1_0(ibv_ack_cq_events, void)
ROCE_COMPAT_1_0(ibv_get_device_guid, zero)
ROCE_COMPAT_1_0(ibv_close_device, enosys)
ROCE_COMPAT_1_0(ibv_get_async_event, enosys)
ROCE_COMPAT_1_0(ibv_query_device, enosys)
ROCE_COMPAT_1_0(ibv_query_port, enosys)
ROCE_COMPAT_1_0(ibv_query_gid, enosys)
ROCE_COMPAT_1_0(ibv_query_pkey, enosys)
ROCE_COMPAT_1_0(ibv_dealloc_pd, enosys)
ROCE_COMPAT_1_0(ibv_dereg_mr, enosys)
ROCE_COMPAT_1_0(ibv_resize_cq, enosys)
ROCE_COMPAT_1_0(ibv_destroy_cq, enosys)
ROCE_COMPAT_1_0(ibv_get_cq_event, enosys)
ROCE_COMPAT_1_0(ibv_modify_srq, enosys)
ROCE_COMPAT_1_0(ibv_query_srq, enosys)
ROCE_COMPAT_1_0(ibv_destroy_srq, enosys)
ROCE_COMPAT_1_0(ibv_query_qp, enosys)
ROCE_COMPAT_1_0(ibv_modify_qp, enosys)
ROCE_COMPAT_1_0(ibv_destroy_qp, enosys)
ROCE_COMPAT_1_0(ibv_destroy_ah, enosys)
ROCE_COMPAT_1_0(ibv_attach_mcast, enosys)
ROCE_COMPAT_1_0(ibv_detach_mcast, enosys)
