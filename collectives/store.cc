// The polling half of every store (wait, get), and the stores that need no network: HashStore
// (threads of one process), FileStore (a shared folder) and PrefixStore (a namespace).
#include "collectives/store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "collectives/error.h"

namespace roce::coll {

namespace {

using Clock = std::chrono::steady_clock;

// Sleeps a little longer each time: a key set right away is seen within tens of microseconds,
// and a long wait (a slow rank) costs a poll every 10 ms, not a busy core.
class Backoff {
 public:
  // A timeout over a year is taken as "forever", not as a deadline that overflows.
  explicit Backoff(std::chrono::milliseconds timeout)
      : deadline_(Clock::now() +
                  std::min(timeout, std::chrono::milliseconds(std::chrono::hours(24 * 365)))) {}
  // False once the deadline has passed (then there is no point in another look).
  bool sleep() {
    auto now = Clock::now();
    if (now >= deadline_) return false;
    std::this_thread::sleep_for(std::min<Clock::duration>(delay_, deadline_ - now));
    delay_ = std::min<Clock::duration>(delay_ * 2, std::chrono::milliseconds(10));
    return true;
  }

 private:
  Clock::time_point deadline_;
  Clock::duration delay_ = std::chrono::microseconds(50);
};

std::string errno_text(int err) { return std::strerror(err); }

[[noreturn]] void throw_system(const std::string& what, const std::string& path, int err) {
  throw Error(ErrorKind::kSystem, "rendezvous: " + what + " '" + path + "': " + errno_text(err));
}

}  // namespace

std::vector<std::string> Store::wait(const std::vector<std::string>& keys,
                                     std::chrono::milliseconds timeout) {
  std::vector<std::string> missing = keys;
  Backoff backoff(timeout);
  for (;;) {
    std::erase_if(missing, [this](const std::string& k) { return try_get(k).has_value(); });
    if (missing.empty() || !backoff.sleep()) return missing;
  }
}

Bytes Store::get(const std::string& key, std::chrono::milliseconds timeout) {
  Backoff backoff(timeout);
  for (;;) {
    if (auto value = try_get(key)) return std::move(*value);
    if (!backoff.sleep()) break;
  }
  throw Error(ErrorKind::kTimeout, "rendezvous: key '" + key + "' not set within " +
                                       std::to_string(timeout.count()) + " ms");
}

// ---- HashStore ----

struct HashStore::Shared {
  std::mutex mu;
  std::map<std::string, Bytes> values;
};

std::shared_ptr<HashStore::Shared> HashStore::make_shared() { return std::make_shared<Shared>(); }

HashStore::HashStore(std::shared_ptr<Shared> shared) : shared_(std::move(shared)) {
  if (!shared_) throw Error(ErrorKind::kInvalidArgument, "HashStore: no shared state given");
}

void HashStore::set(const std::string& key, const Bytes& value) {
  std::lock_guard lock(shared_->mu);
  shared_->values.insert_or_assign(key, value);
}

std::optional<Bytes> HashStore::try_get(const std::string& key) {
  std::lock_guard lock(shared_->mu);
  auto it = shared_->values.find(key);
  if (it == shared_->values.end()) return std::nullopt;
  return it->second;
}

// ---- FileStore ----

namespace {

// mkdir -p: every missing folder on the way is made; one that exists (made by another rank at
// the same moment, say) is fine as long as it is a folder.
void make_dirs(const std::string& dir) {
  for (size_t pos = 1;; ++pos) {
    pos = dir.find('/', pos);
    std::string part = dir.substr(0, pos);
    if (!part.empty() && ::mkdir(part.c_str(), 0777) != 0 && errno != EEXIST) {
      throw_system("cannot create the store folder", part, errno);
    }
    if (pos == std::string::npos) break;
  }
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) throw_system("cannot use the store folder", dir, errno);
  if (!S_ISDIR(st.st_mode)) throw_system("cannot use the store folder", dir, ENOTDIR);
}

uint64_t fnv1a(const std::string& s, uint64_t h) {
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// Keys may hold '/', '.', spaces or anything else; a file name gets only letters, digits, '-'
// and '_', the rest as %XX. So "..", "a/b" and "" are all plain names inside the folder, and
// no key's file starts with '.', which the temporary files use. A name over a file system's
// 255 bytes is cut, and two 64-bit hashes of the whole key follow the '~' (never in a short
// name): keys that differ only at their end still have their own files.
std::string encode_key(const std::string& key) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out = "k";  // never empty, never "." or ".."
  for (unsigned char c : key) {
    if (std::isalnum(c) || c == '-' || c == '_') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  if (out.size() <= 200) return out;
  out.resize(160);
  out += '~';
  for (uint64_t h : {fnv1a(key, 14695981039346656037ull), fnv1a(key, 0x9e3779b97f4a7c15ull)}) {
    for (int shift = 60; shift >= 0; shift -= 4) out += kHex[(h >> shift) & 15];
  }
  return out;
}

// Unique among the processes sharing the folder, on this host and others (equal pids too).
const std::string& process_tag() {
  static const std::string tag = [] {
    std::random_device rd;
    return std::to_string(::getpid()) + "." + std::to_string(rd()) + std::to_string(rd());
  }();
  return tag;
}

// 0, or the errno of the failure.
int write_all(int fd, const Bytes& value) {
  size_t done = 0;
  while (done < value.size()) {
    ssize_t n = ::write(fd, value.data() + done, value.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    done += static_cast<size_t>(n);
  }
  return 0;
}

Bytes read_all(int fd, const std::string& path) {
  Bytes out;
  uint8_t chunk[65536];
  for (;;) {
    ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw_system("cannot read", path, errno);
    if (n == 0) return out;
    out.insert(out.end(), chunk, chunk + n);
  }
}

// Closes the descriptor however the scope is left.
struct FdCloser {
  int fd;
  ~FdCloser() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

FileStore::FileStore(std::string dir) : dir_(std::move(dir)) {
  if (dir_.empty()) throw Error(ErrorKind::kInvalidArgument, "FileStore: empty folder name");
  while (dir_.size() > 1 && dir_.back() == '/') dir_.pop_back();
  make_dirs(dir_);
}

std::string FileStore::path_of(const std::string& key) const {
  return dir_ + "/" + encode_key(key);
}

// Written under a name no reader looks at, then renamed: a reader sees the whole value or none.
// The temporary name is unique across the threads and processes that share the folder.
void FileStore::set(const std::string& key, const Bytes& value) {
  static std::atomic<uint64_t> counter{0};
  std::string path = path_of(key);
  std::string tmp = dir_ + "/.tmp." + process_tag() + "." + std::to_string(counter.fetch_add(1));
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) throw_system("cannot create", tmp, errno);
  int err = write_all(fd, value);
  if (::close(fd) != 0 && err == 0) err = errno;  // NFS may report a failed write only here
  if (err != 0) {
    ::unlink(tmp.c_str());
    throw_system("cannot write", tmp, err);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    err = errno;
    ::unlink(tmp.c_str());
    throw_system("cannot rename a value to", path, err);
  }
}

std::optional<Bytes> FileStore::try_get(const std::string& key) {
  std::string path = path_of(key);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return std::nullopt;
    throw_system("cannot open", path, errno);
  }
  FdCloser closer{fd};
  return read_all(fd, path);
}

// ---- PrefixStore ----

PrefixStore::PrefixStore(std::shared_ptr<Store> base, std::string prefix)
    : base_(std::move(base)), prefix_(std::move(prefix) + "/") {
  if (!base_) throw Error(ErrorKind::kInvalidArgument, "PrefixStore: no base store given");
}

void PrefixStore::set(const std::string& key, const Bytes& value) {
  base_->set(prefix_ + key, value);
}

std::optional<Bytes> PrefixStore::try_get(const std::string& key) {
  return base_->try_get(prefix_ + key);
}

}  // namespace roce::coll
