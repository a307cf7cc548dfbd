#include "engine_fuzz.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <set>
#include <type_traits>
#include <vector>

#include "scripted_port.h"
#include "stack/wire/opcode.h"
#include "stack/wire/psn.h"

namespace roce::test {

namespace {

namespace op = wire::op;

// Response packets a READ of `dma` bytes asks for.
uint32_t read_psns(uint32_t dma, uint32_t mtu) { return std::max(1u, (dma + mtu - 1) / mtu); }

// The program's bytes; reads past the end give zeros (the program then winds down).
class Bytes {
 public:
  Bytes(const uint8_t* p, size_t n) : p_(p), n_(n) {}
  bool empty() const { return n_ == 0; }
  uint8_t u8() {
    if (n_ == 0) return 0;
    --n_;
    return *p_++;
  }
  uint16_t u16() { return static_cast<uint16_t>(u8() | u8() << 8); }
  uint32_t u32() { return u16() | static_cast<uint32_t>(u16()) << 16; }
  uint64_t u64() { return u32() | static_cast<uint64_t>(u32()) << 32; }

 private:
  const uint8_t* p_;
  size_t n_;
};

constexpr uint8_t kRequests[] = {
    op::kRcSendFirst,   op::kRcSendMiddle,   op::kRcSendLast,   op::kRcSendLastImm,
    op::kRcSendOnly,    op::kRcSendOnlyImm,  op::kRcWriteFirst, op::kRcWriteMiddle,
    op::kRcWriteLast,   op::kRcWriteLastImm, op::kRcWriteOnly,  op::kRcWriteOnlyImm,
    op::kRcReadRequest, op::kRcCmpSwap,      op::kRcFetchAdd,   op::kRcSendLastInv,
    op::kRcSendOnlyInv,
};
constexpr uint8_t kUdRequests[] = {op::kUdSendOnly, op::kUdSendOnlyImm};
constexpr uint8_t kResponses[] = {
    op::kRcAck,
    op::kRcAck,
    op::kRcAtomicAck,
    op::kRcReadRespFirst,
    op::kRcReadRespMiddle,
    op::kRcReadRespLast,
    op::kRcReadRespOnly,
};
constexpr WrOpcode kSendOps[] = {
    WrOpcode::kSend,
    WrOpcode::kSendWithImm,
    WrOpcode::kRdmaWrite,
    WrOpcode::kRdmaWriteWithImm,
    WrOpcode::kRdmaRead,
    WrOpcode::kAtomicCmpAndSwp,
    WrOpcode::kAtomicFetchAndAdd,
    WrOpcode::kSendWithInv,
};

class Program {
 public:
  Program(const uint8_t* data, size_t size, EngineFuzzStats* stats)
      : in_(data, size), stats_(stats) {}

  std::string run() {
    ProtocolHarness::Options o;
    const uint8_t cfg = in_.u8();
    const Mtu mtus[] = {Mtu::k256, Mtu::k1024, Mtu::k4096, Mtu::k1024};
    o.mtu = mtus[cfg & 3];
    o.ipv6 = cfg & 4;
    o.max_inflight_psns = (cfg & 8) ? 8 : 256;
    // Not 7: that retries for ever (as rxe does), and the drain below wants the timers to stop.
    o.retry_cnt = static_cast<uint8_t>(((cfg >> 4) & 7) % 7);
    o.rnr_retry = static_cast<uint8_t>(cfg >> 7 ? 7 : 1);
    o.timeout = 8;  // 1 ms
    o.min_rnr_timer = 1;
    o.mr_guard = kGuard;
    o.mem_bytes = kGuard + 128 * 1024 + kGuard;  // small: every program zeroes it
    tame_ = in_.u8() < 160;
    const uint8_t kind = in_.u8();
    type_ = kind < 170 ? 0 : kind < 213 ? 1 : 2;
    constexpr QpType kTypes[] = {QpType::kRc, QpType::kUc, QpType::kUd};
    o.qp_type = kTypes[type_];
    if (type_ != 0) tame_ = false;  // the tame peer speaks RC
    qkey_ = o.qkey;
    ProtocolHarness h(o);
    h_ = &h;
    next_peer_psn_ = ProtocolHarness::kPeerPsn;
    last_req_psn_ = ProtocolHarness::kLocalPsn;

    for (int steps = 0; steps < 400 && !in_.empty() && err_.empty(); ++steps) step();
    if (err_.empty()) drain();
    if (err_.empty() && !h.guards_intact()) err_ = "memory outside the registered region changed";
    if (stats_) {
      add_counters(stats_->qp, h.qp()->counters_);
      ++stats_->programs[type_];
      stats_->rx_packets[type_] += h.qp()->counters_.rx_packets;
      const EngineCounters& ec = h.engine().counters();
      stats_->ud_qkey_mismatch += ec.ud_qkey_mismatch;
      stats_->ud_too_long += ec.ud_too_long;
      stats_->rx_wrong_transport += ec.rx_wrong_transport;
    }
    if (err_.empty()) {
      h.destroy_engine();
      if (h.port().outstanding() != 0) {
        err_ = std::to_string(h.port().outstanding()) + " packet buffers not returned";
      }
    }
    h_ = nullptr;
    return err_;
  }

 private:
  static constexpr uint32_t kGuard = 4096;

  uint32_t mr_len() const { return static_cast<uint32_t>(h_->mem_size() - 2 * kGuard); }

  // An address for the peer to name: mostly inside the region, sometimes at or past its ends,
  // sometimes anything.
  uint64_t remote_va(uint32_t len) {
    const uint8_t m = in_.u8();
    if (m < 160) return h_->addr(kGuard + in_.u16() * 8ull % mr_len());
    if (m < 200) return h_->addr(kGuard + mr_len()) - len + (in_.u8() % 16);  // around the end
    if (m < 230) return h_->addr(kGuard) - (in_.u8() % 16);                   // before the start
    return in_.u64();
  }
  uint32_t rkey() {
    const uint8_t m = in_.u8();
    if (m < 220) return h_->rkey();
    if (m < 240) return h_->rkey() ^ (1u << (m & 31));
    return in_.u32();
  }
  uint32_t length(uint32_t mtu) {
    const uint8_t m = in_.u8();
    if (m < 40) return 0;
    if (m < 140) return in_.u8();
    if (m < 210) return in_.u16() % (mtu + 1);
    if (m < 240) return mtu + in_.u8() % 64;  // more than the MTU allows
    return in_.u32() % (1u << 20);
  }
  // A PSN: mostly `base`, often a little before or after it, sometimes anything.
  uint32_t near(uint32_t base) {
    const uint8_t m = in_.u8();
    if (m < 128) return base;
    if (m < 240) return (base + static_cast<uint32_t>(static_cast<int>(m % 13) - 8)) & 0xFFFFFF;
    return in_.u32() & 0xFFFFFF;
  }

  void step() {
    switch (in_.u8() % 11) {
      case 0:
      case 1:
      case 2:
        peer_request();
        break;
      case 3:
      case 4:
        peer_response();
        break;
      case 5:
      case 6:
        post_send();
        break;
      case 7:
        post_recv();
        break;
      case 8:
        advance();
        break;
      case 9:
        poll_completions();
        break;
      case 10:
        if (in_.u8() < 8) to_error();
        break;
    }
  }

  // A tame peer sends well-formed messages (opcode sequences, lengths, addresses and keys as a
  // correct requester would); only its PSNs are fuzzed. The QP then lives long enough to reach
  // the deeper states: RNR waits, duplicates of READs and atomics, sequence errors mid-message.
  void tame_request() {
    const uint32_t mtu = h_->mtu();
    const uint32_t psn = near(next_peer_psn_);
    const uint8_t pick = in_.u8();
    wire::ExtHeaders ext;
    uint8_t opcode;
    uint32_t payload = 0;
    uint32_t psns = 1;
    if (msg_ == Msg::kSend) {
      if (pick < 100) {
        opcode = op::kRcSendMiddle;
        payload = mtu;
      } else {
        const uint8_t lasts[] = {op::kRcSendLast, op::kRcSendLastImm, op::kRcSendLastInv};
        opcode = lasts[pick % 3];
        payload = 1 + in_.u16() % mtu;
      }
    } else if (msg_ == Msg::kWrite) {
      if (write_left_ > mtu) {
        opcode = op::kRcWriteMiddle;
        payload = mtu;
      } else {
        opcode = (pick & 1) ? op::kRcWriteLast : op::kRcWriteLastImm;
        payload = write_left_;
      }
    } else {
      const uint8_t starts[] = {op::kRcSendFirst,    op::kRcSendOnly,    op::kRcSendOnlyImm,
                                op::kRcSendOnlyInv,  op::kRcWriteFirst,  op::kRcWriteOnly,
                                op::kRcWriteOnlyImm, op::kRcReadRequest, op::kRcCmpSwap,
                                op::kRcFetchAdd};
      opcode = starts[pick % std::size(starts)];
      uint32_t dma = 0;
      switch (opcode) {
        case op::kRcSendFirst:
        case op::kRcWriteFirst:
          payload = mtu;
          dma = mtu * (1 + in_.u8() % 4) + 1 + in_.u16() % mtu;
          break;
        case op::kRcReadRequest:
          dma = in_.u16() % (mtu * 8 + 1);
          psns = read_psns(dma, mtu);
          break;
        case op::kRcCmpSwap:
        case op::kRcFetchAdd:
          break;
        default:
          payload = in_.u16() % (mtu + 1);
          dma = payload;
          break;
      }
      const uint64_t va = h_->addr(kGuard + (in_.u16() * 8ull) % (mr_len() - dma - 8));
      ext.reth.va.set(va);
      ext.reth.rkey.set(h_->rkey());
      ext.reth.dma_length.set(dma);
      ext.atomic.va.set(va & ~7ull);
      ext.atomic.rkey.set(h_->rkey());
      ext.atomic.swap_add.set(in_.u64());
      ext.atomic.compare.set(in_.u64());
      if (psn == next_peer_psn_) {
        if (opcode == op::kRcSendFirst) msg_ = Msg::kSend;
        if (opcode == op::kRcWriteFirst) {
          msg_ = Msg::kWrite;
          write_left_ = dma - mtu;
        }
      }
    }
    const uint32_t imm = in_.u32();
    std::memcpy(ext.imm.data.data(), &imm, 4);
    ext.ieth.rkey.set(in_.u32());
    pump(h_->peer_frame(opcode, psn, ext, payload, in_.u8() & 1));
    if (psn != next_peer_psn_) return;
    next_peer_psn_ = (next_peer_psn_ + psns) & 0xFFFFFF;
    if (opcode == op::kRcWriteMiddle) write_left_ -= mtu;
    if (wire::opcode_info(opcode).has(wire::kOpLast)) msg_ = Msg::kNone;  // a LAST or an ONLY
  }

  void peer_request() {
    if (tame_) {
      tame_request();
      return;
    }
    const uint8_t pick = in_.u8();
    uint8_t opcode = kRequests[pick % std::size(kRequests)];
    if (type_ == 1) opcode = static_cast<uint8_t>(op::kUcBase + pick % 12);  // the UC requests
    if (type_ == 2) opcode = kUdRequests[pick % std::size(kUdRequests)];
    if (pick >= 240) opcode = in_.u8();
    const uint32_t mtu = h_->mtu();
    const uint32_t psn = near(next_peer_psn_);
    wire::ExtHeaders ext;
    ext.deth.qkey.set(in_.u8() < 200 ? qkey_ : in_.u32());
    ext.deth.src_qp.set(in_.u32() & 0xFFFFFF);
    const uint32_t len = length(mtu);
    const uint32_t dma = (opcode == op::kRcReadRequest || in_.u8() < 64) ? length(mtu * 4) : len;
    const uint64_t va = remote_va(dma);
    ext.reth.va.set(va);
    ext.reth.rkey.set(rkey());
    ext.reth.dma_length.set(dma);
    ext.atomic.va.set((in_.u8() < 200) ? (va & ~7ull) : va);
    ext.atomic.rkey.set(ext.reth.rkey.get());
    ext.atomic.swap_add.set(in_.u64());
    ext.atomic.compare.set(in_.u64());
    const uint32_t imm = in_.u32();
    std::memcpy(ext.imm.data.data(), &imm, 4);
    ext.ieth.rkey.set(rkey());
    const wire::OpcodeInfo& info = wire::opcode_info(opcode);
    // (A frame longer than the port takes is dropped by it: a few bytes over is as good a test.)
    const uint32_t payload =
        info.valid() && info.has(wire::kOpPayload) ? std::min(len, mtu + 1024) : 0;
    const bool ack_req = in_.u8() & 1;
    pump(h_->peer_frame(opcode, psn, ext, payload, ack_req));
    if (psn == next_peer_psn_) {
      next_peer_psn_ =
          (next_peer_psn_ + (opcode == op::kRcReadRequest ? read_psns(dma, mtu) : 1u)) & 0xFFFFFF;
    }
  }

  void peer_response() {
    const uint8_t pick = in_.u8();
    const uint8_t opcode = pick < 240 ? kResponses[pick % std::size(kResponses)] : in_.u8();
    const uint32_t psn = near(last_req_psn_);
    uint8_t syndrome;
    const uint8_t m = in_.u8();
    if (m < 150) {
      syndrome = wire::kAethAckUnlimitedCredits;
    } else if (m < 190) {
      syndrome = static_cast<uint8_t>(0x20 | (m & 0x1F));  // RNR NAK
    } else if (m < 230) {
      syndrome = static_cast<uint8_t>(0x60 | (m % 5));  // NAK codes
    } else {
      syndrome = in_.u8();
    }
    wire::ExtHeaders ext;
    ext.aeth.syndrome = syndrome;
    ext.aeth.msn.set(in_.u8());
    ext.atomic_ack.orig.set(in_.u64());
    const wire::OpcodeInfo& info = wire::opcode_info(opcode);
    const uint32_t len = info.valid() && info.has(wire::kOpPayload)
                             ? std::min(length(h_->mtu()), h_->mtu() + 1024)
                             : 0;
    pump(h_->peer_frame(opcode, psn, ext, len, false));
  }

  void post_send() {
    const WrOpcode opc = kSendOps[in_.u8() % std::size(kSendOps)];
    const bool atomic = opc == WrOpcode::kAtomicCmpAndSwp || opc == WrOpcode::kAtomicFetchAndAdd;
    // Inside the region: the first half holds the start, the length is at most half of it.
    const uint32_t len = atomic ? 8 : length(h_->mtu() * 3) % (mr_len() / 2);
    const uint64_t off = kGuard + in_.u16() * 8ull % (mr_len() / 2);
    uint8_t flags = static_cast<uint8_t>(in_.u8() & (kSendSignaled | kSendSolicited | kSendFence));
    if (!atomic && opc != WrOpcode::kRdmaRead && len <= 64 && (in_.u8() & 1)) flags |= kSendInline;
    const uint64_t id = next_wr_id_++;
    const uint64_t ra = in_.u64();
    if (h_->post_send(opc, id, off, len, flags, ra, in_.u32(), in_.u64(), in_.u64()) == 0) {
      posted_.insert(id);
    }
  }

  void post_recv() {
    const uint64_t off = kGuard + in_.u16() * 8ull % (mr_len() / 2);
    const uint32_t len = in_.u16() % (mr_len() / 2);
    const uint64_t id = next_wr_id_++;
    Sge s{h_->addr(off), len, in_.u8() < 240 ? h_->rkey() : in_.u32()};
    if (h_->qp()->post_recv({.wr_id = id, .sg_list = &s, .num_sge = 1}) == 0) posted_.insert(id);
  }

  void advance() {
    const uint8_t m = in_.u8();
    const uint64_t dt = m < 128 ? m * 1000ull : m < 250 ? in_.u16() * 1000ull : 1'000'000'000ull;
    h_->clock().advance(dt);
    pump();
  }

  void to_error() {
    QpAttr a;
    a.qp_state = QpState::kErr;
    h_->engine().modify_qp(h_->qp(), a, kQpState);
    pump();
  }

  void poll_completions() {
    for (const Cqe& c : h_->completions()) {
      if (static_cast<unsigned>(c.status) > static_cast<unsigned>(WcStatus::kGeneralErr)) {
        err_ = "completion with status " + std::to_string(static_cast<int>(c.status));
        return;
      }
      if (stats_)
        ++(c.status == WcStatus::kSuccess ? stats_->completions_ok : stats_->completions_err);
      if (posted_.erase(c.wr_id) == 0) {
        err_ = "completion for wr_id " + std::to_string(c.wr_id) +
               (c.wr_id < next_wr_id_ ? " a second time (or unsignalled)" : " never posted");
        return;
      }
    }
  }

  // Delivers `frame` (if any), polls until the engine is idle, and notes what it sent. The
  // harness checks that every frame sent parses (it throws otherwise).
  void pump(std::vector<uint8_t> frame = {}) {
    std::vector<std::vector<uint8_t>> in;
    if (!frame.empty()) in.push_back(std::move(frame));
    for (const Emitted& e : h_->exchange(std::move(in))) {
      if (stats_) ++stats_->frames_sent;
      if (e.info.op->flags & wire::kOpRequest) last_req_psn_ = e.psn();
    }
  }

  // Lets every timer run out: retransmissions exhaust their retries, RNR waits end.
  void drain() {
    for (int i = 0; i < 5000 && err_.empty(); ++i) {
      pump();
      poll_completions();
      const uint64_t next = h_->engine().next_timer_ns();
      if (next == UINT64_MAX) return;
      const uint64_t now = h_->clock().now_ns();
      h_->clock().advance(next > now ? next - now : 1);
    }
    if (err_.empty()) {
      const Qp& q = *h_->qp();
      err_ = "timers still armed after 5000 deadlines (QP state " +
             std::to_string(static_cast<int>(q.state())) + ", " +
             std::to_string(q.counters_.local_ack_timeouts) + " local ACK timeouts, " +
             std::to_string(q.counters_.rnr_naks_received) + " RNR NAKs, " +
             std::to_string(q.counters_.retransmit_events) + " retransmissions, now " +
             std::to_string(h_->clock().now_ns()) + " ns)";
    }
  }

  enum class Msg { kNone, kSend, kWrite };

  Bytes in_;
  EngineFuzzStats* stats_;
  bool tame_ = false;
  unsigned type_ = 0;        // the QP's: 0 RC, 1 UC, 2 UD
  uint32_t qkey_ = 0;        // a UD QP's Q_Key
  Msg msg_ = Msg::kNone;     // a tame peer's message in progress
  uint32_t write_left_ = 0;  // bytes its WRITE still has to send
  ProtocolHarness* h_ = nullptr;
  std::string err_;
  uint32_t next_peer_psn_ = 0;
  uint32_t last_req_psn_ = 0;
  uint64_t next_wr_id_ = 1;
  std::set<uint64_t> posted_;  // wr_ids posted and not yet completed (unsignalled ones stay)
};

}  // namespace

std::string run_engine_program(const uint8_t* data, size_t size, EngineFuzzStats* stats) {
  try {
    return Program(data, size, stats).run();
  } catch (const std::exception& e) {
    return std::string("exception: ") + e.what();
  }
}

}  // namespace roce::test
