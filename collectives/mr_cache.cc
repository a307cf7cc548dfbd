#include "collectives/mr_cache.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "collectives/error.h"

namespace roce::coll {
namespace {

constexpr int kAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

std::string memlock_hint() {
  rlimit r{};
  if (getrlimit(RLIMIT_MEMLOCK, &r) != 0 || r.rlim_cur == RLIM_INFINITY) return "";
  return "; the locked-memory limit (ulimit -l) is " + std::to_string(r.rlim_cur / 1024) +
         " KiB, which RDMA registration counts against: raise it (ulimit -l unlimited; memlock "
         "in /etc/security/limits.conf; LimitMEMLOCK=infinity for a systemd service; "
         "--ulimit memlock=-1 for a container)";
}

}  // namespace

MrCache::~MrCache() {
  for (auto* m : {&persistent_, &implicit_}) {
    for (auto& [a, mr] : *m) ibv_dereg_mr(mr);
  }
  for (ibv_mr* mr : to_release_) ibv_dereg_mr(mr);
}

ibv_mr* MrCache::covering(const Map& m, uintptr_t a, size_t n) {
  auto it = m.upper_bound(a);
  if (it == m.begin()) return nullptr;
  ibv_mr* mr = std::prev(it)->second;
  const uintptr_t start = reinterpret_cast<uintptr_t>(mr->addr);
  return a + n <= start + mr->length ? mr : nullptr;
}

ibv_mr* MrCache::reg(const void* p, size_t n) {
  static const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  const uintptr_t start = a & ~(page - 1);
  const uintptr_t end = (a + n + page - 1) & ~(page - 1);
  ibv_mr* mr = ibv_reg_mr(pd_, reinterpret_cast<void*>(start), end - start, kAccess);
  if (!mr) {
    const int err = errno;
    std::string hint = err == ENOMEM || err == EPERM || err == EAGAIN ? memlock_hint() : "";
    throw Error(ErrorKind::kSystem, "ibv_reg_mr(" + std::to_string(end - start) +
                                        " bytes): " + std::strerror(err) + hint);
  }
  return mr;
}

Keys MrCache::keys(const void* p, size_t n) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  ibv_mr* mr = covering(persistent_, a, n);
  if (!mr) mr = covering(implicit_, a, n);
  if (!mr) {
    mr = reg(p, n);
    auto [it, fresh] = implicit_.emplace(reinterpret_cast<uintptr_t>(mr->addr), mr);
    if (!fresh) {  // a smaller range at the same start: the new one covers more
      to_release_.push_back(it->second);
      it->second = mr;
    }
  }
  return {mr->lkey, mr->rkey};
}

bool MrCache::register_memory(const void* p, size_t n) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  if (persistent_.count(a)) return false;
  ibv_mr* mr = reg(p, n);
  // Keyed by the caller's pointer so deregister_memory finds it; covering() checks the range.
  persistent_.emplace(a, mr);
  return true;
}

bool MrCache::deregister_memory(const void* p) {
  auto it = persistent_.find(reinterpret_cast<uintptr_t>(p));
  if (it == persistent_.end()) return false;
  ibv_dereg_mr(it->second);
  persistent_.erase(it);
  return true;
}

void MrCache::release_implicit() {
  for (ibv_mr* mr : to_release_) ibv_dereg_mr(mr);
  to_release_.clear();
  if (keep_implicit_) return;
  for (auto& [a, mr] : implicit_) ibv_dereg_mr(mr);
  implicit_.clear();
}

}  // namespace roce::coll
