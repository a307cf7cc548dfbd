#include "stack/sim/sim_network.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "stack/sim/ecmp_hash.h"
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

// Bytes waiting in an egress queue that is busy until free_ns.
uint64_t backlog_bytes(const EgressConfig& e, uint64_t free_ns, uint64_t now) {
  if (e.rate_gbps <= 0 || free_ns <= now) return 0;
  return static_cast<uint64_t>((free_ns - now) * e.rate_gbps / 8);
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

void SimNetwork::set_fabric(const FabricConfig& f) {
  fabric_ = f;
  fabric_.paths = std::max<uint32_t>(f.paths, 1);
  paths_.assign(2 * size_t{fabric_.paths}, Path{});
}

int SimNetwork::find_port(const uint8_t* mac) const {
  for (const auto& p : ports_) {
    if (std::memcmp(p->mac_.data(), mac, 6) == 0) return p->index_;
  }
  return -1;
}

SimNetwork::Queue SimNetwork::host_queue(int port) {
  SimPort& p = *ports_[static_cast<size_t>(port)];
  return Queue{p.egress_,
               p.egress_free_ns_,
               p.stats_.dropped_queue,
               p.stats_.ecn_marked,
               p.stats_.max_queue_bytes,
               EventKind::kDequeue,
               EventKind::kAtHost,
               port};
}

SimNetwork::Queue SimNetwork::path_queue(int path) {
  Path& p = paths_[static_cast<size_t>(path)];
  return Queue{fabric_.path,
               p.free_ns,
               p.stats.dropped_queue,
               p.stats.ecn_marked,
               p.stats.max_queue_bytes,
               EventKind::kPathDequeue,
               EventKind::kAtLeaf,
               path};
}

// The switch forwards by destination MAC (broadcast floods) into output queues; with a fabric,
// a frame for the other leaf first crosses the path its 5-tuple hashes to.
void SimNetwork::at_switch(int src, PktBuf b) {
  if ((b.data[0] & 1) != 0) {
    for (const auto& p : ports_) {
      if (p->index_ == src) continue;
      PktBuf f = clone(b);
      if (f.handle) enqueue(host_queue(p->index_), f);
    }
    put_buffer(b);
    return;
  }
  const int target = find_port(b.data);
  if (target < 0 || target == src) {
    put_buffer(b);  // unknown destination: a learning switch would flood; we drop
    return;
  }
  const int from = ports_[static_cast<size_t>(src)]->leaf_;
  if (!paths_.empty() && from != ports_[static_cast<size_t>(target)]->leaf_) {
    const int path = path_index(from, ecmp_path(b.data, b.len, fabric_.paths, fabric_.hash_seed));
    const uint32_t len = b.len;
    if (enqueue(path_queue(path), b)) {
      PathStats& st = paths_[static_cast<size_t>(path)].stats;
      ++st.frames;
      st.bytes += len;
    }
    return;
  }
  enqueue(host_queue(target), b);
}

bool SimNetwork::enqueue(const Queue& q, PktBuf f) {
  const EgressConfig& e = q.cfg;
  const uint64_t now = clock_.now_ns();
  uint64_t depart = now;
  if (e.rate_gbps > 0) {
    const uint64_t backlog = backlog_bytes(e, q.free_ns, now);
    if (backlog + f.len > e.buffer_bytes) {
      ++q.dropped;
      put_buffer(f);
      return false;
    }
    if (!e.ecn_mark_on_dequeue) red_mark(e, q.marked, f, backlog);
    q.max_bytes = std::max(q.max_bytes, backlog + f.len);
    const uint64_t start = std::max(now, q.free_ns);
    depart = start + serialisation_ns(f.len, e.rate_gbps);
    q.free_ns = depart;
    if (e.ecn_mark_on_dequeue && e.ecn_kmax_bytes > 0) {
      // The frame reaches the head of the queue at `start`: mark it then.
      schedule(start, q.at_head, q.index, f);
      return true;
    }
  }
  schedule(depart + e.delay_ns, q.arrive, q.index, f);
  return true;
}

void SimNetwork::red_mark(const EgressConfig& e, uint64_t& marked, PktBuf& f, uint64_t backlog) {
  if (e.ecn_kmax_bytes == 0 || backlog <= e.ecn_kmin_bytes) return;
  double p_mark = 1.0;
  if (backlog < e.ecn_kmax_bytes) {
    p_mark = e.ecn_pmax * static_cast<double>(backlog - e.ecn_kmin_bytes) /
             static_cast<double>(e.ecn_kmax_bytes - e.ecn_kmin_bytes);
  }
  if (rng_.chance(p_mark) && wire::mark_ce(f.data, f.len)) ++marked;
}

uint64_t SimPort::queue_bytes() const {
  return backlog_bytes(egress_, egress_free_ns_, net_->clock_.now_ns());
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
      case EventKind::kDequeue:
      case EventKind::kPathDequeue: {
        // At the head of the queue: what waits behind it decides the mark.
        const Queue q = ev.kind == EventKind::kDequeue ? host_queue(ev.port) : path_queue(ev.port);
        const uint64_t backlog = backlog_bytes(q.cfg, q.free_ns, now);
        red_mark(q.cfg, q.marked, ev.buf, backlog > ev.buf.len ? backlog - ev.buf.len : 0);
        const uint64_t depart = now + serialisation_ns(ev.buf.len, q.cfg.rate_gbps);
        schedule(depart + q.cfg.delay_ns, q.arrive, ev.port, ev.buf);
        break;
      }
      case EventKind::kAtLeaf: {
        // Across the path: the far leaf forwards it to the destination's egress queue.
        const int target = find_port(ev.buf.data);
        if (target < 0) {
          put_buffer(ev.buf);
        } else {
          enqueue(host_queue(target), ev.buf);
        }
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
  int idle_polls = 0;  // rounds in a row in which no actor did anything
  while (!done()) {
    if (clock_.now_ns() > deadline_ns) return false;
    bool any = deliver_due();
    for (auto& a : actors_) any |= a.poll();
    if (any) {
      idle_polls = 0;
      continue;
    }
    bool busy = false;
    for (auto& a : actors_) busy |= a.busy && a.busy();
    // Busy is not always able to move: an engine whose frames wait for room in its port's full
    // transmit ring (several QPs whose windows together exceed the ring) has output but cannot
    // send it before the uplink serialises a frame. A second round without work would repeat
    // the first for ever at this instant, so then time moves on as if all were idle.
    if (busy && ++idle_polls < 2) continue;
    idle_polls = 0;
    // Everyone is idle (or stuck until later): jump to the next thing that will happen.
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
