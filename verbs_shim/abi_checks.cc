// The stack's enums (stack/core/types.h) carry verbs.h's values so the shim passes them through
// unconverted. This file proves it at compile time against Debian's <infiniband/verbs.h>.
#include "verbs_shim/shim.h"

namespace roce::verbs {
namespace {

template <typename A, typename B>
constexpr bool same(A a, B b) {
  return static_cast<long long>(a) == static_cast<long long>(b);
}

static_assert(same(QpType::kRc, IBV_QPT_RC) && same(QpType::kUc, IBV_QPT_UC) &&
              same(QpType::kUd, IBV_QPT_UD));

static_assert(same(QpState::kReset, IBV_QPS_RESET) && same(QpState::kInit, IBV_QPS_INIT) &&
              same(QpState::kRtr, IBV_QPS_RTR) && same(QpState::kRts, IBV_QPS_RTS) &&
              same(QpState::kSqd, IBV_QPS_SQD) && same(QpState::kSqe, IBV_QPS_SQE) &&
              same(QpState::kErr, IBV_QPS_ERR));

static_assert(same(kQpState, IBV_QP_STATE) && same(kQpCurState, IBV_QP_CUR_STATE) &&
              same(kQpEnSqdAsyncNotify, IBV_QP_EN_SQD_ASYNC_NOTIFY) &&
              same(kQpAccessFlags, IBV_QP_ACCESS_FLAGS) && same(kQpPkeyIndex, IBV_QP_PKEY_INDEX) &&
              same(kQpPort, IBV_QP_PORT) && same(kQpQkey, IBV_QP_QKEY) && same(kQpAv, IBV_QP_AV) &&
              same(kQpPathMtu, IBV_QP_PATH_MTU) && same(kQpTimeout, IBV_QP_TIMEOUT) &&
              same(kQpRetryCnt, IBV_QP_RETRY_CNT) && same(kQpRnrRetry, IBV_QP_RNR_RETRY) &&
              same(kQpRqPsn, IBV_QP_RQ_PSN) && same(kQpMaxQpRdAtomic, IBV_QP_MAX_QP_RD_ATOMIC) &&
              same(kQpAltPath, IBV_QP_ALT_PATH) && same(kQpMinRnrTimer, IBV_QP_MIN_RNR_TIMER) &&
              same(kQpSqPsn, IBV_QP_SQ_PSN) &&
              same(kQpMaxDestRdAtomic, IBV_QP_MAX_DEST_RD_ATOMIC) &&
              same(kQpPathMigState, IBV_QP_PATH_MIG_STATE) && same(kQpCap, IBV_QP_CAP) &&
              same(kQpDestQpn, IBV_QP_DEST_QPN) && same(kQpRateLimit, IBV_QP_RATE_LIMIT));

static_assert(same(kAccessLocalWrite, IBV_ACCESS_LOCAL_WRITE) &&
              same(kAccessRemoteWrite, IBV_ACCESS_REMOTE_WRITE) &&
              same(kAccessRemoteRead, IBV_ACCESS_REMOTE_READ) &&
              same(kAccessRemoteAtomic, IBV_ACCESS_REMOTE_ATOMIC) &&
              same(kAccessMwBind, IBV_ACCESS_MW_BIND) &&
              same(kAccessZeroBased, IBV_ACCESS_ZERO_BASED) &&
              same(kAccessOnDemand, IBV_ACCESS_ON_DEMAND) &&
              same(kAccessHugetlb, IBV_ACCESS_HUGETLB) &&
              same(kAccessRelaxedOrdering, IBV_ACCESS_RELAXED_ORDERING));
// The stack treats bits 20..31 as optional hints, verbs.h bits 20..29: every flag verbs.h calls
// optional is ignored by the engine too (bits 30-31 are not defined by verbs.h at all).
static_assert((kAccessOptionalRange & IBV_ACCESS_OPTIONAL_RANGE) ==
              static_cast<uint32_t>(IBV_ACCESS_OPTIONAL_RANGE));

static_assert(same(WrOpcode::kRdmaWrite, IBV_WR_RDMA_WRITE) &&
              same(WrOpcode::kRdmaWriteWithImm, IBV_WR_RDMA_WRITE_WITH_IMM) &&
              same(WrOpcode::kSend, IBV_WR_SEND) &&
              same(WrOpcode::kSendWithImm, IBV_WR_SEND_WITH_IMM) &&
              same(WrOpcode::kRdmaRead, IBV_WR_RDMA_READ) &&
              same(WrOpcode::kAtomicCmpAndSwp, IBV_WR_ATOMIC_CMP_AND_SWP) &&
              same(WrOpcode::kAtomicFetchAndAdd, IBV_WR_ATOMIC_FETCH_AND_ADD) &&
              same(WrOpcode::kLocalInv, IBV_WR_LOCAL_INV) &&
              same(WrOpcode::kBindMw, IBV_WR_BIND_MW) &&
              same(WrOpcode::kSendWithInv, IBV_WR_SEND_WITH_INV));

static_assert(same(kSendFence, IBV_SEND_FENCE) && same(kSendSignaled, IBV_SEND_SIGNALED) &&
              same(kSendSolicited, IBV_SEND_SOLICITED) && same(kSendInline, IBV_SEND_INLINE));

static_assert(same(WcStatus::kSuccess, IBV_WC_SUCCESS) &&
              same(WcStatus::kLocLenErr, IBV_WC_LOC_LEN_ERR) &&
              same(WcStatus::kLocQpOpErr, IBV_WC_LOC_QP_OP_ERR) &&
              same(WcStatus::kLocEecOpErr, IBV_WC_LOC_EEC_OP_ERR) &&
              same(WcStatus::kLocProtErr, IBV_WC_LOC_PROT_ERR) &&
              same(WcStatus::kWrFlushErr, IBV_WC_WR_FLUSH_ERR) &&
              same(WcStatus::kMwBindErr, IBV_WC_MW_BIND_ERR) &&
              same(WcStatus::kBadRespErr, IBV_WC_BAD_RESP_ERR) &&
              same(WcStatus::kLocAccessErr, IBV_WC_LOC_ACCESS_ERR) &&
              same(WcStatus::kRemInvReqErr, IBV_WC_REM_INV_REQ_ERR) &&
              same(WcStatus::kRemAccessErr, IBV_WC_REM_ACCESS_ERR) &&
              same(WcStatus::kRemOpErr, IBV_WC_REM_OP_ERR) &&
              same(WcStatus::kRetryExcErr, IBV_WC_RETRY_EXC_ERR) &&
              same(WcStatus::kRnrRetryExcErr, IBV_WC_RNR_RETRY_EXC_ERR) &&
              same(WcStatus::kLocRddViolErr, IBV_WC_LOC_RDD_VIOL_ERR) &&
              same(WcStatus::kRemInvRdReqErr, IBV_WC_REM_INV_RD_REQ_ERR) &&
              same(WcStatus::kRemAbortErr, IBV_WC_REM_ABORT_ERR) &&
              same(WcStatus::kInvEecnErr, IBV_WC_INV_EECN_ERR) &&
              same(WcStatus::kInvEecStateErr, IBV_WC_INV_EEC_STATE_ERR) &&
              same(WcStatus::kFatalErr, IBV_WC_FATAL_ERR) &&
              same(WcStatus::kRespTimeoutErr, IBV_WC_RESP_TIMEOUT_ERR) &&
              same(WcStatus::kGeneralErr, IBV_WC_GENERAL_ERR));

static_assert(same(WcOpcode::kSend, IBV_WC_SEND) && same(WcOpcode::kRdmaWrite, IBV_WC_RDMA_WRITE) &&
              same(WcOpcode::kRdmaRead, IBV_WC_RDMA_READ) &&
              same(WcOpcode::kCompSwap, IBV_WC_COMP_SWAP) &&
              same(WcOpcode::kFetchAdd, IBV_WC_FETCH_ADD) &&
              same(WcOpcode::kBindMw, IBV_WC_BIND_MW) &&
              same(WcOpcode::kLocalInv, IBV_WC_LOCAL_INV) && same(WcOpcode::kRecv, IBV_WC_RECV) &&
              same(WcOpcode::kRecvRdmaWithImm, IBV_WC_RECV_RDMA_WITH_IMM));

static_assert(same(kWcGrh, IBV_WC_GRH) && same(kWcWithImm, IBV_WC_WITH_IMM) &&
              same(kWcWithInv, IBV_WC_WITH_INV));

static_assert(same(Mtu::k256, IBV_MTU_256) && same(Mtu::k512, IBV_MTU_512) &&
              same(Mtu::k1024, IBV_MTU_1024) && same(Mtu::k2048, IBV_MTU_2048) &&
              same(Mtu::k4096, IBV_MTU_4096));

// Limits the shim reports must fit the verbs types they are reported in.
static_assert(kMaxCqe <= static_cast<uint32_t>(INT32_MAX) && kMaxQpWr <= INT32_MAX);

// The engine's asynchronous event numbers are ibv_event_type values.
static_assert(same(AsyncEventType::kCqErr, IBV_EVENT_CQ_ERR) &&
              same(AsyncEventType::kSqDrained, IBV_EVENT_SQ_DRAINED) &&
              same(AsyncEventType::kQpFatal, IBV_EVENT_QP_FATAL) &&
              same(AsyncEventType::kQpReqErr, IBV_EVENT_QP_REQ_ERR) &&
              same(AsyncEventType::kQpAccessErr, IBV_EVENT_QP_ACCESS_ERR) &&
              same(AsyncEventType::kSrqLimitReached, IBV_EVENT_SRQ_LIMIT_REACHED) &&
              same(AsyncEventType::kQpLastWqeReached, IBV_EVENT_QP_LAST_WQE_REACHED));

}  // namespace
}  // namespace roce::verbs
