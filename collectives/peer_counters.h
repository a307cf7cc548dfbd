// What a communicator counts per peer about admission (Communicator::peer_counters(); the
// benchmark prints them). A public header: programs read these.
#pragma once

#include <cstdint>

namespace roce::coll {

struct PeerCounters {
  uint64_t grants_sent = 0;          // grants this rank wrote to the peer (as its receiver)
  uint64_t grants_received = 0;      // grants of the peer this rank wrote data into
  uint64_t bytes_sent = 0;           // data bytes written to the peer
  uint64_t grant_wait_ns = 0;        // time this rank had data for the peer, room, and no grant
  uint64_t peak_inflight_bytes = 0;  // most bytes written to the peer and not yet acknowledged
  uint64_t peak_granted_bytes = 0;   // most bytes granted to the peer and not yet landed
};

}  // namespace roce::coll
