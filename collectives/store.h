// Rendezvous stores: a small key-value service that ranks use to find each other (Gloo's
// shape). A value, once set, is never changed. Three kinds:
//   HashStore  - in one process (tests: ranks as threads);
//   FileStore  - a folder every rank can reach (a shared file system);
//   TcpStore   - rank 0 serves at MASTER_ADDR:MASTER_PORT, the others connect (torchrun's env://).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace roce::coll {

using Bytes = std::vector<uint8_t>;

class Store {
 public:
  virtual ~Store() = default;
  virtual void set(const std::string& key, const Bytes& value) = 0;
  // The value if the key is set now; never blocks for long.
  virtual std::optional<Bytes> try_get(const std::string& key) = 0;

  // Waits until every key is set or `timeout` passed; returns the keys still missing then
  // (empty: all there). Polls try_get with a short back-off.
  std::vector<std::string> wait(const std::vector<std::string>& keys,
                                std::chrono::milliseconds timeout);
  // The value, waiting up to `timeout`; throws Error(kTimeout) naming the key.
  Bytes get(const std::string& key, std::chrono::milliseconds timeout);
};

// Keys shared by the stores made from one HashStore::Shared (one per test).
class HashStore : public Store {
 public:
  struct Shared;
  static std::shared_ptr<Shared> make_shared();
  explicit HashStore(std::shared_ptr<Shared> shared);
  void set(const std::string& key, const Bytes& value) override;
  std::optional<Bytes> try_get(const std::string& key) override;

 private:
  std::shared_ptr<Shared> shared_;
};

class FileStore : public Store {
 public:
  // Creates `dir` if missing. A value is written to a temporary file and renamed into place.
  explicit FileStore(std::string dir);
  void set(const std::string& key, const Bytes& value) override;
  std::optional<Bytes> try_get(const std::string& key) override;

 private:
  std::string path_of(const std::string& key) const;
  std::string dir_;
};

class TcpStore : public Store {
 public:
  // is_server: listen on host:port (rank 0) and serve until destroyed; otherwise connect,
  // retrying a refused connection until `timeout` (rank 0 may start later). Throws Error
  // (kSystem / kTimeout) with the address and the reason.
  TcpStore(const std::string& host, uint16_t port, bool is_server,
           std::chrono::milliseconds timeout);
  ~TcpStore() override;
  void set(const std::string& key, const Bytes& value) override;
  std::optional<Bytes> try_get(const std::string& key) override;

 private:
  struct Server;
  std::unique_ptr<Server> server_;
  std::string address_;  // host:port, for the errors
  std::mutex mu_;        // one request at a time on fd_, whichever thread sends it
  int fd_ = -1;          // the connection to the server (the server's own rank connects too)
};

// A store whose keys are those of `base` with `prefix` before them (one per communicator, so
// split communicators and repeated ones do not collide).
class PrefixStore : public Store {
 public:
  PrefixStore(std::shared_ptr<Store> base, std::string prefix);
  void set(const std::string& key, const Bytes& value) override;
  std::optional<Bytes> try_get(const std::string& key) override;
  const std::shared_ptr<Store>& base() const { return base_; }

 private:
  std::shared_ptr<Store> base_;
  std::string prefix_;
};

}  // namespace roce::coll
