// Whether the process may access a range of its memory, as the kernel's view of the address
// space (/proc/self/maps) says. For memory registration, a control-path call: the engine reads
// registered memory, and writes it when the region allows writes, with plain loads and stores,
// so memory the process may not access that way must be refused before, not fault later.
#pragma once

#include <cstdint>

namespace roce {

// True if every byte of [addr, addr + len) lies in mappings that are readable and, with
// `write`, writable. The answer is that of the moment: nothing is pinned, so a later munmap or
// mprotect goes unseen. Where /proc/self/maps cannot be read (no /proc) it cannot tell, and
// answers true.
bool range_accessible(const void* addr, uint64_t len, bool write);

}  // namespace roce
