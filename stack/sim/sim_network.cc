#include "stack/sim/sim_network.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "stack/wire/headers.h"
#include "stack/wire/parser.h"

namespace roce::sim {

namespace {
constexpr uint32_t kChunk = 1024;  // buffers allocated at a time

uint64_t serialisation_ns(uint32_t bytes, double gbps) {
  if (gbps <= 0) return 0;
  // + 20 bytes of preamble, SFD and inter-frame gap, + 4 of FCS, as a real link carries.
  return static_cast<uint64_t>((bytes + 24) * 8 / gbps);
}

}  // namespace

SimNetwork::SimNetwork(uint64_t seed, uint32_t max_buffers, uint32_t buffer_bytes)
    : rng_(seed), max_buffers_(max_buffers), buffer_bytes_(buffer_bytes) {}

SimNetwork::~SimNetwork() = default;

SimPort* SimNetwork::add_port(const Mac& mac, uint32_t max_frame) {
  const int idx = static_cast<int>(ports_.size());
  if (max_frame > buffer_bytes_) max_frame = buffer_bytes_;
  ports_.push_back(std::unique_ptr<SimPort>(new SimPort(this, idx, mac, max_frame)));
  return ports_.back().get();
}

SimNetwork::Buffer* SimNetwork::get_buffer() {
  if (free_.empty()) {
    if (total_buffers_ >= max_buffers_) return nullptr;
    const uint32_t n = std::min(kChunk, max_buffers_ - total_buffers_);
    chunks_.push_back(std::make_unique<uint8_t[]>(static_cast<size_t>(n) * buffer_bytes_));
    buffer_chunks_.push_back(std::make_unique<Buffer[]>(n));
    for (uint32_t i = 0; i < n; ++i) {
      Buffer& b = buffer_chunks_.back()[i];
      b.data = chunks_.back().get() + static_cast<size_t>(i) * buffer_bytes_;
      b.cap = buffer_bytes_;
      free_.push_back(&b);
    }
    total_buffers_ += n;
  }
  Buffer* b = free_.back();
  free_.pop_back();
  return b;
}

void SimNetwork::put_buffer(PktBuf& b) {
  free_.push_back(static_cast<Buffer*>(b.handle));
  b.handle = nullptr;
}

PktBuf SimNetwork::clone(const PktBuf& b) {
  Buffer* nb = get_buffer();
  if (!nb) return PktBuf{};
  std::memcpy(nb->data, b.data, b.len);
  return PktBuf{nb, nb->data, b.len, nb->cap};
}

void SimNetwork::schedule(uint64_t time, EventKind kind, int port, const PktBuf& buf) {
  events_.push(Event{time, seq_++, kind, port, buf});
}

// A host hands a frame to its uplink: serialisation, then faults, then the propagation delay.
void SimNetwork::on_transmit(SimPort& src, PktBuf b) {
  ++src.stats_.tx_frames;
  const LinkConfig& l = src.uplink_;
  const uint64_t now = clock_.now_ns();
  const uint64_t start = std::max(now, src.uplink_free_ns_);
  const uint64_t done = start + serialisation_ns(b.len, l.rate_gbps);
  src.uplink_free_ns_ = done;
  ++src.tx_in_flight_;
  schedule(done, EventKind::kUplinkDone, src.index_, PktBuf{});

  if (rng_.chance(l.drop)) {
    ++src.stats_.dropped_fault;
    put_buffer(b);
    return;
  }
  int copies = 1;
  if (rng_.chance(l.duplicate)) {
    ++src.stats_.duplicated;
    copies = 2;
  }
  // Both copies before any bit flips: the duplicate is a copy of the frame sent, corrupted (or
  // not) on its own.
  PktBuf frames[2] = {b, copies == 2 ? clone(b) : PktBuf{}};
  for (int c = 0; c < copies; ++c) {
    PktBuf f = frames[c];
    if (!f.handle) break;
    if (rng_.chance(l.corrupt) && f.len) {
      ++src.stats_.corrupted;
      f.data[rng_.below(f.len)] ^= static_cast<uint8_t>(1u << rng_.below(8));
    }
    uint64_t at = done + l.delay_ns;
    if (l.jitter_ns) at += rng_.below(l.jitter_ns + 1);
    if (rng_.chance(l.reorder)) {
      // Held back: later frames overtake this one.
      ++src.stats_.reordered;
      at += l.reorder_delay_ns;
    } else {
      at = std::max(at, src.uplink_last_arrival_ns_);
      src.uplink_last_arrival_ns_ = at;
    }
    schedule(at, EventKind::kAtSwitch, src.index_, f);
  }
}

// The switch forwards by destination MAC (broadcast floods) into output queues.
void SimNetwork::at_switch(int src, PktBuf b) {
  const uint8_t* dst = b.data;
  const bool bcast = (dst[0] & 1) != 0;
  int target = -1;
  if (!bcast) {
    for (const auto& p : ports_) {
      if (std::memcmp(p->mac_.data(), dst, 6) == 0) {
        target = p->index_;
        break;
      }
    }
    if (target < 0 || target == src) {
      put_buffer(b);  // unknown destination: a learning switch would flood; we drop
      return;
    }
  }
  const uint64_t now = clock_.now_ns();
  for (const auto& p : ports_) {
    if (bcast ? p->index_ == src : p->index_ != target) continue;
    PktBuf f = bcast ? clone(b) : b;
    if (!f.handle) continue;
    SimPort& out = *p;
    const EgressConfig& e = out.egress_;
    uint64_t depart = now;
    if (e.rate_gbps > 0) {
      const uint64_t backlog_ns = out.egress_free_ns_ > now ? out.egress_free_ns_ - now : 0;
      const uint64_t backlog = static_cast<uint64_t>(backlog_ns * e.rate_gbps / 8);
      if (backlog + f.len > e.buffer_bytes) {
        ++out.stats_.dropped_queue;
        put_buffer(f);
        continue;
      }
      if (!e.ecn_mark_on_dequeue) red_mark(out, f, backlog);
      out.stats_.max_queue_bytes = std::max(out.stats_.max_queue_bytes, backlog + f.len);
      const uint64_t start = std::max(now, out.egress_free_ns_);
      depart = start + serialisation_ns(f.len, e.rate_gbps);
      out.egress_free_ns_ = depart;
      if (e.ecn_mark_on_dequeue && e.ecn_kmax_bytes > 0) {
        // The frame reaches the head of the queue at `start`: mark it then.
        schedule(start, EventKind::kDequeue, out.index_, f);
        continue;
      }
    }
    schedule(depart + e.delay_ns, EventKind::kAtHost, out.index_, f);
  }
  if (bcast) put_buffer(b);
}

void SimNetwork::red_mark(SimPort& out, PktBuf& f, uint64_t backlog) {
  const EgressConfig& e = out.egress_;
  if (e.ecn_kmax_bytes == 0 || backlog <= e.ecn_kmin_bytes) return;
  double p_mark = 1.0;
  if (backlog < e.ecn_kmax_bytes) {
    p_mark = e.ecn_pmax * static_cast<double>(backlog - e.ecn_kmin_bytes) /
             static_cast<double>(e.ecn_kmax_bytes - e.ecn_kmin_bytes);
  }
  if (rng_.chance(p_mark) && wire::mark_ce(f.data, f.len)) ++out.stats_.ecn_marked;
}

uint64_t SimPort::queue_bytes() const {
  const uint64_t now = net_->clock_.now_ns();
  if (egress_.rate_gbps <= 0 || egress_free_ns_ <= now) return 0;
  return static_cast<uint64_t>((egress_free_ns_ - now) * egress_.rate_gbps / 8);
}

bool SimNetwork::deliver_due() {
  bool any = false;
  const uint64_t now = clock_.now_ns();
  while (!events_.empty() && events_.top().time <= now) {
    Event ev = events_.top();
    events_.pop();
    any = true;
    switch (ev.kind) {
      case EventKind::kUplinkDone:
        --ports_[static_cast<size_t>(ev.port)]->tx_in_flight_;
        break;
      case EventKind::kAtSwitch:
        at_switch(ev.port, ev.buf);
        break;
      case EventKind::kDequeue: {
        // At the head of the egress queue: what waits behind it decides the mark.
        SimPort& out = *ports_[static_cast<size_t>(ev.port)];
        const uint64_t backlog = out.queue_bytes();
        red_mark(out, ev.buf, backlog > ev.buf.len ? backlog - ev.buf.len : 0);
        const uint64_t depart = now + serialisation_ns(ev.buf.len, out.egress_.rate_gbps);
        schedule(depart + out.egress_.delay_ns, EventKind::kAtHost, ev.port, ev.buf);
        break;
      }
      case EventKind::kAtHost: {
        SimPort& p = *ports_[static_cast<size_t>(ev.port)];
        if (p.rx_ring_ != 0 && p.rx_.size() >= p.rx_ring_) {
          ++p.stats_.dropped_rx_ring;
          put_buffer(ev.buf);
          break;
        }
        ++p.stats_.rx_frames;
        p.rx_.push_back(ev.buf);
        p.stats_.max_rx_frames = std::max<uint64_t>(p.stats_.max_rx_frames, p.rx_.size());
        break;
      }
    }
  }
  return any;
}

bool SimNetwork::run_until(const std::function<bool()>& done, uint64_t deadline_ns) {
  constexpr uint64_t kNever = std::numeric_limits<uint64_t>::max();
  while (!done()) {
    if (clock_.now_ns() > deadline_ns) return false;
    bool any = deliver_due();
    for (auto& a : actors_) any |= a.poll();
    if (any) continue;
    bool busy = false;
    for (auto& a : actors_) busy |= a.busy && a.busy();
    if (busy) continue;
    // Everyone is idle: jump to the next thing that will happen.
    uint64_t next = events_.empty() ? kNever : events_.top().time;
    for (auto& a : actors_) {
      if (a.next_time) next = std::min(next, a.next_time());
    }
    if (next == kNever) return done();
    // Never past the deadline: what is due later has not happened when this returns. (A
    // deadline of kNever is none: deadline + 1 would wrap to 0.)
    const uint64_t limit = deadline_ns == kNever ? kNever : deadline_ns + 1;
    clock_.set(std::max(std::min(next, limit), clock_.now_ns() + 1));
  }
  return true;
}

// --- SimPort: the PacketIo -----------------------------------------------------------------

uint16_t SimPort::rx_burst(PktBuf* bufs, uint16_t n) {
  uint16_t k = 0;
  while (k < n && !rx_.empty()) {
    bufs[k++] = rx_.front();
    rx_.pop_front();
  }
  return k;
}

uint16_t SimPort::tx_burst(PktBuf* bufs, uint16_t n) {
  uint16_t k = 0;
  for (; k < n; ++k) {
    if (tx_in_flight_ >= tx_ring_) {
      ++stats_.tx_ring_full;
      break;
    }
    net_->on_transmit(*this, bufs[k]);
  }
  return k;
}

uint16_t SimPort::alloc(PktBuf* bufs, uint16_t n) {
  uint16_t k = 0;
  for (; k < n; ++k) {
    SimNetwork::Buffer* b = net_->get_buffer();
    if (!b) break;
    bufs[k] = PktBuf{b, b->data, 0, b->cap};
  }
  return k;
}

void SimPort::free(PktBuf* bufs, uint16_t n) {
  for (uint16_t i = 0; i < n; ++i) net_->put_buffer(bufs[i]);
}

}  // namespace roce::sim
