// roce-pcap: checks and dumps RoCEv2 captures with the stack's own wire layer.
//
//   roce-pcap check FILE...   parse every RoCEv2 frame, verify its ICRC, rebuild it from the
//                             parsed fields and compare byte for byte; per-opcode summary;
//                             exit 1 if any frame fails
//   roce-pcap dump FILE...    one line per RoCEv2 frame
// Both exit 2 if a file cannot be read to its end or is not an Ethernet capture, and on a bad
// argument (one line on stderr).
#include <CLI/CLI.hpp>

#include <array>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "apps/common/cli.h"
#include "apps/common/pcap_reader.h"
#include "stack/wire/builder.h"
#include "stack/wire/icrc.h"
#include "stack/wire/parser.h"

namespace {

using namespace roce::wire;
using roce::apps::CapturedFrame;
using roce::apps::PcapReader;

// A frame is RoCEv2 when it is IP/UDP to port 4791; decided from the fixed offsets alone, so
// that malformed RoCEv2 frames are reported and other traffic (ARP, ND, TCP) is skipped.
bool looks_like_roce(std::span<const uint8_t> f) {
  if (f.size() < 14) return false;
  size_t off = 12;
  uint16_t type = static_cast<uint16_t>(f[off] << 8 | f[off + 1]);
  off += 2;
  if (type == kEtherTypeVlan) {
    if (f.size() < off + 4) return false;
    type = static_cast<uint16_t>(f[off + 2] << 8 | f[off + 3]);
    off += 4;
  }
  uint8_t proto;
  if (type == kEtherTypeIpv4) {
    if (f.size() < off + 20) return false;
    proto = f[off + 9];
    off += static_cast<size_t>(f[off] & 0x0F) * 4;
  } else if (type == kEtherTypeIpv6) {
    if (f.size() < off + 40) return false;
    proto = f[off + 6];
    off += 40;
  } else {
    return false;
  }
  if (proto != kIpProtoUdp || f.size() < off + 4) return false;
  return (f[off + 2] << 8 | f[off + 3]) == kRoceUdpPort;
}

struct OpStats {
  uint64_t frames = 0;
  uint64_t failed = 0;
  uint64_t bytes = 0;
};

struct Totals {
  uint64_t frames = 0;
  uint64_t roce = 0;
  uint64_t failed = 0;
  uint64_t ipv4 = 0;
  uint64_t ipv6 = 0;
};

// Opens an Ethernet capture; nullptr (with one line on stderr) if it cannot be read or holds
// another link type.
std::unique_ptr<PcapReader> open_ethernet(const std::string& file) {
  std::string error;
  auto reader = PcapReader::open(file, &error);
  if (!reader) {
    std::fprintf(stderr, "roce-pcap: cannot open %s: %s\n", file.c_str(), error.c_str());
    return nullptr;
  }
  if (!reader->is_ethernet()) {
    std::fprintf(stderr, "roce-pcap: %s: link type %d is not Ethernet\n", file.c_str(),
                 reader->link_type());
    return nullptr;
  }
  return reader;
}

// Whether reading stopped on an error (a cut or corrupt capture) rather than at the end; says so.
bool read_failed(const std::string& file, const PcapReader& reader) {
  if (reader.error().empty()) return false;
  std::fprintf(stderr, "roce-pcap: %s: read error: %s\n", file.c_str(), reader.error().c_str());
  return true;
}

void print_failure(const std::string& file, uint64_t index, const std::string& why) {
  std::printf("FAIL %s frame %llu: %s\n", file.c_str(), static_cast<unsigned long long>(index),
              why.c_str());
}

// Returns an empty string if the frame passes, else the reason.
std::string check_frame(const CapturedFrame& fr, PacketInfo& info) {
  if (fr.bytes.size() < fr.orig_len) {
    return "cut by the capture's snap length (" + std::to_string(fr.bytes.size()) + " of " +
           std::to_string(fr.orig_len) + " bytes)";
  }
  const auto len = static_cast<uint32_t>(fr.bytes.size());
  ParseError err = parse_frame(fr.bytes.data(), len, info, {.verify_icrc = false});
  if (err != ParseError::kOk) return std::string(to_string(err));
  const uint32_t icrc_off = len - kIcrcSize;
  const uint32_t computed = icrc_compute(fr.bytes.data() + info.l3_off, icrc_off - info.l3_off,
                                         info.family == IpFamily::kIpv6);
  if (computed != info.icrc) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "bad ICRC: frame has 0x%08x, computed 0x%08x", info.icrc,
                  computed);
    return buf;
  }
  // Re-serialise from the parsed fields and compare.
  PathSpec path;
  BthFields bth;
  ExtHeaders ext;
  extract_spec(info, path, bth, ext);
  std::vector<uint8_t> out(len + kMaxHeadersLen + kTrailerRoom);
  const uint32_t n = build_frame(out.data(), static_cast<uint32_t>(out.size()), path, bth, ext,
                                 info.payload(), info.payload_len);
  if (n != len) {
    return "rebuilt frame is " + std::to_string(n) + " bytes, captured " + std::to_string(len);
  }
  for (uint32_t i = 0; i < len; ++i) {
    if (out[i] != fr.bytes[i]) {
      char buf[96];
      std::snprintf(buf, sizeof buf, "rebuilt frame differs at byte %u (0x%02x, captured 0x%02x)",
                    i, out[i], fr.bytes[i]);
      return buf;
    }
  }
  return {};
}

int cmd_check(const std::vector<std::string>& files, bool quiet) {
  Totals t;
  std::map<uint8_t, OpStats> per_op;
  std::map<std::string, uint64_t> reasons;
  bool file_error = false;
  for (const auto& file : files) {
    auto reader = open_ethernet(file);
    if (!reader) {
      file_error = true;
      continue;
    }
    CapturedFrame fr;
    while (reader->next(fr)) {
      ++t.frames;
      if (!looks_like_roce(fr.bytes)) continue;
      ++t.roce;
      PacketInfo info;
      std::string why = check_frame(fr, info);
      const uint8_t opcode = info.op ? info.opcode : 0xFF;
      OpStats& s = per_op[opcode];
      ++s.frames;
      s.bytes += fr.bytes.size();
      if (info.op) (info.family == IpFamily::kIpv6 ? t.ipv6 : t.ipv4)++;
      if (!why.empty()) {
        ++t.failed;
        ++s.failed;
        ++reasons[why.substr(0, why.find(':'))];
        if (!quiet) print_failure(file, fr.index, why);
      }
    }
    if (read_failed(file, *reader)) file_error = true;
  }

  std::printf("%-36s %10s %10s %12s\n", "opcode", "frames", "failed", "bytes");
  for (const auto& [opcode, s] : per_op) {
    const OpcodeInfo& oi = opcode_info(opcode);
    std::string name = oi.valid() ? std::string(oi.name) : "(unparsed)";
    char label[64];
    std::snprintf(label, sizeof label, "0x%02x %s", opcode, name.c_str());
    std::printf("%-36s %10llu %10llu %12llu\n", label, static_cast<unsigned long long>(s.frames),
                static_cast<unsigned long long>(s.failed),
                static_cast<unsigned long long>(s.bytes));
  }
  for (const auto& [why, n] : reasons) {
    std::printf("failures: %llu x %s\n", static_cast<unsigned long long>(n), why.c_str());
  }
  std::printf("%llu files, %llu frames, %llu RoCEv2 (%llu IPv4, %llu IPv6), %llu failed\n",
              static_cast<unsigned long long>(files.size()),
              static_cast<unsigned long long>(t.frames), static_cast<unsigned long long>(t.roce),
              static_cast<unsigned long long>(t.ipv4), static_cast<unsigned long long>(t.ipv6),
              static_cast<unsigned long long>(t.failed));
  if (file_error) return 2;
  return t.failed ? 1 : 0;
}

int cmd_dump(const std::vector<std::string>& files) {
  bool file_error = false;
  for (const auto& file : files) {
    auto reader = open_ethernet(file);
    if (!reader) {
      file_error = true;
      continue;
    }
    CapturedFrame fr;
    while (reader->next(fr)) {
      if (!looks_like_roce(fr.bytes)) continue;
      PacketInfo info;
      ParseError err = parse_frame(fr.bytes.data(), static_cast<uint32_t>(fr.bytes.size()), info);
      if (err != ParseError::kOk) {
        std::printf("%llu %s\n", static_cast<unsigned long long>(fr.index),
                    std::string(to_string(err)).c_str());
        continue;
      }
      std::printf("%llu IPv%d %s dqpn=0x%06x psn=0x%06x%s pad=%u len=%u sport=%u ecn=%u",
                  static_cast<unsigned long long>(fr.index), static_cast<int>(info.family),
                  std::string(info.op->name).c_str(), info.dest_qp, info.psn,
                  info.ack_req ? " A" : "", info.pad, info.payload_len, info.udp_sport,
                  static_cast<unsigned>(info.ecn()));
      if (info.op->has_ext(Ext::kAeth)) {
        const Aeth& a = info.ext<Aeth>(Ext::kAeth);
        std::printf(" syndrome=0x%02x msn=%u", a.syndrome, a.msn.get());
      }
      if (info.op->has_ext(Ext::kReth)) {
        const Reth& r = info.ext<Reth>(Ext::kReth);
        std::printf(" va=0x%llx rkey=0x%x dlen=%u", static_cast<unsigned long long>(r.va.get()),
                    r.rkey.get(), r.dma_length.get());
      }
      std::printf("\n");
    }
    if (read_failed(file, *reader)) file_error = true;
  }
  return file_error ? 2 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"roce-pcap: check and dump RoCEv2 captures"};
  app.require_subcommand(1);
  std::vector<std::string> files;
  bool quiet = false;
  auto* check = app.add_subcommand(
      "check", "Parse, ICRC-verify and rebuild every RoCEv2 frame; exit 1 if any fails");
  check->add_option("files", files, "pcap/pcapng files")->required()->check(CLI::ExistingFile);
  check->add_flag("-q,--quiet", quiet, "Only the summary, not every failing frame");
  auto* dump = app.add_subcommand("dump", "Print one line per RoCEv2 frame");
  dump->add_option("files", files, "pcap/pcapng files")->required()->check(CLI::ExistingFile);
  if (const int rc = roce::apps::parse_command_line(app, argc, argv, "roce-pcap"); rc >= 0)
    return rc;
  if (check->parsed()) return cmd_check(files, quiet);
  return cmd_dump(files);
}
