// nccl-tests' output, line for line in layout (nccl-tests 2.19, src/util.cu): the header, one row
// per size with out-of-place then in-place time / algbw / busbw / #wrong, the footer with the
// out-of-bounds count and the average bus bandwidth; and the same results as JSON (-J).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace roce::coll::perf {

struct Placement {
  double time_us = 0, algbw = 0, busbw = 0;  // GB/s = 1e9 bytes a second
  int64_t wrong = 0;                         // -1: not checked ("N/A")
};

struct Row {
  size_t bytes = 0, count = 0;
  std::string type, redop;
  int root = -1;
  Placement out_of_place, in_place;
};

// nccl-tests' number in a fixed width: 2 decimals, else fewer, else exponent notation.
std::string fixed_width(double value, int width);

std::string table_header();  // the three "# ..." lines above the rows
std::string row_line(const Row& r);
// "# Out of bounds values : N OK|FAILED", "# Avg bus bandwidth    : X [OK|FAILED]", ...
// min_bw < 0: no floor (NCCL_TESTS_MIN_BW unset); the floor fails below 0.9 x min_bw, as
// nccl-tests does.
std::string footer(int64_t wrong, double avg_busbw, double min_bw, const std::string& program);
// Mean of every printed busbw (both placements of every row), as nccl-tests' average.
double average_busbw(const std::vector<Row>& rows);
// A baseline's row (gloo-bench, mpi-bench): `count` float32 elements, one operation taking
// `seconds`, busbw by nccl-tests' factor for AllReduce or AlltoAll, the one placement measured
// shown in both columns, #wrong not checked.
Row baseline_row(bool all_reduce, size_t count, int ranks, double seconds);
std::string json(const std::string& program, const std::vector<Row>& rows, int64_t wrong,
                 double avg_busbw);

}  // namespace roce::coll::perf
