// The verbs side of a communicator: the device, one CQ, the control region, the peers' QPs and
// the registration cache; bring-up through a store; the progress loop (progress.cc) that drains
// the CQ, notices a failed peer and gives up within the configured time. Used by one thread at
// a time (the communicator's caller, or its worker for asynchronous operations).
#pragma once

#include <infiniband/verbs.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "collectives/config.h"
#include "collectives/device.h"
#include "collectives/error.h"
#include "collectives/mr_cache.h"
#include "collectives/peer.h"
#include "collectives/store.h"

namespace roce::coll {

struct RankInfo;

class Transport {
 public:
  // Opens the device and connects a QP to every other rank through `store` (keys "rank/<r>",
  // "ready/<r>"); throws Error naming the ranks that never arrived within the rendezvous
  // timeout, or options that differ between ranks.
  Transport(Store& store, int rank, int size, const CommOptions& options);
  ~Transport();
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  const CommOptions& options() const { return options_; }
  const Device& device() const { return *device_; }
  Peer& peer(int r) { return *peers_[r]; }
  const Peer* peer_or_null(int r) const { return peers_[r].get(); }
  MrCache& mrs() { return *mrs_; }
  // `options().slots` landing slots of `options().chunk_bytes` for messages from `peer` that
  // are reduced, not stored (allocated and registered on first use).
  uint8_t* scratch(int peer, Keys* keys);

  // The receive budget (CommOptions::recv_budget): bytes granted to all peers together that
  // have not arrived yet. A grant fits if nothing is outstanding or it stays within the budget.
  bool grant_fits(uint64_t len) const {
    return granted_bytes_ == 0 || granted_bytes_ + len <= options_.recv_budget;
  }
  void on_granted(uint64_t len) { granted_bytes_ += len; }

  // --- progress (progress.cc)
  // Drains the CQ and checks the abort slots; throws the communicator's Error once failed.
  void poll();
  // The caller is waiting on `peers` (for the error message and liveness probes); throws
  // Error(kTimeout) after options().timeout without progress. Call in every wait loop.
  void check_stall(const char* what, const std::vector<int>& peers);
  // Progress was made (a grant seen): restarts the stall clock.
  void note_progress() { last_progress_ = std::chrono::steady_clock::now(); }
  void start_operation() { note_progress(); }
  // Records the failure, tells every other rank (abort records), and throws it.
  [[noreturn]] void fail(const Error& e);
  const std::optional<Error>& failure() const { return failure_; }
  // Throws Error(kSystem) for a failed post, naming the peer.
  void check_post(int rc, const char* what, int peer);

 private:
  struct Scratch;
  void bring_up(Store& store);
  void check_same_settings(const RankInfo& self, const RankInfo& info, int q) const;
  void connect_peer(Peer& p, const RankInfo& self, const RankInfo& info);
  void teardown();
  bool dispatch(const ibv_wc& wc);
  void check_aborts();
  void send_probes(const std::vector<int>& peers);

  int rank_, size_;
  CommOptions options_;
  std::unique_ptr<Device> device_;
  ibv_cq* cq_ = nullptr;
  ControlLayout layout_{};
  uint8_t* control_ = nullptr;  // the control region, then our outboxes, probe and abort staging
  size_t control_bytes_ = 0;
  AbortRecord* notice_ = nullptr;  // staging for our abort notices
  uint64_t* probe_src_ = nullptr;  // what a probe writes
  ibv_mr* control_mr_ = nullptr;
  std::unique_ptr<MrCache> mrs_;
  std::vector<std::unique_ptr<Peer>> peers_;  // [rank_] is null
  std::vector<std::unique_ptr<Scratch>> scratch_;
  std::optional<Error> failure_;
  std::chrono::steady_clock::time_point last_progress_{}, last_probe_{};
  uint32_t abort_scan_ = 0;
  uint32_t stall_checks_ = 0;
  uint32_t idle_polls_ = 0;
  uint64_t granted_bytes_ = 0;
  bool connected_ = false;
};

}  // namespace roce::coll
