// populate_pages: maps pages in without changing them, and survives a range that is not (or no
// longer) mapped -- a memif peer's port stopping unmaps its regions from the interrupt thread
// while the engine thread prefaults them (that was a SIGSEGV in the by-hand fallback).
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "dpdk/dpdk_port.h"

namespace roce::dpdk {
namespace {

const size_t kPage = static_cast<size_t>(sysconf(_SC_PAGESIZE));

size_t resident_pages(void* p, size_t len) {
  std::vector<unsigned char> v(len / kPage);
  if (mincore(p, len, v.data()) != 0) return 0;
  size_t n = 0;
  for (unsigned char c : v) n += c & 1;
  return n;
}

TEST(Prefault, MapsEverySharedPageInAndKeepsItsContents) {
  const size_t len = 32 * kPage;
  void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(p, MAP_FAILED);
  auto* bytes = static_cast<uint8_t*>(p);
  // Some pages written before (their data must survive), the rest never touched.
  for (size_t i = 0; i < len; i += 4 * kPage) bytes[i + 7] = static_cast<uint8_t>(i / kPage + 1);
  ASSERT_LT(resident_pages(p, len), len / kPage);
  const auto a = reinterpret_cast<uintptr_t>(p);
  // Unaligned ends are rounded out to whole pages.
  EXPECT_EQ(populate_pages(a + 5, a + len - 3), len);
  EXPECT_EQ(resident_pages(p, len), len / kPage);
  for (size_t i = 0; i < len; i += kPage) {
    const uint8_t want = (i / kPage) % 4 == 0 ? static_cast<uint8_t>(i / kPage + 1) : 0;
    ASSERT_EQ(bytes[i + 7], want) << "page " << i / kPage;
  }
  munmap(p, len);
}

TEST(Prefault, SkipsARangeThatIsNoLongerMapped) {
  const size_t len = 16 * kPage;
  void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(p, MAP_FAILED);
  const auto a = reinterpret_cast<uintptr_t>(p);
  ASSERT_EQ(munmap(p, len), 0);
  EXPECT_EQ(populate_pages(a, a + len), 0u);  // and no SIGSEGV
}

TEST(Prefault, SurvivesAHoleInTheRange) {
  const size_t len = 16 * kPage;
  void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(p, MAP_FAILED);
  const auto a = reinterpret_cast<uintptr_t>(p);
  ASSERT_EQ(munmap(static_cast<uint8_t*>(p) + 6 * kPage, 4 * kPage), 0);
  EXPECT_LT(populate_pages(a, a + len), len);  // the hole is not counted (nor touched)
  munmap(p, 6 * kPage);
  munmap(static_cast<uint8_t*>(p) + 10 * kPage, 6 * kPage);
}

TEST(Prefault, AnEmptyRangeIsNothing) { EXPECT_EQ(populate_pages(4096, 4096), 0u); }

}  // namespace
}  // namespace roce::dpdk
