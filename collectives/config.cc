#include "collectives/config.h"

#include <infiniband/verbs.h>

#include <charconv>
#include <initializer_list>
#include <string_view>
#include <utility>

#include "collectives/error.h"

namespace roce::coll {
namespace {

[[noreturn]] void refuse(const char* var, const std::string& value, const std::string& why) {
  throw Error(ErrorKind::kInvalidArgument, std::string(var) + "='" + value + "': " + why);
}

// An integer in [lo, hi] with an optional K / M / G suffix (powers of 1024) when `sized`.
int64_t parse_int(const char* var, const std::string& s, int64_t lo, int64_t hi,
                  bool sized = false) {
  int64_t v = 0;
  const char* end = s.data() + s.size();
  auto [p, ec] = std::from_chars(s.data(), end, v);
  if (ec != std::errc() || p == s.data()) refuse(var, s, "not an integer");
  if (sized && p + 1 == end) {
    const int shift = *p == 'K' || *p == 'k'   ? 10
                      : *p == 'M' || *p == 'm' ? 20
                      : *p == 'G'              ? 30
                                               : -1;
    if (shift < 0) refuse(var, s, "the only suffixes are K, M and G");
    if (v > (hi >> shift))
      v = hi + 1;  // out of range below, without overflowing
    else
      v <<= shift;
    ++p;
  }
  if (p != end) refuse(var, s, "not an integer");
  if (v < lo || v > hi) {
    refuse(var, s, "out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  return v;
}

bool parse_bool(const char* var, const std::string& s) {
  if (s == "1" || s == "yes" || s == "true" || s == "on") return true;
  if (s == "0" || s == "no" || s == "false" || s == "off") return false;
  refuse(var, s, "takes 1 or 0");
}

template <typename T>
void apply(const EnvLookup& env, const char* var, T& field, int64_t lo, int64_t hi,
           bool sized = false) {
  if (auto v = env(var)) field = static_cast<T>(parse_int(var, *v, lo, hi, sized));
}

// One of a few names; refused with the list ("takes a, b or c").
template <typename E>
void apply_choice(const EnvLookup& env, const char* var, E& field,
                  std::initializer_list<std::pair<const char*, E>> choices) {
  auto v = env(var);
  if (!v) return;
  std::string names;
  size_t i = 0;
  for (const auto& [name, value] : choices) {
    if (*v == name) {
      field = value;
      return;
    }
    names += (i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ") + std::string(name);
    ++i;
  }
  refuse(var, *v, "takes " + names);
}

void apply_ms(const EnvLookup& env, const char* var, std::chrono::milliseconds& field) {
  if (auto v = env(var)) {
    field = std::chrono::milliseconds(parse_int(var, *v, 1, int64_t{24} * 3600 * 1000));
  }
}

}  // namespace

int ibv_mtu_of_bytes(int bytes) {
  switch (bytes) {
    case 256:
      return IBV_MTU_256;
    case 512:
      return IBV_MTU_512;
    case 1024:
      return IBV_MTU_1024;
    case 2048:
      return IBV_MTU_2048;
    case 4096:
      return IBV_MTU_4096;
    default:
      return 0;
  }
}

CommOptions CommOptions::from_env(const EnvLookup& env) {
  CommOptions o;
  if (auto v = env("ROCE_COLL_DEVICE")) o.device = *v;
  apply(env, "ROCE_COLL_PORT", o.port, 1, 255);
  apply(env, "ROCE_COLL_GID_INDEX", o.gid_index, 0, 65535);
  if (auto v = env("ROCE_COLL_ALLOW_LINK_LOCAL")) {
    o.allow_link_local = parse_bool("ROCE_COLL_ALLOW_LINK_LOCAL", *v);
  }
  if (auto v = env("ROCE_COLL_MTU")) {
    o.mtu = static_cast<int>(parse_int("ROCE_COLL_MTU", *v, 256, 4096));
    if (!ibv_mtu_of_bytes(o.mtu)) refuse("ROCE_COLL_MTU", *v, "takes 256, 512, 1024, 2048 or 4096");
  }
  apply(env, "ROCE_COLL_HOP_LIMIT", o.hop_limit, 1, 255);
  apply(env, "ROCE_COLL_TC", o.traffic_class, 0, 255);
  apply(env, "ROCE_COLL_GRANT_TC", o.grant_traffic_class, -1, 255);
  apply(env, "ROCE_COLL_IB_TIMEOUT", o.ib_timeout, 1, 31);
  apply(env, "ROCE_COLL_RETRY_CNT", o.retry_count, 0, 6);  // 7 is infinite on rxe (config.h)
  apply(env, "ROCE_COLL_CHUNK", o.chunk_bytes, 256, int64_t{1} << 30, true);
  apply(env, "ROCE_COLL_SLOTS", o.slots, 2, 256);  // ring forwarding needs 2 (ring.cc)
  apply(env, "ROCE_COLL_GRANTS", o.grants, 0, 256);
  if (o.grants > o.slots) {
    refuse("ROCE_COLL_GRANTS", std::to_string(o.grants),
           "more than the " + std::to_string(o.slots) + " slots (ROCE_COLL_SLOTS)");
  }
  apply(env, "ROCE_COLL_QPS", o.qps_per_peer, 1, 16);
  apply_choice(env, "ROCE_COLL_QP_SPREAD", o.qp_spread,
               {{"rr", QpSpread::kRoundRobin}, {"split", QpSpread::kSplit}});
  apply(env, "ROCE_COLL_RECV_BYTES", o.recv_budget, 4096, int64_t{1} << 40, true);
  apply_choice(env, "ROCE_COLL_ALGO", o.all_reduce_algo,
               {{"auto", AllReduceAlgo::kAuto},
                {"ring", AllReduceAlgo::kRing},
                {"rd", AllReduceAlgo::kRecursiveDoubling}});
  apply(env, "ROCE_COLL_SMALL_BYTES", o.small_bytes, 0, int64_t{1} << 30, true);
  if (auto v = env("ROCE_COLL_REG_CACHE")) {
    o.cache_registrations = parse_bool("ROCE_COLL_REG_CACHE", *v);
  }
  apply_ms(env, "ROCE_COLL_TIMEOUT_MS", o.timeout);
  apply_ms(env, "ROCE_COLL_RENDEZVOUS_TIMEOUT_MS", o.rendezvous_timeout);
  apply_ms(env, "ROCE_COLL_PROBE_MS", o.probe_interval);
  return o;
}

}  // namespace roce::coll
