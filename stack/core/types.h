// The stack's object model in the vocabulary of the verbs API. Every enum value equals its
// <infiniband/verbs.h> counterpart (verbs_shim/ checks this with static_asserts), so the shim
// passes values through unchanged; the stack itself never includes verbs.h.
#pragma once

#include <array>
#include <cstdint>

namespace roce {

enum class QpType : uint8_t { kRc = 2, kUc = 3, kUd = 4 };

enum class QpState : uint8_t {
  kReset = 0,
  kInit = 1,
  kRtr = 2,
  kRts = 3,
  kSqd = 4,
  kSqe = 5,
  kErr = 6,
};
const char* to_string(QpState s);

// ibv_qp_attr_mask
enum QpAttrMask : uint32_t {
  kQpState = 1u << 0,
  kQpCurState = 1u << 1,
  kQpEnSqdAsyncNotify = 1u << 2,
  kQpAccessFlags = 1u << 3,
  kQpPkeyIndex = 1u << 4,
  kQpPort = 1u << 5,
  kQpQkey = 1u << 6,
  kQpAv = 1u << 7,
  kQpPathMtu = 1u << 8,
  kQpTimeout = 1u << 9,
  kQpRetryCnt = 1u << 10,
  kQpRnrRetry = 1u << 11,
  kQpRqPsn = 1u << 12,
  kQpMaxQpRdAtomic = 1u << 13,
  kQpAltPath = 1u << 14,
  kQpMinRnrTimer = 1u << 15,
  kQpSqPsn = 1u << 16,
  kQpMaxDestRdAtomic = 1u << 17,
  kQpPathMigState = 1u << 18,
  kQpCap = 1u << 19,
  kQpDestQpn = 1u << 20,
  kQpRateLimit = 1u << 25,
};

// ibv_access_flags
enum Access : uint32_t {
  kAccessLocalWrite = 1u << 0,
  kAccessRemoteWrite = 1u << 1,
  kAccessRemoteRead = 1u << 2,
  kAccessRemoteAtomic = 1u << 3,
  kAccessMwBind = 1u << 4,
  kAccessZeroBased = 1u << 5,
  kAccessOnDemand = 1u << 6,
  kAccessHugetlb = 1u << 7,
  kAccessRelaxedOrdering = 1u << 20,  // first of the optional flags: accepted, ignored
};
inline constexpr uint32_t kAccessOptionalRange = 0x3ff00000u;  // bits 20-29, hints

// ibv_wr_opcode
enum class WrOpcode : uint8_t {
  kRdmaWrite = 0,
  kRdmaWriteWithImm = 1,
  kSend = 2,
  kSendWithImm = 3,
  kRdmaRead = 4,
  kAtomicCmpAndSwp = 5,
  kAtomicFetchAndAdd = 6,
  kLocalInv = 7,
  kBindMw = 8,
  kSendWithInv = 9,
};

// ibv_send_flags
enum SendFlags : uint8_t {
  kSendFence = 1u << 0,
  kSendSignaled = 1u << 1,
  kSendSolicited = 1u << 2,
  kSendInline = 1u << 3,
};

// ibv_wc_status
enum class WcStatus : uint8_t {
  kSuccess = 0,
  kLocLenErr = 1,
  kLocQpOpErr = 2,
  kLocEecOpErr = 3,
  kLocProtErr = 4,
  kWrFlushErr = 5,
  kMwBindErr = 6,
  kBadRespErr = 7,
  kLocAccessErr = 8,
  kRemInvReqErr = 9,
  kRemAccessErr = 10,
  kRemOpErr = 11,
  kRetryExcErr = 12,
  kRnrRetryExcErr = 13,
  kLocRddViolErr = 14,
  kRemInvRdReqErr = 15,
  kRemAbortErr = 16,
  kInvEecnErr = 17,
  kInvEecStateErr = 18,
  kFatalErr = 19,
  kRespTimeoutErr = 20,
  kGeneralErr = 21,
};
const char* to_string(WcStatus s);

// ibv_wc_opcode
enum class WcOpcode : uint8_t {
  kSend = 0,
  kRdmaWrite = 1,
  kRdmaRead = 2,
  kCompSwap = 3,
  kFetchAdd = 4,
  kBindMw = 5,
  kLocalInv = 6,
  kRecv = 128,
  kRecvRdmaWithImm = 129,
};

// The completion opcode of a send-queue work request.
inline constexpr WcOpcode wc_opcode(WrOpcode o) {
  switch (o) {
    case WrOpcode::kRdmaWrite:
    case WrOpcode::kRdmaWriteWithImm:
      return WcOpcode::kRdmaWrite;
    case WrOpcode::kRdmaRead:
      return WcOpcode::kRdmaRead;
    case WrOpcode::kAtomicCmpAndSwp:
      return WcOpcode::kCompSwap;
    case WrOpcode::kAtomicFetchAndAdd:
      return WcOpcode::kFetchAdd;
    default:
      return WcOpcode::kSend;
  }
}

// ibv_wc_flags
enum WcFlags : uint8_t {
  kWcGrh = 1u << 0,
  kWcWithImm = 1u << 1,
  kWcWithInv = 1u << 3,
};

// ibv_wc.sl of a UD receive. RoCE has no service level; mlx5 puts the packet's L3 header type
// there instead (its CQE's roce_pkt_type, bits 2:0: 1 IPv6, 2 IPv4; libmlx5's handle_responder
// copies the nibble), as libhns does since rdma-core 47, and UCX's ud_verbs reads the datagram's
// address family from it (uct_ud_iface_check_grh: anything but 2 means a 16-byte destination
// GID, so an IPv4 datagram reported as 0 fails its GID check and is dropped). Bit 3 (mlx5: "a
// UDP header is present") stays clear, as libhns leaves it; UCX masks it off.
enum UdSl : uint8_t {
  kUdSlIpv6 = 1,
  kUdSlIpv4 = 2,
};

// ibv_mtu
enum class Mtu : uint8_t { k256 = 1, k512 = 2, k1024 = 3, k2048 = 4, k4096 = 5 };
constexpr uint32_t mtu_bytes(Mtu m) { return 128u << static_cast<unsigned>(m); }
constexpr bool mtu_valid(uint8_t v) { return v >= 1 && v <= 5; }

using Gid = std::array<uint8_t, 16>;
using Mac = std::array<uint8_t, 6>;

// ibv_ah_attr / ibv_global_route, as much as RoCEv2 uses.
struct AhAttr {
  Gid dgid{};
  uint32_t flow_label = 0;
  uint8_t sgid_index = 0;
  uint8_t hop_limit = 64;
  uint8_t traffic_class = 0;
  uint8_t sl = 0;
  uint8_t port_num = 1;
  bool is_global = true;
};

// ibv_qp_cap
struct QpCap {
  uint32_t max_send_wr = 0;
  uint32_t max_recv_wr = 0;
  uint32_t max_send_sge = 1;
  uint32_t max_recv_sge = 1;
  uint32_t max_inline_data = 0;
};

// ibv_qp_attr, the fields RoCE uses.
struct QpAttr {
  QpState qp_state = QpState::kReset;
  QpState cur_qp_state = QpState::kReset;
  Mtu path_mtu = Mtu::k1024;
  uint32_t qkey = 0;
  uint32_t rq_psn = 0;
  uint32_t sq_psn = 0;
  uint32_t dest_qp_num = 0;
  uint32_t qp_access_flags = 0;
  QpCap cap{};
  AhAttr ah_attr{};
  uint16_t pkey_index = 0;
  uint8_t en_sqd_async_notify = 0;
  uint8_t sq_draining = 0;
  uint8_t max_rd_atomic = 0;
  uint8_t max_dest_rd_atomic = 0;
  uint8_t min_rnr_timer = 0;
  uint8_t port_num = 1;
  uint8_t timeout = 0;
  uint8_t retry_cnt = 0;
  uint8_t rnr_retry = 0;
  uint32_t rate_limit = 0;  // kb/s, 0 = unlimited
  // With kQpRateLimit, ibv_modify_qp_rate_limit's shaping (0 = the defaults): bursts of at most
  // max_burst_sz bytes, for frames of typical_pkt_sz bytes (whole frames, Ethernet header to
  // ICRC; by default the QP's largest data frame: Engine::largest_data_frame). Plain
  // IBV_QP_RATE_LIMIT leaves both 0.
  uint32_t max_burst_sz = 0;
  uint16_t typical_pkt_sz = 0;
};
// A QP's rate limit (QpAttr::rate_limit, kb/s; 0 = none): 1 Mb/s .. 400 Gb/s.
inline constexpr uint32_t kMinRateLimitKbps = 1'000;
inline constexpr uint32_t kMaxRateLimitKbps = 400'000'000;

struct Sge {
  uint64_t addr = 0;
  uint32_t length = 0;
  uint32_t lkey = 0;
};

// A completion, as ibv_wc has it.
struct Cqe {
  uint64_t wr_id = 0;
  WcStatus status = WcStatus::kSuccess;
  WcOpcode opcode = WcOpcode::kSend;
  uint8_t wc_flags = 0;
  uint8_t sl = 0;
  uint32_t vendor_err = 0;
  uint32_t byte_len = 0;
  uint32_t imm_data = 0;  // network byte order, as received (or invalidated rkey)
  uint32_t qp_num = 0;
  uint32_t src_qp = 0;
  uint16_t pkey_index = 0;
  uint16_t reserved = 0;
};
static_assert(sizeof(Cqe) == 40);

// IBA 9.7.5.2.8: RNR NAK timer codes in microseconds (code 0 = 655.36 ms).
inline constexpr uint32_t kRnrTimerUs[32] = {
    655360, 10,    20,    30,    40,    60,     80,     120,    160,    240,   320,
    480,    640,   960,   1280,  1920,  2560,   3840,   5120,   7680,   10240, 15360,
    20480,  30720, 40960, 61440, 81920, 122880, 163840, 245760, 327680, 491520};

// Local ACK timeout: 4.096 us * 2^timeout; 0 means infinite (IBA 9.7.6.1.3).
constexpr uint64_t local_ack_timeout_ns(uint8_t timeout) {
  return timeout == 0 ? 0 : 4096ull << (timeout > 31 ? 31 : timeout);
}

}  // namespace roce
