// DCQCN congestion control (Zhu et al., "Congestion Control for Large-Scale RDMA Deployments",
// SIGCOMM 2015) as pure, deterministic state machines: no I/O, no clock, no allocation, no
// virtual calls. Every call takes the caller's `now_ns`; time only moves forward.
//
//  - DcqcnRp: the reaction point, one per sender QP. Owns the current rate Rc, the target rate
//    Rt, the congestion estimate alpha, the rate-increase timer and byte counter, and a pacer
//    that turns Rc into "may this frame go now, and if not, when?".
//  - DcqcnNp: the notification point, one per receiver QP: decides when a CE-marked packet must
//    be answered with a CNP (at most one per cnp_interval per QP).
//
// Engine wiring (requester): call on_cnp() for every CNP addressed to the QP; ask tx_time() before
// each data frame and call on_sent() after it; arm one timer-wheel node at next_timer_ns() and call
// on_timer() when it fires. Re-read next_timer_ns() and tx_time() after any call: CNPs, timer
// expiries and byte-counter expiries all move them. Late calls are fine: every entry point first
// replays the timer expiries that fell due before `now_ns`, in order.
//
// Numbers: rates are doubles in Gb/s, which is also bits per ns; times are integer ns. The
// pacer keeps its virtual clock as integer ns plus a fractional part, so the average rate is
// exact however long it runs (a double clock would round away fractions of a ns within hours).
#pragma once

#include <cstdint>
#include <limits>
#include <string>

#include "stack/cc/pacer.h"

namespace roce::cc {

// ECN codepoint the sender puts on data packets (RFC 3168 5: ECT(1) = 01b, ECT(0) = 10b).
// ConnectX marks RoCEv2 data ECT(0); switches mark CE (11b) on either.
enum class EcnMark : uint8_t { kEct1 = 0b01, kEct0 = 0b10 };

struct DcqcnParams {
  // --- Rates (Gb/s) ---
  double line_gbps = 100.0;          // Rc and Rt never exceed this
  double min_rate_gbps = 0.1;        // a cut never goes below this (ConnectX rpg_min_rate)
  double rai_gbps = 0.040;           // additive increase step of Rt (rpg_ai_rate)
  double rhai_gbps = 0.200;          // hyper increase step of Rt (rpg_hai_rate)
  double first_cnp_rate_gbps = 0.0;  // > 0: the first cut sets Rc = Rt = this instead
                                     // (ConnectX rate_to_set_on_first_cnp); 0 = off

  // --- Congestion estimate alpha ---
  double g = 1.0 / 256;               // gain: on a cut a = (1-g)a + g; per quiet period a = (1-g)a
  double initial_alpha = 1.0;         // alpha used by the first cut
  uint64_t alpha_period_ns = 55'000;  // decay period without CNP (ConnectX dce_tcp_rtt)

  // --- Rate decrease ---
  double min_dec_factor = 0.0;       // a cut keeps Rc >= this * Rc (rpg_min_dec_fac / 100)
  uint64_t min_cut_interval_ns = 0;  // at most one cut per interval (rate_reduce_monitor_period)
  bool clamp_tgt_rate = true;        // every cut sets Rt = Rc (the paper); false: see below
  bool clamp_tgt_rate_after_time_inc = true;  // with clamp off: timer increases also unlock Rt = Rc

  // --- Rate increase ---
  uint64_t rate_timer_ns = 55'000;           // T: one increase event per period (rpg_time_reset)
  uint64_t byte_counter_bytes = 10'000'000;  // B: one increase event per B bytes sent; 0 = off
  uint32_t threshold = 5;  // F: fast-recovery steps before additive (rpg_threshold)

  // --- Notification point ---
  uint64_t cnp_interval_ns = 50'000;  // at most one CNP per QP per interval; 0 = every CE
  EcnMark ecn = EcnMark::kEct0;

  // --- Pacer ---
  // A frame may start while the pacer's virtual clock is at most max(burst_ns, the time
  // burst_bytes take at Rc) ahead of now. burst_ns must cover the engine's timer granularity (1.024
  // us ticks, see TimerWheel) or a late wake-up is time lost for good and the rate sags below Rc.
  uint64_t pacer_burst_ns = 2048;
  uint32_t pacer_burst_bytes = 8192;

  // SIGCOMM 2015 DCQCN as published (values and sources in dcqcn.cc).
  static DcqcnParams paper(double line_gbps);
  // NVIDIA ConnectX-4+ firmware defaults (values and sources in dcqcn.cc).
  static DcqcnParams connectx(double line_gbps);

  // Overrides fields from "key=value,key=value" (command-line options). Keys are the field names
  // above; a field ending in _ns also accepts _us (value x 1000) and one ending in _gbps also
  // accepts _mbps (value / 1000). Bools take true/false/1/0, `ecn` takes ect0/ect1. On error
  // returns false, sets *err to one line naming the bad key or value, and leaves *this unchanged.
  bool parse(const std::string& spec, std::string* err);
  // Range checks (e.g. 0 < g <= 1, 0 < min_rate <= line). One line in *err on failure.
  bool validate(std::string* err) const;
  // Moves the line rate to `gbps` (> 0, finite), lowering min_rate and first_cnp_rate to it
  // where they are above it, as the profiles do for a slow line: the result still validates.
  void set_line_rate(double gbps);
  // Every field as "key=value,..."; parse(to_string()) reproduces the same parameters.
  std::string to_string() const;
};

struct DcqcnRpCounters {
  uint64_t cnps = 0;           // CNPs received
  uint64_t rate_cuts = 0;      // rate decreases applied
  uint64_t cnps_deferred = 0;  // CNPs inside min_cut_interval: folded into one later cut
  uint64_t timer_events = 0;   // rate-increase timer expiries
  uint64_t byte_events = 0;    // byte-counter expiries
  uint64_t fast_recovery = 0;  // increase events by phase
  uint64_t additive_increase = 0;
  uint64_t hyper_increase = 0;
};

// Reaction point: rate control for one sender QP.
class DcqcnRp {
 public:
  static constexpr uint64_t kNoTimer = std::numeric_limits<uint64_t>::max();
  // Timer events replayed per call at most; a call that stops early leaves next_timer_ns() <= now
  // so the engine calls again on its next poll. Bounds the work of a very late call.
  static constexpr unsigned kMaxEventsPerCall = 1024;

  // Starts at line rate with no timer armed: DCQCN does nothing until the first CNP. `params`
  // must pass validate() (the profiles and parse() guarantee it); the RP keeps its own copy.
  void init(const DcqcnParams& params, uint64_t now_ns);

  // A CNP for this QP arrived: cut the rate (Zhu et al., RP algorithm), unless a cut happened less
  // than min_cut_interval ago; then one cut is applied when that interval ends (next_timer_ns()).
  void on_cnp(uint64_t now_ns);
  // Replays every timer expiry due at or before now_ns, in time order (idempotent).
  void on_timer(uint64_t now_ns);
  // Earliest deadline at which the rate may change (increase timer or a deferred cut), or
  // kNoTimer. Alpha decay needs no wake-up: it is applied exactly, in closed form, on each call.
  uint64_t next_timer_ns() const;
  // Feeds the byte counter B (a rate-increase event every B bytes while recovering).
  void on_bytes_sent(uint64_t bytes, uint64_t now_ns);

  // Pacer. tx_time(): earliest time >= now_ns at which the next frame may start (== now_ns: send
  // now). on_sent(): the frame went; charges it to the pacer at Rc and feeds the byte counter.
  // Frames of any size are allowed once the pacer is not ahead by more than the burst tolerance;
  // the cost of a big frame is charged after it, so no frame waits forever and the average rate
  // is exactly Rc. Idle time earns at most the burst tolerance of credit.
  uint64_t tx_time(uint64_t now_ns) const;
  void on_sent(uint32_t frame_bytes, uint64_t now_ns);

  // The port's line rate changed (a link that came up at, or renegotiated to, another speed):
  // DcqcnParams::set_line_rate on the RP's copy. A QP at line rate moves to the new one; one
  // that is recovering keeps Rc and Rt where they are below the new line rate and is cut to it
  // where they are above, and is back at line rate (recovery over) once Rc reaches it.
  void set_line_rate(double gbps, uint64_t now_ns);

  double rate_gbps() const { return rc_; }               // Rc
  double target_gbps() const { return rt_; }             // Rt
  double alpha() const { return alpha_; }                // as of the latest call
  uint32_t timer_stage() const { return timer_stage_; }  // T: timer expiries since the last cut
  uint32_t byte_stage() const { return byte_stage_; }    // BC: byte expiries since the last cut
  bool recovering() const { return recovering_; }        // below line rate, increase timer running
  const DcqcnRpCounters& counters() const { return counters_; }
  const DcqcnParams& params() const { return p_; }

 private:
  enum class Source : uint8_t { kTimer, kBytes };
  void advance(uint64_t now_ns);
  void decay_alpha_to(uint64_t t_ns);
  void cut(uint64_t t_ns);
  void increase_event(Source source);
  void end_recovery_at_line_rate();
  void count_bytes(uint64_t bytes);
  void rate_changed();

  DcqcnParams p_;
  double rc_ = 0;
  double rt_ = 0;
  double alpha_ = 0;
  uint64_t now_ns_ = 0;  // latest time seen; earlier times are treated as this
  // Alpha decays once per alpha_period without a cut, counted from the latest cut. It is kept
  // as base * (1-g)^k (k whole periods since the cut), so its value depends only on time, not
  // on how often the engine happened to call.
  double alpha_base_ = 0;         // alpha right after the latest cut
  uint64_t alpha_anchor_ns_ = 0;  // time of the latest cut
  uint64_t alpha_k_ = 0;
  bool alpha_decaying_ = false;  // the first cut starts the decay (alpha = initial until then)
  bool cut_seen_ = false;
  uint64_t last_cut_ns_ = 0;
  bool cut_pending_ = false;  // a CNP arrived inside min_cut_interval
  uint64_t cut_due_ns_ = 0;
  bool recovering_ = false;
  uint64_t rate_deadline_ns_ = 0;  // next increase-timer expiry, valid while recovering_
  uint32_t timer_stage_ = 0;
  uint32_t byte_stage_ = 0;
  uint64_t byte_acc_ = 0;  // bytes toward the next byte-counter expiry
  Pacer pacer_;            // at Rc
  DcqcnRpCounters counters_;
};

struct DcqcnNpCounters {
  uint64_t ce_packets = 0;  // CE-marked packets seen
  uint64_t cnps_sent = 0;   // times on_ce_packet() returned true
};

// Notification point: CNP generation for one receiver QP (Zhu et al., NP algorithm: at most one CNP
// per QP per 50 us; ConnectX np_min_time_between_cnps). A CE packet is answered at once when the
// previous CNP is at least cnp_interval old (or there was none); otherwise it is absorbed, as the
// sender is already reacting to the CNP just sent.
class DcqcnNp {
 public:
  void init(const DcqcnParams& params) { init(params.cnp_interval_ns); }
  void init(uint64_t cnp_interval_ns);
  // A packet with IP ECN = CE (11b) arrived for this QP. True: send a CNP now.
  bool on_ce_packet(uint64_t now_ns);
  const DcqcnNpCounters& counters() const { return counters_; }

 private:
  uint64_t interval_ns_ = 0;
  uint64_t last_cnp_ns_ = 0;
  bool sent_any_ = false;
  DcqcnNpCounters counters_;
};

}  // namespace roce::cc
