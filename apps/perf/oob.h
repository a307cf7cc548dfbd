// perftest's out-of-band exchange over TCP (the "Ethernet" data exchange method, i.e. without
// rdma_cm), byte for byte, so that roce-perf and a real perftest can face each other.
// References: perftest 6.06 src/perftest_communication.c -- ethernet_client_connect /
// ethernet_server_connect (IPv4 TCP, port 18515), ctx_hand_shake (client writes first, server
// reads first), ethernet_write_keys / ethernet_read_keys (KEY_PRINT_FMT_GID, 108 bytes),
// exchange_versions (16 bytes), check_sys_data (two big-endian ints), check_mtu (2 ASCII
// bytes), xchg_bw_reports (five 8-byte big-endian values), ctx_close_connection ("done").
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "stack/core/types.h"

namespace roce::perf {

// perftest's struct pingpong_dest, as it travels.
struct KeyMessage {
  uint32_t lid = 0;
  uint32_t out_reads = 0;
  uint32_t qpn = 0;
  uint32_t psn = 0;
  uint32_t rkey = 0;
  uint64_t vaddr = 0;
  Gid gid{};
  uint32_t srqn = 0;
};
inline constexpr size_t kKeyMessageSize = 108;  // KEY_MSG_SIZE_GID, with the trailing NUL

// "%04x:%04x:%06x:%06x:%08x:%016llx:" 16 x "%02x:" "%08x:" + NUL.
std::string format_key_message(const KeyMessage& k);
// Parses the 108 bytes of a key message; false on anything malformed.
bool parse_key_message(const char* buf, size_t len, KeyMessage* out);

// The 16-byte version message: "6.06" NUL-padded, as perftest's strncpy leaves it. roce-perf
// puts a marker, the revision of its own records (--verify's) and its flags in the padding
// (perftest reads it with atof, which stops at the NUL), so two roce-perfs know each other and
// agree on --verify.
struct VersionInfo {
  std::string version;  // "6.06"
  bool roce_perf = false;
  bool verify = false;
  int revision = 0;  // a roce-perf peer's kRocePerfRevision
};
// 2: --verify's first record carries the number of sizes.
inline constexpr int kRocePerfRevision = 2;
inline constexpr size_t kVersionSize = 16;
void format_version(const VersionInfo& v, uint8_t out[kVersionSize]);
VersionInfo parse_version(const uint8_t in[kVersionSize]);

// The largest cycle buffer and cache line roce-perf takes from a peer. perftest sends its page
// size (sysconf(_SC_PAGESIZE): 4 KiB on x86, 16 or 64 KiB on arm64 and ppc64, at most 256 KiB
// on any Linux) and its L1 cache line (64, 128 or 256 bytes); a value beyond these is not a
// machine's, and would make us allocate and register that much per QP.
inline constexpr uint32_t kMaxCycleBuffer = 1u << 20;
inline constexpr uint32_t kMaxCacheLine = 4096;

// perftest's struct bw_report_data as exchanged (remote version >= 5.33: 64-bit iters).
struct BwReport {
  uint64_t size = 0;
  uint64_t iters = 0;
  double bw_peak = 0;
  double bw_avg = 0;
  double msg_rate = 0;
};

// Whether the peer is gone: what StallWatch (perf_test.h) asks besides the link.
class PeerState {
 public:
  virtual bool peer_left() const = 0;

 protected:
  ~PeerState() = default;
};

// One TCP connection to the peer, with every wait bounded by a deadline.
class OobChannel : public PeerState {
 public:
  OobChannel() = default;
  ~OobChannel();
  OobChannel(const OobChannel&) = delete;
  OobChannel& operator=(const OobChannel&) = delete;

  // Server: listens on 0.0.0.0:port (SO_REUSEADDR) and accepts one client. Client: connects to
  // host:port, retrying a refused connection until the timeout (the server may start later).
  bool accept_one(int port, double timeout_s, std::string* err);
  bool connect_to(const std::string& host, int port, double timeout_s, std::string* err);
  bool is_client() const { return client_; }
  // The peer closed the connection (a peer that stops on an error closes it; perftest keeps it
  // open until both sides are done): no wait, nothing read.
  bool peer_left() const override;
  // Whether a read would find something (data, or the end of the stream) now: no wait.
  bool readable() const;
  void set_timeout(double s) { timeout_s_ = s; }
  // While waiting, call fn(ctx) between non-blocking polls instead of sleeping: an engine that
  // runs inline must keep running (answering ARP, receiving the peer's RDMA) while this side
  // waits for its peer on TCP.
  void set_progress(void (*fn)(void*), void* ctx) {
    progress_ = fn;
    progress_ctx_ = ctx;
  }

  // Whole-buffer I/O, each call bounded by the timeout; false with *err on error, timeout,
  // interruption or a closed peer.
  bool write_all(const void* buf, size_t len, std::string* err);
  bool read_all(void* buf, size_t len, std::string* err);
  // ctx_xchg_data: the client writes then reads, the server reads then writes.
  bool exchange(const void* mine, void* theirs, size_t len, std::string* err);

  // ctx_hand_shake with a key message.
  bool hand_shake(const KeyMessage& mine, KeyMessage* theirs, std::string* err);
  bool exchange_versions(const VersionInfo& mine, VersionInfo* theirs, std::string* err);
  // check_sys_data: both values as 4-byte big-endian ints; each side keeps the larger. The
  // peer's must be powers of two, its cache line no larger than its cycle buffer, and both
  // below kMaxCycleBuffer / kMaxCacheLine (they size our buffers and divide our strides).
  bool exchange_sys_data(int* cycle_buffer, int* cache_line_size, std::string* err);
  // check_mtu: the IB MTU enum as "%d" in 2 bytes; returns min(local, valid remote).
  bool exchange_mtu(Mtu local, Mtu* chosen, std::string* err);
  bool exchange_bw_reports(const BwReport& mine, BwReport* theirs, std::string* err);
  // ctx_close_connection: a last hand shake, then "done". The connection stays open for
  // finish().
  bool close_connection(const KeyMessage& mine, std::string* err);
  // The end of a run, once this process no longer touches the link (Transport::quiesce):
  // closes our half of the connection, which tells the peer so, and waits up to timeout_s for
  // the peer's half to close (roce-perf closes it at the same point; perftest right after
  // "done"), then closes. So neither side stops its port while the other still polls it: when a
  // net_memif port stops, DPDK's memif_disconnect unmaps the shared rings on the peer's
  // interrupt thread, under whatever rx_burst / tx_burst the peer is in.
  void finish(double timeout_s);
  void close();

 private:
  void run_progress();
  // Waits until the socket is ready for `events` (POLLIN / POLLOUT), running the progress hook
  // meanwhile; false with *err once `deadline` passed (if `bounded`) or on an interruption.
  bool wait_ready(short events, bool bounded, std::chrono::steady_clock::time_point deadline,
                  std::string* err);

  int fd_ = -1;
  bool client_ = false;
  double timeout_s_ = 0;
  void (*progress_)(void*) = nullptr;
  void* progress_ctx_ = nullptr;
};

// Set by SIGINT/SIGTERM: every wait gives up with "interrupted".
void install_interrupt_handlers();
bool interrupted();
// After an interrupted run has cleaned up: the process dies of the signal it caught, as perftest
// does (so a shell sees 130 for Ctrl-C). Returns if nothing was caught.
void die_of_interrupt();

}  // namespace roce::perf
