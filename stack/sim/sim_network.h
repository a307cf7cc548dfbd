// A deterministic in-memory network on a virtual clock: N ports (each a PacketIo an engine runs
// on) joined by one output-queued switch. Every frame a host sends crosses
//
//   host tx ring -> uplink (rate, delay, faults: drop / duplicate / reorder / corrupt / jitter)
//   -> switch, forwarded by destination MAC -> egress queue (rate, finite buffer, RED/ECN
//   marking, tail drop) -> downlink delay -> host rx queue.
//
// Optionally (set_fabric) the switch is two leaves joined by equal-cost paths: a frame from a
// host on one leaf to a host on the other first queues on the path its 5-tuple hashes to.
//
// Everything random comes from one seeded generator, and events are ordered by (time,
// sequence number): a run is a pure function of its seed and inputs, so every failure can be
// reproduced from the seed it prints.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <queue>
#include <vector>

#include "stack/core/types.h"
#include "stack/io/packet_io.h"
#include "stack/util/clock.h"
#include "stack/util/rng.h"

namespace roce::sim {

// Faults and timing of a host's uplink (applied to every frame the host sends).
struct LinkConfig {
  double drop = 0;       // probability a frame is lost
  double duplicate = 0;  // probability a frame is delivered twice
  double reorder = 0;    // probability a frame is held back by reorder_delay_ns
  double corrupt = 0;    // probability one random bit of the frame flips
  uint64_t delay_ns = 1000;
  uint64_t jitter_ns = 0;  // uniform extra delay in [0, jitter_ns]; the link stays FIFO
  uint64_t reorder_delay_ns = 20000;
  double rate_gbps = 0;  // serialisation rate; 0 = infinite
};

// A switch egress port (towards one host).
struct EgressConfig {
  double rate_gbps = 0;  // 0 = infinite: no queue
  uint64_t buffer_bytes = 4u << 20;
  uint64_t delay_ns = 0;
  // RED-style ECN marking on the queue length at enqueue: no marks below kmin, probability
  // rising linearly to pmax at kmax, every ECT frame marked above kmax. Disabled if kmax == 0.
  uint64_t ecn_kmin_bytes = 0;
  uint64_t ecn_kmax_bytes = 0;
  double ecn_pmax = 0;
  // Decide the mark when the frame leaves the queue (on the queue then behind it), as switch
  // ASICs used with DCQCN do: feedback takes one round trip however deep the queue is. With
  // enqueue marking the CE-marked frame first waits out the whole queue.
  bool ecn_mark_on_dequeue = true;
};

struct PortStats {
  uint64_t tx_frames = 0;
  uint64_t rx_frames = 0;
  uint64_t dropped_fault = 0;
  uint64_t duplicated = 0;
  uint64_t reordered = 0;
  uint64_t corrupted = 0;
  uint64_t dropped_queue = 0;  // egress tail drops towards this port
  uint64_t ecn_marked = 0;     // CE marks on frames towards this port
  uint64_t max_queue_bytes = 0;
  uint64_t tx_ring_full = 0;
  uint64_t dropped_rx_ring = 0;  // arrived while the host's receive ring was full
  uint64_t max_rx_frames = 0;    // most frames waiting in the receive ring at once
};

// Counters of one ECMP path in one direction.
struct PathStats {
  uint64_t frames = 0;  // accepted onto the path
  uint64_t bytes = 0;   // their lengths, Ethernet header to ICRC
  uint64_t dropped_queue = 0;
  uint64_t ecn_marked = 0;
  uint64_t max_queue_bytes = 0;
};

// Two leaf switches joined by `paths` equal-cost paths (a leaf-spine fabric, one spine per
// path). A frame between hosts on different leaves leaves its leaf on the path ecmp_path()
// (ecmp_hash.h) picks for its 5-tuple, waits in that path's queue (each path and direction has
// its own), and reaches the far leaf after the path's delay; that leaf forwards it into the
// destination's egress queue as the single switch does. One queue per path is enough: the spine
// passes on what the path's rate let through, so it cannot queue anything itself. Frames
// within one leaf, and broadcasts, go straight to the egress queues.
struct FabricConfig {
  uint32_t paths = 2;
  uint64_t hash_seed = 0;
  EgressConfig path;  // every path, both directions
};

class SimNetwork;

class SimPort final : public PacketIo {
 public:
  uint16_t rx_burst(PktBuf* bufs, uint16_t n) override;
  uint16_t tx_burst(PktBuf* bufs, uint16_t n) override;
  uint16_t alloc(PktBuf* bufs, uint16_t n) override;
  void free(PktBuf* bufs, uint16_t n) override;
  uint32_t max_frame_len() const override { return max_frame_; }

  const Mac& mac() const { return mac_; }
  int index() const { return index_; }
  PortStats& stats() { return stats_; }
  LinkConfig& uplink() { return uplink_; }
  // Frames the host's receive ring holds (0: unbounded). What arrives while it is full is
  // dropped, as a NIC's or an af_packet ring drops it.
  void set_rx_ring(uint32_t frames) { rx_ring_ = frames; }
  EgressConfig& egress() { return egress_; }
  // Bytes queued at the switch towards this port right now.
  uint64_t queue_bytes() const;
  // The leaf this host hangs off (0 or 1), with SimNetwork::set_fabric.
  void set_leaf(int leaf) { leaf_ = leaf != 0; }
  int leaf() const { return leaf_; }

 private:
  friend class SimNetwork;
  SimPort(SimNetwork* net, int index, const Mac& mac, uint32_t max_frame)
      : net_(net), index_(index), mac_(mac), max_frame_(max_frame) {}
  SimNetwork* net_;
  int index_;
  Mac mac_;
  uint32_t max_frame_;
  LinkConfig uplink_;
  EgressConfig egress_;
  PortStats stats_;
  std::deque<PktBuf> rx_;
  uint64_t uplink_free_ns_ = 0;          // when the uplink finishes serialising what it has
  uint64_t uplink_last_arrival_ns_ = 0;  // FIFO: jitter delays frames but never reorders them
  uint64_t egress_free_ns_ = 0;          // when the switch egress towards this port is idle
  uint32_t tx_ring_ = 256;               // frames the host's uplink queue holds
  uint32_t tx_in_flight_ = 0;            // frames accepted but not yet serialised
  uint32_t rx_ring_ = 0;                 // frames the host's receive ring holds (0: unbounded)
  int leaf_ = 0;
};

class SimNetwork {
 public:
  // Buffers are allocated on demand, up to max_buffers of buffer_bytes each.
  explicit SimNetwork(uint64_t seed, uint32_t max_buffers = 1u << 16, uint32_t buffer_bytes = 9344);
  ~SimNetwork();
  SimNetwork(const SimNetwork&) = delete;
  SimNetwork& operator=(const SimNetwork&) = delete;

  SimPort* add_port(const Mac& mac, uint32_t max_frame = 4352);
  SimPort* port(int i) { return ports_[static_cast<size_t>(i)].get(); }
  size_t port_count() const { return ports_.size(); }
  VirtualClock& clock() { return clock_; }
  const VirtualClock& clock() const { return clock_; }
  Rng& rng() { return rng_; }
  // Two leaves joined by equal-cost paths instead of one switch (before any traffic).
  void set_fabric(const FabricConfig& f);
  uint32_t paths() const { return fabric_.paths; }
  // The path `path` from leaf `from_leaf` to the other.
  const PathStats& path_stats(int from_leaf, uint32_t path) const {
    return paths_[path_index(from_leaf, path)].stats;
  }
  uint32_t free_buffers() const { return static_cast<uint32_t>(free_.size()); }
  uint32_t total_buffers() const { return total_buffers_; }

  // Something that acts at virtual times: an engine (or a test driver).
  struct Actor {
    std::function<bool()> poll;           // one step; true if it did work
    std::function<uint64_t()> next_time;  // earliest time it wants to run (UINT64_MAX: never)
    std::function<bool()> busy;           // has work it can do now without waiting
  };
  void add_actor(Actor a) { actors_.push_back(std::move(a)); }

  // Runs until done() holds (true) or the virtual time passes deadline_ns (false). Time jumps
  // to the next event whenever every actor is idle, but not past deadline_ns + 1.
  bool run_until(const std::function<bool()>& done, uint64_t deadline_ns);
  uint64_t now() const { return clock_.now_ns(); }
  uint64_t events_pending() const { return events_.size(); }

 private:
  friend class SimPort;
  struct Buffer {
    uint8_t* data;
    uint32_t cap;
  };
  enum class EventKind : uint8_t {
    kAtSwitch,
    kAtHost,
    kUplinkDone,
    kDequeue,      // at the head of the egress queue towards a port
    kPathDequeue,  // at the head of a path's queue
    kAtLeaf,       // crossed a path: at the far leaf
  };
  struct Event {
    uint64_t time;
    uint64_t seq;
    EventKind kind;
    // Source port for kAtSwitch / kUplinkDone, destination for kAtHost and kDequeue, the path
    // (path_index) for kPathDequeue and kAtLeaf.
    int port;
    PktBuf buf;
    bool operator>(const Event& o) const { return time != o.time ? time > o.time : seq > o.seq; }
  };
  struct Path {
    uint64_t free_ns = 0;  // when the path's queue is idle
    PathStats stats;
  };
  // One switch output queue, towards a host or onto a path: its state and counters, and the
  // events of a frame in it (at its head, when it marks on dequeue; out the other end).
  struct Queue {
    const EgressConfig& cfg;
    uint64_t& free_ns;
    uint64_t& dropped;
    uint64_t& marked;
    uint64_t& max_bytes;
    EventKind at_head, arrive;
    int index;
  };

  Buffer* get_buffer();
  void put_buffer(PktBuf& b);
  void schedule(uint64_t time, EventKind kind, int port, const PktBuf& buf);
  void on_transmit(SimPort& src, PktBuf b);
  void at_switch(int src, PktBuf b);
  int find_port(const uint8_t* mac) const;
  Queue host_queue(int port);
  Queue path_queue(int path);
  int path_index(int from_leaf, uint32_t path) const {
    return static_cast<int>(static_cast<uint32_t>(from_leaf) * fabric_.paths + path);
  }
  bool enqueue(const Queue& q, PktBuf f);  // false: tail-dropped
  void red_mark(const EgressConfig& e, uint64_t& marked, PktBuf& f, uint64_t backlog);
  bool deliver_due();
  PktBuf clone(const PktBuf& b);

  VirtualClock clock_;
  Rng rng_;
  std::vector<std::unique_ptr<SimPort>> ports_;
  std::vector<std::unique_ptr<uint8_t[]>> chunks_;
  std::vector<std::unique_ptr<Buffer[]>> buffer_chunks_;
  std::vector<Buffer*> free_;
  uint32_t total_buffers_ = 0;
  uint32_t max_buffers_;
  uint32_t buffer_bytes_;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events_;
  uint64_t seq_ = 0;
  std::vector<Actor> actors_;
  FabricConfig fabric_;
  std::vector<Path> paths_;  // path_index: empty without a fabric
};

}  // namespace roce::sim
