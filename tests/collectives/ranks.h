// N ranks as threads of one process, each with its own Communicator, all on one device of the
// stack's libibverbs (net_null port, receiving nothing: QPs of one device reach each other through
// its own GIDs, as on a NIC, so no namespace is needed), meeting through an in-process HashStore.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "collectives/communicator.h"

namespace roce::coll::test {

inline void use_loopback_device() {
  // Read by the shim on its first device listing; one device for the whole process.
  setenv("ROCE_DEVICE", "name=coll0; port=net_null0,no-rx=1; ipv4=10.77.0.1/24; mtu=4200", 0);
  unsetenv("ROCE_CONFIG");
}

inline CommOptions test_options() {
  CommOptions o;
  o.rendezvous_timeout = std::chrono::seconds(60);
  return o;
}

// Runs body(comm) on n ranks; each rank's exception becomes a test failure naming the rank.
inline void run_ranks(int n, const std::function<void(Communicator&)>& body,
                      const CommOptions& options = test_options()) {
  use_loopback_device();
  auto shared = HashStore::make_shared();
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        auto comm = Communicator::create(std::make_shared<HashStore>(shared), r, n, options);
        body(*comm);
      } catch (const std::exception& e) {
        ADD_FAILURE() << "rank " << r << ": " << e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
}

}  // namespace roce::coll::test
