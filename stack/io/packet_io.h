// The packet I/O interface between an engine and its port: bursts of frame buffers with
// headroom, the shape of rte_eth_rx_burst / rte_eth_tx_burst. Implementations: the simulator's
// in-memory port (stack/sim) and DPDK ports (dpdk/). One virtual call per burst, never per
// packet.
//
// Ownership (see stack/OWNERSHIP.md):
// - rx_burst hands the engine `n` buffers; the engine returns each with free() (in bulk) once it
//   has copied out what it needs. It never keeps an rx buffer across poll iterations.
// - alloc() gives the engine empty tx buffers; the engine writes a frame into one and sets
//   `len` (and `data` if the frame does not start at the buffer start).
// - tx_burst takes ownership of the first k buffers it returns; the engine still owns the rest
//   and either retries them later or frees them.
#pragma once

#include <cstdint>

namespace roce {

struct PktBuf {
  void* handle = nullptr;   // the implementation's buffer (an rte_mbuf*, a sim buffer ...)
  uint8_t* data = nullptr;  // first byte of the frame
  uint32_t len = 0;         // frame length in bytes
  uint32_t cap = 0;         // bytes available from `data` (tx buffers)
};

class PacketIo {
 public:
  virtual ~PacketIo() = default;
  virtual uint16_t rx_burst(PktBuf* bufs, uint16_t n) = 0;
  virtual uint16_t tx_burst(PktBuf* bufs, uint16_t n) = 0;
  // Fills up to n empty buffers (data at the buffer start, cap = capacity); returns how many.
  virtual uint16_t alloc(PktBuf* bufs, uint16_t n) = 0;
  virtual void free(PktBuf* bufs, uint16_t n) = 0;
  // Largest frame this port carries (Ethernet header to ICRC, no FCS).
  virtual uint32_t max_frame_len() const = 0;
  // Frames the receive ring holds before the port (or the kernel behind it) drops what arrives
  // while nobody polls; 0 if unknown or unbounded. The engine keeps what it may have in flight
  // toward itself within it (EngineConfig::port_inflight_psns).
  virtual uint32_t rx_ring_frames() const { return 0; }
};

}  // namespace roce
