// What rdma-core's own test suite (python3-pyverbs' tests) expects of a libibverbs and its
// provider, each checked here at the verbs interface: provider libraries that programs link
// directly load and do not take the stack's devices for theirs; cmd_fd is a descriptor the
// caller may duplicate, and the device file its name leads to is the same file; re-registering an
// MR's access or PD keeps its keys and IOVA (rxe, mlx5); a QP moved to RESET or destroyed leaves no
// completions in its CQs (mlx5, __mlx5_cq_clean); CQs resize both ways and refuse a size below
// their unpolled completions (rxe).
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>

#include "verbs_fixture.h"

namespace roce::verbs_test {
namespace {

// libmlx5 (Debian's ibverbs-providers) links against libibverbs' provider-private symbols and
// registers itself as it loads; its direct-verbs entry point must then refuse a stack device.
TEST_F(VerbsTest, ProviderLibrariesLoadAndLeaveTheDevicesAlone) {
  void* mlx5 = dlopen("libmlx5.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!mlx5) GTEST_SKIP() << "libmlx5.so.1 not installed: " << dlerror();
  using IsSupported = bool (*)(ibv_device*);
  auto is_supported = reinterpret_cast<IsSupported>(dlsym(mlx5, "mlx5dv_is_supported"));
  ASSERT_NE(is_supported, nullptr);
  EXPECT_FALSE(is_supported(ctx_[0]->device));
  dlclose(mlx5);

  // Provider entry points nothing here uses fail with EOPNOTSUPP.
  using Destroy = int (*)(void*);
  auto destroy_cq = reinterpret_cast<Destroy>(dlsym(RTLD_DEFAULT, "ibv_cmd_destroy_cq"));
  ASSERT_NE(destroy_cq, nullptr);
  EXPECT_EQ(destroy_cq(nullptr), EOPNOTSUPP);
  using Open = void* (*)(ibv_device*, void*);
  auto open = reinterpret_cast<Open>(dlsym(RTLD_DEFAULT, "verbs_open_device"));
  ASSERT_NE(open, nullptr);
  errno = 0;
  EXPECT_EQ(open(ctx_[0]->device, nullptr), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
}

// pyverbs' import tests dup() cmd_fd and hand the copy to ibv_import_device.
TEST_F(VerbsTest, CmdFdIsAnOpenDescriptorTheContextOwns) {
  const int fd = ctx_[0]->cmd_fd;
  ASSERT_GE(fd, 0);
  EXPECT_GE(fcntl(fd, F_GETFD), 0);
  const int copy = dup(fd);
  ASSERT_GE(copy, 0);
  errno = 0;
  EXPECT_EQ(ibv_import_device(copy), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP);
  // A uverbs command written to it fails, it does not vanish.
  const uint32_t cmd[4] = {};
  EXPECT_EQ(write(copy, cmd, sizeof cmd), -1);
  close(copy);
  EXPECT_NE(ctx_[1]->cmd_fd, fd);
  // Closed with the context.
  ASSERT_EQ(ibv_close_device(ctx_[0]), 0);
  ctx_[0] = nullptr;
  EXPECT_EQ(fcntl(fd, F_GETFD), -1);
  EXPECT_EQ(errno, EBADF);
}

// UCX 1.13 lists a device only if /dev/infiniband/<dev_name> is a character device the user may
// read and write (uct_ib_device_is_accessible). The name leads to the file behind cmd_fd,
// /dev/null, wherever /dev/infiniband exists; it must not name a kernel uverbs device.
TEST_F(VerbsTest, DeviceFileIsTheOneBehindCmdFd) {
  const std::string name = ctx_[0]->device->dev_name;
  const std::filesystem::path file = std::filesystem::path("/dev/infiniband") / name;
  EXPECT_EQ(file.lexically_normal(), "/dev/null");
  struct stat by_name {
  }, by_fd{};
  ASSERT_EQ(stat(file.lexically_normal().c_str(), &by_name), 0);
  ASSERT_EQ(fstat(ctx_[0]->cmd_fd, &by_fd), 0);
  EXPECT_TRUE(S_ISCHR(by_name.st_mode));
  EXPECT_EQ(by_name.st_rdev, by_fd.st_rdev);
  EXPECT_EQ(access(file.lexically_normal().c_str(), R_OK | W_OK), 0);
  if (std::filesystem::is_directory("/dev/infiniband")) {  // UCX's own path, unnormalised
    EXPECT_EQ(access(file.c_str(), R_OK | W_OK), 0);
  }
}

// test_mr.py's rereg tests: the peer keeps the rkey it was given, and a custom IOVA stays.
TEST_F(VerbsTest, ReregOfAccessOrPdKeepsTheKeysAndTheIova) {
  Side a, b;
  make_side(a, 0);
  make_side(b, 1);
  connect_pair(a, b);
  constexpr uint64_t kIova = 0x100000;
  ibv_mr* mr = ibv_reg_mr_iova(a.pd, a.buf->p, 4096, kIova, IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(mr, nullptr);
  const uint32_t lkey = mr->lkey, rkey = mr->rkey;
  ASSERT_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr, 0,
                         IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE),
            0);
  EXPECT_EQ(mr->lkey, lkey);
  EXPECT_EQ(mr->rkey, rkey);
  EXPECT_EQ(mr->addr, a.buf->p);
  // The peer writes at the IOVA with the rkey it had before.
  std::memset(b.buf->p, 0x5a, 64);
  ASSERT_EQ(post_send(b.qp, IBV_WR_RDMA_WRITE, 7, b, 0, 64, kIova + 128, rkey), 0);
  const auto wc = wait_wc(b.cq, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS) << ibv_wc_status_str(wc[0].status);
  EXPECT_EQ(a.buf->p[128], 0x5a);
  EXPECT_EQ(a.buf->p[128 + 63], 0x5a);

  // Another PD: same keys; the new PD is in use, the old one is not.
  ibv_pd* other = ibv_alloc_pd(a.ctx);
  ASSERT_NE(other, nullptr);
  ASSERT_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_PD, other, nullptr, 0, 0), 0);
  EXPECT_EQ(mr->pd, other);
  EXPECT_EQ(mr->rkey, rkey);
  EXPECT_EQ(ibv_dealloc_pd(other), EBUSY);
  ASSERT_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_PD, a.pd, nullptr, 0, 0), 0);
  EXPECT_EQ(ibv_dealloc_pd(other), 0);
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
}

// An RC QP on `cq` in INIT, where receives may be posted.
ibv_qp* rc_qp(ibv_pd* pd, ibv_cq* cq) {
  ibv_qp* qp = VerbsTest::plain_qp(pd, cq, IBV_QPT_RC, 8);
  ibv_qp_attr at{};
  at.qp_state = IBV_QPS_INIT;
  at.port_num = 1;
  at.qp_access_flags = IBV_ACCESS_LOCAL_WRITE;
  if (qp && ibv_modify_qp(qp, &at,
                          IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) {
    ibv_destroy_qp(qp);
    return nullptr;
  }
  return qp;
}

int to_state(ibv_qp* qp, ibv_qp_state state) {
  ibv_qp_attr at{};
  at.qp_state = state;
  return ibv_modify_qp(qp, &at, IBV_QP_STATE);
}

// Three QPs on one CQ, each with flushed receives in it: the one moved to RESET and the one
// destroyed leave none behind; the third's stay.
TEST_F(VerbsTest, ResetOrDestroyRemovesTheQpsCompletionsFromItsCq) {
  Side s;
  make_side(s, 0);
  ibv_qp* x = rc_qp(s.pd, s.cq);
  ibv_qp* y = rc_qp(s.pd, s.cq);
  ibv_qp* z = rc_qp(s.pd, s.cq);
  ASSERT_TRUE(x && y && z);
  for (uint64_t i = 0; i < 2; ++i) ASSERT_EQ(post_recv(x, 10 + i, s, 0, 64), 0);
  ASSERT_EQ(post_recv(y, 20, s, 0, 64), 0);
  ASSERT_EQ(post_recv(z, 30, s, 0, 64), 0);
  for (ibv_qp* q : {x, y, z}) ASSERT_EQ(to_state(q, IBV_QPS_ERR), 0);
  ASSERT_EQ(to_state(x, IBV_QPS_RESET), 0);
  ASSERT_EQ(ibv_destroy_qp(y), 0);
  const auto wc = wait_wc(s.cq, 2, 1);  // one expected; a second would be a leftover
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].wr_id, 30u);
  EXPECT_EQ(wc[0].status, IBV_WC_WR_FLUSH_ERR);
  EXPECT_EQ(wc[0].qp_num, z->qp_num);
  EXPECT_EQ(ibv_destroy_qp(x), 0);
  EXPECT_EQ(ibv_destroy_qp(z), 0);
}

// test_cq.py's test_resize_cq: shrink, grow, and a shrink below the unpolled completions fails
// with EINVAL (rxe); the completions survive each resize, in order.
TEST_F(VerbsTest, ResizeCqBothWaysKeepsItsCompletions) {
  Side s;
  make_side(s, 0);
  ibv_cq* cq = ibv_create_cq(s.ctx, 3, nullptr, nullptr, 0);
  ASSERT_NE(cq, nullptr);
  ASSERT_EQ(ibv_resize_cq(cq, 1), 0);
  EXPECT_GE(cq->cqe, 1);
  ASSERT_EQ(ibv_resize_cq(cq, 7), 0);
  EXPECT_GE(cq->cqe, 7);
  ibv_qp* qp = rc_qp(s.pd, cq);
  ASSERT_NE(qp, nullptr);
  for (uint64_t i = 0; i < 6; ++i) ASSERT_EQ(post_recv(qp, i, s, 0, 64), 0);
  ASSERT_EQ(to_state(qp, IBV_QPS_ERR), 0);
  EXPECT_EQ(ibv_resize_cq(cq, 1), EINVAL);
  EXPECT_EQ(ibv_resize_cq(cq, 1 << 21), EINVAL);  // above max_cqe
  ASSERT_EQ(ibv_resize_cq(cq, 100), 0);
  EXPECT_GE(cq->cqe, 100);
  const auto wc = wait_wc(cq, 6);
  ASSERT_EQ(wc.size(), 6u);
  for (uint64_t i = 0; i < 6; ++i) EXPECT_EQ(wc[i].wr_id, i);
  EXPECT_EQ(ibv_destroy_qp(qp), 0);
  EXPECT_EQ(ibv_destroy_cq(cq), 0);
}

}  // namespace
}  // namespace roce::verbs_test
