// Starts EAL once for a test binary and cleans it up after the last test. ctest runs every test
// of a binary as its own process (gtest_discover_tests), so each gets its own EAL and its own
// --file-prefix (roce-<pid>).
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "dpdk/eal.h"

namespace roce::dpdk::testing {

class EalEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    std::string error;
    ASSERT_TRUE(Eal::init(EalOptions{}, &error)) << error;
  }
  void TearDown() override { Eal::cleanup(); }
};

}  // namespace roce::dpdk::testing
