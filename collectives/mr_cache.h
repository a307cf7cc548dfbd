// Registered memory for the collectives. A buffer the application registered
// (Communicator::register_memory, as ncclCommRegister) stays registered until it deregisters it,
// and any range inside it is served from that one registration. Any other buffer is registered
// for the duration of one operation and released after it (Gloo's way), since a freed and
// reused address cannot be told from the old one without hooking the allocator: on a NIC that
// pins pages, a stale registration would move the old pages' bytes. ROCE_COLL_REG_CACHE=1
// keeps those too, for applications that promise not to free their buffers.
#pragma once

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

namespace roce::coll {

struct Keys {
  uint32_t lkey = 0;
  uint32_t rkey = 0;
};

class MrCache {
 public:
  MrCache(ibv_pd* pd, bool keep_implicit) : pd_(pd), keep_implicit_(keep_implicit) {}
  ~MrCache();
  MrCache(const MrCache&) = delete;
  MrCache& operator=(const MrCache&) = delete;

  // Keys for [p, p + n); registers it (whole pages) if no registration covers it. Throws
  // Error(kSystem) that says when the locked-memory limit is the likely cause and how to raise it.
  Keys keys(const void* p, size_t n);
  // Registers [p, p + n) until deregister(p); returns false if it already was.
  bool register_memory(const void* p, size_t n);
  bool deregister_memory(const void* p);
  // Ends an operation: releases the registrations it made implicitly (unless kept).
  void release_implicit();

 private:
  using Map = std::map<uintptr_t, ibv_mr*>;  // keyed by the registered range's start
  static ibv_mr* covering(const Map& m, uintptr_t a, size_t n);
  ibv_mr* reg(const void* p, size_t n);

  ibv_pd* pd_;
  bool keep_implicit_;
  Map persistent_;
  Map implicit_;
  std::vector<ibv_mr*> to_release_;
};

}  // namespace roce::coll
