// Wire-layer microbenchmarks: parse and build ns/packet; CRC-32 / ICRC throughput beside zlib's
// crc32 on the same buffers in the same run (the baseline).
#include <benchmark/benchmark.h>
#include <zlib.h>

#include <cstring>
#include <random>
#include <vector>

#include "../unit/frame_factory.h"
#include "stack/wire/icrc.h"
#include "stack/wire/parser.h"

namespace {
using namespace roce::wire;

std::vector<uint8_t> random_buffer(size_t n) {
  std::vector<uint8_t> b(n);
  std::mt19937 rng(1);
  for (auto& x : b) x = static_cast<uint8_t>(rng());
  return b;
}

void BM_Crc32_IsaL(benchmark::State& state) {
  auto buf = random_buffer(static_cast<size_t>(state.range(0)));
  for (auto _ : state) {
    benchmark::DoNotOptimize(crc32_ieee_with(CrcImpl::kIsal, 0, buf.data(), buf.size()));
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}
BENCHMARK(BM_Crc32_IsaL)->Arg(64)->Arg(1024)->Arg(4096);

// crc32_ieee as the stack runs it: the implementation this CPU gets (crc_impl(), in the label).
void BM_Crc32(benchmark::State& state) {
  auto buf = random_buffer(static_cast<size_t>(state.range(0)));
  for (auto _ : state) {
    benchmark::DoNotOptimize(crc32_ieee(0, buf.data(), buf.size()));
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
  state.SetLabel(crc_impl_name(crc_impl()));
}
BENCHMARK(BM_Crc32)->Arg(64)->Arg(1024)->Arg(4096);

void BM_Crc32_Zlib(benchmark::State& state) {
  auto buf = random_buffer(static_cast<size_t>(state.range(0)));
  for (auto _ : state) {
    benchmark::DoNotOptimize(crc32(0, buf.data(), static_cast<uInt>(buf.size())));
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}
BENCHMARK(BM_Crc32_Zlib)->Arg(64)->Arg(1024)->Arg(4096);

// A sender's payload into its frame: memcpy, then ISA-L over the copy (the baseline, as the
// engine did before), against crc32_copy's one pass.
void BM_CopyThenCrc32(benchmark::State& state) {
  auto src = random_buffer(static_cast<size_t>(state.range(0)));
  std::vector<uint8_t> dst(src.size());
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), src.size());
    benchmark::DoNotOptimize(crc32_ieee_with(CrcImpl::kIsal, 0, dst.data(), dst.size()));
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}
BENCHMARK(BM_CopyThenCrc32)->Arg(1024)->Arg(4096);

void BM_Crc32Copy(benchmark::State& state) {
  auto src = random_buffer(static_cast<size_t>(state.range(0)));
  std::vector<uint8_t> dst(src.size());
  for (auto _ : state) {
    benchmark::DoNotOptimize(crc32_copy(0, dst.data(), src.data(), src.size()));
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
  state.SetLabel(crc_impl_name(crc_impl()));
}
BENCHMARK(BM_Crc32Copy)->Arg(1024)->Arg(4096);

// Full ICRC of a RoCEv2 frame carrying range(0) payload bytes (masked header copy + payload).
void BM_Icrc(benchmark::State& state) {
  auto f = roce::test::make_frame(roce::test::make_path(IpFamily::kIpv4), op::kRcSendOnly,
                                  static_cast<uint32_t>(state.range(0)));
  const uint32_t covered = static_cast<uint32_t>(f.size()) - 4 - 14;
  for (auto _ : state) {
    benchmark::DoNotOptimize(icrc_compute(f.data() + 14, covered, false));
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * covered);
}
BENCHMARK(BM_Icrc)->Arg(0)->Arg(8)->Arg(64)->Arg(1024)->Arg(4096);

// zlib over the same masked-header + payload bytes, as a baseline for BM_Icrc.
void BM_Icrc_ZlibBaseline(benchmark::State& state) {
  auto f = roce::test::make_frame(roce::test::make_path(IpFamily::kIpv4), op::kRcSendOnly,
                                  static_cast<uint32_t>(state.range(0)));
  const uint32_t covered = static_cast<uint32_t>(f.size()) - 4 - 14;
  for (auto _ : state) {
    uint8_t masked[8 + 40] = {};
    std::memcpy(masked + 8, f.data() + 14, 40);
    uLong c = crc32(0, masked, 48);
    benchmark::DoNotOptimize(crc32(c, f.data() + 14 + 40, covered - 40));
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * covered);
}
BENCHMARK(BM_Icrc_ZlibBaseline)->Arg(64)->Arg(1024)->Arg(4096);

// Parse without the ICRC (header validation only) and with it.
template <bool kVerifyIcrc>
void BM_Parse(benchmark::State& state) {
  auto f = roce::test::make_frame(roce::test::make_path(IpFamily::kIpv4), op::kRcWriteFirst,
                                  static_cast<uint32_t>(state.range(0)));
  PacketInfo info;
  for (auto _ : state) {
    benchmark::DoNotOptimize(
        parse_frame(f.data(), static_cast<uint32_t>(f.size()), info, {.verify_icrc = kVerifyIcrc}));
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}
BENCHMARK(BM_Parse<false>)->Name("BM_ParseHeaders")->Arg(64)->Arg(4096);
BENCHMARK(BM_Parse<true>)->Name("BM_ParseWithIcrc")->Arg(8)->Arg(64)->Arg(1024)->Arg(4096);

// Build headers + pad + ICRC around a payload already in place.
void BM_BuildAroundPayload(benchmark::State& state) {
  const PathSpec path = roce::test::make_path(IpFamily::kIpv4);
  const ExtHeaders ext = roce::test::make_ext();
  const uint32_t len = static_cast<uint32_t>(state.range(0));
  std::vector<uint8_t> buf(len + kMaxHeadersLen + kTrailerRoom);
  BthFields bth;
  bth.opcode = op::kRcWriteFirst;
  bth.dest_qp = 0x11;
  uint32_t frame_len = 0;
  for (auto _ : state) {
    bth.psn = (bth.psn + 1) & 0xFFFFFF;
    benchmark::DoNotOptimize(
        build_around_payload(buf.data() + kMaxHeadersLen, len, path, bth, ext, &frame_len));
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}
BENCHMARK(BM_BuildAroundPayload)->Arg(8)->Arg(64)->Arg(1024)->Arg(4096);

// A sender's packet of a WRITE (the engine's path from 256 bytes on): the headers written and
// CRCed through the RETH, the payload copied in from registered memory while it is CRCed, the
// pad and the ICRC.
void BM_BuildHeadersCopyPayload(benchmark::State& state) {
  const PathSpec path = roce::test::make_path(IpFamily::kIpv4);
  const ExtHeaders ext = roce::test::make_ext();
  const uint32_t len = static_cast<uint32_t>(state.range(0));
  std::vector<uint8_t> buf(len + kMaxHeadersLen + kTrailerRoom), src(len, 0x5A);
  BthFields bth;
  bth.opcode = op::kRcWriteFirst;
  bth.dest_qp = 0x11;
  for (auto _ : state) {
    bth.psn = (bth.psn + 1) & 0xFFFFFF;
    uint8_t* payload = buf.data() + kMaxHeadersLen;
    uint32_t crc = 0;
    const uint8_t* frame = build_headers(payload, len, path, bth, ext, &crc);
    crc = crc32_copy(crc, payload, src.data(), len);
    benchmark::DoNotOptimize(finish_icrc(frame, payload, len, crc));
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}
BENCHMARK(BM_BuildHeadersCopyPayload)->Arg(256)->Arg(1024)->Arg(4096);

}  // namespace

BENCHMARK_MAIN();
