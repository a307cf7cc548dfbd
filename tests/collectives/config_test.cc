// CommOptions from the environment: defaults, every variable applied, and each bad value
// refused with one line naming the variable.
#include <gtest/gtest.h>

#include <map>

#include "collectives/config.h"
#include "collectives/error.h"

namespace roce::coll {
namespace {

EnvLookup env_of(std::map<std::string, std::string> m) {
  return [m](const char* k) -> std::optional<std::string> {
    auto it = m.find(k);
    if (it == m.end()) return std::nullopt;
    return it->second;
  };
}

std::string refusal(std::map<std::string, std::string> m) {
  try {
    CommOptions::from_env(env_of(std::move(m)));
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    return e.what();
  }
  return "accepted";
}

TEST(CommOptions, Defaults) {
  const CommOptions o = CommOptions::from_env(env_of({}));
  EXPECT_EQ(o.device, "");
  EXPECT_EQ(o.gid_index, -1);
  EXPECT_FALSE(o.allow_link_local);
  EXPECT_EQ(o.hop_limit, 64);
  EXPECT_EQ(o.retry_count, 6);  // finite on rxe and on this stack (7 retries for ever there)
  EXPECT_EQ(o.chunk_bytes, 256u * 1024);
  EXPECT_EQ(o.slots, 4u);
  EXPECT_EQ(o.window(), 4u);  // grants in flight: every slot
  EXPECT_EQ(o.qps_per_peer, 1u);
  EXPECT_EQ(o.qp_spread, QpSpread::kRoundRobin);
  EXPECT_FALSE(o.own_control_qp());  // grants on the data QP, in its class
  EXPECT_EQ(o.recv_budget, 1u << 20);
  EXPECT_EQ(o.timeout, std::chrono::seconds(30));
  EXPECT_EQ(o.all_reduce_algo, AllReduceAlgo::kAuto);
}

TEST(CommOptions, EveryVariableApplies) {
  const CommOptions o = CommOptions::from_env(env_of({
      {"ROCE_COLL_DEVICE", "rxe0"},
      {"ROCE_COLL_PORT", "2"},
      {"ROCE_COLL_GID_INDEX", "3"},
      {"ROCE_COLL_ALLOW_LINK_LOCAL", "yes"},
      {"ROCE_COLL_MTU", "1024"},
      {"ROCE_COLL_HOP_LIMIT", "255"},
      {"ROCE_COLL_TC", "184"},
      {"ROCE_COLL_IB_TIMEOUT", "20"},
      {"ROCE_COLL_RETRY_CNT", "3"},
      {"ROCE_COLL_CHUNK", "1M"},
      {"ROCE_COLL_SLOTS", "8"},
      {"ROCE_COLL_GRANTS", "3"},
      {"ROCE_COLL_QPS", "16"},
      {"ROCE_COLL_QP_SPREAD", "split"},
      {"ROCE_COLL_GRANT_TC", "104"},
      {"ROCE_COLL_RECV_BYTES", "4M"},
      {"ROCE_COLL_ALGO", "ring"},
      {"ROCE_COLL_SMALL_BYTES", "32K"},
      {"ROCE_COLL_REG_CACHE", "1"},
      {"ROCE_COLL_TIMEOUT_MS", "5000"},
      {"ROCE_COLL_RENDEZVOUS_TIMEOUT_MS", "7000"},
      {"ROCE_COLL_PROBE_MS", "250"},
  }));
  EXPECT_EQ(o.device, "rxe0");
  EXPECT_EQ(o.port, 2);
  EXPECT_EQ(o.gid_index, 3);
  EXPECT_TRUE(o.allow_link_local);
  EXPECT_EQ(o.mtu, 1024);
  EXPECT_EQ(o.hop_limit, 255);
  EXPECT_EQ(o.traffic_class, 184);
  EXPECT_EQ(o.ib_timeout, 20);
  EXPECT_EQ(o.retry_count, 3);
  EXPECT_EQ(o.chunk_bytes, 1u << 20);
  EXPECT_EQ(o.slots, 8u);
  EXPECT_EQ(o.grants, 3u);
  EXPECT_EQ(o.window(), 3u);
  EXPECT_EQ(o.qps_per_peer, 16u);
  EXPECT_EQ(o.qp_spread, QpSpread::kSplit);
  EXPECT_EQ(o.grant_traffic_class, 104);
  EXPECT_TRUE(o.own_control_qp());
  EXPECT_EQ(o.recv_budget, 4u << 20);
  EXPECT_EQ(o.all_reduce_algo, AllReduceAlgo::kRing);
  EXPECT_EQ(o.small_bytes, 32u * 1024);
  EXPECT_TRUE(o.cache_registrations);
  EXPECT_EQ(o.timeout, std::chrono::milliseconds(5000));
  EXPECT_EQ(o.rendezvous_timeout, std::chrono::milliseconds(7000));
  EXPECT_EQ(o.probe_interval, std::chrono::milliseconds(250));
}

TEST(CommOptions, BadValuesNameTheVariable) {
  EXPECT_EQ(refusal({{"ROCE_COLL_PORT", "x"}}), "ROCE_COLL_PORT='x': not an integer");
  EXPECT_EQ(refusal({{"ROCE_COLL_PORT", "1x"}}), "ROCE_COLL_PORT='1x': not an integer");
  EXPECT_EQ(refusal({{"ROCE_COLL_HOP_LIMIT", "0"}}),
            "ROCE_COLL_HOP_LIMIT='0': out of range [1, 255]");
  EXPECT_EQ(refusal({{"ROCE_COLL_MTU", "1500"}}),
            "ROCE_COLL_MTU='1500': takes 256, 512, 1024, 2048 or 4096");
  EXPECT_EQ(refusal({{"ROCE_COLL_RETRY_CNT", "7"}}),
            "ROCE_COLL_RETRY_CNT='7': out of range [0, 6]");
  EXPECT_EQ(refusal({{"ROCE_COLL_SLOTS", "1"}}), "ROCE_COLL_SLOTS='1': out of range [2, 256]");
  EXPECT_EQ(refusal({{"ROCE_COLL_CHUNK", "4T"}}),
            "ROCE_COLL_CHUNK='4T': the only suffixes are K, M and G");
  EXPECT_EQ(refusal({{"ROCE_COLL_CHUNK", "2G"}}),
            "ROCE_COLL_CHUNK='2G': out of range [256, 1073741824]");
  EXPECT_EQ(refusal({{"ROCE_COLL_CHUNK", "255"}}),
            "ROCE_COLL_CHUNK='255': out of range [256, 1073741824]");
  EXPECT_EQ(refusal({{"ROCE_COLL_QPS", "17"}}), "ROCE_COLL_QPS='17': out of range [1, 16]");
  EXPECT_EQ(refusal({{"ROCE_COLL_QPS", "0"}}), "ROCE_COLL_QPS='0': out of range [1, 16]");
  EXPECT_EQ(refusal({{"ROCE_COLL_QP_SPREAD", "hash"}}),
            "ROCE_COLL_QP_SPREAD='hash': takes rr or split");
  EXPECT_EQ(refusal({{"ROCE_COLL_GRANTS", "5"}}),
            "ROCE_COLL_GRANTS='5': more than the 4 slots (ROCE_COLL_SLOTS)");
  EXPECT_EQ(refusal({{"ROCE_COLL_GRANT_TC", "256"}}),
            "ROCE_COLL_GRANT_TC='256': out of range [-1, 255]");
  EXPECT_EQ(refusal({{"ROCE_COLL_ALGO", "tree"}}), "ROCE_COLL_ALGO='tree': takes auto, ring or rd");
  EXPECT_EQ(refusal({{"ROCE_COLL_REG_CACHE", "maybe"}}),
            "ROCE_COLL_REG_CACHE='maybe': takes 1 or 0");
  EXPECT_EQ(refusal({{"ROCE_COLL_TIMEOUT_MS", "0"}}),
            "ROCE_COLL_TIMEOUT_MS='0': out of range [1, 86400000]");
}

}  // namespace
}  // namespace roce::coll
