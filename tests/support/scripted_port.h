// Test support for protocol tests: a PacketIo whose receive side the test fills with crafted
// frames and whose transmit side the test inspects, plus a "peer" that builds the frames a
// remote RC QP would send. One engine, a virtual clock, nothing else.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <vector>

#include "stack/core/engine.h"
#include "stack/io/packet_io.h"
#include "stack/wire/builder.h"
#include "stack/wire/parser.h"

namespace roce::test {

class ScriptedPort final : public PacketIo {
 public:
  uint16_t rx_burst(PktBuf* bufs, uint16_t n) override;
  uint16_t tx_burst(PktBuf* bufs, uint16_t n) override;
  uint16_t alloc(PktBuf* bufs, uint16_t n) override;
  void free(PktBuf* bufs, uint16_t n) override;
  uint32_t max_frame_len() const override { return 4352; }
  uint32_t rx_ring_frames() const override { return rx_ring; }
  uint32_t rx_ring = 0;  // what rx_ring_frames() reports (read by an engine when it is made)

  void inject(std::vector<uint8_t> frame) { rx_.push_back(std::move(frame)); }
  std::vector<std::vector<uint8_t>> take_sent() { return std::move(sent_); }
  size_t outstanding() const { return outstanding_; }
  uint32_t tx_limit = 1u << 30;  // frames tx_burst accepts before refusing (backpressure)
  // Buffers alloc() hands out from now on before it has none (an exhausted mbuf pool); each
  // buffer taken counts it down.
  uint32_t alloc_limit = 1u << 30;
  // Capacity alloc() reports for its buffers (at most 9216 B), and how far into its buffer each
  // frame tx_burst took started, with the frame's address (as sent, in order).
  uint32_t buf_cap = 9216;
  struct Placement {
    uintptr_t frame;  // address of the frame's first byte
    uint32_t offset;  // from the start of its buffer
  };
  std::vector<Placement> take_placements() { return std::move(placements_); }

 private:
  std::deque<std::vector<uint8_t>> rx_;
  std::vector<std::vector<uint8_t>> sent_;
  std::vector<Placement> placements_;
  size_t outstanding_ = 0;  // buffers handed out and not yet returned
};

// A parsed emitted frame, copied so it outlives the port.
struct Emitted {
  std::vector<uint8_t> bytes;
  wire::PacketInfo info;
  uint8_t opcode() const { return info.opcode; }
  uint32_t psn() const { return info.psn; }
  uint8_t syndrome() const { return info.ext<wire::Aeth>(wire::Ext::kAeth).syndrome; }
  uint32_t msn() const { return info.ext<wire::Aeth>(wire::Ext::kAeth).msn.get(); }
};

// One engine with a QP connected to an imaginary peer, driven packet by packet.
class ProtocolHarness {
 public:
  static constexpr uint32_t kPeerQpn = 0x22;
  static constexpr uint32_t kLocalPsn = 0x100;    // our sq_psn
  static constexpr uint32_t kPeerPsn = 0xFFFFF0;  // our rq_psn: near the wrap on purpose

  struct Options {
    Mtu mtu = Mtu::k1024;
    uint8_t timeout = 10;  // 4.2 ms
    uint8_t retry_cnt = 7;
    uint8_t rnr_retry = 7;
    uint8_t min_rnr_timer = 14;  // 0.96 ms
    uint8_t max_rd_atomic = 4;
    uint8_t max_dest_rd_atomic = 4;
    uint32_t qp_access = kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic;
    uint32_t mr_access =
        kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic;
    bool ipv6 = false;
    uint32_t max_inflight_psns = 256;  // EngineConfig: the go-back-N window
    bool peer_mac_known = true;        // false: the peer's MAC is unresolved until resolve_peer()
    // Bytes at each end of mem() left out of the MR (filled with kGuardByte by the harness), so
    // that a test can show nothing was written outside the registered region.
    uint32_t mr_guard = 0;
    uint32_t mem_bytes = 1 << 20;  // size of mem()
    // The QP's transport. UC and UD QPs are set up with what their transitions require (IBA
    // table 91); a UD QP takes datagrams with Q_Key `qkey` from anyone.
    QpType qp_type = QpType::kRc;
    uint32_t qkey = 0x11223344;
    CcKind cc = CcKind::kEngineDefault;  // the QP's congestion control
    bool stop_at_rtr = false;            // connect() leaves the QP in RTR (a responder only)
    bool sq_sig_all = false;             // QpInitAttr::sq_sig_all
    int vlan_tci = -1;                   // >= 0: the engine's EngineConfig::vlan_tci (tagged)
    uint64_t stall_ns = 0;               // EngineConfig::stall_ns (0: off)
    uint32_t rx_ring_frames = 0;         // the port's receive ring (PacketIo::rx_ring_frames)
  };
  static constexpr uint8_t kGuardByte = 0xA5;
  explicit ProtocolHarness(const Options& o);
  ProtocolHarness() : ProtocolHarness(Options{}) {}

  Engine& engine() { return *engine_; }
  Qp* qp() { return qp_; }
  CompletionQueue* cq() { return cq_; }
  uint8_t* mem() { return mem_.data(); }
  uint64_t addr(uint64_t off = 0) const { return reinterpret_cast<uint64_t>(mem_.data()) + off; }
  uint32_t rkey() const { return key_; }
  uint32_t mtu() const { return mtu_bytes(opts_.mtu); }
  size_t mem_size() const { return mem_.size(); }
  // Whether every guard byte (Options::mr_guard) still holds kGuardByte.
  bool guards_intact() const;
  VirtualClock& clock() { return clock_; }
  ScriptedPort& port() { return port_; }
  void destroy_engine() { engine_.reset(); }
  // Moves the QP from RESET to RTS (or RTR: Options::stop_at_rtr) with the harness's attributes
  // (the constructor does it once).
  void connect();
  // The QP's rate limit (IBV_QP_RATE_LIMIT, kb/s; 0 lifts it), as ibv_modify_qp sets it in RTS.
  int set_rate_limit(uint32_t kbps, uint32_t max_burst_sz = 0, uint16_t typical_pkt_sz = 0) {
    QpAttr a;
    a.rate_limit = kbps;
    a.max_burst_sz = max_burst_sz;
    a.typical_pkt_sz = typical_pkt_sz;
    return engine_->modify_qp(qp_, a, kQpRateLimit);
  }
  // The peer's MAC becomes known, as when an ARP reply or neighbour advertisement arrives.
  void resolve_peer();
  // The neighbour agent gives up on the peer's address (its solicitations went unanswered).
  void fail_peer();
  const Gid& peer_gid() const { return peer_gid_; }
  // IP traffic class (DSCP and ECN) of the frames peer_frame builds from now on.
  void set_peer_traffic_class(uint8_t tc) { peer_path_.traffic_class = tc; }
  // Source address of the frames peer_frame builds from now on (another host's, say).
  void set_peer_source(const Gid& gid) { peer_path_.src_gid = gid; }
  // Destination address of the frames peer_frame builds from now on (not ours, say).
  void set_peer_destination(const Gid& gid) { peer_path_.dst_gid = gid; }
  // 802.1Q tag of the frames peer_frame builds from now on (none: untagged).
  void set_peer_vlan(std::optional<uint16_t> tci) {
    peer_path_.has_vlan = tci.has_value();
    peer_path_.vlan_tci = tci.value_or(0);
  }
  // Solicited Event bit of the frames peer_frame builds from now on.
  void set_peer_solicited(bool se) { peer_solicited_ = se; }

  // Frames the peer sends to our QP.
  std::vector<uint8_t> peer_frame(uint8_t opcode, uint32_t psn, const wire::ExtHeaders& ext,
                                  const uint8_t* payload, uint32_t len, bool ack_req = true);
  std::vector<uint8_t> peer_frame(uint8_t opcode, uint32_t psn, const wire::ExtHeaders& ext = {},
                                  uint32_t len = 0, bool ack_req = true);
  wire::ExtHeaders reth(uint64_t va, uint32_t rkey, uint32_t len) const;
  wire::ExtHeaders aeth(uint8_t syndrome, uint32_t msn = 0) const;

  // Injects frames, polls the engine until it is idle, and returns what it sent.
  std::vector<Emitted> exchange(std::vector<std::vector<uint8_t>> frames = {});
  // Advances virtual time by dt (in steps, polling), returning everything sent meanwhile.
  std::vector<Emitted> advance(uint64_t dt_ns);
  std::vector<Cqe> completions();
  void post_recv(uint64_t wr_id, uint64_t off, uint32_t len);
  int post_send(WrOpcode op, uint64_t wr_id, uint64_t off, uint32_t len,
                uint8_t flags = kSendSignaled, uint64_t remote_addr = 0x5000,
                uint32_t rkey = 0x1234, uint64_t cmp = 0, uint64_t swap = 0);

 private:
  Options opts_;
  VirtualClock clock_;
  ScriptedPort port_;
  std::unique_ptr<Engine> engine_;
  Qp* qp_ = nullptr;
  CompletionQueue* cq_ = nullptr;
  std::vector<uint8_t> mem_;
  uint32_t key_ = 0;
  wire::PathSpec peer_path_;  // from the peer to us
  Gid peer_gid_{};
  Mac peer_mac_{};
  bool peer_solicited_ = false;
};

}  // namespace roce::test
