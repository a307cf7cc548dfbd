// libFuzzer target for the frame parser. Beyond "no crash, no sanitizer report", it checks that
// whatever the parser accepts describes bytes inside the frame, and that rebuilding an accepted
// frame from its parsed fields gives a frame of the same length that parses to the same view.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "stack/wire/builder.h"
#include "stack/wire/parser.h"

using namespace roce::wire;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 16384) return 0;
  // An exact-size heap copy, so that any over-read is caught by ASan.
  std::vector<uint8_t> frame(data, data + size);
  PacketInfo info;
  for (bool icrc : {false, true}) {
    ParseError e = parse_frame(frame.data(), static_cast<uint32_t>(size), info,
                               {.verify_icrc = icrc, .verify_ipv4_checksum = icrc});
    if (e != ParseError::kOk) continue;
    const size_t end = size_t{info.payload_off} + info.payload_len + info.pad + 4;
    if (end > size || info.op == nullptr || !info.op->valid()) abort();
    if (info.cnp_short || end != size) continue;  // short CNP or Ethernet padding: no rebuild
    PathSpec path;
    BthFields bth;
    ExtHeaders ext;
    extract_spec(info, path, bth, ext);
    std::vector<uint8_t> out(size + kMaxHeadersLen + kTrailerRoom);
    uint32_t n = build_frame(out.data(), static_cast<uint32_t>(out.size()), path, bth, ext,
                             info.payload(), info.payload_len);
    if (n != size) abort();
    PacketInfo again;
    if (parse_frame(out.data(), n, again) != ParseError::kOk) abort();
    if (again.opcode != info.opcode || again.psn != info.psn || again.dest_qp != info.dest_qp ||
        again.payload_len != info.payload_len ||
        std::memcmp(again.payload(), info.payload(), info.payload_len) != 0) {
      abort();
    }
  }
  return 0;
}
