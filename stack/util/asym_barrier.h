// An asymmetric store-load barrier for a rare side and a frequent side (Linux membarrier(2)).
// Each side stores, then loads what the other side stores; at least one of them must see the
// other's store. The frequent side needs only a compiler barrier; the rare side makes every
// running thread of the process execute a full memory barrier (an IPI). Where
// MEMBARRIER_CMD_PRIVATE_EXPEDITED is not available (an old kernel, a seccomp filter,
// valgrind), available() is false and both sides must use full fences.
#pragma once

namespace roce::asym_barrier {

// Registers the process for expedited private barriers on the first call; true if heavy() can
// be used.
bool available();
// The rare side's barrier. Only after available() returned true.
void heavy();
// The frequent side's: keeps the compiler from moving its load above its store.
inline void light() { __atomic_signal_fence(__ATOMIC_SEQ_CST); }

}  // namespace roce::asym_barrier
