// The communicator beyond the operation matrix: AlltoAllv, send / recv, barrier, asynchronous
// operations, split, registered memory, forced algorithms and small chunks, the C API, and the
// errors a user or a disagreeing peer gets.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "coll_checks.h"
#include "collectives/roce_coll.h"
#include "ranks.h"

namespace roce::coll::test {
namespace {

class CommApi : public ::testing::TestWithParam<int> {};

TEST_P(CommApi, AllToAllVSendRecvAndBarrier) {
  run_ranks(GetParam(), [](Communicator& c) {
    for (size_t unit : {0, 1, 100, 70000}) {
      EXPECT_EQ(check_all_to_all_v(c, unit, DataType::kFloat32), "") << "rank " << c.rank();
    }
    for (size_t n : {0, 1, 4099, 300000}) {
      EXPECT_EQ(check_send_recv(c, n, DataType::kInt32), "") << "rank " << c.rank();
    }
    for (int i = 0; i < 5; ++i) c.barrier();
  });
}

// Chunks of one page and the fewest slots: many messages per step, the ring's forwarding
// at its tightest; and each algorithm forced at sizes where auto picks the other.
TEST_P(CommApi, SmallChunksAndForcedAlgorithms) {
  CommOptions o = test_options();
  o.chunk_bytes = 4096;
  o.slots = 2;
  for (AllReduceAlgo algo : {AllReduceAlgo::kRing, AllReduceAlgo::kRecursiveDoubling}) {
    o.all_reduce_algo = algo;
    run_ranks(
        GetParam(),
        [](Communicator& c) {
          for (size_t n : {1, 5, 1000, 100003}) {
            EXPECT_EQ(check_all_reduce(c, n, DataType::kFloat32, ReduceOp::kSum, false), "");
            EXPECT_EQ(check_all_reduce(c, n, DataType::kUint8, ReduceOp::kMin, true), "");
          }
          EXPECT_EQ(check_reduce_scatter(c, 30001, DataType::kInt64, ReduceOp::kAvg, false), "");
          EXPECT_EQ(check_reduce(c, 50001, DataType::kFloat64, ReduceOp::kMax, true, 0), "");
          EXPECT_EQ(check_broadcast(c, 50001, DataType::kFloat16, false, c.size() - 1), "");
        },
        o);
  }
}

// A receive budget of one page: a rank grants one chunk at a time over all its peers, and every
// operation still completes (a grant always goes out when nothing is outstanding).
TEST_P(CommApi, EveryOperationWithinAOnePageReceiveBudget) {
  CommOptions o = test_options();
  o.chunk_bytes = 4096;
  o.recv_budget = 4096;
  run_ranks(
      GetParam(),
      [](Communicator& c) {
        EXPECT_EQ(check_all_reduce(c, 30001, DataType::kFloat32, ReduceOp::kSum, false), "");
        EXPECT_EQ(check_all_reduce(c, 100, DataType::kInt8, ReduceOp::kMax, true), "");
        EXPECT_EQ(check_reduce_scatter(c, 5001, DataType::kBfloat16, ReduceOp::kSum, true), "");
        EXPECT_EQ(check_all_gather(c, 5001, DataType::kInt32, false), "");
        EXPECT_EQ(check_broadcast(c, 20001, DataType::kFloat64, true, 0), "");
        EXPECT_EQ(check_reduce(c, 20001, DataType::kInt64, ReduceOp::kAvg, false, c.size() - 1),
                  "");
        EXPECT_EQ(check_all_to_all(c, 7001, DataType::kFloat16, false), "");
        EXPECT_EQ(check_all_to_all_v(c, 3001, DataType::kUint8), "");
        EXPECT_EQ(check_send_recv(c, 9001, DataType::kUint32), "");
        c.barrier();
      },
      o);
}

TEST_P(CommApi, AsyncOperationsRunInOrderAndOverlapTheCaller) {
  run_ranks(GetParam(), [](Communicator& c) {
    const size_t n = 300000;
    auto a = make_input(c.rank(), n, DataType::kFloat32, ReduceOp::kSum);
    auto b = make_input(c.rank(), n, DataType::kInt32, ReduceOp::kMax);
    std::vector<uint8_t> gathered(n * 4 * c.size());
    Work w1 = c.all_reduce_async(a.data(), a.data(), n, DataType::kFloat32, ReduceOp::kSum);
    Work w2 = c.all_reduce_async(b.data(), b.data(), n, DataType::kInt32, ReduceOp::kMax);
    Work w3 = c.all_gather_async(b.data(), gathered.data(), n, DataType::kInt32);
    Work w4 = c.barrier_async();
    while (!w4.test()) std::this_thread::yield();  // the caller is free meanwhile
    w1.wait(), w2.wait(), w3.wait();
    EXPECT_EQ(
        diff(a.data(), reference(c.size(), n, DataType::kFloat32, ReduceOp::kSum).data(), n * 4, 4),
        "");
    const auto bmax = reference(c.size(), n, DataType::kInt32, ReduceOp::kMax);
    EXPECT_EQ(diff(b.data(), bmax.data(), n * 4, 4), "");
    for (int r = 0; r < c.size(); ++r) {  // all_gather ran after the max: every block is it
      EXPECT_EQ(diff(gathered.data() + r * n * 4, bmax.data(), n * 4, 4), "") << "block " << r;
    }
    // A blocking call after asynchronous ones waits for them first.
    Work w5 = c.all_reduce_async(a.data(), a.data(), 1000, DataType::kFloat32, ReduceOp::kMin);
    EXPECT_EQ(check_all_reduce(c, 1000, DataType::kFloat32, ReduceOp::kSum, false), "");
    EXPECT_TRUE(w5.test());
  });
}

TEST_P(CommApi, SplitByParityAndRegisteredMemory) {
  run_ranks(GetParam(), [](Communicator& c) {
    auto sub = c.split(c.rank() % 2, -c.rank());  // keys reverse the order within a colour
    ASSERT_NE(sub, nullptr);
    const int size = (c.size() + 1 - c.rank() % 2) / 2;
    EXPECT_EQ(sub->size(), size);
    EXPECT_EQ(sub->rank(), size - 1 - c.rank() / 2);
    EXPECT_EQ(check_all_reduce(*sub, 5000, DataType::kInt32, ReduceOp::kSum, false), "");
    EXPECT_EQ(check_all_gather(*sub, 777, DataType::kFloat64, true), "");
    auto none = c.split(c.rank() == 0 ? -1 : 0, 0);
    EXPECT_EQ(none == nullptr, c.rank() == 0);
    // Registered once, reused inside: in place and at an offset.
    std::vector<float> buf(1 << 16);
    c.register_memory(buf.data(), buf.size() * 4);
    auto in = make_input(c.rank(), 1000, DataType::kFloat32, ReduceOp::kSum);
    std::memcpy(buf.data() + 100, in.data(), in.size());
    c.all_reduce(buf.data() + 100, buf.data() + 100, 1000, DataType::kFloat32, ReduceOp::kSum);
    EXPECT_EQ(diff(reinterpret_cast<uint8_t*>(buf.data() + 100),
                   reference(c.size(), 1000, DataType::kFloat32, ReduceOp::kSum).data(), 4000, 4),
              "");
    c.deregister_memory(buf.data());
    EXPECT_THROW(c.deregister_memory(buf.data()), Error);
    c.barrier();  // no rank leaves while another still uses `none` or `sub`
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, CommApi, ::testing::Values(1, 2, 3, 5),
                         [](const auto& info) { return std::to_string(info.param); });

TEST(CommErrors, BadArgumentsAreRefusedWithOneLine) {
  run_ranks(2, [](Communicator& c) {
    std::vector<float> v(16);
    auto msg = [&](auto&& f) {
      try {
        f();
      } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument) << e.what();
        return std::string(e.what());
      }
      return std::string("no error");
    };
    EXPECT_EQ(msg([&] { c.broadcast(v.data(), v.data(), 16, DataType::kFloat32, 2); }),
              "broadcast: root 2 is not a rank of 2");
    EXPECT_EQ(msg([&] { c.all_reduce(nullptr, v.data(), 16, DataType::kFloat32, ReduceOp::kSum); }),
              "all_reduce: null buffer for 16 elements");
    EXPECT_EQ(msg([&] { c.send(v.data(), 1, DataType::kFloat32, c.rank()); }),
              "send: rank " + std::to_string(c.rank()) + " is not another rank of 2");
    EXPECT_EQ(msg([&] { c.all_reduce(v.data(), v.data(), 1, DataType(42), ReduceOp::kSum); }),
              "unknown data type 42");
    // Nothing was sent: the communicator still works.
    EXPECT_EQ(check_all_reduce(c, 10, DataType::kInt8, ReduceOp::kSum, false), "");
  });
}

// Ranks that disagree fail with kMismatch naming the peer, on both sides, instead of hanging.
TEST(CommErrors, RanksCallingDifferentCollectivesFailOnBothSides) {
  std::atomic<int> errors{0};
  run_ranks(2, [&](Communicator& c) {
    std::vector<float> v(1000);
    try {
      if (c.rank() == 0) {
        c.all_reduce(v.data(), v.data(), 1000, DataType::kFloat32, ReduceOp::kSum);
      } else {
        c.all_reduce(v.data(), v.data(), 999, DataType::kFloat32, ReduceOp::kSum);
      }
      ADD_FAILURE() << "rank " << c.rank() << ": no error";
    } catch (const Error& e) {
      // Found here, or told by the rank that found it first.
      const std::string what = e.what();
      EXPECT_EQ(e.kind(), ErrorKind::kMismatch) << what;
      EXPECT_EQ(e.peer(), 1 - c.rank()) << what;
      EXPECT_TRUE(what.find("counts differ") != std::string::npos ||
                  what.find("gave up on this rank") != std::string::npos)
          << what;
      ++errors;
    }
    // The communicator stays failed.
    EXPECT_THROW(c.barrier(), Error);
  });
  EXPECT_EQ(errors, 2);
  std::atomic<int> type_errors{0};
  run_ranks(3, [&](Communicator& c) {
    std::vector<int32_t> v(64);
    try {
      c.all_reduce(v.data(), v.data(), 64, c.rank() == 2 ? DataType::kUint32 : DataType::kInt32,
                   ReduceOp::kSum);
      ADD_FAILURE() << "rank " << c.rank() << ": no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kMismatch) << e.what();
      ++type_errors;
    }
  });
  EXPECT_EQ(type_errors, 3);
}

// A rank that gives up (abort(): its QPs are gone, as when its process dies): every other rank
// fails within the timeout, naming it, and none hangs.
TEST(CommErrors, ARankThatLeavesIsNamedByEveryOtherRank) {
  CommOptions o = test_options();
  o.timeout = std::chrono::milliseconds(3000);
  o.probe_interval = std::chrono::milliseconds(200);
  o.ib_timeout = 12;  // 16.8 ms: a write to a destroyed QP fails after ~0.15 s of retries
  std::atomic<int> named{0};
  run_ranks(
      4,
      [&](Communicator& c) {
        std::vector<float> v(100000);
        c.all_reduce(v.data(), v.data(), v.size(), DataType::kFloat32, ReduceOp::kSum);
        if (c.rank() == 2) {
          c.abort();
          EXPECT_THROW(c.barrier(), Error);
          return;
        }
        const auto t0 = std::chrono::steady_clock::now();
        try {
          c.all_reduce(v.data(), v.data(), v.size(), DataType::kFloat32, ReduceOp::kSum);
          ADD_FAILURE() << "rank " << c.rank() << ": no error";
        } catch (const Error& e) {
          EXPECT_EQ(e.peer(), 2) << "rank " << c.rank() << ": " << e.what();
          EXPECT_EQ(e.kind(), ErrorKind::kPeerFailed) << e.what();
          EXPECT_NE(std::string(e.what()).find("rank 2"), std::string::npos) << e.what();
          EXPECT_LT(std::chrono::steady_clock::now() - t0, o.timeout + std::chrono::seconds(2));
          ++named;
        }
      },
      o);
  EXPECT_EQ(named, 3);
}

// A live rank that does not call the collective: the one waiting on it times out naming it as
// alive (its QPs answer the probes), and the late rank learns of the failure from the abort.
TEST(CommErrors, ALiveRankThatNeverCallsIsNamedByATimeout) {
  CommOptions o = test_options();
  o.timeout = std::chrono::milliseconds(1500);
  o.probe_interval = std::chrono::milliseconds(200);
  o.ib_timeout = 12;
  run_ranks(
      2,
      [&](Communicator& c) {
        std::vector<int32_t> v(1000);
        // Well past rank 0's timeout, so that a loaded machine cannot let rank 1 in on time.
        if (c.rank() == 1) std::this_thread::sleep_for(std::chrono::milliseconds(4500));
        try {
          c.all_reduce(v.data(), v.data(), v.size(), DataType::kInt32, ReduceOp::kSum);
          ADD_FAILURE() << "rank " << c.rank() << ": no error";
        } catch (const Error& e) {
          EXPECT_EQ(e.kind(), ErrorKind::kTimeout) << e.what();
          if (c.rank() == 0) {
            EXPECT_EQ(e.peer(), 1) << e.what();
            EXPECT_NE(std::string(e.what()).find("alive but not in this operation"),
                      std::string::npos)
                << e.what();
          } else {
            EXPECT_NE(std::string(e.what()).find("rank 0 gave up"), std::string::npos) << e.what();
          }
        }
      },
      o);
}

TEST(CommCApi, AllReduceThroughTheCApi) {
  use_loopback_device();
  char dir[] = "/tmp/roce-coll-capi-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 3; ++r) {
    ranks.emplace_back([&, r] {
      roce_coll_comm* comm = nullptr;
      ASSERT_EQ(roce_coll_init_file(&comm, r, 3, dir), ROCE_COLL_SUCCESS) << roce_coll_last_error();
      EXPECT_EQ(roce_coll_rank(comm), r);
      EXPECT_EQ(roce_coll_size(comm), 3);
      std::vector<double> v(1001, r + 1.0);
      roce_coll_request* req = nullptr;
      ASSERT_EQ(roce_coll_all_reduce_start(comm, v.data(), v.data(), v.size(), ROCE_COLL_FLOAT64,
                                           ROCE_COLL_SUM, &req),
                ROCE_COLL_SUCCESS);
      EXPECT_EQ(roce_coll_wait(req), ROCE_COLL_SUCCESS);
      roce_coll_request_free(req);
      for (double x : v) ASSERT_EQ(x, 6.0);
      EXPECT_EQ(roce_coll_broadcast(comm, v.data(), v.data(), 1, ROCE_COLL_FLOAT64, 7),
                ROCE_COLL_INVALID_ARGUMENT);
      EXPECT_STREQ(roce_coll_last_error(), "broadcast: root 7 is not a rank of 3");
      EXPECT_EQ(roce_coll_destroy(comm), ROCE_COLL_SUCCESS);
    });
  }
  for (auto& t : ranks) t.join();
  std::filesystem::remove_all(dir);
}

TEST(CommRendezvous, AMissingRankIsNamed) {
  use_loopback_device();
  CommOptions o = test_options();
  o.rendezvous_timeout = std::chrono::milliseconds(500);
  auto shared = HashStore::make_shared();
  std::vector<std::thread> ranks;
  for (int r : {0, 2}) {  // ranks 1 and 3 never come
    ranks.emplace_back([&, r] {
      try {
        Communicator::create(std::make_shared<HashStore>(shared), r, 4, o);
        ADD_FAILURE() << "rank " << r << " got a communicator";
      } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kTimeout);
        EXPECT_NE(std::string(e.what()).find("ranks 1, 3 of 4 never arrived"), std::string::npos)
            << e.what();
      }
    });
  }
  for (auto& t : ranks) t.join();
}

}  // namespace
}  // namespace roce::coll::test
