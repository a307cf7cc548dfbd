// The check behind #wrong: inputs whose reductions are exact in every type and order (small
// integers; products of +-1 and +-2), and each rank's expected output computed from every
// rank's inputs with the library's own kernels in rank order (the kernels are checked against
// an independent reference by coll_kernels_test).
#pragma once

#include <cstddef>
#include <cstdint>

#include "apps/coll_perf/bench.h"

namespace roce::coll::perf {

// Writes this rank's inputs where once() reads them, and fills the output with 0xee first.
void fill_inputs(const Case& k, int rank, int ranks, bool in_place, uint8_t* send, uint8_t* recv);
// Elements of this rank's output that differ from the expected ones.
int64_t count_wrong(const Case& k, int rank, int ranks, bool in_place, const uint8_t* send,
                    const uint8_t* recv);
// Tests only (--test-corrupt): one wrong element in this rank's output.
void corrupt_output(const Case& k, int rank, bool in_place, uint8_t* recv);

}  // namespace roce::coll::perf
