// IBVERBS_PRIVATE_34: the interface rdma-core's libibverbs offers its provider libraries
// (libibverbs/driver.h, cmd_ioctl.h; not installed by Debian). Provider libraries that programs
// link directly (libmlx5.so.1 for mlx5dv_*, libefa.so.1 for efadv_*: pyverbs' modules link
// both) import these symbols, so without them such a program does not load. Here no provider
// ever drives a device, so every entry point fails cleanly:
//  - verbs_register_driver_34 (each provider's load-time constructor calls it) records nothing:
//    the stack's devices come from its configuration, not from providers;
//  - the ibv_cmd_* wrappers of the kernel's uverbs commands, and execute_ioctl, return
//    EOPNOTSUPP (they return an errno, as rdma-core's do); ibv_cmd_poll_cq returns -EOPNOTSUPP
//    since a poll's non-negative result is a count;
//  - the context constructors return NULL with errno EOPNOTSUPP, the helpers that only
//    initialise or log do nothing.
// A provider's direct verbs reach none of this with a stack device: they test the device's
// verbs_device::ops against their own first (mlx5dv_is_supported, efadv's is_efa_dev), and the
// shim's ops slot is NULL (shim.h).
//
// The parameters are those of driver.h, with provider-private structures as void*: with
// extern "C" nothing but the name links, and every such argument is a pointer in the same
// register.
#include <cerrno>
#include <cstddef>
#include <cstdint>

#define ROCE_PRIVATE extern "C" __attribute__((visibility("default")))

namespace {
constexpr int kNo = EOPNOTSUPP;
}  // namespace

// rdma-core reads this flag when a device was disassociated (hot-unplugged); never here.
extern "C" {
__attribute__((visibility("default"))) bool verbs_allow_disassociate_destroy = false;
}

// --- provider registration and context set-up ----------------------------------------------

ROCE_PRIVATE void verbs_register_driver_34(const void* /*verbs_device_ops*/) {}

ROCE_PRIVATE void* _verbs_init_and_alloc_context(void* /*ibv_device*/, int /*cmd_fd*/,
                                                 size_t /*alloc_size*/, void* /*offset*/,
                                                 uint32_t /*driver_id*/) {
  errno = kNo;
  return nullptr;
}
ROCE_PRIVATE void* verbs_open_device(void* /*ibv_device*/, void* /*private_data*/) {
  errno = kNo;
  return nullptr;
}
ROCE_PRIVATE void verbs_uninit_context(void* /*verbs_context*/) {}
ROCE_PRIVATE void verbs_set_ops(void* /*verbs_context*/, const void* /*ops*/) {}
ROCE_PRIVATE void verbs_init_cq(void* /*cq*/, void* /*context*/, void* /*channel*/,
                                void* /*cq_context*/) {}
ROCE_PRIVATE void __verbs_log(void* /*verbs_context*/, const char* /*fmt*/, ...) {}
ROCE_PRIVATE int ibv_read_ibdev_sysfs_file(char* /*buf*/, size_t /*size*/, void* /*sysfs_dev*/,
                                           const char* /*fnfmt*/, ...) {
  errno = kNo;  // the stack's devices have no sysfs directory
  return -1;
}

// --- ioctl command buffers (cmd_ioctl.h) ----------------------------------------------------

// Sizes a command buffer's attribute array before execute_ioctl: no chained attributes here.
ROCE_PRIVATE unsigned int __ioctl_final_num_attrs(unsigned int num_attrs, void* /*link*/) {
  return num_attrs;
}
ROCE_PRIVATE int execute_ioctl(void* /*context*/, void* /*cmd*/) { return kNo; }

// --- uverbs command wrappers: no kernel device answers them --------------------------------

ROCE_PRIVATE int ibv_cmd_get_context(void*, void*, size_t, void*, size_t) { return kNo; }
ROCE_PRIVATE int ibv_cmd_query_context(void*, void*) { return kNo; }
ROCE_PRIVATE int ibv_cmd_query_device_any(void*, const void*, void*, size_t, void*, size_t*) {
  return kNo;
}
ROCE_PRIVATE int ibv_cmd_query_port(void*, uint8_t, void*, void*, size_t) { return kNo; }

ROCE_PRIVATE int ibv_cmd_alloc_pd(void*, void*, void*, size_t, void*, size_t) { return kNo; }
ROCE_PRIVATE int ibv_cmd_dealloc_pd(void*) { return kNo; }
ROCE_PRIVATE int ibv_cmd_open_xrcd(void*, void*, int, void*, void*, size_t, void*, size_t) {
  return kNo;
}
ROCE_PRIVATE int ibv_cmd_close_xrcd(void*) { return kNo; }

ROCE_PRIVATE int ibv_cmd_reg_mr(void*, void*, size_t, uint64_t, int, void*, void*, size_t, void*,
                                size_t) {
  return kNo;
}
ROCE_PRIVATE int ibv_cmd_rereg_mr(void*, uint32_t, void*, size_t, uint64_t, int, void*, void*,
                                  size_t, void*, size_t) {
  return kNo;
}
ROCE_PRIVATE int ibv_cmd_dereg_mr(void*) { return kNo; }
ROCE_PRIVATE int ibv_cmd_query_mr(void*, void*, uint32_t) { return kNo; }
ROCE_PRIVATE int ibv_cmd_advise_mr(void*, int, uint32_t, void*, uint32_t) { return kNo; }
ROCE_PRIVATE int ibv_cmd_reg_dmabuf_mr(void*, uint64_t, size_t, uint64_t, int, int, void*) {
  return kNo;
}
ROCE_PRIVATE int ibv_cmd_alloc_mw(void*, int, void*, void*, size_t, void*, size_t) { return kNo; }
ROCE_PRIVATE int ibv_cmd_dealloc_mw(void*) { return kNo; }
ROCE_PRIVATE int ibv_cmd_alloc_dm(void*, const void*, void*, void*) { return kNo; }
ROCE_PRIVATE int ibv_cmd_free_dm(void*) { return kNo; }
ROCE_PRIVATE int ibv_cmd_reg_dm_mr(void*, void*, uint64_t, size_t, unsigned int, void*, void*) {
  return kNo;
}

ROCE_PRIVATE int ibv_cmd_create_cq(void*, int, void*, int, void*, void*, size_t, void*, size_t) {
  return kNo;
}
ROCE_PRIVATE int ibv_cmd_create_cq_ex(void*, const void*, void*, void*, size_t, void*, size_t,
                                      uint32_t) {
  return kNo;
}
ROCE_PRIVATE int ibv_cmd_poll_cq(void*, int, void*) { return -kNo; }
ROCE_PRIVATE int ibv_cmd_req_notify_cq(void*, int) { return kNo; }
ROCE_PRIVATE int ibv_cmd_resize_cq(void*, int, void*, size_t, void*, size_t) { return kNo; }
ROCE_PRIVATE int ibv_cmd_destroy_cq(void*) { return kNo; }
ROCE_PRIVATE int ibv_cmd_modify_cq(void*, void*, void*, size_t) { return kNo; }

ROCE_PRIVATE int ibv_cmd_create_srq(void*, void*, void*, void*, size_t, void*, size_t) {
  return kNo;
}
ROCE_PRIVATE int ibv_cmd_create_srq_ex(void*, void*, void*, void*, size_t, void*, size_t) {
  return kNo;
}
ROCE_PRIVATE int ibv_cmd_modify_srq(void*, void*, int, void*, size_t) { return kNo; }
ROCE_PRIVATE int ibv_cmd_query_srq(void*, void*, void*, size_t) { return kNo; }
ROCE_PRIVATE int ibv_cmd_destroy_srq(void*) { return kNo; }
ROCE_PRIVATE int ibv_cmd_post_srq_recv(void*, void*, void**) { return kNo; }

ROCE_PRIVATE int ibv_cmd_create_qp(void*, void*, void*, void*, size_t, void*, size_t) {
  return kNo;
}
ROCE_PRIVATE int ibv_cmd_create_qp_ex(void*, void*, void*, void*, size_t, void*, size_t) {
  return kNo;
}
ROCE_PRIVATE int ibv_cmd_create_qp_ex2(void*, void*, void*, void*, size_t, void*, size_t) {
  return kNo;
}
ROCE_PRIVATE int ibv_cmd_open_qp(void*, void*, int, void*, void*, size_t, void*, size_t) {
  return kNo;
}
ROCE_PRIVATE int ibv_cmd_query_qp(void*, void*, int, void*, void*, size_t) { return kNo; }
ROCE_PRIVATE int ibv_cmd_modify_qp(void*, void*, int, void*, size_t) { return kNo; }
ROCE_PRIVATE int ibv_cmd_modify_qp_ex(void*, void*, int, void*, size_t, void*, size_t) {
  return kNo;
}
ROCE_PRIVATE int ibv_cmd_destroy_qp(void*) { return kNo; }
ROCE_PRIVATE int ibv_cmd_post_send(void*, void*, void**) { return kNo; }
ROCE_PRIVATE int ibv_cmd_post_recv(void*, void*, void**) { return kNo; }

ROCE_PRIVATE int ibv_cmd_create_ah(void*, void*, void*, void*, size_t) { return kNo; }
ROCE_PRIVATE int ibv_cmd_destroy_ah(void*) { return kNo; }
ROCE_PRIVATE int ibv_cmd_attach_mcast(void*, const void*, uint16_t) { return kNo; }
ROCE_PRIVATE int ibv_cmd_detach_mcast(void*, const void*, uint16_t) { return kNo; }

ROCE_PRIVATE int ibv_cmd_create_flow(void*, void*, void*, void*, size_t) { return kNo; }
ROCE_PRIVATE int ibv_cmd_destroy_flow(void*) { return kNo; }
ROCE_PRIVATE int ibv_cmd_create_flow_action_esp(void*, void*, void*, void*) { return kNo; }
ROCE_PRIVATE int ibv_cmd_modify_flow_action_esp(void*, void*, void*) { return kNo; }
ROCE_PRIVATE int ibv_cmd_destroy_flow_action(void*) { return kNo; }

ROCE_PRIVATE int ibv_cmd_create_wq(void*, void*, void*, void*, size_t, void*, size_t) {
  return kNo;
}
ROCE_PRIVATE int ibv_cmd_modify_wq(void*, void*, void*, size_t) { return kNo; }
ROCE_PRIVATE int ibv_cmd_destroy_wq(void*) { return kNo; }
ROCE_PRIVATE int ibv_cmd_create_rwq_ind_table(void*, void*, void*, void*, size_t) { return kNo; }
ROCE_PRIVATE int ibv_cmd_destroy_rwq_ind_table(void*) { return kNo; }

ROCE_PRIVATE int ibv_cmd_create_counters(void*, void*, void*, void*) { return kNo; }
ROCE_PRIVATE int ibv_cmd_destroy_counters(void*) { return kNo; }
ROCE_PRIVATE int ibv_cmd_read_counters(void*, uint64_t*, uint32_t, uint32_t, void*) { return kNo; }
