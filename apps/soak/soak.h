// roce-soak's run: one process per side, each with one device, several RC QPs to its peer and a
// TCP side channel. QP q is "active" on side q % 2 (it posts the batches of apps/soak/plan.h:
// SEND, SEND_WITH_IMM, WRITE, WRITE_WITH_IMM, READ, FETCH_ADD, CMP_SWAP, 1 B .. 1 MiB) and
// "passive" on the other (it checks every byte and immediate that arrives, the WRITEs once the
// batch's marker has come, the atomics' word against the plan's arithmetic, then posts the next
// batch's receives and acknowledges the batch with a SEND). The active side checks its READs
// and the atomics' results. Every completion must succeed. The gaps between a QP's completions
// are held against (retry_cnt + 1) x the local ACK timeout, the longest a QP may go without
// progress before the engine fails it: one over it is counted and fails the run at its end (a
// 1 MiB message that recovers from several losses may take that long, and so may a QP on a
// machine whose CPUs are all taken, so the run goes on to gather its samples); no completion at
// all for max(10 s, 4 x that) is a stall and ends the run at once. Samples (mbufs, memory,
// descriptors, counters, CPU pressure) go to a CSV every interval.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "apps/soak/plan.h"
#include "apps/soak/sampler.h"
#include "stack/core/types.h"

namespace roce {
class CompletionQueue;
class Qp;
namespace dpdk {
class Device;
}
namespace perf {
class OobChannel;
}
}  // namespace roce

namespace roce::soak {

inline constexpr uint32_t kMaxQps = 64;
inline constexpr uint32_t kMaxOps = 64;

struct SoakOptions {
  bool server = true;
  double seconds = 60;   // traffic; then the batches in flight finish
  double interval = 60;  // between samples
  std::string csv;
  uint32_t qps = 8;
  uint8_t gid_index = 1;  // the first IPv4 address
  uint8_t timeout = 14;   // local ACK timeout, 4.096 us x 2^timeout (67 ms)
  uint8_t retry = 7;
  PlanParams plan;
};

class Soak {
 public:
  Soak(const SoakOptions& o, dpdk::Device& dev, perf::OobChannel& oob);
  ~Soak();
  Soak(const Soak&) = delete;
  Soak& operator=(const Soak&) = delete;
  // The whole run: set-up, traffic, the final exchange with the peer, the summary, teardown.
  // 0 when everything was verified and nothing stalled; 1 otherwise (said on stderr).
  int run();

 private:
  using Clock = std::chrono::steady_clock;
  struct Active {
    Plan plan;
    std::vector<uint64_t> olds;  // each atomic's expected result
    uint64_t word = 0;           // the peer's word for this QP, before the batch
    uint64_t word_after = 0;
    uint64_t batch = 0;
    uint32_t completed = 0;
    bool acked = false;
    bool busy = false;
    bool warm = false;       // a completion seen (the first waits for the peer's MAC to resolve)
    Clock::time_point last;  // the last completion, or the post if none since
  };
  struct Passive {
    Plan plan;
    std::vector<uint64_t> olds;
    uint64_t word = 0;  // our word, before and after the batch
    uint64_t word_after = 0;
    uint64_t batch = 0;
    uint32_t next = 0;  // the plan's next op to look at for a receive
  };

  // soak_setup.cc
  bool setup(std::string* err);
  bool connect(std::string* err);
  void teardown();
  uint8_t* area(uint32_t q) const;
  uint8_t* ctrl(uint32_t q) const;
  uint64_t* word(uint32_t q) const;
  uint64_t peer_addr(const uint8_t* mine) const;  // the peer's address of the same place
  bool is_active(uint32_t q) const { return active_side(q) == side_; }
  // soak_traffic.cc
  void start_batch(uint32_t q);
  void prepare_passive(uint32_t q);
  void on_send_completion(const Cqe& c);
  void on_recv_completion(const Cqe& c);
  void on_active_recv(uint32_t q, const Cqe& c);
  void on_passive_recv(uint32_t q, const Cqe& c);
  void end_passive_batch(uint32_t q);
  void progress(uint32_t q);
  // ok, or fail(what()): the message is made only for a failure.
  template <typename What>
  bool check(bool ok, What&& what) {
    return ok || fail(what());
  }
  // soak_run.cc
  bool step(bool may_start);
  void watch(Clock::time_point now);
  void sample(Clock::time_point now, bool force);
  bool finish_with_peer();
  void check_quiet_mbufs();
  void summary();
  bool fail(const std::string& why);

  SoakOptions o_;
  dpdk::Device& dev_;
  perf::OobChannel& oob_;
  uint32_t side_ = 0;
  // Memory: the QPs' areas, our read source, the atomics' words, the control slots.
  uint8_t* mem_ = nullptr;
  uint64_t mem_len_ = 0, area_len_ = 0, read_off_ = 0, words_off_ = 0, ctrl_off_ = 0;
  uint32_t lkey_ = 0;
  uint64_t peer_base_ = 0;
  uint32_t peer_rkey_ = 0;
  // Engine objects.
  uint32_t pd_ = 0;
  bool have_pd_ = false, have_mr_ = false;
  CompletionQueue* send_cq_ = nullptr;
  CompletionQueue* recv_cq_ = nullptr;
  std::vector<Qp*> qps_;
  std::vector<Active> active_;
  std::vector<Passive> passive_;
  // Progress and findings.
  bool failed_ = false;
  std::string error_;
  uint64_t ops_verified_[kOps] = {};
  uint64_t bytes_verified_ = 0, batches_ = 0;
  uint64_t wait_limit_ns_ = 0;  // 0: no limit (timeout 0 is infinite)
  uint64_t max_wait_ns_ = 0, run_max_wait_ns_ = 0;
  uint64_t waits_over_limit_ = 0;  // completions that came later than the limit allows
  // This loop's polls: when the latest began, the time since the one before, the longest such.
  Clock::time_point poll_at_;
  Clock::duration poll_gap_{};
  Clock::duration max_gap_{}, run_max_gap_{};
  uint64_t mbufs_min_ = UINT64_MAX, mbufs_max_ = 0;
  uint64_t quiet_start_ = 0, quiet_end_ = 0;  // mbufs in use before and after the traffic
  Clock::time_point t0_, next_sample_, next_mbuf_read_;
  CsvWriter csv_;
  Sample last_{};
};

}  // namespace roce::soak
