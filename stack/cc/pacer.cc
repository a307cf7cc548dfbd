#include "stack/cc/pacer.h"

#include <algorithm>
#include <cmath>

namespace roce::cc {

void Pacer::rescale(double npb, uint64_t now_ns) {
  if (ns_per_byte_ > 0 && tat_ns_ > now_ns) {
    const double debt = (static_cast<double>(tat_ns_ - now_ns) + tat_frac_) * (npb / ns_per_byte_);
    const double whole = std::floor(debt);
    tat_ns_ = now_ns + static_cast<uint64_t>(whole);
    tat_frac_ = debt - whole;
  }
  ns_per_byte_ = npb;
}

void Pacer::set_rate(double gbps, uint64_t now_ns, uint64_t burst_ns, uint32_t burst_bytes) {
  const double npb = 8.0 / gbps;
  rescale(npb, now_ns);
  burst_tol_ns_ = static_cast<double>(burst_ns);
  if (burst_bytes) {
    burst_tol_ns_ = std::max(burst_tol_ns_, std::min(static_cast<double>(burst_bytes) * npb,
                                                     4.0 * static_cast<double>(burst_ns)));
  }
}

// A frame starts while what was charged before it, less the time since, is within the tolerance;
// after an idle, frames of pkt_bytes start at 0, c, 2c ... of charge (c = one frame's time), so a
// tolerance of (max_burst - pkt) bytes' time lets exactly max_burst / pkt of them go at once.
void Pacer::set_rate_burst(double gbps, uint64_t now_ns, uint32_t max_burst_bytes,
                           uint32_t pkt_bytes) {
  const double npb = 8.0 / gbps;
  rescale(npb, now_ns);
  burst_tol_ns_ =
      max_burst_bytes > pkt_bytes ? static_cast<double>(max_burst_bytes - pkt_bytes) * npb : 0.0;
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
