// A batch of the soak: the operations one side (the QP's "active" side) posts on one QP at once,
// derived from the run's seed, the QP and the batch number alone, so that the other side (the
// "passive" one, which checks what arrives) derives the same plan without being told it.
//
// Every operation gets its own range of the QP's area, at the same offset on both sides: the
// active side's source (SEND, WRITE) or destination (READ, an atomic's result), the passive
// side's receive buffer (SEND) or target (WRITE). No two operations of a batch share bytes, and
// the active side starts the next batch only once the passive side has checked this one and
// said so (a SEND back), so no byte is overwritten before it is checked. The batch ends with a
// SEND_WITH_IMM (the marker): RC executes a QP's requests in order, so once the marker arrives
// every WRITE before it has landed.
#pragma once

#include <cstdint>
#include <vector>

#include "apps/soak/pattern.h"

namespace roce::soak {

enum class Op : uint8_t { kSend, kSendImm, kWrite, kWriteImm, kRead, kFetchAdd, kCmpSwap, kCount };
inline constexpr int kOps = static_cast<int>(Op::kCount);
const char* op_name(Op op);
// Whether the operation consumes a receive at the passive side.
inline bool takes_recv(Op op) {
  return op == Op::kSend || op == Op::kSendImm || op == Op::kWriteImm;
}
inline bool is_atomic(Op op) { return op == Op::kFetchAdd || op == Op::kCmpSwap; }

struct PlannedOp {
  Op op = Op::kSend;
  uint32_t size = 0;      // bytes (8 for an atomic)
  uint64_t offset = 0;    // in the QP's area, on both sides
  uint32_t recv_len = 0;  // a SEND: the receive's length (size and some bytes of slack)
  uint64_t read_off = 0;  // a READ: where in the passive side's read source
  uint32_t imm = 0;       // the *_WITH_IMM's immediate
  uint64_t operand = 0;   // FETCH_ADD: what is added; CMP_SWAP: the swap value
  bool cas_hits = false;  // CMP_SWAP: compares with the word's value (else with another value)
  bool inline_data = false;
  uint64_t key = 0;  // the pattern of its data (a READ's is the read source's)
};

struct PlanParams {
  uint64_t seed = 1;
  uint32_t max_ops = 16;                    // operations of a batch, the marker included
  uint64_t area = 4ull << 20;               // bytes of a QP's area
  uint32_t max_size = 1 << 20;              // largest message
  uint64_t read_source = (1 << 20) + 4096;  // bytes of each side's read source
  uint32_t max_inline = 256;                // larger messages are never sent inline
};

// The side (0 server, 1 client) that posts QP `qp`'s batches; the other one checks them. Half of
// the QPs each way, so that every operation runs in both directions.
inline uint32_t active_side(uint32_t qp) { return qp % 2; }

struct Plan {
  uint64_t batch = 0;
  std::vector<PlannedOp> ops;  // the last one is the marker (SEND_WITH_IMM)
};

// The plan of batch `batch` of QP `qp` (index in the run). `out` keeps its capacity.
void make_plan(const PlanParams& p, uint32_t qp, uint64_t batch, Plan* out);

// The read source of the side with index `side` (0 server, 1 client): a stream of its own.
inline uint64_t read_source_key(uint64_t seed, uint32_t side) {
  return key_of(seed, 0x5eed'0000'0000ull + side);
}
// The atomics' word of QP `qp` at its passive side, before the first batch.
uint64_t initial_word(uint64_t seed, uint32_t qp);
// The compare value a CMP_SWAP of `op` uses when the word holds `cur`.
inline uint64_t cas_compare(const PlannedOp& op, uint64_t cur) { return op.cas_hits ? cur : ~cur; }
// Runs the plan's atomics on `word` (as the responder executes them, in order, each once):
// returns the word's value after the batch, and each atomic's expected result (the value before
// it) in olds[i] for op i (other ops: untouched).
uint64_t apply_atomics(const Plan& plan, uint64_t word, std::vector<uint64_t>* olds);

}  // namespace roce::soak
