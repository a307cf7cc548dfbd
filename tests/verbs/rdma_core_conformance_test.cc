// What rdma-core's own test suite (python3-pyverbs' tests) expects of a libibverbs and its
// provider, each checked here at the verbs interface: provider libraries that programs link
// directly load and do not take the stack's devices for theirs; cmd_fd is a descriptor the
// caller may duplicate; re-registering an MR's access or PD keeps its keys and IOVA (rxe, mlx5);
// a QP moved to RESET or destroyed leaves no completions in its CQs (mlx5, __mlx5_cq_clean);
// CQs resize both ways and refuse a size below their unpolled completions (rxe).
#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstring>

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

}  // namespace
}  // namespace roce::verbs_test
