#include "stack/util/asym_barrier.h"

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace roce::asym_barrier {
namespace {
long membarrier(int cmd) { return syscall(SYS_membarrier, cmd, 0, 0); }
}  // namespace

bool available() {
  static const bool ok = [] {
    const long cmds = membarrier(MEMBARRIER_CMD_QUERY);
    if (cmds < 0 || !(cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED)) return false;
    return membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0;
  }();
  return ok;
}

void heavy() {
  if (membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0) {
    // The process is registered, so the kernel has no reason to refuse. If it does, the light
    // sides are not ordered and a wake-up could be lost without a trace: stop loudly instead.
    std::perror("membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)");
    std::abort();
  }
}

}  // namespace roce::asym_barrier
