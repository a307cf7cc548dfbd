// libFuzzer target for the engine: the input is a program for one QP (RC, UC or UD) and its
// imaginary peer (tests/support/engine_fuzz.h). Any broken invariant aborts with a line saying
// which.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "../support/engine_fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 8192) return 0;
  const std::string err = roce::test::run_engine_program(data, size);
  if (!err.empty()) {
    std::fprintf(stderr, "engine invariant broken: %s\n", err.c_str());
    std::abort();
  }
  return 0;
}
