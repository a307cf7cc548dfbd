// DCQCN reaction and notification points. "RP:" / "NP:" comments cite the RP and NP algorithms
// of Zhu et al., "Congestion Control for Large-Scale RDMA Deployments", SIGCOMM 2015, section 3.
// Names in brackets are NVIDIA ConnectX firmware / mlx5 debugfs cc_params names.
#include "stack/cc/dcqcn.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <string_view>

#include "stack/util/shown.h"

namespace roce::cc {

// --- Profiles --------------------------------------------------------------------------------

// The paper's values. Where the paper is silent we take the authors' public ns-3 simulator
// (github.com/bobzhuyb/ns3-rdma: mix/config.txt and qbb-net-device.cc).
//  - g = 1/256, alpha period 55 us, CNP interval 50 us, F = 5, Rai = 40 Mb/s, Rhai = 200 Mb/s:
//    the paper; the simulator's config has the same (DCTCP_GAIN 0.00390625, ALPHA_RESUME_INTERVAL
//    55, CNP_INTERVAL 50, FAST_RECOVERY_TIMES 5, RATE_AI 40Mb/s, RATE_HAI 200Mb/s).
//  - T = 55 us: the paper's timer value, chosen just above the 50 us CNP interval so that a flow
//    that keeps receiving CNPs at the NP's maximum rate never gets a timer increase between two
//    cuts. The simulator's config uses RP_TIMER 60 us; set rate_timer_us=60 to match it.
//  - B = 10 MB: the paper's byte counter. With it the timer drives recovery (10 MB is 2 ms at
//    40 Gb/s, 40 timer periods). The simulator's config uses BYTE_COUNTER 300000 (300 KB), which
//    makes the byte counter dominate at line rate; set byte_counter_bytes=300000 to match it.
//  - initial alpha 1: the first cut halves the rate, as in the paper's examples. (The simulator
//    initialises alpha to 0.5.)
//  - min rate 100 Mb/s: the simulator's MinRate default; the paper gives none.
//  - No min_dec_factor and no minimum time between cuts: every CNP cuts (RP); alpha <= 1 already
//    bounds one cut to half the rate. clamp_tgt_rate: the paper always sets Rt = Rc.
DcqcnParams DcqcnParams::paper(double line_gbps) {
  DcqcnParams p;
  p.line_gbps = line_gbps;
  p.min_rate_gbps = std::min(0.1, line_gbps);
  p.rai_gbps = 0.040;
  p.rhai_gbps = 0.200;
  p.first_cnp_rate_gbps = 0;
  p.g = 1.0 / 256;
  p.initial_alpha = 1.0;
  p.alpha_period_ns = 55'000;
  p.min_dec_factor = 0;
  p.min_cut_interval_ns = 0;
  p.clamp_tgt_rate = true;
  p.clamp_tgt_rate_after_time_inc = true;
  p.rate_timer_ns = 55'000;
  p.byte_counter_bytes = 10'000'000;
  p.threshold = 5;
  p.cnp_interval_ns = 50'000;
  p.ecn = EcnMark::kEct0;
  return p;
}

// ConnectX-4 and later firmware defaults, from NVIDIA's "DCQCN CC Parameters" table (DOCA/
// MLNX_OFED docs; Mellanox community DOC-2790 "DCQCN Parameters").
//  - rpg_time_reset 300 us, rpg_byte_reset 32767 B, rpg_threshold 1, rpg_ai_rate 5 Mb/s,
//    rpg_hai_rate 50 Mb/s, rpg_min_rate 1 Mb/s, rpg_min_dec_fac 50 %, rate_to_set_on_first_cnp 0
//    (off), rate_reduce_monitor_period 4 us, clamp_tgt_rate 0, clamp_tgt_rate_after_time_inc 1.
//  - initial_alpha_value 1023 and dce_tcp_g 1019 are 10-bit fixed-point fractions. The firmware
//    updates alpha = (G/1024) alpha + (1024 - G)/1024 when a CNP arrived in the period and
//    alpha = (G/1024) alpha otherwise, so G = 1019 is our g = 5/1024 (~1/205), not 1019/1024;
//    the paper's 1/256 would be G = 1020.
//  - dce_tcp_rtt 1 us: the alpha update period.
//  - rpg_gd 11: the cut is Rc (1 - alpha_fixed / 2^11) = Rc (1 - alpha/2), the paper's formula.
//  - CNP interval 4 us: the firmware's knob (np_min_time_between_cnps) is 0 per the mlx5
//    debugfs patch and 4 us in common tuning guides. With the paper's 50 us instead, the 1 us
//    alpha period decays alpha to ~0.02 between CNPs, cuts shrink to ~1 % and the queue runs
//    away (measured: docs/dcqcn.md). The paper profile keeps 50 us: the engine's default.
DcqcnParams DcqcnParams::connectx(double line_gbps) {
  DcqcnParams p;
  p.line_gbps = line_gbps;
  p.min_rate_gbps = std::min(0.001, line_gbps);
  p.rai_gbps = 0.005;
  p.rhai_gbps = 0.050;
  p.first_cnp_rate_gbps = 0;
  p.g = 5.0 / 1024;
  p.initial_alpha = 1023.0 / 1024;
  p.alpha_period_ns = 1'000;
  p.min_dec_factor = 0.5;
  p.min_cut_interval_ns = 4'000;
  p.clamp_tgt_rate = false;
  p.clamp_tgt_rate_after_time_inc = true;
  p.rate_timer_ns = 300'000;
  p.byte_counter_bytes = 32'767;
  p.threshold = 1;
  p.cnp_interval_ns = 4'000;
  p.ecn = EcnMark::kEct0;
  return p;
}

// --- parse / validate / to_string ---------------------------------------------------------------

namespace {

// One entry per field: exactly one member pointer is set.
struct Field {
  const char* name;
  double DcqcnParams::*d = nullptr;
  uint64_t DcqcnParams::*u64 = nullptr;
  uint32_t DcqcnParams::*u32 = nullptr;
  bool DcqcnParams::*b = nullptr;
  EcnMark DcqcnParams::*e = nullptr;
};

constexpr Field kFields[] = {
    {.name = "line_gbps", .d = &DcqcnParams::line_gbps},
    {.name = "min_rate_gbps", .d = &DcqcnParams::min_rate_gbps},
    {.name = "rai_gbps", .d = &DcqcnParams::rai_gbps},
    {.name = "rhai_gbps", .d = &DcqcnParams::rhai_gbps},
    {.name = "first_cnp_rate_gbps", .d = &DcqcnParams::first_cnp_rate_gbps},
    {.name = "g", .d = &DcqcnParams::g},
    {.name = "initial_alpha", .d = &DcqcnParams::initial_alpha},
    {.name = "alpha_period_ns", .u64 = &DcqcnParams::alpha_period_ns},
    {.name = "min_dec_factor", .d = &DcqcnParams::min_dec_factor},
    {.name = "min_cut_interval_ns", .u64 = &DcqcnParams::min_cut_interval_ns},
    {.name = "clamp_tgt_rate", .b = &DcqcnParams::clamp_tgt_rate},
    {.name = "clamp_tgt_rate_after_time_inc", .b = &DcqcnParams::clamp_tgt_rate_after_time_inc},
    {.name = "rate_timer_ns", .u64 = &DcqcnParams::rate_timer_ns},
    {.name = "byte_counter_bytes", .u64 = &DcqcnParams::byte_counter_bytes},
    {.name = "threshold", .u32 = &DcqcnParams::threshold},
    {.name = "cnp_interval_ns", .u64 = &DcqcnParams::cnp_interval_ns},
    {.name = "ecn", .e = &DcqcnParams::ecn},
    {.name = "pacer_burst_ns", .u64 = &DcqcnParams::pacer_burst_ns},
    {.name = "pacer_burst_bytes", .u32 = &DcqcnParams::pacer_burst_bytes},
};

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool fail(std::string* err, std::string msg) {
  if (err) *err = std::move(msg);
  return false;
}

bool parse_double(std::string_view v, double* out) {
  const char* end = v.data() + v.size();
  auto [ptr, ec] = std::from_chars(v.data(), end, *out);
  return ec == std::errc() && ptr == end && std::isfinite(*out);
}

bool parse_u64(std::string_view v, double scale, uint64_t max, uint64_t* out) {
  const char* end = v.data() + v.size();
  if (scale == 1.0) {
    auto [ptr, ec] = std::from_chars(v.data(), end, *out);
    return ec == std::errc() && ptr == end && *out <= max;
  }
  // A unit alias (e.g. _us for a _ns field): the value may be fractional; round to the unit.
  double d = 0;
  if (!parse_double(v, &d) || d < 0) return false;
  d = std::round(d * scale);
  if (d > static_cast<double>(max)) return false;
  *out = static_cast<uint64_t>(d);
  return true;
}

// Sets the field `key` (or its unit alias) of *p from `value`.
bool set_field(DcqcnParams* p, std::string_view key, std::string_view value, std::string* err) {
  const Field* f = nullptr;
  double scale = 1.0;
  for (const Field& c : kFields) {
    if (key == c.name) f = &c;
  }
  if (!f) {
    // Unit aliases: x_us for x_ns (value * 1000), x_mbps for x_gbps (value / 1000).
    std::string base;
    if (key.ends_with("_us")) {
      base = std::string(key.substr(0, key.size() - 3)) + "_ns";
      scale = 1000.0;
    } else if (key.ends_with("_mbps")) {
      base = std::string(key.substr(0, key.size() - 5)) + "_gbps";
      scale = 1e-3;
    }
    for (const Field& c : kFields) {
      if (!base.empty() && base == c.name) f = &c;
    }
  }
  if (!f) return fail(err, "dcqcn: unknown key '" + shown(key) + "'");

  auto bad = [&](const char* expected) {
    return fail(err, "dcqcn: bad value '" + shown(value) + "' for '" + shown(key) + "' (expected " +
                         expected + ")");
  };
  if (f->d) {
    double d = 0;
    if (!parse_double(value, &d)) return bad("a number");
    p->*(f->d) = d * scale;
  } else if (f->u64) {
    uint64_t u = 0;
    if (!parse_u64(value, scale, std::numeric_limits<uint64_t>::max() / 2, &u)) {
      return bad("a non-negative integer");
    }
    p->*(f->u64) = u;
  } else if (f->u32) {
    uint64_t u = 0;
    if (!parse_u64(value, scale, std::numeric_limits<uint32_t>::max(), &u)) {
      return bad("an integer in [0, 4294967295]");
    }
    p->*(f->u32) = static_cast<uint32_t>(u);
  } else if (f->b) {
    if (value == "true" || value == "1") {
      p->*(f->b) = true;
    } else if (value == "false" || value == "0") {
      p->*(f->b) = false;
    } else {
      return bad("true, false, 1 or 0");
    }
  } else {
    if (value == "ect0") {
      p->*(f->e) = EcnMark::kEct0;
    } else if (value == "ect1") {
      p->*(f->e) = EcnMark::kEct1;
    } else {
      return bad("ect0 or ect1");
    }
  }
  return true;
}

std::string fmt_double(double d) {
  char buf[64];
  auto [ptr, ec] = std::to_chars(buf, buf + sizeof(buf), d);  // shortest exact round trip
  return ec == std::errc() ? std::string(buf, ptr) : std::string("nan");
}

}  // namespace

bool DcqcnParams::parse(const std::string& spec, std::string* err) {
  DcqcnParams next = *this;  // commit only if every item and the result are valid
  std::string_view rest = spec;
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    std::string_view item = trim(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      return fail(err, "dcqcn: '" + shown(item) + "' is not key=value");
    }
    if (!set_field(&next, trim(item.substr(0, eq)), trim(item.substr(eq + 1)), err)) return false;
  }
  if (!next.validate(err)) return false;
  *this = next;
  return true;
}

bool DcqcnParams::validate(std::string* err) const {
  auto out_of_range = [&](const char* key, double v, const char* range) {
    return fail(err, std::string("dcqcn: ") + key + "=" + fmt_double(v) + " out of range " + range);
  };
  // Written as !(in range) so that NaN fails too.
  if (!(line_gbps > 0) || !std::isfinite(line_gbps)) {
    return out_of_range("line_gbps", line_gbps, "(0, inf)");
  }
  if (!(min_rate_gbps > 0 && min_rate_gbps <= line_gbps)) {
    return out_of_range("min_rate_gbps", min_rate_gbps, "(0, line_gbps]");
  }
  if (!(rai_gbps >= 0) || !std::isfinite(rai_gbps)) {
    return out_of_range("rai_gbps", rai_gbps, "[0, inf)");
  }
  if (!(rhai_gbps >= 0) || !std::isfinite(rhai_gbps)) {
    return out_of_range("rhai_gbps", rhai_gbps, "[0, inf)");
  }
  if (!(first_cnp_rate_gbps == 0 ||
        (first_cnp_rate_gbps >= min_rate_gbps && first_cnp_rate_gbps <= line_gbps))) {
    return out_of_range("first_cnp_rate_gbps", first_cnp_rate_gbps,
                        "0 or [min_rate_gbps, line_gbps]");
  }
  if (!(g > 0 && g <= 1)) return out_of_range("g", g, "(0, 1]");
  if (!(initial_alpha >= 0 && initial_alpha <= 1)) {
    return out_of_range("initial_alpha", initial_alpha, "[0, 1]");
  }
  if (alpha_period_ns == 0) return out_of_range("alpha_period_ns", 0, "[1, inf)");
  if (!(min_dec_factor >= 0 && min_dec_factor <= 1)) {
    return out_of_range("min_dec_factor", min_dec_factor, "[0, 1]");
  }
  if (rate_timer_ns == 0) return out_of_range("rate_timer_ns", 0, "[1, inf)");
  return true;
}

void DcqcnParams::set_line_rate(double gbps) {
  line_gbps = gbps;
  min_rate_gbps = std::min(min_rate_gbps, gbps);
  first_cnp_rate_gbps = std::min(first_cnp_rate_gbps, gbps);
}

std::string DcqcnParams::to_string() const {
  std::string s;
  for (const Field& f : kFields) {
    if (!s.empty()) s += ',';
    s += f.name;
    s += '=';
    if (f.d) {
      s += fmt_double(this->*(f.d));
    } else if (f.u64) {
      s += std::to_string(this->*(f.u64));
    } else if (f.u32) {
      s += std::to_string(this->*(f.u32));
    } else if (f.b) {
      s += this->*(f.b) ? "true" : "false";
    } else {
      s += this->*(f.e) == EcnMark::kEct1 ? "ect1" : "ect0";
    }
  }
  return s;
}

// --- Reaction point ---------------------------------------------------------------------------

void DcqcnRp::init(const DcqcnParams& params, uint64_t now_ns) {
  *this = DcqcnRp();
  p_ = params;
  rc_ = rt_ = p_.line_gbps;
  alpha_ = p_.initial_alpha;
  now_ns_ = now_ns;
  rate_changed();
}

uint64_t DcqcnRp::next_timer_ns() const {
  uint64_t t = recovering_ ? rate_deadline_ns_ : kNoTimer;
  if (cut_pending_) t = std::min(t, cut_due_ns_);
  return t;
}

void DcqcnRp::on_timer(uint64_t now_ns) { advance(now_ns); }

void DcqcnRp::advance(uint64_t now_ns) {
  now_ns_ = std::max(now_ns_, now_ns);
  uint64_t done_to = now_ns_;
  for (unsigned n = 0;; ++n) {
    const uint64_t t = next_timer_ns();
    if (t > now_ns_) break;
    if (n == kMaxEventsPerCall) {
      done_to = t;  // the rest is replayed by the next call
      break;
    }
    if (cut_pending_ && cut_due_ns_ == t) {
      cut(t);  // at the same instant, the congestion signal goes before an increase
    } else {
      // Each period is counted from the previous deadline, not from the late call, so a late
      // engine replays exactly the expiries a punctual one would have seen.
      rate_deadline_ns_ += p_.rate_timer_ns;
      ++counters_.timer_events;
      increase_event(Source::kTimer);
    }
  }
  decay_alpha_to(done_to);
}

// RP: each period K without a CNP, alpha = (1-g) alpha. K restarts at each cut, as the authors'
// simulator re-arms its alpha timer on every CNP.
void DcqcnRp::decay_alpha_to(uint64_t t_ns) {
  if (!alpha_decaying_ || t_ns <= alpha_anchor_ns_) return;
  const uint64_t k = (t_ns - alpha_anchor_ns_) / p_.alpha_period_ns;
  if (k == alpha_k_) return;
  alpha_k_ = k;
  alpha_ = alpha_base_ * std::pow(1.0 - p_.g, static_cast<double>(k));
}

void DcqcnRp::on_cnp(uint64_t now_ns) {
  advance(now_ns);
  ++counters_.cnps;
  if (cut_pending_) {
    ++counters_.cnps_deferred;
    return;
  }
  // ConnectX applies at most one cut per rate_reduce_monitor_period; a CNP inside it is not
  // lost but cuts once when the period ends (as HPCC's ns-3 model of the Mellanox RP does).
  if (cut_seen_ && now_ns_ - last_cut_ns_ < p_.min_cut_interval_ns) {
    cut_pending_ = true;
    cut_due_ns_ = last_cut_ns_ + p_.min_cut_interval_ns;
    ++counters_.cnps_deferred;
    return;
  }
  cut(now_ns_);
}

void DcqcnRp::cut(uint64_t t_ns) {
  decay_alpha_to(t_ns);
  if (!cut_seen_ && p_.first_cnp_rate_gbps > 0) {
    rc_ = rt_ = p_.first_cnp_rate_gbps;  // [rate_to_set_on_first_cnp]
  } else {
    // RP: Rt = Rc. Without clamp_tgt_rate, Rt keeps its value unless the rate went up since
    // the previous cut (QCN/802.1Qau behaviour, ConnectX clamp_tgt_rate = 0): repeated cuts with
    // no increase in between keep the old target, so recovery aims back at it.
    const bool clamp = p_.clamp_tgt_rate || byte_stage_ > 0 ||
                       (p_.clamp_tgt_rate_after_time_inc && timer_stage_ > 0);
    if (clamp) rt_ = rc_;
    // RP: Rc = Rc (1 - alpha/2), with the alpha from before this CNP.
    double next = rc_ * (1.0 - alpha_ / 2);
    next = std::max(next, rc_ * p_.min_dec_factor);  // [rpg_min_dec_fac]
    rc_ = std::max(next, p_.min_rate_gbps);          // [rpg_min_rate]
  }
  // RP: alpha = (1-g) alpha + g (binary feedback: a CNP means "marked").
  alpha_base_ = (1.0 - p_.g) * alpha_ + p_.g;
  alpha_ = alpha_base_;
  alpha_anchor_ns_ = t_ns;
  alpha_k_ = 0;
  alpha_decaying_ = true;
  // RP: a cut resets the timer, the byte counter and both stage counts.
  timer_stage_ = 0;
  byte_stage_ = 0;
  byte_acc_ = 0;
  rate_deadline_ns_ = t_ns + p_.rate_timer_ns;
  recovering_ = true;
  cut_seen_ = true;
  last_cut_ns_ = t_ns;
  cut_pending_ = false;
  ++counters_.rate_cuts;
  rate_changed();
}

// RP: one rate-increase event per timer or byte-counter expiry. T and BC are the numbers of
// timer and byte-counter expiries since the latest cut *before* this one, so with F = 5 the
// first five events are fast recovery, as in QCN's five fast-recovery cycles, and ConnectX's
// rpg_threshold = 1 gives one. (The authors' simulator counts the expiry first and so does F-1 of
// them.)
//   max(T, BC) < F: fast recovery   Rc = (Rt + Rc)/2
//   min(T, BC) > F: hyper increase  Rt += i Rhai with i = min(T, BC) - F, Rc = (Rt + Rc)/2
//   otherwise:      additive        Rt += Rai, Rc = (Rt + Rc)/2
// i grows by one per event once both counters are past F (QCN's hyper-active increase), so the
// increase accelerates the longer the path stays uncongested. Rt and Rc stop at line rate.
void DcqcnRp::increase_event(Source source) {
  const uint32_t f = p_.threshold;
  const uint32_t hi = std::max(timer_stage_, byte_stage_);
  const uint32_t lo = std::min(timer_stage_, byte_stage_);
  if (hi < f) {
    ++counters_.fast_recovery;
  } else if (lo > f) {
    rt_ = std::min(p_.line_gbps, rt_ + static_cast<double>(lo - f) * p_.rhai_gbps);
    ++counters_.hyper_increase;
  } else {
    rt_ = std::min(p_.line_gbps, rt_ + p_.rai_gbps);
    ++counters_.additive_increase;
  }
  rc_ = std::min(p_.line_gbps, (rt_ + rc_) / 2);
  if (source == Source::kTimer) {
    ++timer_stage_;
  } else {
    ++byte_stage_;
  }
  end_recovery_at_line_rate();
  rate_changed();
}

// Back at line rate (within rounding: (Rt + Rc)/2 can stall one ulp short of Rt): nothing is
// left to recover, so the timer and the byte counter stop until the next cut.
void DcqcnRp::end_recovery_at_line_rate() {
  if (rc_ < p_.line_gbps * (1 - 1e-12)) return;
  rc_ = rt_ = p_.line_gbps;
  recovering_ = false;
  byte_acc_ = 0;
}

void DcqcnRp::set_line_rate(double gbps, uint64_t now_ns) {
  advance(now_ns);
  p_.set_line_rate(gbps);
  if (!recovering_) rc_ = gbps;  // at line rate: it follows the line
  rt_ = std::min(rt_, gbps);
  end_recovery_at_line_rate();
  rate_changed();
}

void DcqcnRp::on_bytes_sent(uint64_t bytes, uint64_t now_ns) {
  advance(now_ns);
  count_bytes(bytes);
}

// RP: the byte counter runs only while recovering (it is reset by every cut).
void DcqcnRp::count_bytes(uint64_t bytes) {
  if (!recovering_ || p_.byte_counter_bytes == 0) return;
  byte_acc_ += bytes;
  for (unsigned n = 0; n < kMaxEventsPerCall && recovering_ && byte_acc_ >= p_.byte_counter_bytes;
       ++n) {
    byte_acc_ -= p_.byte_counter_bytes;
    ++counters_.byte_events;
    increase_event(Source::kBytes);
  }
}

void DcqcnRp::rate_changed() {
  pacer_.set_rate(rc_, now_ns_, p_.pacer_burst_ns, p_.pacer_burst_bytes);
}

uint64_t DcqcnRp::tx_time(uint64_t now_ns) const { return pacer_.tx_time(now_ns); }

void DcqcnRp::on_sent(uint32_t frame_bytes, uint64_t now_ns) {
  advance(now_ns);
  pacer_.on_sent(frame_bytes, now_ns_);
  count_bytes(frame_bytes);
}

// --- Notification point -----------------------------------------------------------------------

void DcqcnNp::init(uint64_t cnp_interval_ns) {
  *this = DcqcnNp();
  interval_ns_ = cnp_interval_ns;
}

bool DcqcnNp::on_ce_packet(uint64_t now_ns) {
  ++counters_.ce_packets;
  if (sent_any_) {
    const uint64_t since = now_ns > last_cnp_ns_ ? now_ns - last_cnp_ns_ : 0;
    if (since < interval_ns_) return false;
  }
  sent_any_ = true;
  last_cnp_ns_ = now_ns;
  ++counters_.cnps_sent;
  return true;
}

}  // namespace roce::cc
