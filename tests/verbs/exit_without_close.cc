// For the VerbsExit tests: opens the first device of the shim's configuration (ROCE_CONFIG),
// allocates a PD and returns from main without closing anything, as a program that ends on an
// error path often does. Exit status 0 once opened.
//
// With the argument "fork" it forks after that, and the child, which inherited the open device
// but none of the stack's threads, checks that verbs fail at once with EOPNOTSUPP (control,
// post and poll) and then returns from main, so that the library's exit handler runs. The parent
// waits for it (10 s at most), checks that its own device still works, and exits 0 only if
// everything did as it should.
#include <infiniband/verbs.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace {

int child(ibv_context* ctx, ibv_pd* pd, ibv_cq* cq) {
  if (ibv_alloc_pd(ctx) || errno != EOPNOTSUPP) {
    std::fprintf(stderr, "child: ibv_alloc_pd did not fail with EOPNOTSUPP (%s)\n",
                 std::strerror(errno));
    return 10;
  }
  static char buf[64];
  if (ibv_reg_mr(pd, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE) || errno != EOPNOTSUPP) {
    std::fprintf(stderr, "child: ibv_reg_mr did not fail with EOPNOTSUPP\n");
    return 11;
  }
  ibv_wc wc;
  if (ibv_poll_cq(cq, 1, &wc) >= 0) {
    std::fprintf(stderr, "child: ibv_poll_cq did not fail\n");
    return 12;
  }
  return 0;  // the library's exit handler runs now: it must not wait for the parent's threads
}

}  // namespace

int main(int argc, char** argv) {
  const bool fork_mode = argc > 1 && std::strcmp(argv[1], "fork") == 0;
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (!list || n < 1) {
    std::fprintf(stderr, "no device: %s\n", std::strerror(errno));
    return 1;
  }
  ibv_context* ctx = ibv_open_device(list[0]);
  if (!ctx) {
    std::fprintf(stderr, "ibv_open_device: %s\n", std::strerror(errno));
    return 1;
  }
  ibv_pd* pd = ibv_alloc_pd(ctx);
  if (!pd) {
    std::fprintf(stderr, "ibv_alloc_pd: %s\n", std::strerror(errno));
    return 1;
  }
  if (!fork_mode) return 0;  // the device, its list and the PD are left open on purpose

  ibv_cq* cq = ibv_create_cq(ctx, 4, nullptr, nullptr, 0);
  if (!cq) {
    std::fprintf(stderr, "ibv_create_cq: %s\n", std::strerror(errno));
    return 1;
  }
  const pid_t pid = fork();
  if (pid < 0) return 1;
  if (pid == 0) return child(ctx, pd, cq);
  int status = 0;
  pid_t got = 0;
  for (int i = 0; i < 1000 && (got = waitpid(pid, &status, WNOHANG)) == 0; ++i) usleep(10000);
  if (got == 0) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    std::fprintf(stderr, "the child did not finish within 10 s\n");
    return 2;
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "the child failed (status %#x)\n", status);
    return 3;
  }
  if (!ibv_alloc_pd(ctx)) {
    std::fprintf(stderr, "parent: ibv_alloc_pd after the fork: %s\n", std::strerror(errno));
    return 4;
  }
  return 0;
}
