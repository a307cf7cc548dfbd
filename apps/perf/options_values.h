// Checked values of roce-perf's flags: each parser returns false with one line in *err.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

namespace roce::perf::detail {

// Sets *err to `why` and returns false: `return refuse(err, ...)`.
inline bool refuse(std::string* err, std::string why) {
  *err = std::move(why);
  return false;
}

// A value for flag `name` in [lo, hi].
bool int_in(const char* name, const std::string& s, long long lo, long long hi, int* out,
            std::string* err);
// A finite number of 0 or more (perftest's -w / -y).
bool nonnegative(const char* name, const std::string& s, double* out, std::string* err);
// perftest's -s: a number with an optional K or M suffix, 1 .. UINT_MAX/2.
bool parse_size(const std::string& in, uint64_t* out, std::string* err);
// --sizes: a comma-separated list of -s values.
bool parse_size_list(const std::string& in, std::vector<uint64_t>* out, std::string* err);

// The value of `s` among `names` (perftest's strcmp chains); false if none is `s`.
template <typename E>
bool named(const std::string& s, std::initializer_list<std::pair<const char*, E>> names, E* out) {
  for (const auto& [name, value] : names) {
    if (s == name) {
      *out = value;
      return true;
    }
  }
  return false;
}

}  // namespace roce::perf::detail
