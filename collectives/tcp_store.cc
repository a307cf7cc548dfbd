// TcpStore: rank 0 serves a key-value map over TCP from one thread (a poll(2) loop), every rank
// (rank 0 too) is a client with one connection.
//
// Wire format, integers big-endian:
//   request  op u8 (1 SET, 2 GET), key length u32, key, value length u32, value (GET: empty)
//   reply    SET: ok u8 (1)    GET: found u8, value length u32, value (empty if not found)
// A client sends one request and reads its reply before the next. The server drops a
// connection that sends anything else (unknown op, a length over 64 MiB, EOF mid-message)
// without stopping: a stray port scanner or a crashed rank must not take the job's store down.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <thread>

#include "collectives/error.h"
#include "collectives/store.h"

namespace roce::coll {

namespace {

using Clock = std::chrono::steady_clock;

constexpr uint32_t kMaxLen = 64u << 20;  // a key or a value; the rest is taken for garbage
constexpr auto kForever = std::chrono::hours(24 * 365);  // longer timeouts do not overflow
constexpr uint8_t kOpSet = 1;
constexpr uint8_t kOpGet = 2;

std::string format_address(const std::string& host, uint16_t port) {
  bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

void put_u32(Bytes& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<uint8_t>(v >> shift));
}

uint32_t get_u32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

using AddrList = std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)>;

// Literals (IPv4, IPv6) and host names alike. `passive` with an empty host: every interface.
// A temporary resolver failure (EAI_AGAIN) returns null, for the caller to try again.
AddrList resolve(const std::string& host, uint16_t port, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  addrinfo* list = nullptr;
  std::string service = std::to_string(port);
  int rc = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &list);
  if (rc == EAI_AGAIN) return AddrList(nullptr, ::freeaddrinfo);
  if (rc != 0) {
    throw Error(ErrorKind::kSystem, "rendezvous: cannot resolve the store's host '" + host +
                                        "': " + ::gai_strerror(rc));
  }
  return AddrList(list, ::freeaddrinfo);
}

// ---- the server's side of the protocol ----

struct Request {
  uint8_t op = 0;
  std::string key;
  Bytes value;
};

enum class Parse { kIncomplete, kDone, kBad };

// One request from the front of p[0, n); `used` is its length when kDone. A bad op or length is
// refused as soon as its bytes arrive, not after waiting for 4 GiB that will never come.
Parse parse_request(const uint8_t* p, size_t n, Request& req, size_t& used) {
  if (n >= 1 && p[0] != kOpSet && p[0] != kOpGet) return Parse::kBad;
  if (n < 5) return Parse::kIncomplete;
  uint32_t klen = get_u32(p + 1);
  if (klen > kMaxLen) return Parse::kBad;
  if (n < 9 + size_t{klen}) return Parse::kIncomplete;
  uint32_t vlen = get_u32(p + 5 + klen);
  if (vlen > kMaxLen || (p[0] == kOpGet && vlen != 0)) return Parse::kBad;
  used = 9 + size_t{klen} + vlen;
  if (n < used) return Parse::kIncomplete;
  req.op = p[0];
  req.key.assign(reinterpret_cast<const char*>(p + 5), klen);
  req.value.assign(p + 9 + klen, p + used);
  return Parse::kDone;
}

struct Conn {
  int fd = -1;
  Bytes in;  // received, not yet parsed (from in_off on)
  size_t in_off = 0;
  Bytes out;  // the reply not yet sent (from out_off on)
  size_t out_off = 0;
  bool sending() const { return out_off < out.size(); }
};

}  // namespace

struct TcpStore::Server {
  Server(const std::string& host, uint16_t port);
  ~Server();
  void run();
  void accept_all();
  bool receive(Conn& c);
  bool serve(Conn& c);
  bool flush(Conn& c);
  void handle(const Request& req, Bytes& reply);

  std::string address;
  int listen_fd = -1;
  int wake_fd = -1;  // an eventfd: the destructor's "stop"
  bool accept_paused = false;
  std::vector<Conn> conns;
  std::map<std::string, Bytes> values;  // the server thread's alone
  std::thread thread;
};

TcpStore::Server::Server(const std::string& host, uint16_t port)
    : address(format_address(host, port)) {
  AddrList list = resolve(host, port, /*passive=*/true);
  int err = 0;
  for (addrinfo* ai = list.get(); ai != nullptr && listen_fd < 0; ai = ai->ai_next) {
    int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    int one = 1;
    if (fd >= 0 && ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == 0 &&
        ::bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && ::listen(fd, 128) == 0) {
      listen_fd = fd;
    } else {
      err = errno;
      if (fd >= 0) ::close(fd);
    }
  }
  if (listen_fd < 0) {
    std::string why = list ? std::strerror(err) : "the resolver failed for now";
    std::string hint = err == EADDRINUSE ? " (another store or program has this port: pick "
                                           "another MASTER_PORT)"
                                         : "";
    throw Error(ErrorKind::kSystem,
                "rendezvous: cannot serve the store at " + address + ": " + why + hint);
  }
  wake_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd < 0) {
    int e = errno;
    ::close(listen_fd);
    throw Error(ErrorKind::kSystem,
                "rendezvous: eventfd for the store: " + std::string(std::strerror(e)));
  }
  try {
    thread = std::thread([this] { run(); });
  } catch (...) {
    ::close(listen_fd);
    ::close(wake_fd);
    throw;
  }
}

TcpStore::Server::~Server() {
  uint64_t one = 1;
  while (::write(wake_fd, &one, sizeof one) < 0 && errno == EINTR) {
  }
  thread.join();
  ::close(wake_fd);
}

void TcpStore::Server::run() {
  std::vector<pollfd> fds;
  for (;;) {
    fds.assign({{wake_fd, POLLIN, 0}, {listen_fd, accept_paused ? short{0} : short{POLLIN}, 0}});
    for (const Conn& c : conns) {
      fds.push_back({c.fd, c.sending() ? short{POLLOUT} : short{POLLIN}, 0});
    }
    // Out of descriptors: accept again after a pause instead of spinning on the listener.
    int n = ::poll(fds.data(), fds.size(), accept_paused ? 100 : -1);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 || (fds[0].revents & POLLIN) != 0) break;
    for (size_t i = 0; i < conns.size(); ++i) {
      short ev = fds[i + 2].revents;
      Conn& c = conns[i];
      bool ok = (ev & (POLLERR | POLLNVAL)) == 0;
      if (ok && (ev & POLLOUT) != 0) ok = serve(c);
      if (ok && (ev & (POLLIN | POLLHUP)) != 0) ok = receive(c) && serve(c);
      if (!ok) {
        ::close(c.fd);
        c.fd = -1;
      }
    }
    std::erase_if(conns, [](const Conn& c) { return c.fd < 0; });
    accept_paused = false;
    if ((fds[1].revents & POLLIN) != 0) accept_all();
  }
  for (Conn& c : conns) ::close(c.fd);
  conns.clear();
  ::close(listen_fd);  // connections still in the backlog are reset: their clients see an error
  listen_fd = -1;
}

void TcpStore::Server::accept_all() {
  for (;;) {
    int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        accept_paused = true;
      }
      return;  // EAGAIN (all taken), or a connection that went away before we took it
    }
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    conns.push_back(Conn{fd});
  }
}

// One read per wake-up, so one client sending a large value does not starve the others. None
// while a reply waits: a client that sends and never reads cannot make us buffer without bound.
bool TcpStore::Server::receive(Conn& c) {
  if (c.sending()) return true;
  uint8_t chunk[256 * 1024];
  ssize_t n = ::recv(c.fd, chunk, sizeof chunk, MSG_DONTWAIT);
  if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
  if (n == 0) return false;  // closed: between requests or in the middle of one
  c.in.insert(c.in.end(), chunk, chunk + n);
  return true;
}

// Answers the complete requests received, one at a time: the next is parsed only when the
// previous reply has left.
bool TcpStore::Server::serve(Conn& c) {
  try {
    for (;;) {
      if (!flush(c)) return false;
      if (c.sending()) return true;
      Request req;
      size_t used = 0;
      Parse r = parse_request(c.in.data() + c.in_off, c.in.size() - c.in_off, req, used);
      if (r == Parse::kBad) return false;
      if (r == Parse::kIncomplete) {
        c.in.erase(c.in.begin(), c.in.begin() + static_cast<ptrdiff_t>(c.in_off));
        c.in_off = 0;
        return true;
      }
      c.in_off += used;
      c.out.clear();
      c.out_off = 0;
      handle(req, c.out);
    }
  } catch (const std::bad_alloc&) {
    return false;  // this client's values do not fit: it goes, the store stays
  }
}

bool TcpStore::Server::flush(Conn& c) {
  while (c.sending()) {
    ssize_t n = ::send(c.fd, c.out.data() + c.out_off, c.out.size() - c.out_off,
                       MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK;
    c.out_off += static_cast<size_t>(n);
  }
  return true;
}

void TcpStore::Server::handle(const Request& req, Bytes& reply) {
  if (req.op == kOpSet) {
    values.insert_or_assign(req.key, req.value);
    reply.push_back(1);
    return;
  }
  auto it = values.find(req.key);
  reply.push_back(it != values.end() ? 1 : 0);
  put_u32(reply, it != values.end() ? static_cast<uint32_t>(it->second.size()) : 0);
  if (it != values.end()) reply.insert(reply.end(), it->second.begin(), it->second.end());
}

// ---- the client ----

namespace {

// TCP's simultaneous open: with no server yet, a client whose ephemeral port happens to be the
// store's port connects to itself, and would read its own requests back as replies.
bool connected_to_itself(int fd) {
  sockaddr_storage self{}, peer{};
  socklen_t self_len = sizeof self, peer_len = sizeof peer;
  return ::getsockname(fd, reinterpret_cast<sockaddr*>(&self), &self_len) == 0 &&
         ::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) == 0 &&
         self_len == peer_len && std::memcmp(&self, &peer, self_len) == 0;
}

// One attempt on one address, bounded by the deadline (a host that drops SYNs does not hold us
// past it). Returns the connected, blocking socket, or -1 with the reason in `err`.
int connect_once(const addrinfo* ai, Clock::time_point deadline, int& err) {
  int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    err = errno;
    return -1;
  }
  int rc = ::connect(fd, ai->ai_addr, ai->ai_addrlen);
  err = rc == 0 ? 0 : errno;
  if (rc != 0 && err == EINPROGRESS) {
    auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
    pollfd p{fd, POLLOUT, 0};
    int n = ::poll(&p, 1, static_cast<int>(std::clamp<int64_t>(left.count(), 1, 1 << 30)));
    socklen_t len = sizeof err;
    if (n <= 0) err = n == 0 ? ETIMEDOUT : errno;
    if (n > 0 && ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
  }
  int one = 1;
  if (err == 0 && (::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0 ||
                   ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0)) {
    err = errno;
  }
  if (err == 0 && connected_to_itself(fd)) err = ECONNREFUSED;
  if (err != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// The errors of a store that is not up yet (rank 0 starts later, or is still binding).
bool worth_retrying(int err) {
  return err == ECONNREFUSED || err == ETIMEDOUT || err == ECONNRESET || err == ECONNABORTED ||
         err == EHOSTUNREACH || err == ENETUNREACH || err == EINTR;
}

int connect_until(const std::string& host, uint16_t port, std::chrono::milliseconds timeout) {
  auto deadline = Clock::now() + std::min(timeout, std::chrono::milliseconds(kForever));
  auto pause = std::chrono::milliseconds(5);
  std::string why;  // of the last failure; not replaced by an attempt the deadline cut short
  for (;;) {
    int err = 0;
    AddrList list = resolve(host, port, /*passive=*/false);
    for (addrinfo* ai = list.get(); ai != nullptr; ai = ai->ai_next) {
      int fd = connect_once(ai, deadline, err);
      if (fd >= 0) return fd;
    }
    if (!list) why = "the resolver failed for now";
    if (list && (err != ETIMEDOUT || why.empty())) why = std::strerror(err);
    if (list && !worth_retrying(err)) {
      throw Error(ErrorKind::kSystem, "rendezvous: cannot reach the store at " +
                                          format_address(host, port) + ": " + why);
    }
    auto now = Clock::now();
    if (now >= deadline) {
      throw Error(ErrorKind::kTimeout, "rendezvous: could not reach the store at " +
                                           format_address(host, port) + " within " +
                                           std::to_string(timeout.count()) + " ms: " + why);
    }
    std::this_thread::sleep_for(std::min<Clock::duration>(pause, deadline - now));
    pause = std::min(pause * 2, std::chrono::milliseconds(200));
  }
}

// 0, or the errno of the failure (EPIPE if the peer closed).
int send_all(int fd, const Bytes& data) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    done += static_cast<size_t>(n);
  }
  return 0;
}

// 0, or the errno of the failure (ECONNRESET if the peer closed before `len` bytes came).
int recv_all(int fd, uint8_t* out, size_t len) {
  size_t done = 0;
  while (done < len) {
    ssize_t n = ::recv(fd, out + done, len - done, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    if (n == 0) return ECONNRESET;
    done += static_cast<size_t>(n);
  }
  return 0;
}

Bytes encode_request(uint8_t op, const std::string& key, const Bytes& value) {
  if (key.size() > kMaxLen || value.size() > kMaxLen) {
    throw Error(ErrorKind::kInvalidArgument,
                "rendezvous: key '" + key.substr(0, 64) + "' or its value is over 64 MiB");
  }
  Bytes out;
  out.reserve(9 + key.size() + value.size());
  out.push_back(op);
  put_u32(out, static_cast<uint32_t>(key.size()));
  out.insert(out.end(), key.begin(), key.end());
  put_u32(out, static_cast<uint32_t>(value.size()));
  out.insert(out.end(), value.begin(), value.end());
  return out;
}

// After a failed exchange the stream's position is unknown: the connection is closed, and
// every later call says so instead of reading someone else's reply.
[[noreturn]] void lose_connection(int& fd, const std::string& address, int err) {
  if (fd < 0) {
    throw Error(ErrorKind::kSystem, "rendezvous: the connection to the store at " + address +
                                        " was lost by an earlier call");
  }
  ::close(fd);
  fd = -1;
  throw Error(ErrorKind::kSystem,
              "rendezvous: lost the connection to the store at " + address + ": " +
                  (err == ECONNRESET || err == EPIPE ? "the store closed it" : std::strerror(err)));
}

}  // namespace

TcpStore::TcpStore(const std::string& host, uint16_t port, bool is_server,
                   std::chrono::milliseconds timeout)
    : address_(format_address(host, port)) {
  if (is_server) server_ = std::make_unique<Server>(host, port);
  fd_ = connect_until(host, port, timeout);
}

TcpStore::~TcpStore() {
  if (fd_ >= 0) ::close(fd_);
  server_.reset();  // stops the server thread, closing its clients' connections
}

void TcpStore::set(const std::string& key, const Bytes& value) {
  Bytes request = encode_request(kOpSet, key, value);
  std::lock_guard lock(mu_);
  if (fd_ < 0) lose_connection(fd_, address_, 0);
  if (int err = send_all(fd_, request)) lose_connection(fd_, address_, err);
  uint8_t ok = 0;
  if (int err = recv_all(fd_, &ok, 1)) lose_connection(fd_, address_, err);
  if (ok != 1) lose_connection(fd_, address_, EPROTO);
}

std::optional<Bytes> TcpStore::try_get(const std::string& key) {
  Bytes request = encode_request(kOpGet, key, {});
  std::lock_guard lock(mu_);
  if (fd_ < 0) lose_connection(fd_, address_, 0);
  if (int err = send_all(fd_, request)) lose_connection(fd_, address_, err);
  uint8_t head[5];
  if (int err = recv_all(fd_, head, sizeof head)) lose_connection(fd_, address_, err);
  uint32_t len = get_u32(head + 1);
  if (head[0] > 1 || len > kMaxLen || (head[0] == 0 && len != 0)) {
    lose_connection(fd_, address_, EPROTO);
  }
  if (head[0] == 0) return std::nullopt;
  Bytes value(len);
  if (int err = recv_all(fd_, value.data(), len)) lose_connection(fd_, address_, err);
  return value;
}

}  // namespace roce::coll
