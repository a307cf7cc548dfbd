#include "apps/soak/plan.h"

#include "stack/util/rng.h"

namespace roce::soak {

namespace {

constexpr uint64_t kAlign = 64;        // every range starts on a cache line (atomics: 8 would do)
constexpr uint32_t kSlack = 64;        // most bytes a SEND's receive has beyond the message
constexpr uint32_t kMarkerMax = 4096;  // the marker's largest size

uint64_t round_up(uint64_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

// 1 B .. max_size, log-uniform: as many messages of 1-2 B as of 512 KiB-1 MiB, so that every
// segmentation case (ONLY, FIRST/LAST, FIRST/MIDDLE.../LAST, inline) comes often.
uint32_t pick_size(Rng& r, uint32_t max_size) {
  const unsigned top = 31 - static_cast<unsigned>(__builtin_clz(max_size));
  const uint64_t lo = 1ull << r.below(top + 1);
  const uint64_t s = lo + r.below(lo);
  return static_cast<uint32_t>(s > max_size ? max_size : s);
}

bool carries_data(Op op) { return op != Op::kRead && !is_atomic(op); }

// Draws op `i`'s parameters (its kind and size are set).
void draw(const PlanParams& p, uint32_t qp, uint64_t batch, uint32_t i, Rng& r, PlannedOp* o) {
  o->key = o->op == Op::kRead ? read_source_key(p.seed, 1 - active_side(qp))
                              : key_of(p.seed, qp, batch, 0x1000 + i);
  const uint32_t slack = static_cast<uint32_t>(r.below(kSlack + 1));
  const uint64_t anywhere = r.next();
  o->imm = static_cast<uint32_t>(anywhere >> 32);
  o->operand = r.next();
  o->cas_hits = r.below(4) != 0;
  const bool maybe_inline = r.below(2) != 0;
  if (o->op == Op::kSend || o->op == Op::kSendImm) o->recv_len = o->size + slack;
  if (o->op == Op::kRead) o->read_off = anywhere % (p.read_source - o->size + 1);
  o->inline_data = carries_data(o->op) && o->size <= p.max_inline && maybe_inline;
}

}  // namespace

const char* op_name(Op op) {
  static const char* const kNames[] = {"SEND", "SEND_WITH_IMM", "WRITE",   "WRITE_WITH_IMM",
                                       "READ", "FETCH_ADD",     "CMP_SWAP"};
  return op < Op::kCount ? kNames[static_cast<int>(op)] : "?";
}

uint64_t initial_word(uint64_t seed, uint32_t qp) { return key_of(seed, qp, 0xa70'41c0ull); }

void make_plan(const PlanParams& p, uint32_t qp, uint64_t batch, Plan* out) {
  Rng r(key_of(p.seed, qp, batch, 0x91a7));
  out->batch = batch;
  out->ops.clear();
  const uint32_t n = 1 + static_cast<uint32_t>(r.below(p.max_ops));  // the marker included
  const uint64_t marker_room = round_up(kMarkerMax + kSlack);
  uint64_t off = 0;
  for (uint32_t i = 0; i + 1 < n; ++i) {
    PlannedOp o;
    o.op = static_cast<Op>(r.below(kOps));
    o.size = is_atomic(o.op) ? 8 : pick_size(r, p.max_size);
    draw(p, qp, batch, i, r, &o);
    const uint64_t need = round_up(o.recv_len > o.size ? o.recv_len : o.size);
    if (off + need + marker_room > p.area) break;  // the area is full: the marker comes now
    o.offset = off;
    off += need;
    out->ops.push_back(o);
  }
  PlannedOp m;
  m.op = Op::kSendImm;
  m.size = 1 + static_cast<uint32_t>(r.below(kMarkerMax));
  draw(p, qp, batch, static_cast<uint32_t>(out->ops.size()), r, &m);
  m.offset = off;
  out->ops.push_back(m);
}

uint64_t apply_atomics(const Plan& plan, uint64_t word, std::vector<uint64_t>* olds) {
  olds->resize(plan.ops.size());
  for (size_t i = 0; i < plan.ops.size(); ++i) {
    const PlannedOp& o = plan.ops[i];
    if (!is_atomic(o.op)) continue;
    (*olds)[i] = word;
    if (o.op == Op::kFetchAdd) {
      word += o.operand;
    } else if (cas_compare(o, word) == word) {
      word = o.operand;
    }
  }
  return word;
}

}  // namespace roce::soak
