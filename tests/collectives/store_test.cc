// Rendezvous stores (collectives/store.h): what every store must do, run over the three kinds
// with ranks as threads, then what is particular to FileStore's names and TcpStore's server:
// clients that come early, a server that refuses, goes away, or is sent garbage.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "collectives/error.h"
#include "collectives/store.h"

namespace roce::coll {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

constexpr auto kLong = 20s;  // waits meant to succeed: generous on a loaded machine

Bytes bytes(const std::string& s) { return Bytes(s.begin(), s.end()); }

// A port nothing listens on now: the kernel's pick for a socket bound to port 0.
uint16_t free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    ADD_FAILURE() << "no free port: " << std::strerror(errno);
  }
  ::close(fd);
  return ntohs(a.sin_port);
}

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "coll_store_XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) ADD_FAILURE() << "mkdtemp: " << std::strerror(errno);
    path_ = tmpl;
  }
  ~TempDir() { fs::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// The message of the Error `f` throws, checking its kind; "" if it throws none.
template <typename F>
std::string error_of(ErrorKind kind, F f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    return e.what();
  }
  return "";
}

// ---- every store ----

enum class Kind { kHash, kFile, kTcp };

// Each rank has its own store object, as each process would; for TcpStore rank 0's serves.
class EveryStore : public ::testing::TestWithParam<Kind> {
 protected:
  void SetUp() override {
    if (GetParam() == Kind::kTcp) {
      port_ = free_port();
      rank0_ = std::make_shared<TcpStore>("127.0.0.1", port_, true, kLong);
    }
  }

  std::shared_ptr<Store> store(int rank) {
    switch (GetParam()) {
      case Kind::kHash:
        return std::make_shared<HashStore>(shared_);
      case Kind::kFile:
        return std::make_shared<FileStore>(dir_.path() + "/store");
      case Kind::kTcp:
        return rank == 0 ? rank0_ : std::make_shared<TcpStore>("127.0.0.1", port_, false, kLong);
    }
    return nullptr;
  }

  std::shared_ptr<HashStore::Shared> shared_ = HashStore::make_shared();
  TempDir dir_;
  uint16_t port_ = 0;
  std::shared_ptr<Store> rank0_;
};

std::string kind_name(const ::testing::TestParamInfo<Kind>& info) {
  switch (info.param) {
    case Kind::kHash:
      return "Hash";
    case Kind::kFile:
      return "File";
    case Kind::kTcp:
      return "Tcp";
  }
  return "";
}

INSTANTIATE_TEST_SUITE_P(Kinds, EveryStore, ::testing::Values(Kind::kHash, Kind::kFile, Kind::kTcp),
                         kind_name);

TEST_P(EveryStore, AValueSetByOneRankIsSeenByAnother) {
  auto a = store(0);
  auto b = store(1);
  EXPECT_FALSE(b->try_get("k").has_value());
  a->set("k", bytes("value"));
  a->set("empty", {});
  a->set("binary", Bytes{0, 1, 0, 255});
  EXPECT_EQ(b->try_get("k"), bytes("value"));
  EXPECT_EQ(b->get("empty", std::chrono::milliseconds::max()), Bytes{});  // no overflow
  EXPECT_EQ(b->get("binary", kLong), (Bytes{0, 1, 0, 255}));
  EXPECT_FALSE(b->try_get("K").has_value());
}

TEST_P(EveryStore, EightRanksEachSetTheirKeyAndWaitForAllOthers) {
  constexpr int kRanks = 8;
  std::vector<std::string> keys;
  for (int r = 0; r < kRanks; ++r) keys.push_back("rank/" + std::to_string(r));
  std::vector<std::vector<std::string>> missing(kRanks);
  std::vector<std::vector<Bytes>> seen(kRanks);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      auto s = store(r);
      s->set(keys[r], bytes("addr of " + std::to_string(r)));
      missing[r] = s->wait(keys, kLong);
      for (const auto& k : keys) seen[r].push_back(s->get(k, kLong));
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_TRUE(missing[r].empty()) << "rank " << r;
    for (int o = 0; o < kRanks; ++o) EXPECT_EQ(seen[r][o], bytes("addr of " + std::to_string(o)));
  }
}

TEST_P(EveryStore, WaitReturnsExactlyTheKeysStillMissing) {
  auto s = store(0);
  s->set("a", bytes("1"));
  s->set("c", bytes("3"));
  auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(s->wait({"a", "b", "c", "d"}, 50ms), (std::vector<std::string>{"b", "d"}));
  EXPECT_GE(std::chrono::steady_clock::now() - start, 50ms);
  EXPECT_TRUE(s->wait({"a", "c"}, 0ms).empty());
  EXPECT_TRUE(s->wait({}, 0ms).empty());
}

TEST_P(EveryStore, GetTimesOutNamingTheKey) {
  auto s = store(1);
  EXPECT_EQ(error_of(ErrorKind::kTimeout, [&] { s->get("never/set", 30ms); }),
            "rendezvous: key 'never/set' not set within 30 ms");
}

TEST_P(EveryStore, AKeySetLaterWakesTheRankWaitingForIt) {
  auto waiter = store(1);
  std::thread late([&] {
    std::this_thread::sleep_for(30ms);
    store(0)->set("late", bytes("here"));
  });
  EXPECT_EQ(waiter->get("late", kLong), bytes("here"));
  late.join();
}

TEST_P(EveryStore, AMebibyteValueRoundTrips) {
  Bytes big(1 << 20);
  std::mt19937 rng(7);
  for (auto& b : big) b = static_cast<uint8_t>(rng());
  store(0)->set("big", big);
  EXPECT_EQ(store(1)->get("big", kLong), big);
}

TEST_P(EveryStore, PrefixStoresKeepTheirKeysApart) {
  auto base = store(0);
  PrefixStore one(base, "comm1");
  PrefixStore two(base, "comm2");
  one.set("k", bytes("1"));
  two.set("k", bytes("2"));
  EXPECT_EQ(one.get("k", kLong), bytes("1"));
  EXPECT_EQ(two.get("k", kLong), bytes("2"));
  EXPECT_FALSE(base->try_get("k").has_value());
  EXPECT_EQ(PrefixStore(store(1), "comm1").try_get("k"), bytes("1"));
  EXPECT_EQ(one.base(), base);
  EXPECT_EQ(one.wait({"k", "other"}, 10ms), std::vector<std::string>{"other"});
}

// ---- FileStore ----

TEST(FileStore, KeysOfAnyCharactersAreFilesInsideTheFolder) {
  TempDir tmp;
  std::string dir = tmp.path() + "/a/b/c";  // missing folders are made
  FileStore s(dir + "/");
  std::vector<std::string> keys = {"a/b", "../escape", "/", "", ".", "..", "%41", "A", "k", "%6B"};
  for (std::string odd : {"sp ace", "\xc3\xbc", "a\nb", ".tmp.1.2"}) keys.push_back(odd);
  // Longer than a file name may be; the two long ones differ only in their last byte.
  for (std::string long_key :
       {std::string(80, '/'), std::string(300, 'x') + "1", std::string(300, 'x') + "2"}) {
    keys.push_back(long_key);
  }
  for (size_t i = 0; i < keys.size(); ++i) s.set(keys[i], bytes(std::to_string(i)));
  FileStore other(dir);
  for (size_t i = 0; i < keys.size(); ++i) {
    EXPECT_EQ(other.try_get(keys[i]), bytes(std::to_string(i))) << keys[i];
  }
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    EXPECT_TRUE(e.is_regular_file()) << e.path();
    ++files;
  }
  EXPECT_EQ(files, keys.size());  // one each, and no temporary file left behind
  EXPECT_FALSE(fs::exists(tmp.path() + "/a/b/escape"));
  EXPECT_FALSE(fs::exists(tmp.path() + "/a/b/kescape"));
}

TEST(FileStore, AFolderThatCannotBeMadeIsAnErrorNamingIt) {
  TempDir tmp;
  std::string file = tmp.path() + "/file";
  std::ofstream(file) << "x";
  std::string err = error_of(ErrorKind::kSystem, [&] { FileStore s(file + "/sub"); });
  EXPECT_NE(err.find(file), std::string::npos) << err;
  EXPECT_NE(err.find(std::strerror(ENOTDIR)), std::string::npos) << err;
  err = error_of(ErrorKind::kSystem, [&] { FileStore s(file); });
  EXPECT_NE(err.find(std::strerror(ENOTDIR)), std::string::npos) << err;
}

TEST(FileStore, AStoreWhoseFolderWentAwayFailsNamingThePath) {
  TempDir tmp;
  FileStore s(tmp.path() + "/gone");
  fs::remove_all(tmp.path() + "/gone");
  std::string err = error_of(ErrorKind::kSystem, [&] { s.set("k", bytes("v")); });
  EXPECT_NE(err.find(tmp.path() + "/gone"), std::string::npos) << err;
  EXPECT_FALSE(s.try_get("k").has_value());
}

// ---- TcpStore ----

std::unique_ptr<TcpStore> server_at(uint16_t port) {
  return std::make_unique<TcpStore>("127.0.0.1", port, true, kLong);
}

std::unique_ptr<TcpStore> client_of(uint16_t port, std::chrono::milliseconds timeout = kLong) {
  return std::make_unique<TcpStore>("127.0.0.1", port, false, timeout);
}

TEST(TcpStore, ManyClientsInThreads) {
  uint16_t port = free_port();
  auto server = server_at(port);
  constexpr int kClients = 16;
  std::vector<std::thread> threads;
  std::vector<int> failures(kClients);
  for (int c = 0; c < kClients; ++c) {
    threads.emplace_back([&, c] {
      auto s = client_of(port);
      for (int i = 0; i < 20; ++i)
        s->set(std::to_string(c) + "/" + std::to_string(i), {uint8_t(i)});
      for (int o = 0; o < kClients; ++o) {
        for (int i = 0; i < 20; ++i) {
          failures[c] +=
              s->get(std::to_string(o) + "/" + std::to_string(i), kLong) != Bytes{uint8_t(i)};
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int c = 0; c < kClients; ++c) EXPECT_EQ(failures[c], 0) << "client " << c;
}

// One object, one connection, several threads: each gets its own reply, not another's.
TEST(TcpStore, OneClientSharedByThreads) {
  uint16_t port = free_port();
  auto server = server_at(port);
  auto shared = client_of(port);
  std::vector<std::thread> threads;
  std::vector<int> failures(8);
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 100; ++i) {
        std::string key = std::to_string(t) + "." + std::to_string(i);
        shared->set(key, bytes(key + std::string(size_t(i * 37), 'x')));
        failures[t] += shared->try_get(key) != bytes(key + std::string(size_t(i * 37), 'x'));
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int t = 0; t < 8; ++t) EXPECT_EQ(failures[t], 0) << "thread " << t;
}

TEST(TcpStore, AClientThatStartsBeforeTheServerWaitsForIt) {
  uint16_t port = free_port();
  std::optional<Bytes> got;
  std::thread early([&] { got = client_of(port)->get("ready", kLong); });
  std::this_thread::sleep_for(150ms);  // refused a few times meanwhile
  auto server = server_at(port);
  server->set("ready", bytes("yes"));
  early.join();
  EXPECT_EQ(got, bytes("yes"));
}

TEST(TcpStore, NoServerTimesOutWithTheAddressAndTheReason) {
  uint16_t port = free_port();
  auto start = std::chrono::steady_clock::now();
  std::string err = error_of(ErrorKind::kTimeout, [&] { client_of(port, 200ms); });
  EXPECT_GE(std::chrono::steady_clock::now() - start, 200ms);
  EXPECT_EQ(err, "rendezvous: could not reach the store at 127.0.0.1:" + std::to_string(port) +
                     " within 200 ms: Connection refused");
}

TEST(TcpStore, APortInUseIsRefusedNamingIt) {
  uint16_t port = free_port();
  auto first = server_at(port);
  std::string err = error_of(ErrorKind::kSystem, [&] { server_at(port); });
  EXPECT_NE(err.find("127.0.0.1:" + std::to_string(port) + ": Address already in use"),
            std::string::npos)
      << err;
  first->set("still", bytes("serving"));
  EXPECT_EQ(client_of(port)->try_get("still"), bytes("serving"));
}

TEST(TcpStore, HostNamesAndIpv6Literals) {
  uint16_t port = free_port();
  {
    TcpStore server("localhost", port, true, kLong);
    server.set("k", bytes("by name"));
    EXPECT_EQ(TcpStore("localhost", port, false, kLong).try_get("k"), bytes("by name"));
  }
  int probe = ::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_addr = in6addr_loopback;
  bool v6 = probe >= 0 && ::bind(probe, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  if (probe >= 0) ::close(probe);
  if (!v6) GTEST_SKIP() << "no IPv6 loopback here";
  TcpStore server("::1", port, true, kLong);
  server.set("k", bytes("v6"));
  EXPECT_EQ(TcpStore("::1", port, false, kLong).try_get("k"), bytes("v6"));
}

// ---- TcpStore's server against raw clients ----

// A connection that speaks the wire format by hand; replies are waited for 10 s at most.
class RawClient {
 public:
  explicit RawClient(uint16_t port) : fd_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    timeval tv{10, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    EXPECT_EQ(::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0) << std::strerror(errno);
  }
  ~RawClient() { ::close(fd_); }
  void send(const Bytes& b) { ::send(fd_, b.data(), b.size(), MSG_NOSIGNAL); }
  Bytes recv(size_t n) {
    Bytes out(n);
    size_t done = 0;
    while (done < n) {
      ssize_t r = ::recv(fd_, out.data() + done, n - done, 0);
      if (r <= 0) break;
      done += size_t(r);
    }
    out.resize(done);
    return out;
  }
  // True once the server has closed this connection (EOF or reset), false after 10 s without.
  bool closed_by_server() {
    uint8_t b;
    for (;;) {
      ssize_t r = ::recv(fd_, &b, 1, 0);
      if (r == 0 || (r < 0 && errno == ECONNRESET)) return true;
      if (r < 0) return false;
    }
  }

 private:
  int fd_;
};

Bytes request(uint8_t op, const std::string& key, const std::string& value) {
  Bytes out{op};
  auto put = [&](const std::string& s) {
    for (int shift = 24; shift >= 0; shift -= 8) out.push_back(uint8_t(s.size() >> shift));
    out.insert(out.end(), s.begin(), s.end());
  };
  put(key);
  put(value);
  return out;
}

TEST(TcpStoreServer, SpeaksTheDocumentedWireFormat) {
  uint16_t port = free_port();
  auto server = server_at(port);
  RawClient raw(port);
  raw.send(request(1, "key", "val"));
  EXPECT_EQ(raw.recv(1), Bytes{1});
  raw.send(request(2, "key", ""));
  EXPECT_EQ(raw.recv(8), (Bytes{1, 0, 0, 0, 3, 'v', 'a', 'l'}));
  raw.send(request(2, "nope", ""));
  EXPECT_EQ(raw.recv(5), (Bytes{0, 0, 0, 0, 0}));
  EXPECT_EQ(server->try_get("key"), bytes("val"));
}

TEST(TcpStoreServer, GarbageDropsOnlyItsOwnConnection) {
  uint16_t port = free_port();
  auto server = server_at(port);
  auto good = client_of(port);
  good->set("before", bytes("1"));
  RawClient idle(port);  // half a request, then silence: must not hold the others up
  idle.send(Bytes{1, 0, 0, 0, 10, 'a', 'b'});
  std::vector<Bytes> bad = {
      bytes("GET / HTTP/1.0\r\n\r\n"),            // unknown op
      Bytes{1, 0xff, 0xff, 0xff, 0xff, 'k'},      // key length over the limit
      Bytes{1, 0, 0, 0, 1, 'k', 0x04, 0, 0, 1},   // value length over the limit
      request(2, "k", "a GET carries no value"),  // malformed GET
      Bytes{0},                                   // op 0
  };
  for (const Bytes& b : bad) {
    RawClient raw(port);
    raw.send(b);
    EXPECT_TRUE(raw.closed_by_server()) << "garbage starting with " << int(b[0]);
    good->set("after", b);  // served between each
  }
  {
    RawClient leaves(port);  // gone in the middle of a large value
    Bytes half = request(1, "big", std::string(1 << 20, 'x'));
    half.resize(half.size() / 2);
    leaves.send(half);
  }
  EXPECT_EQ(client_of(port)->get("before", kLong), bytes("1"));
  EXPECT_FALSE(good->try_get("big").has_value());
  EXPECT_EQ(good->try_get("after"), Bytes{0});
}

// Rank 0 gone: the others' next call fails at once, naming the store, and so does every
// later one (the connection's position in the stream is lost).
TEST(TcpStoreServer, ClientsOfAServerThatIsGoneFailInsteadOfHanging) {
  uint16_t port = free_port();
  auto server = server_at(port);
  auto a = client_of(port);
  auto b = client_of(port);
  a->set("k", bytes("v"));
  server.reset();
  std::string where = "127.0.0.1:" + std::to_string(port);
  std::string err = error_of(ErrorKind::kSystem, [&] { a->set("k2", bytes("v")); });
  EXPECT_NE(err.find(where), std::string::npos) << err;
  err = error_of(ErrorKind::kSystem, [&] { b->try_get("k"); });
  EXPECT_NE(err.find(where), std::string::npos) << err;
  err = error_of(ErrorKind::kSystem, [&] { b->get("k", kLong); });
  EXPECT_NE(err.find(where), std::string::npos) << err;
}

}  // namespace
}  // namespace roce::coll
