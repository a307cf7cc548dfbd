// For VerbsExit.CountersWrittenWhenAProgramExitsWithoutClosing: opens the first device of the
// shim's configuration (ROCE_CONFIG), allocates a PD and returns from main without closing
// anything, as a program that ends on an error path often does. Exit status 0 once opened.
#include <infiniband/verbs.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

int main() {
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
  if (!ibv_alloc_pd(ctx)) {
    std::fprintf(stderr, "ibv_alloc_pd: %s\n", std::strerror(errno));
    return 1;
  }
  return 0;  // the device, its list and the PD are left open on purpose
}
