#include "stack/cc/pacer.h"

#include <algorithm>
#include <cmath>

namespace roce::cc {

void Pacer::set_rate(double gbps, uint64_t now_ns, uint64_t burst_ns, uint32_t burst_bytes) {
  const double npb = 8.0 / gbps;
  if (ns_per_byte_ > 0 && tat_ns_ > now_ns) {
    const double debt = (static_cast<double>(tat_ns_ - now_ns) + tat_frac_) * (npb / ns_per_byte_);
    const double whole = std::floor(debt);
    tat_ns_ = now_ns + static_cast<uint64_t>(whole);
    tat_frac_ = debt - whole;
  }
  ns_per_byte_ = npb;
  burst_tol_ns_ = static_cast<double>(burst_ns);
  if (burst_bytes) {
    burst_tol_ns_ = std::max(burst_tol_ns_, std::min(static_cast<double>(burst_bytes) * npb,
                                                     4.0 * static_cast<double>(burst_ns)));
  }
}

void Pacer::on_sent(uint32_t frame_bytes, uint64_t now_ns) {
  if (tat_ns_ < now_ns) {  // idle: unused time is not banked
    tat_ns_ = now_ns;
    tat_frac_ = 0;
  }
  const double cost = static_cast<double>(frame_bytes) * ns_per_byte_ + tat_frac_;
  const double whole = std::floor(cost);
  tat_ns_ += static_cast<uint64_t>(whole);
  tat_frac_ = cost - whole;
}

}  // namespace roce::cc
