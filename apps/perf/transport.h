// The RDMA calls roce-perf makes, behind one small interface: register memory, create and
// connect QPs, post, poll. The native implementation (native_transport.h) drives the stack's
// engine directly; a verbs implementation over our drop-in libibverbs can sit beside it, so the
// same tool measures what the shim costs. The measurement loops call only post_*, poll_* and
// progress(): one virtual call each, no allocation, no locks (with -e, await_completion too,
// which sleeps in poll()).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "stack/core/types.h"

namespace roce::perf {

// What the tool needs to know about the device (ibv_query_device / ibv_query_port).
struct DeviceInfo {
  std::string name;
  std::vector<Gid> gids;
  Mtu active_mtu = Mtu::k1024;
  uint32_t max_inline = 0;     // bytes
  uint32_t max_rd_atomic = 0;  // outstanding READ/atomic requests per QP
  uint32_t max_qp_wr = 0;      // work requests per queue
  int num_comp_vectors = 1;    // completion vectors (-X)
};

struct MemoryRegion {
  uint8_t* addr = nullptr;
  uint64_t length = 0;
  uint32_t lkey = 0;
  uint32_t rkey = 0;
};

// Queues for all QPs of a test; every QP shares one send CQ and one receive CQ, as perftest's.
struct QpSetup {
  QpType type = QpType::kRc;  // -c: RC, UC or UD
  uint32_t num_qps = 1;
  uint32_t max_send_wr = 1;
  uint32_t max_recv_wr = 1;
  uint32_t max_inline = 0;
  uint32_t send_cq_depth = 1;
  uint32_t recv_cq_depth = 1;  // 0: no receive CQ (receives complete on the send CQ)
  uint32_t srq_depth = 0;      // --use-srq: every QP receives from one SRQ this deep; 0: none
  uint32_t max_post_list = 1;  // longest list handed to one post_send call
  bool events = false;         // -e: the CQs will be waited on (Transport::enable_events)
  int comp_vector = 0;         // -X: the CQs' completion vector, below num_comp_vectors
};

// INIT -> RTR (-> RTS) in one call, with the peer's values from the out-of-band exchange.
// Each QP type takes the attributes its transitions call for (IBA table 91), as perftest's
// ctx_modify_qp_to_* pass them: RC all of them; UC no RNR, retry or read/atomic values; UD
// only the Q_Key and the send PSN. A UD QP that moves to RTS also gets an address handle for
// (dgid, dest_qpn): its SENDs go there, with `qkey`.
struct ConnectAttr {
  uint32_t access = 0;  // Access flags for the remote side (RC, UC)
  uint32_t qkey = 0;    // UD
  Mtu path_mtu = Mtu::k1024;
  uint32_t dest_qpn = 0;
  uint32_t rq_psn = 0;
  uint32_t sq_psn = 0;
  Gid dgid{};
  uint8_t sgid_index = 0;
  uint8_t hop_limit = 0xFF;
  uint8_t traffic_class = 0;
  uint8_t sl = 0;
  uint8_t max_dest_rd_atomic = 1;
  uint8_t max_rd_atomic = 1;
  uint8_t min_rnr_timer = 12;
  uint8_t timeout = 14;
  uint8_t retry_cnt = 7;
  uint8_t rnr_retry = 7;
  uint32_t rate_limit_kbps = 0;  // RTS: the QP's rate limit (IBV_QP_RATE_LIMIT); 0: none
  bool to_rts = true;            // a side that never sends stays in RTR (perftest's BW server)
};

enum class Op : uint8_t { kSend, kWrite, kRead, kFetchAdd, kCmpSwap };

struct WorkRequest {
  uint64_t wr_id = 0;
  uint64_t local_addr = 0;
  uint32_t length = 0;
  uint32_t lkey = 0;
  uint64_t remote_addr = 0;
  uint32_t rkey = 0;
  Op op = Op::kWrite;
  bool signaled = true;
  bool inline_data = false;
  uint64_t compare_add = 0;
  uint64_t swap = 0;
};

struct RecvRequest {
  uint64_t wr_id = 0;
  uint64_t addr = 0;
  uint32_t length = 0;
  uint32_t lkey = 0;
};

struct Completion {
  uint64_t wr_id = 0;
  WcStatus status = WcStatus::kSuccess;
  uint32_t byte_len = 0;
  uint32_t qp_num = 0;
};

// Whether a port's link was up and is down now: what StallWatch (perf_test.h) asks.
class LinkState {
 public:
  virtual bool link_lost() const = 0;

 protected:
  ~LinkState() = default;
};

class Transport : public LinkState {
 public:
  virtual ~Transport() = default;

  virtual const DeviceInfo& info() const = 0;
  // Protection domain, CQs and QPs; false with *err on failure.
  virtual bool create_qps(const QpSetup& setup, std::string* err) = 0;
  virtual uint32_t qpn(uint32_t qp) const = 0;
  virtual bool reg_mr(void* addr, uint64_t length, uint32_t access, MemoryRegion* out,
                      std::string* err) = 0;
  virtual bool connect(uint32_t qp, const ConnectAttr& attr, std::string* err) = 0;

  // Datapath. post_*: 0 or an errno (ENOMEM: queue full, try again after polling).
  virtual int post_send(uint32_t qp, const WorkRequest* wrs, uint32_t n) = 0;
  // With an SRQ (QpSetup::srq_depth), receives go to the SRQ whatever `qp` says.
  virtual int post_recv(uint32_t qp, const RecvRequest* wrs, uint32_t n) = 0;
  virtual int poll_send(Completion* out, int n) = 0;
  virtual int poll_recv(Completion* out, int n) = 0;
  // Drives the stack when the engine runs inline; a no-op when it has its own thread.
  virtual void progress() = 0;
  // Called when a wait found nothing to do: with an engine thread, give the CPU away for a
  // moment (two instances on a two-core machine would otherwise starve their engine threads).
  virtual void relax() = 0;
  // Whether progress() does anything.
  virtual bool inline_engine() const = 0;

  // -e: completion events (perftest's ibv_req_notify_cq / ibv_get_cq_event) instead of busy
  // polling. enable_events arms both CQs, once, before the first post; false with *err.
  // await_completion sleeps until a CQ of `cqs` (kSendCq | kRecvCq) holds a completion
  // (returns 1 at once if one does) or `timeout_s` passed (0); -1 with *err on failure. Each
  // event that wakes it re-arms its CQ, so completions that arrive later wake a later call.
  static constexpr unsigned kSendCq = 1, kRecvCq = 2;
  virtual bool enable_events(std::string* err) = 0;
  virtual int await_completion(unsigned cqs, double timeout_s, std::string* err) = 0;
  // Waits up to `timeout_s` for the device's link to be up and ready to measure on (see
  // dpdk::Device::wait_link_up); false with *err on timeout. Transports that cannot see the
  // link return true.
  virtual bool wait_link(double timeout_s, std::string* err) = 0;
  // Whether the port's link was up and is down now (dpdk::Device::link_lost; over verbs, port
  // 1 not active). The measurement loops ask once a wait has made no progress for a second.
  bool link_lost() const override = 0;

  // Counters of the device and its QPs, as text (--counters).
  virtual std::string counters_text() = 0;
  // Releases QPs, CQs and MRs and stops driving the engine where the transport can (the native
  // one: nothing of this process touches the port's rings afterwards); the port stays up.
  virtual void quiesce() = 0;
  // quiesce(), then closes the device (stops the port, flushes a capture file).
  virtual void close() = 0;
};

}  // namespace roce::perf
