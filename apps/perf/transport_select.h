// --transport: roce-perf (the stack's native API) and roce-perf-verbs (<infiniband/verbs.h> over
// our libibverbs) are two executables, since the verbs one links the shim, which holds its own
// copy of the stack and DPDK. Each hands a run meant for the other to it, so `--transport`
// works with either name.
#pragma once

namespace roce::perf {

inline constexpr const char* kNativeExecutable = "roce-perf";
inline constexpr const char* kVerbsExecutable = "roce-perf-verbs";

// Replaces this process by the executable `name` found beside this one (/proc/self/exe), with
// the same arguments. Returns only on failure: 1, with one line on stderr.
int exec_sibling(const char* name, char** argv);

}  // namespace roce::perf
