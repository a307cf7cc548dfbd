#include "apps/perf/options_values.h"

#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdlib>

namespace roce::perf::detail {

namespace {

bool parse_long(const std::string& s, long long* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (errno || *end) return false;
  *out = v;
  return true;
}

}  // namespace

bool int_in(const char* name, const std::string& s, long long lo, long long hi, int* out,
            std::string* err) {
  long long v = 0;
  if (!parse_long(s, &v) || v < lo || v > hi) {
    *err = std::string(name) + ": '" + s + "' is not a number in " + std::to_string(lo) + ".." +
           std::to_string(hi);
    return false;
  }
  *out = static_cast<int>(v);
  return true;
}

// A finite number of 0 or more (perftest's -w / -y), in int_in's manner.
bool nonnegative(const char* name, const std::string& s, double* out, std::string* err) {
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(s.c_str(), &end);
  if (errno != 0 || end == s.c_str() || *end != '\0' || !std::isfinite(v) || v < 0) {
    *err = std::string(name) + ": '" + s + "' is not a number of 0 or more";
    return false;
  }
  *out = v;
  return true;
}

// perftest's -s: a number with an optional K or M suffix, 1 .. UINT_MAX/2.
bool parse_size(const std::string& in, uint64_t* out, std::string* err) {
  std::string s = in;
  uint64_t factor = 1;
  if (!s.empty() && (s.back() == 'K' || s.back() == 'M')) {
    factor = s.back() == 'K' ? 1024 : 1024 * 1024;
    s.pop_back();
  }
  long long v = 0;
  if (!parse_long(s, &v) || v < 1 || static_cast<uint64_t>(v) > UINT_MAX / 2 / factor) {
    *err = "size: '" + in + "' is not a message size in 1.." + std::to_string(UINT_MAX / 2) +
           " (a K or M suffix is allowed)";
    return false;
  }
  *out = static_cast<uint64_t>(v) * factor;
  return true;
}

bool parse_size_list(const std::string& in, std::vector<uint64_t>* out, std::string* err) {
  size_t start = 0;
  while (start <= in.size()) {
    const size_t comma = in.find(',', start);
    const std::string item = in.substr(start, comma == std::string::npos ? comma : comma - start);
    uint64_t v = 0;
    if (!parse_size(item, &v, err)) {
      *err = "--sizes: " + *err;
      return false;
    }
    out->push_back(v);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return true;
}

}  // namespace roce::perf::detail
