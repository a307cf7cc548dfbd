#include "apps/perf/oob.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace roce::perf {

namespace {

std::atomic<int> g_signal{0};  // SIGINT or SIGTERM once caught

void on_signal(int sig) { g_signal.store(sig); }

using Clock = std::chrono::steady_clock;

// Milliseconds left until the deadline for poll(); -1 = no deadline. Waits are cut into
// slices of 200 ms so an interruption is noticed.
int slice_ms(bool bounded, Clock::time_point deadline) {
  if (!bounded) return 200;
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  if (left <= 0) return 0;
  return left < 200 ? static_cast<int>(left) : 200;
}

// A non-blocking connect bounded by the deadline (a blocking one may hang for minutes when the
// peer's address does not answer).
bool connect_within(int s, const sockaddr* a, socklen_t len, bool bounded,
                    Clock::time_point deadline, std::string* why) {
  if (::connect(s, a, len) == 0) return true;
  if (errno != EINPROGRESS) {
    *why = std::strerror(errno);
    return false;
  }
  for (;;) {
    if (interrupted()) {
      *why = "interrupted";
      return false;
    }
    const int ms = slice_ms(bounded, deadline);
    if (bounded && ms == 0) {
      if (why->empty()) *why = "no answer";
      return false;
    }
    pollfd p{s, POLLOUT, 0};
    if (poll(&p, 1, ms) > 0) break;
  }
  int err = 0;
  socklen_t elen = sizeof err;
  getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &elen);
  if (err) *why = std::strerror(err);
  return err == 0;
}

uint64_t swap64(uint64_t v) { return __builtin_bswap64(v); }

uint64_t double_bits(double d) {
  uint64_t u;
  std::memcpy(&u, &d, 8);
  return u;
}
double bits_double(uint64_t u) {
  double d;
  std::memcpy(&d, &u, 8);
  return d;
}

// Version padding marker: bytes 8..11 "rprf", byte 12 our protocol revision, byte 13 flags.
constexpr char kMarker[4] = {'r', 'p', 'r', 'f'};
constexpr uint8_t kFlagVerify = 1;

}  // namespace

void install_interrupt_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a peer that left shows up as EPIPE, not a signal
}

bool interrupted() { return g_signal.load(std::memory_order_relaxed) != 0; }

void die_of_interrupt() {
  const int sig = g_signal.load();
  if (!sig) return;
  std::fflush(nullptr);
  signal(sig, SIG_DFL);
  raise(sig);
}

std::string format_key_message(const KeyMessage& k) {
  char msg[kKeyMessageSize + 8];
  const Gid& g = k.gid;
  const int n = std::snprintf(
      msg, sizeof msg,
      "%04x:%04x:%06x:%06x:%08x:%016llx:%02x:%02x:%02x:%02x:%02x:%02x:%02x:%02x:%02x:%02x:%02x:"
      "%02x:%02x:%02x:%02x:%02x:%08x:",
      k.lid, k.out_reads, k.qpn, k.psn, k.rkey, static_cast<unsigned long long>(k.vaddr), g[0],
      g[1], g[2], g[3], g[4], g[5], g[6], g[7], g[8], g[9], g[10], g[11], g[12], g[13], g[14],
      g[15], k.srqn);
  std::string s(msg, static_cast<size_t>(n));
  s.resize(kKeyMessageSize, '\0');  // the NUL perftest's sizeof(msg) sends along
  return s;
}

bool parse_key_message(const char* buf, size_t len, KeyMessage* out) {
  // 23 ':'-terminated hex fields: lid, out_reads, qpn, psn, rkey, vaddr, 16 GID bytes, srqn.
  uint64_t f[23];
  size_t pos = 0;
  for (int i = 0; i < 23; ++i) {
    uint64_t v = 0;
    size_t digits = 0;
    while (pos < len && buf[pos] != ':') {
      const char c = buf[pos];
      int d;
      if (c >= '0' && c <= '9') {
        d = c - '0';
      } else if (c >= 'a' && c <= 'f') {
        d = c - 'a' + 10;
      } else if (c >= 'A' && c <= 'F') {
        d = c - 'A' + 10;
      } else {
        return false;
      }
      if (++digits > 16) return false;
      v = v << 4 | static_cast<uint64_t>(d);
      ++pos;
    }
    if (pos >= len || digits == 0) return false;
    ++pos;  // the ':'
    f[i] = v;
  }
  out->lid = static_cast<uint32_t>(f[0]);
  out->out_reads = static_cast<uint32_t>(f[1]);
  out->qpn = static_cast<uint32_t>(f[2]);
  out->psn = static_cast<uint32_t>(f[3]);
  out->rkey = static_cast<uint32_t>(f[4]);
  out->vaddr = f[5];
  for (int i = 0; i < 16; ++i) {
    if (f[6 + i] > 0xFF) return false;
    out->gid[static_cast<size_t>(i)] = static_cast<uint8_t>(f[6 + i]);
  }
  out->srqn = static_cast<uint32_t>(f[22]);
  return out->qpn <= 0xFFFFFF && out->psn <= 0xFFFFFF;
}

void format_version(const VersionInfo& v, uint8_t out[kVersionSize]) {
  std::memset(out, 0, kVersionSize);
  std::memcpy(out, v.version.data(), v.version.size() < 7 ? v.version.size() : 7);
  if (v.roce_perf) {
    std::memcpy(out + 8, kMarker, 4);
    out[12] = kRocePerfRevision;
    out[13] = v.verify ? kFlagVerify : 0;
  }
}

VersionInfo parse_version(const uint8_t in[kVersionSize]) {
  VersionInfo v;
  size_t n = 0;
  while (n < kVersionSize && in[n]) ++n;
  v.version.assign(reinterpret_cast<const char*>(in), n);
  if (n < 8 && std::memcmp(in + 8, kMarker, 4) == 0 && in[12] >= 1) {
    v.roce_perf = true;
    v.revision = in[12];
    v.verify = in[13] & kFlagVerify;
  }
  return v;
}

OobChannel::~OobChannel() { close(); }

void OobChannel::run_progress() {
  // Many engine polls per look at the socket: a system call per poll would throttle the
  // engine to the rate of system calls.
  if (!progress_) return;
  for (int i = 0; i < 256; ++i) progress_(progress_ctx_);
}

void OobChannel::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

bool OobChannel::peer_left() const {
  if (fd_ < 0) return false;
  pollfd p{fd_, POLLIN | POLLRDHUP, 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  if (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) return true;
  char c;
  return ::recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0;  // end of stream, nothing pending
}

bool OobChannel::readable() const {
  if (fd_ < 0) return false;
  pollfd p{fd_, POLLIN, 0};
  return ::poll(&p, 1, 0) > 0;
}

bool OobChannel::accept_one(int port, double timeout_s, std::string* err) {
  timeout_s_ = timeout_s;
  const int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (ls < 0) {
    *err = std::string("socket: ") + std::strerror(errno);
    return false;
  }
  int one = 1;
  setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  if (bind(ls, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(ls, 1) != 0) {
    *err = "Couldn't listen to port " + std::to_string(port) + ": " + std::strerror(errno);
    ::close(ls);
    return false;
  }
  const bool bounded = timeout_s > 0;
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(timeout_s));
  for (;;) {
    if (interrupted()) {
      *err = "interrupted while waiting for a client";
      ::close(ls);
      return false;
    }
    pollfd p{ls, POLLIN, 0};
    const int ms = slice_ms(bounded, deadline);
    if (bounded && ms == 0) {
      *err = "no client connected to port " + std::to_string(port) + " within " +
             std::to_string(static_cast<int>(timeout_s)) + " s";
      ::close(ls);
      return false;
    }
    if (poll(&p, 1, progress_ ? 0 : ms) > 0) break;
    run_progress();
  }
  fd_ = accept4(ls, nullptr, nullptr, SOCK_CLOEXEC);
  const int e = errno;
  ::close(ls);
  if (fd_ < 0) {
    *err = std::string("accept() failed: ") + std::strerror(e);
    return false;
  }
  setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  client_ = false;
  return true;
}

bool OobChannel::connect_to(const std::string& host, int port, double timeout_s, std::string* err) {
  timeout_s_ = timeout_s;
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  if (const int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &res); rc != 0) {
    *err = "cannot resolve '" + host + "': " + gai_strerror(rc);
    return false;
  }
  const bool bounded = timeout_s > 0;
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(timeout_s));
  std::string last;
  while (fd_ < 0) {
    for (addrinfo* t = res; t && fd_ < 0; t = t->ai_next) {
      const int s =
          socket(t->ai_family, t->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, t->ai_protocol);
      if (s < 0) continue;
      if (connect_within(s, t->ai_addr, t->ai_addrlen, bounded, deadline, &last)) {
        const int flags = fcntl(s, F_GETFL);
        fcntl(s, F_SETFL, flags & ~O_NONBLOCK);
        fd_ = s;
      } else {
        ::close(s);
      }
    }
    if (fd_ >= 0) break;
    // Retrying a refused connection makes starting both sides at once work; perftest gives up
    // at once, which is what --timeout 0 does.
    if (!bounded || Clock::now() >= deadline || interrupted()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  freeaddrinfo(res);
  if (fd_ < 0) {
    *err = "Couldn't connect to " + host + ":" + std::to_string(port) + " (" +
           (last.empty() ? "no answer" : last) + ")";
    return false;
  }
  int one = 1;
  setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  client_ = true;
  return true;
}

bool OobChannel::wait_ready(short events, bool bounded, Clock::time_point deadline,
                            std::string* err) {
  for (;;) {
    if (interrupted()) {
      *err = "interrupted";
      return false;
    }
    const int ms = slice_ms(bounded, deadline);
    if (bounded && ms == 0) {
      *err = std::string(events == POLLIN ? "the peer did not answer"
                                          : "the peer did not take our data") +
             " within " + std::to_string(static_cast<int>(timeout_s_)) + " s";
      return false;
    }
    pollfd pf{fd_, events, 0};
    if (poll(&pf, 1, progress_ ? 0 : ms) > 0) return true;
    run_progress();
  }
}

bool OobChannel::write_all(const void* buf, size_t len, std::string* err) {
  const auto* p = static_cast<const uint8_t*>(buf);
  const bool bounded = timeout_s_ > 0;
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(timeout_s_));
  while (len) {
    if (!wait_ready(POLLOUT, bounded, deadline, err)) return false;
    // MSG_DONTWAIT: the socket blocks, and room for some bytes may be less than `len`.
    const ssize_t n = send(fd_, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      *err = std::string("exchange with the peer failed: ") + std::strerror(errno);
      return false;
    }
    p += n;
    len -= static_cast<size_t>(n);
  }
  return true;
}

bool OobChannel::read_all(void* buf, size_t len, std::string* err) {
  auto* p = static_cast<uint8_t*>(buf);
  const bool bounded = timeout_s_ > 0;
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(timeout_s_));
  while (len) {
    if (!wait_ready(POLLIN, bounded, deadline, err)) return false;
    const ssize_t n = recv(fd_, p, len, 0);
    if (n == 0) {
      *err = "the peer closed the connection";
      return false;
    }
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      *err = std::string("exchange with the peer failed: ") + std::strerror(errno);
      return false;
    }
    p += n;
    len -= static_cast<size_t>(n);
  }
  return true;
}

bool OobChannel::exchange(const void* mine, void* theirs, size_t len, std::string* err) {
  if (client_) return write_all(mine, len, err) && read_all(theirs, len, err);
  return read_all(theirs, len, err) && write_all(mine, len, err);
}

bool OobChannel::hand_shake(const KeyMessage& mine, KeyMessage* theirs, std::string* err) {
  const std::string out = format_key_message(mine);
  char in[kKeyMessageSize];
  if (!exchange(out.data(), in, kKeyMessageSize, err)) return false;
  if (!parse_key_message(in, kKeyMessageSize, theirs)) {
    *err = "cannot parse the peer's address message <" +
           std::string(in, strnlen(in, kKeyMessageSize)) + ">";
    return false;
  }
  return true;
}

bool OobChannel::exchange_versions(const VersionInfo& mine, VersionInfo* theirs, std::string* err) {
  uint8_t out[kVersionSize], in[kVersionSize];
  format_version(mine, out);
  if (!exchange(out, in, kVersionSize, err)) return false;
  *theirs = parse_version(in);
  return true;
}

bool OobChannel::exchange_sys_data(int* cycle_buffer, int* cache_line_size, std::string* err) {
  uint32_t mine = htonl(static_cast<uint32_t>(*cycle_buffer)), theirs = 0;
  if (!exchange(&mine, &theirs, 4, err)) return false;
  const uint32_t rem_cycle = ntohl(theirs);
  mine = htonl(static_cast<uint32_t>(*cache_line_size));
  if (!exchange(&mine, &theirs, 4, err)) return false;
  const uint32_t rem_line = ntohl(theirs);
  // perftest takes them unchecked; we size buffers by them and divide by them.
  const auto sane = [err](const char* what, uint32_t v, uint32_t max) {
    const bool pow2 = v && (v & (v - 1)) == 0;
    if (pow2 && v <= max) return true;
    *err = std::string("the peer's ") + what + " " + std::to_string(v) +
           (pow2 ? " is above " + std::to_string(max) + ", the most roce-perf takes"
                 : std::string(" is not a power of two"));
    return false;
  };
  if (!sane("cycle buffer", rem_cycle, kMaxCycleBuffer) ||
      !sane("cache line size", rem_line, kMaxCacheLine)) {
    return false;
  }
  if (rem_line > rem_cycle) {
    *err = "the peer's cache line size " + std::to_string(rem_line) +
           " is larger than its cycle buffer " + std::to_string(rem_cycle);
    return false;
  }
  if (static_cast<int>(rem_cycle) > *cycle_buffer) *cycle_buffer = static_cast<int>(rem_cycle);
  if (static_cast<int>(rem_line) > *cache_line_size) *cache_line_size = static_cast<int>(rem_line);
  return true;
}

bool OobChannel::exchange_mtu(Mtu local, Mtu* chosen, std::string* err) {
  char out[2] = {static_cast<char>('0' + static_cast<int>(local)), '\0'};
  char in[3] = {0, 0, 0};
  if (!exchange(out, in, 2, err)) return false;
  const long rem = std::strtol(in, nullptr, 10);
  *chosen = local;
  if (rem >= 1 && rem <= 5 && rem < static_cast<long>(local)) *chosen = static_cast<Mtu>(rem);
  return true;
}

bool OobChannel::exchange_bw_reports(const BwReport& mine, BwReport* theirs, std::string* err) {
  // Each field is its own exchange, in perftest's order.
  const uint64_t out[5] = {swap64(mine.size), swap64(mine.iters), swap64(double_bits(mine.bw_peak)),
                           swap64(double_bits(mine.bw_avg)), swap64(double_bits(mine.msg_rate))};
  uint64_t in[5];
  for (int i = 0; i < 5; ++i) {
    if (!exchange(&out[i], &in[i], 8, err)) return false;
  }
  theirs->size = swap64(in[0]);
  theirs->iters = swap64(in[1]);
  theirs->bw_peak = bits_double(swap64(in[2]));
  theirs->bw_avg = bits_double(swap64(in[3]));
  theirs->msg_rate = bits_double(swap64(in[4]));
  return true;
}

bool OobChannel::close_connection(const KeyMessage& mine, std::string* err) {
  KeyMessage theirs;
  if (!hand_shake(mine, &theirs, err)) return false;
  // perftest writes "done" and closes without reading: the peer may be gone already.
  static const char kDone[] = "done";
  (void)send(fd_, kDone, sizeof kDone, MSG_NOSIGNAL);
  return true;
}

void OobChannel::finish(double timeout_s) {
  if (fd_ < 0) return;
  ::shutdown(fd_, SHUT_WR);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  char buf[64];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    if (left <= 0) break;
    pollfd p{fd_, POLLIN, 0};
    const int r = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, 100)));
    if (r < 0 && errno != EINTR) break;
    if (r <= 0) continue;
    const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);  // "done", then the end of the stream
    if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) break;
  }
  close();
}

}  // namespace roce::perf
