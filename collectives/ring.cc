#include "collectives/ring.h"

#include <algorithm>
#include <cstring>
#include <deque>

#include "collectives/reduce.h"

namespace roce::coll {

Segments even_segments(size_t count, int n) {
  Segments s;
  const size_t base = count / n, extra = count % n;
  size_t at = 0;
  for (int i = 0; i < n; ++i) {
    const size_t len = base + (size_t(i) < extra);
    s.off.push_back(at), s.len.push_back(len);
    at += len;
    s.max_len = std::max(s.max_len, len);
  }
  return s;
}

Segments equal_blocks(size_t block, int n) {
  Segments s;
  for (int i = 0; i < n; ++i) s.off.push_back(i * block), s.len.push_back(block);
  s.max_len = block;
  return s;
}

namespace {

// Message k of a phase: chunk j of step s (chunk-major order).
struct Message {
  size_t j;
  int s;
};

}  // namespace

void ring_reduce_scatter(Op& op, const uint8_t* in, const Segments& seg, uint8_t* dst,
                         DataType type, ReduceOp rop, uint64_t total) {
  const int n = op.size, r = op.rank;
  const size_t es = size_of(type);
  if (n == 1) {
    copy_local(dst, in + seg.off[0] * es, seg.len[0] * es);
    return;
  }
  const int left = mod(r - 1, n), right = mod(r + 1, n), steps = n - 1;
  const size_t per = std::max<size_t>(1, op.chunk_bytes / es);
  const uint64_t m_total = chunks_for(seg.max_len, per) * steps;
  const uint32_t slots = op.t.options().slots;
  const Keys in_keys = op.keys(in, seg.end() * es);
  Keys sk;
  uint8_t* scratch = op.t.scratch(left, &sk);
  auto slot = [&](uint64_t k) { return scratch + (k % slots) * op.chunk_bytes; };
  auto at = [&](uint64_t k) { return Message{k / steps, int(k % steps)}; };
  // The segment sent at step s is the one received at step s - 1.
  auto sent_seg = [&](int s) { return mod(r - s - 1, n); };
  auto recv_seg = [&](int s) { return mod(r - s - 2, n); };

  Peer& from = op.t.peer(left);
  Peer& to = op.t.peer(right);
  const uint64_t arrivals0 = from.arrivals();
  std::vector<bool> busy(slots);
  struct Release {
    uint64_t send;  // the forwarding send's number on `to`
    uint32_t slot;
  };
  std::deque<Release> releases;
  uint64_t granted = 0, reduced = 0, sent = 0;
  const std::vector<int> waiting{left, right};
  for (;;) {
    while (granted < m_total && !busy[granted % slots]) {
      const Message m = at(granted);
      const Span sp = chunk_of(seg.len[recv_seg(m.s)], per, m.j);
      if (!op.try_grant(left, slot(granted), sp.count * es, sk, total)) break;
      busy[granted % slots] = true;
      ++granted;
    }
    while (reduced < granted && from.arrivals() - arrivals0 > reduced) {
      const Message m = at(reduced);
      const int g = recv_seg(m.s);
      const Span sp = chunk_of(seg.len[g], per, m.j);
      const uint8_t* mine = in + (seg.off[g] + sp.begin) * es;
      if (m.s < steps - 1) {  // a partial result, forwarded from the slot as message k + 1
        reduce(slot(reduced), mine, slot(reduced), sp.count, type, rop);
      } else {  // segment `rank`, complete
        uint8_t* d = dst + sp.begin * es;
        reduce(d, mine, slot(reduced), sp.count, type, rop);
        if (rop == ReduceOp::kAvg) divide(d, d, sp.count, type, uint64_t(n));
        busy[reduced % slots] = false;
      }
      ++reduced;
    }
    while (sent < m_total && (at(sent).s == 0 || reduced >= sent)) {
      const Message m = at(sent);
      const int g = sent_seg(m.s);
      const Span sp = chunk_of(seg.len[g], per, m.j);
      const bool first = m.s == 0;
      const void* src = first ? in + (seg.off[g] + sp.begin) * es : slot(sent - 1);
      if (!op.try_send(right, src, sp.count * es, first ? in_keys.lkey : sk.lkey, total)) break;
      if (!first) releases.push_back({to.sends_posted() - 1, uint32_t((sent - 1) % slots)});
      ++sent;
    }
    while (!releases.empty() && to.sends_completed() > releases.front().send) {
      busy[releases.front().slot] = false;
      releases.pop_front();
    }
    if (reduced == m_total && sent == m_total) break;
    op.progress(waiting);
  }
  op.drain_sends({right});  // the caller may write to `in` once we return
}

void ring_all_gather(Op& op, uint8_t* buf, const Segments& seg, size_t es, uint64_t total) {
  const int n = op.size, r = op.rank;
  if (n == 1) return;
  const int left = mod(r - 1, n), right = mod(r + 1, n), steps = n - 1;
  const size_t per = std::max<size_t>(1, op.chunk_bytes / es);
  const uint64_t m_total = chunks_for(seg.max_len, per) * steps;
  const Keys keys = op.keys(buf, seg.end() * es);
  auto at = [&](uint64_t k) { return Message{k / steps, int(k % steps)}; };
  auto region = [&](int g, size_t j, size_t* bytes) {
    const Span sp = chunk_of(seg.len[g], per, j);
    *bytes = sp.count * es;
    return buf + (seg.off[g] + sp.begin) * es;
  };

  Peer& from = op.t.peer(left);
  const uint64_t arrivals0 = from.arrivals();
  uint64_t granted = 0, sent = 0;
  const std::vector<int> waiting{left, right};
  for (;;) {
    while (granted < m_total) {
      const Message m = at(granted);
      size_t bytes;
      uint8_t* d = region(mod(r - m.s - 1, n), m.j, &bytes);
      if (!op.try_grant(left, d, bytes, keys, total)) break;
      ++granted;
    }
    // Message k forwards what arrived as message k - 1 (step s sends what step s - 1 received).
    while (sent < m_total && (at(sent).s == 0 || from.arrivals() - arrivals0 >= sent)) {
      const Message m = at(sent);
      size_t bytes;
      const uint8_t* src = region(mod(r - m.s, n), m.j, &bytes);
      if (!op.try_send(right, src, bytes, keys.lkey, total)) break;
      ++sent;
    }
    if (sent == m_total && from.arrivals() - arrivals0 == m_total) break;
    op.progress(waiting);
  }
  op.drain_sends({right});
}

}  // namespace roce::coll
