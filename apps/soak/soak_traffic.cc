// roce-soak: the batches. The active side posts a batch and checks its READs and atomics as they
// complete; the passive side checks what arrives, then posts the next batch's receives and
// acknowledges. Every check that fails ends the run with a line naming the QP, the batch, the
// operation and the first wrong byte.
#include <algorithm>
#include <cstring>

#include "apps/soak/soak.h"
#include "dpdk/device.h"
#include "stack/core/qp.h"

namespace roce::soak {

namespace {

constexpr uint32_t kAckIdx = 0xff;  // a wr_id's index of the acknowledgement (send and receive)
constexpr uint64_t kAckMagic = 0x61636b2d736f616bull;

// wr_id: QP (8 bits), batch (40 bits), index in the batch (8 bits).
uint64_t wr_id(uint32_t q, uint64_t batch, uint32_t idx) {
  return static_cast<uint64_t>(q) << 48 | (batch & 0xff'ffff'ffffull) << 8 | idx;
}
uint32_t wr_qp(uint64_t id) { return static_cast<uint32_t>(id >> 48); }
uint32_t wr_idx(uint64_t id) { return static_cast<uint32_t>(id & 0xff); }

struct Ack {
  uint64_t magic;
  uint64_t batch;
};

WrOpcode wr_opcode(Op op) {
  static constexpr WrOpcode kMap[] = {WrOpcode::kSend,           WrOpcode::kSendWithImm,
                                      WrOpcode::kRdmaWrite,      WrOpcode::kRdmaWriteWithImm,
                                      WrOpcode::kRdmaRead,       WrOpcode::kAtomicFetchAndAdd,
                                      WrOpcode::kAtomicCmpAndSwp};
  return kMap[static_cast<int>(op)];
}

std::string where(uint32_t q, uint64_t batch, size_t i, const PlannedOp& o) {
  return "QP " + std::to_string(q) + " batch " + std::to_string(batch) + " op " +
         std::to_string(i) + " (" + op_name(o.op) + ", " + std::to_string(o.size) + " B)";
}

}  // namespace

void Soak::start_batch(uint32_t q) {
  Active& a = active_[q];
  make_plan(o_.plan, q, a.batch, &a.plan);
  a.word_after = apply_atomics(a.plan, a.word, &a.olds);
  SendWr wrs[kMaxOps];
  Sge sges[kMaxOps];
  std::memset(ctrl(q), 0, sizeof(Ack));
  Sge ack_sge{reinterpret_cast<uint64_t>(ctrl(q)), sizeof(Ack), lkey_};
  if (!check(qps_[q]->post_recv(RecvWr{wr_id(q, a.batch, kAckIdx), &ack_sge, 1}) == 0, [&] {
        return std::string("QP " + std::to_string(q) +
                           ": cannot post the acknowledgement's receive");
      })) {
    return;
  }
  const size_t n = a.plan.ops.size();
  for (size_t i = 0; i < n; ++i) {
    const PlannedOp& o = a.plan.ops[i];
    uint8_t* local = area(q) + o.offset;
    SendWr& w = wrs[i];
    w = SendWr{};
    w.wr_id = wr_id(q, a.batch, static_cast<uint32_t>(i));
    w.opcode = wr_opcode(o.op);
    w.send_flags = static_cast<uint8_t>(kSendSignaled | (o.inline_data ? kSendInline : 0));
    w.imm_data = o.imm;
    w.rkey = peer_rkey_;
    if (o.op == Op::kRead) {
      fill_pattern(local, o.size, o.key, o.read_off, true);  // poisoned: every byte must come
      w.remote_addr = peer_base_ + read_off_ + o.read_off;
    } else if (is_atomic(o.op)) {
      const uint64_t poison = ~a.olds[i];
      std::memcpy(local, &poison, 8);
      w.remote_addr = peer_addr(reinterpret_cast<const uint8_t*>(word(q)));
      w.compare_add = o.op == Op::kFetchAdd ? o.operand : cas_compare(o, a.olds[i]);
      w.swap = o.operand;
    } else {
      fill_pattern(local, o.size, o.key);
      w.remote_addr = peer_addr(area(q) + o.offset);
    }
    sges[i] = Sge{reinterpret_cast<uint64_t>(local), o.size, lkey_};
    w.sg_list = &sges[i];
    w.num_sge = 1;
  }
  uint32_t bad = 0;
  const int rc = qps_[q]->post_send_list(wrs, static_cast<uint32_t>(n), &bad);
  if (!check(rc == 0, [&] {
        return std::string(where(q, a.batch, bad, a.plan.ops[bad]) +
                           ": post failed: " + std::strerror(rc));
      })) {
    return;
  }
  a.completed = 0;
  a.acked = false;
  a.busy = true;
  a.last = Clock::now();
}

void Soak::prepare_passive(uint32_t q) {
  Passive& p = passive_[q];
  make_plan(o_.plan, q, p.batch, &p.plan);
  p.word_after = apply_atomics(p.plan, p.word, &p.olds);
  p.next = 0;
  for (size_t i = 0; i < p.plan.ops.size(); ++i) {
    const PlannedOp& o = p.plan.ops[i];
    uint8_t* at = area(q) + o.offset;
    // Poisoned (the inverted stream) first: a byte the operation does not write fails its check.
    if (o.op == Op::kSend || o.op == Op::kSendImm) fill_pattern(at, o.recv_len, o.key, 0, true);
    if (o.op == Op::kWrite || o.op == Op::kWriteImm) fill_pattern(at, o.size, o.key, 0, true);
    if (!takes_recv(o.op)) continue;
    // A WRITE_WITH_IMM's receive takes no bytes.
    Sge sge{reinterpret_cast<uint64_t>(at), o.recv_len, lkey_};
    const RecvWr wr{wr_id(q, p.batch, static_cast<uint32_t>(i)), &sge,
                    o.op == Op::kWriteImm ? 0u : 1u};
    if (!check(qps_[q]->post_recv(wr) == 0,
               [&] { return std::string(where(q, p.batch, i, o) + ": cannot post a receive"); })) {
      return;
    }
  }
}

void Soak::progress(uint32_t q) {
  Active& a = active_[q];
  if (a.warm) {
    // The completion came at most poll_gap_ before this poll (the loop did not look meanwhile:
    // a loaded machine took its CPU), and the last one no later than a.last: so the QP waited at
    // least this long, which is what the limit is held against.
    const auto waited = poll_at_ - a.last - std::min(poll_gap_, poll_at_ - a.last);
    const uint64_t ns =
        static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(waited).count());
    if (ns > max_wait_ns_) max_wait_ns_ = ns;
    if (ns > run_max_wait_ns_) run_max_wait_ns_ = ns;
    if (wait_limit_ns_ && ns > wait_limit_ns_) ++waits_over_limit_;
  }
  a.warm = true;
  a.last = poll_at_;
  if (a.completed == a.plan.ops.size() && a.acked) {
    a.word = a.word_after;
    ++a.batch;
    ++batches_;
    a.busy = false;
  }
}

void Soak::on_send_completion(const Cqe& c) {
  const uint32_t q = wr_qp(c.wr_id);
  if (!check(q < o_.qps && c.qp_num == qps_[q]->qpn(),
             [&] { return std::string("a send completion of no QP of ours"); })) {
    return;
  }
  if (!is_active(q)) {  // our acknowledgement of a batch
    check(c.status == WcStatus::kSuccess, [&] {
      return std::string("QP " + std::to_string(q) + ": the acknowledgement completed with " +
                         to_string(c.status));
    });
    return;
  }
  Active& a = active_[q];
  const uint32_t i = wr_idx(c.wr_id);
  if (!check(a.busy && i == a.completed && i < a.plan.ops.size(), [&] {
        return std::string("QP " + std::to_string(q) + ": completion of op " + std::to_string(i) +
                           " out of order (expected op " + std::to_string(a.completed) + ")");
      })) {
    return;
  }
  const PlannedOp& o = a.plan.ops[i];
  const auto at = [&] { return where(q, a.batch, i, o); };
  if (!check(c.status == WcStatus::kSuccess,
             [&] { return std::string(at() + ": completed with " + to_string(c.status)); }) ||
      !check(c.opcode == wc_opcode(wr_opcode(o.op)),
             [&] { return std::string(at() + ": wrong completion opcode"); })) {
    return;
  }
  const uint8_t* local = area(q) + o.offset;
  if (o.op == Op::kRead) {
    const int64_t bad = check_pattern(local, o.size, o.key, o.read_off);
    if (!check(bad < 0, [&] {
          return std::string(at() + ": byte " + std::to_string(bad) + " read is wrong");
        }))
      return;
  } else if (is_atomic(o.op)) {
    uint64_t got = 0;
    std::memcpy(&got, local, 8);
    if (!check(got == a.olds[i], [&] {
          return std::string(at() + ": returned " + std::to_string(got) + ", expected " +
                             std::to_string(a.olds[i]));
        })) {
      return;
    }
  }
  if (o.op == Op::kRead || is_atomic(o.op)) {
    ++ops_verified_[static_cast<int>(o.op)];
    bytes_verified_ += o.size;
  }
  ++a.completed;
  progress(q);
}

void Soak::on_recv_completion(const Cqe& c) {
  const uint32_t q = wr_qp(c.wr_id);
  if (!check(q < o_.qps && c.qp_num == qps_[q]->qpn(),
             [&] { return std::string("a receive completion of no QP of ours"); })) {
    return;
  }
  if (is_active(q)) {
    on_active_recv(q, c);
  } else {
    on_passive_recv(q, c);
  }
}

void Soak::on_active_recv(uint32_t q, const Cqe& c) {
  Active& a = active_[q];
  Ack ack;
  std::memcpy(&ack, ctrl(q), sizeof ack);
  const auto at = [&] { return "QP " + std::to_string(q) + " batch " + std::to_string(a.batch); };
  if (!check(c.status == WcStatus::kSuccess,
             [&] {
               return std::string(at() + ": the acknowledgement's receive completed with " +
                                  to_string(c.status));
             }) ||
      !check(a.busy && !a.acked && wr_idx(c.wr_id) == kAckIdx && c.byte_len == sizeof ack &&
                 ack.magic == kAckMagic && ack.batch == a.batch,
             [&] {
               return std::string(at() + ": a wrong acknowledgement (batch " +
                                  std::to_string(ack.batch) + ")");
             })) {
    return;
  }
  a.acked = true;
  progress(q);
}

void Soak::on_passive_recv(uint32_t q, const Cqe& c) {
  Passive& p = passive_[q];
  while (p.next < p.plan.ops.size() && !takes_recv(p.plan.ops[p.next].op)) ++p.next;
  if (!check(p.next < p.plan.ops.size(), [&] {
        return std::string("QP " + std::to_string(q) + " batch " + std::to_string(p.batch) +
                           ": a receive too many");
      })) {
    return;
  }
  const uint32_t i = p.next++;
  const PlannedOp& o = p.plan.ops[i];
  const auto at = [&] { return where(q, p.batch, i, o); };
  const bool imm = o.op != Op::kSend;
  const WcOpcode want = o.op == Op::kWriteImm ? WcOpcode::kRecvRdmaWithImm : WcOpcode::kRecv;
  if (!check(c.status == WcStatus::kSuccess,
             [&] { return std::string(at() + ": received with " + to_string(c.status)); }) ||
      !check(c.wr_id == wr_id(q, p.batch, i),
             [&] { return std::string(at() + ": completed another receive"); }) ||
      !check(c.opcode == want && ((c.wc_flags & kWcWithImm) != 0) == imm &&
                 (!imm || c.imm_data == o.imm),
             [&] { return std::string(at() + ": wrong opcode or immediate"); }) ||
      !check(c.byte_len == o.size,
             [&] { return std::string(at() + ": byte_len " + std::to_string(c.byte_len)); })) {
    return;
  }
  const uint8_t* at_mem = area(q) + o.offset;
  int64_t bad = check_pattern(at_mem, o.size, o.key);
  if (bad < 0 && o.recv_len > o.size) {
    // The slack behind a SEND must still hold its poison.
    bad = check_pattern(at_mem + o.size, o.recv_len - o.size, o.key, o.size, true);
    if (bad >= 0) bad += o.size;
  }
  if (!check(bad < 0,
             [&] { return std::string(at() + ": byte " + std::to_string(bad) + " is wrong"); }))
    return;
  ++ops_verified_[static_cast<int>(o.op)];
  bytes_verified_ += o.size;
  if (i + 1 == p.plan.ops.size()) end_passive_batch(q);
}

void Soak::end_passive_batch(uint32_t q) {
  Passive& p = passive_[q];
  // The marker came: every WRITE before it has landed (RC executes a QP's requests in order),
  // and so has every atomic.
  for (size_t i = 0; i < p.plan.ops.size(); ++i) {
    const PlannedOp& o = p.plan.ops[i];
    if (o.op != Op::kWrite) continue;
    const int64_t bad = check_pattern(area(q) + o.offset, o.size, o.key);
    if (!check(bad < 0, [&] {
          return std::string(where(q, p.batch, i, o) + ": byte " + std::to_string(bad) +
                             " is wrong");
        })) {
      return;
    }
    ++ops_verified_[static_cast<int>(o.op)];
    bytes_verified_ += o.size;
  }
  if (!check(*word(q) == p.word_after, [&] {
        return std::string("QP " + std::to_string(q) + " batch " + std::to_string(p.batch) +
                           ": the atomics left " + std::to_string(*word(q)) + ", expected " +
                           std::to_string(p.word_after));
      })) {
    return;
  }
  const Ack ack{kAckMagic, p.batch};
  p.word = p.word_after;
  ++p.batch;
  prepare_passive(q);  // the next batch's receives first: the peer starts it on our ack
  std::memcpy(ctrl(q), &ack, sizeof ack);
  Sge sge{reinterpret_cast<uint64_t>(ctrl(q)), sizeof ack, lkey_};
  SendWr w;
  w.wr_id = wr_id(q, ack.batch, kAckIdx);
  w.sg_list = &sge;
  w.num_sge = 1;
  w.opcode = WrOpcode::kSend;
  w.send_flags = kSendSignaled;
  check(qps_[q]->post_send(w) == 0, [&] {
    return std::string("QP " + std::to_string(q) + ": cannot post an acknowledgement");
  });
}

}  // namespace roce::soak
