// perftest's force_dependecies() (src/perftest_parameters.c): the values derived from the
// checked flags, each group in a step of its own, in perftest's order.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>

#include "apps/perf/options.h"
#include "apps/perf/options_values.h"

namespace roce::perf {

using detail::refuse;

namespace {

// Sizes that contradict the test or the run mode.
bool check_sizes(PerfOptions* o, std::string* err) {
  if (o->verb == Verb::kAtomic && o->size != 8) {
    return refuse(err, "size: message size cannot be changed for atomic tests (8 bytes)");
  }
  if (o->run_all && o->duration_mode) {
    return refuse(err, "-D does not support running on all sizes (-a)");
  }
  if (!o->size_list.empty() && o->duration_mode) return refuse(err, "-D does not support --sizes");
  if (o->verb == Verb::kAtomic && (!o->size_list.empty() || o->run_all)) {
    return refuse(err, "-a/--sizes: atomic tests use 8-byte messages");
  }
  o->multi_size = o->run_all || !o->size_list.empty();
  return true;
}

// Queue depths no larger than the run needs; the SRQ's share per QP.
bool cap_depths(PerfOptions* o, std::string* err) {
  if (!o->duration_mode) {
    if (static_cast<uint64_t>(o->tx_depth) > o->iters) o->tx_depth = static_cast<int>(o->iters);
    if (o->verb == Verb::kSend && static_cast<uint64_t>(o->rx_depth) > o->iters) {
      o->rx_depth = static_cast<int>(o->iters);
    }
    // UC and UD have no RNR flow control: a receiver that runs out of receives loses messages,
    // so perftest posts as many as the run sends (up to UC_MAX_RX) unless told otherwise.
    if (o->conn != Conn::kRc && o->rx_depth == kDefRxSend) {
      o->rx_depth = static_cast<int>(std::min<uint64_t>(o->iters, kUcMaxRx));
    }
  }
  // Each QP's share of the SRQ's receives is rx_depth / num_qps (perftest's size_per_qp).
  if (o->use_srq && o->num_qps > o->rx_depth) {
    return refuse(err, "--use-srq: the SRQ's depth (" + std::to_string(o->rx_depth) +
                           "; -r, or -n when smaller) must be at least the number of QPs (" +
                           std::to_string(o->num_qps) + "; -q)");
  }
  if (o->rate_limit > 0 && o->burst_size <= 0) o->burst_size = o->tx_depth;
  return true;
}

// Completion moderation, and post lists that fit it and the send queue.
bool set_moderation(PerfOptions* o, std::string* err) {
  // Big messages need no completion moderation, and with it the bandwidth would be skewed.
  // (Not with -e: perftest keeps the moderation there, one event per completion would cost.)
  // (Nor for UD, whose messages are never big.)
  if (o->size > 8192 && !o->run_all && o->size_list.empty() && !o->req_cq_mod && !o->use_event &&
      o->conn != Conn::kUd) {
    o->cq_mod = 1;
  }
  if (o->cq_mod > o->tx_depth) o->cq_mod = o->tx_depth;
  if (o->verb == Verb::kRead || o->verb == Verb::kAtomic) o->inline_size = 0;
  if (o->post_list <= 1) return true;
  if (!o->duration_mode && o->iters % static_cast<uint64_t>(o->post_list) != 0) {
    return refuse(err,
                  "post_list: the number of iterations must be a multiple of the post list size");
  }
  // A list is posted whole once the send queue has room for it (bw.cc): one longer than the
  // TX depth never would be. perftest has no such check; its run_iter_bw then waits for ever.
  if (o->post_list > o->tx_depth) {
    return refuse(err, "post_list: the post list size (" + std::to_string(o->post_list) +
                           ") must not exceed the TX depth (" + std::to_string(o->tx_depth) +
                           "; -t)");
  }
  if (!o->req_cq_mod) {
    o->cq_mod = o->post_list;
  } else if (o->post_list % o->cq_mod != 0) {
    return refuse(err, "post_list: the post list size must be a multiple of the CQ moderation");
  }
  return true;
}

// -D: no iteration count, no peak, margins inside the duration.
bool set_duration(PerfOptions* o, std::string* err) {
  if (!o->duration_mode) return true;
  if (o->use_event) return refuse(err, "-D: duration mode doesn't work with events (-e)");
  o->iters = 0;
  o->no_peak = true;
  if (o->margin < 0) o->margin = o->duration / 4;
  if (!(o->duration > 2 * static_cast<int64_t>(o->margin))) {  // (2 * margin may pass INT_MAX)
    return refuse(err, "duration: DURATION must be greater than 2 * MARGIN");
  }
  return true;
}

// The peak, odd SEND receive depths and the inline defaults.
void set_peak_and_inline(PerfOptions* o) {
  const bool bw = o->kind == TestKind::kBw;
  // A SEND receiver has no posts to time; in -b both sides send, and both compute the peak.
  if (o->verb == Verb::kSend && bw && !o->client() && !o->duplex) o->no_peak = true;
  // perftest's work-around for odd receive depths in SEND tests.
  // (perftest: RUN_REGULAR only; with several sizes the extra receive would stay posted.)
  if (o->verb == Verb::kSend && o->rx_depth % 2 == 1 && !o->run_all && o->size_list.empty()) {
    o->rx_depth += 1;
  }
  if (!o->duration_mode && o->iters > 20000 && bw) o->no_peak = true;
  // Inline defaults for a device that supports inline data (ctx_set_max_inline).
  if (o->inline_size < 0) {
    o->inline_size = 0;
    if (!bw && o->verb == Verb::kWrite) o->inline_size = 220;
    if (!bw && o->verb == Verb::kSend) {
      o->inline_size = o->conn == Conn::kUd ? kDefInlineSendUd : 236;
    }
  }
  if (o->conn == Conn::kUd && o->inline_size > kMaxInlineUd) {
    std::fprintf(stderr, "Setting inline size to %d (Max inline size in UD)\n", kMaxInlineUd);
    o->inline_size = kMaxInlineUd;
  }
  if (o->verify) o->cq_mod = 1;  // every completion is checked where it lands
}

// The sizes a run goes through; buffers are laid out for the largest (perftest: -a sizes them
// for MAX_SIZE).
void set_size_list(PerfOptions* o) {
  if (o->run_all) {
    o->size_list.clear();
    for (int i = 1; i < 24; ++i) o->size_list.push_back(uint64_t{1} << i);
  } else if (o->size_list.empty()) {
    o->size_list.push_back(o->size);
  }
  uint64_t largest = 0;
  for (uint64_t s : o->size_list) largest = s > largest ? s : largest;
  if (o->run_all) largest = kMaxSize;
  o->size = largest;
}

}  // namespace

bool apply_dependencies(PerfOptions* o, std::string* err) {
  if (!(check_sizes(o, err) && cap_depths(o, err) && set_moderation(o, err) &&
        set_duration(o, err))) {
    return false;
  }
  set_peak_and_inline(o);
  set_size_list(o);
  return true;
}

}  // namespace roce::perf
