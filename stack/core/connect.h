// A QP of the native API connected in one call: RESET -> INIT -> RTR [-> RTS], each transition
// with the attributes IBA table 91 ("QP state transition properties") requires of the QP's
// transport and nothing more: access flags for RC and UC at INIT, a Q_Key for UD; the path, the
// peer's QP and the receive PSN at RTR (plus the responder's read and RNR settings for RC); the
// send PSN at RTS (plus the requester's timeout, retries and reads for RC).
#pragma once

#include <cstdint>

#include "stack/core/types.h"

namespace roce {

class Engine;
class Qp;

struct ConnectParams {
  // INIT
  uint32_t access = kAccessRemoteWrite;  // RC, UC: what the peer may do to our memory
  uint32_t qkey = 0;                     // UD
  // RTR (RC, UC)
  AhAttr ah{};  // the path to the peer: dgid, sgid_index, hop limit, traffic class
  Mtu mtu = Mtu::k1024;
  uint32_t dest_qpn = 0;
  uint32_t rq_psn = 0;             // the first PSN expected from the peer
  uint8_t max_dest_rd_atomic = 1;  // RC: reads and atomics the peer may have outstanding to us
  uint8_t min_rnr_timer = 12;      // RC: 0.64 ms (IBA table 45)
  // RTS
  bool to_rts = true;  // false: stay in RTR (a side that never sends)
  uint32_t sq_psn = 0;
  uint8_t timeout = 14;  // RC: 4.096 us * 2^14 = 67 ms (IBA 9.7.6.1.3)
  uint8_t retry_cnt = 7;
  uint8_t rnr_retry = 7;         // 7: retry for ever (IBA 9.7.5.2.8)
  uint8_t max_rd_atomic = 1;     // RC: reads and atomics we may have outstanding
  uint32_t rate_limit_kbps = 0;  // 0: none
};

// Moves `q` (in RESET) of `e` to RTS, or to RTR without p.to_rts, from the owning thread of `e`.
// Returns 0, or the errno of the first transition refused; *failed_step (if given) then names it:
// "INIT", "RTR" or "RTS".
int connect_qp(Engine& e, Qp* q, const ConnectParams& p, const char** failed_step = nullptr);

}  // namespace roce
