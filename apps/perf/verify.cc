// --verify: every byte of every message checked end to end (both sides roce-perf).
//
// Message m of a run carries pattern(m) (verify_pattern.h): 64-bit words derived from m and the
// word's offset, so a message that lands in the wrong place, twice, torn or stale is caught, not
// only a flipped bit. Each requester-side slot is refilled only after the message in it completed.
//   send_bw  the receiver checks each message in its own receive slot before reposting it.
//   read_bw  the responder fills its region with a pass of messages; the requester checks each
//            READ as it completes; a pass result over TCP lets the next pass begin.
//   write_bw the requester writes a pass covering the responder's region, then sends its CRC
//            of the pass over TCP; the responder checks every byte against the pattern and the
//            CRC, and answers before the next pass overwrites the region.
// Either side that finds a bad byte reports the message and offset and exits 1; the other side
// learns it over TCP and exits 1 too.
#include <zlib.h>

#include <cstring>

#include "apps/perf/perf_test.h"
#include "apps/perf/verify_pattern.h"

namespace roce::perf {

namespace {

constexpr uint64_t kRegionBytes = 64ull << 20;  // responder region / receive slots
constexpr uint64_t kSourceBytes = 32ull << 20;  // requester slots
constexpr uint64_t kMaxSlots = 4096;

// kSizes, the first record of a run, carries the number of sizes: a peer that runs fewer would
// read our next kParams as part of a key message, and both sides would wait for ever.
enum Kind : uint32_t {
  kParams = 1,
  kPassDone = 2,
  kPassResult = 3,
  kReadReady = 4,
  kDone = 5,
  kSizes = 6,
};

// The verification records on the TCP connection: 4 big-endian 64-bit words.
struct Record {
  uint64_t kind = 0, a = 0, b = 0, c = 0;
};

bool send_record(OobChannel& oob, const Record& r, std::string* err) {
  const uint64_t w[4] = {__builtin_bswap64(r.kind), __builtin_bswap64(r.a), __builtin_bswap64(r.b),
                         __builtin_bswap64(r.c)};
  return oob.write_all(w, sizeof w, err);
}

bool recv_record(OobChannel& oob, uint32_t want, Record* r, std::string* err) {
  uint64_t w[4];
  if (!oob.read_all(w, sizeof w, err)) return false;
  r->kind = __builtin_bswap64(w[0]);
  r->a = __builtin_bswap64(w[1]);
  r->b = __builtin_bswap64(w[2]);
  r->c = __builtin_bswap64(w[3]);
  if (r->kind != want) {
    *err = "verification exchange out of step (got record " + std::to_string(r->kind) +
           ", expected " + std::to_string(want) + ")";
    return false;
  }
  return true;
}

// Both sides send `mine` and receive a record of the same kind, in the exchange's order (the
// client writes first).
bool swap_records(OobChannel& oob, const Record& mine, Record* theirs, std::string* err) {
  const auto want = static_cast<uint32_t>(mine.kind);
  if (oob.is_client()) return send_record(oob, mine, err) && recv_record(oob, want, theirs, err);
  return recv_record(oob, want, theirs, err) && send_record(oob, mine, err);
}

// The --test-corrupt hook: flips the middle byte of message `msg` where it landed.
void maybe_corrupt(const PerfOptions& o, uint64_t msg, uint8_t* data, uint64_t size) {
  if (o.test_corrupt >= 0 && static_cast<uint64_t>(o.test_corrupt) == msg) {
    data[(size - 1) / 2] ^= 0x5A;
  }
}

std::string hex2(uint8_t v) {
  char b[8];
  std::snprintf(b, sizeof b, "0x%02x", v);
  return b;
}

}  // namespace

void PerfTest::plan_verify() {
  const uint64_t size = o_.size;
  uint64_t region = kRegionBytes / size, src = kSourceBytes / size;
  if (region < 1) region = 1;
  if (src < 1) src = 1;
  if (region > kMaxSlots) region = kMaxSlots;
  if (src > kMaxSlots) src = kMaxSlots;
  vfy_.region_slots = region;
  vfy_.src_slots = src;
}

// Messages per pass and requester slots for a message size (the region is laid out for the
// largest size of the run; smaller sizes use more slots of it).
uint64_t PerfTest::verify_slots(uint64_t size, bool region) const {
  const uint64_t bytes = (region ? vfy_.region_slots : vfy_.src_slots) * o_.size;
  uint64_t n = bytes / size;
  if (n > kMaxSlots) n = kMaxSlots;
  if (region && o_.verb == Verb::kSend && n > static_cast<uint64_t>(o_.rx_depth)) {
    n = static_cast<uint64_t>(o_.rx_depth);
  }
  if (!region && n > static_cast<uint64_t>(o_.tx_depth)) n = static_cast<uint64_t>(o_.tx_depth);
  return n < 1 ? 1 : n;
}

bool PerfTest::verify_sync_params(uint64_t size) {
  std::string err;
  Record theirs;
  if (!vfy_.sizes_agreed) {
    const uint64_t sizes = o_.size_list.size();
    if (!swap_records(oob_, Record{kSizes, sizes, 0, 0}, &theirs, &err)) return fail(err);
    if (theirs.a != sizes) {
      return fail("--verify: the number of sizes differs (the peer runs " +
                  std::to_string(theirs.a) + ", this side " + std::to_string(sizes) +
                  "): give both sides the same -s/--sizes/-a and -n");
    }
    vfy_.sizes_agreed = true;
  }
  const uint64_t n = o_.verb == Verb::kSend ? 0 : verify_slots(size, true);
  const Record mine{kParams, size, o_.iters, n};
  if (!swap_records(oob_, mine, &theirs, &err)) return fail(err);
  if (theirs.a != mine.a || theirs.b != mine.b || theirs.c != mine.c) {
    return fail("--verify: the peer runs size " + std::to_string(theirs.a) + " x " +
                std::to_string(theirs.b) + " iterations, this side " + std::to_string(size) +
                " x " + std::to_string(o_.iters) +
                ": give both sides the same -s/--sizes/-a and -n");
  }
  return true;
}

bool PerfTest::verify_post_receives(uint64_t size) {
  const uint64_t slots = verify_slots(size, true);
  const uint64_t first = slots < o_.iters ? slots : o_.iters;
  for (uint64_t j = 0; j < first; ++j) {
    RecvRequest r{j, layout_[0].recv + j * size, static_cast<uint32_t>(size), mr_.lkey};
    if (const int rc = t_.post_recv(0, &r, 1)) {
      return fail("Couldn't post recv: " + std::string(std::strerror(rc)));
    }
  }
  rx_posted_ = static_cast<uint32_t>(first);
  return true;
}

// Requester loop shared by WRITE and READ passes and by SEND: posts messages first..first+count
// with the slot window, verifies READ data on completion. Returns false on error.
bool PerfTest::verify_post_run(uint64_t size, uint64_t first, uint64_t count, uint32_t* crc) {
  const Pattern pat = pattern_for(o_.verb, size);
  const uint64_t src_slots = verify_slots(size, false);
  const bool peak = !o_.no_peak;
  WorkRequest w = wr_[0];
  w.length = static_cast<uint32_t>(size);
  w.signaled = true;
  w.inline_data = false;
  uint64_t posted = 0, completed = 0;
  StallWatch watch = stall_watch(false);
  while (completed < count) {
    bool busy = false;
    while (posted < count && posted - completed < src_slots) {
      const uint64_t m = first + posted;
      uint8_t* slot = reinterpret_cast<uint8_t*>(layout_[0].send + (m % src_slots) * size);
      if (o_.verb == Verb::kRead) {
        w.remote_addr = rem_dest_[0].vaddr + posted * size;
      } else {
        pat.fill(slot, m, size);
        if (crc) *crc = static_cast<uint32_t>(crc32(*crc, slot, static_cast<uInt>(size)));
        if (o_.verb == Verb::kWrite) w.remote_addr = rem_dest_[0].vaddr + posted * size;
      }
      w.local_addr = reinterpret_cast<uint64_t>(slot);
      w.wr_id = m;
      if (peak) tposted_[m] = StallWatch::now_ns();
      if (const int rc = t_.post_send(0, &w, 1)) {
        return fail("Couldn't post send: message " + std::to_string(m) + ": " + std::strerror(rc));
      }
      ++posted;
      busy = true;
    }
    t_.progress();
    const int ne = t_.poll_send(wc_.data(), static_cast<int>(wc_.size()));
    for (int i = 0; i < ne; ++i) {
      const Completion& c = wc_[static_cast<size_t>(i)];
      if (c.status != WcStatus::kSuccess) {
        return completion_error(c, "client", vfy_.messages, o_.iters);
      }
      const uint64_t m = c.wr_id;
      if (peak) tcompleted_[m] = StallWatch::now_ns();
      if (o_.verb == Verb::kRead) {
        auto* slot = reinterpret_cast<uint8_t*>(layout_[0].send + (m % src_slots) * size);
        maybe_corrupt(o_, m, slot, size);
        uint8_t want = 0;
        const int64_t bad = pat.check(slot, m, size, &want);
        if (bad >= 0) {
          vfy_.bad_msg = m;
          vfy_.bad_off = static_cast<uint64_t>(bad);
          return fail("verification FAILED: READ message " + std::to_string(m) + " (size " +
                      std::to_string(size) + ") offset " + std::to_string(bad) + ": expected " +
                      hex2(want) + ", got " + hex2(slot[bad]));
        }
        vfy_.bytes += size;
      }
      ++vfy_.messages;
      ++completed;
    }
    if (ne > 0) busy = true;
    if (busy) {
      watch.progress();
      continue;
    }
    t_.relax();
    if (watch.stalled()) {
      return fail_stalled(watch, completed, count);
    }
    if (interrupted()) return fail("interrupted");
  }
  return true;
}

bool PerfTest::verify_write(uint64_t size) {
  const uint64_t n = verify_slots(size, true);
  const Pattern pat = pattern_for(Verb::kWrite, size);
  auto* region = reinterpret_cast<uint8_t*>(layout_[0].target);
  std::string err;
  const uint64_t t0 = StallWatch::now_ns();
  for (uint64_t first = 0; first < o_.iters; first += n) {
    const uint64_t count = o_.iters - first < n ? o_.iters - first : n;
    Record r;
    if (oob_.is_client()) {
      uint32_t crc = static_cast<uint32_t>(crc32(0, nullptr, 0));
      if (!verify_post_run(size, first, count, &crc)) return false;
      // Every WRITE of the pass is acknowledged, so its data is in the responder's memory.
      if (!send_record(oob_, Record{kPassDone, first, count, crc}, &err) ||
          !recv_record(oob_, kPassResult, &r, &err)) {
        return fail(err);
      }
      if (r.a != 0) {
        return fail("verification FAILED at the server: WRITE message " + std::to_string(r.b) +
                    " (size " + std::to_string(size) + ") offset " + std::to_string(r.c));
      }
      vfy_.bytes += count * size;
    } else {
      if (!recv_record(oob_, kPassDone, &r, &err)) return fail(err);
      if (r.a != first || r.b != count) return fail("--verify: the peer's WRITE passes differ");
      // Every byte against the pattern, and the region against the requester's CRC.
      uint64_t bad_msg = 0, bad_off = 0;
      bool bad = false;
      std::string why;
      for (uint64_t k = 0; k < count; ++k) maybe_corrupt(o_, first + k, region + k * size, size);
      for (uint64_t k = 0; k < count && !bad; ++k) {
        uint8_t want = 0;
        const int64_t off = pat.check(region + k * size, first + k, size, &want);
        if (off >= 0) {
          bad = true;
          bad_msg = first + k;
          bad_off = static_cast<uint64_t>(off);
          why = "verification FAILED: WRITE message " + std::to_string(bad_msg) + " (size " +
                std::to_string(size) + ") offset " + std::to_string(bad_off) + ": expected " +
                hex2(want) + ", got " + hex2(region[k * size + bad_off]);
        }
      }
      const uint32_t crc = static_cast<uint32_t>(
          crc32(crc32(0, nullptr, 0), region, static_cast<uInt>(count * size)));
      if (!bad && crc != r.c) {
        bad = true;
        why = "verification FAILED: WRITE pass from message " + std::to_string(first) + ": CRC " +
              std::to_string(crc) + " differs from the requester's " + std::to_string(r.c);
      }
      if (!send_record(oob_, Record{kPassResult, bad ? 1u : 0u, bad_msg, bad_off}, &err)) {
        return fail(err);
      }
      if (bad) return fail(why);
      vfy_.bytes += count * size;
      vfy_.messages += count;
    }
    ++vfy_.passes;
  }
  return verified_run_done(t0);
}

// A verified run counts every message; without peak figures the report spans t0 .. now.
bool PerfTest::verified_run_done(uint64_t t0) {
  measured_iters_ = o_.iters;
  if (o_.no_peak) {
    tposted_[0] = t0;
    tcompleted_[0] = StallWatch::now_ns();
  }
  return true;
}

bool PerfTest::verify_read(uint64_t size) {
  const uint64_t n = verify_slots(size, true);
  const Pattern pat = pattern_for(Verb::kRead, size);
  auto* region = reinterpret_cast<uint8_t*>(layout_[0].target);
  std::string err;
  const uint64_t t0 = StallWatch::now_ns();
  for (uint64_t first = 0; first < o_.iters; first += n) {
    const uint64_t count = o_.iters - first < n ? o_.iters - first : n;
    Record r;
    if (oob_.is_client()) {
      if (!recv_record(oob_, kReadReady, &r, &err)) return fail(err);
      if (r.a != first || r.b != count) return fail("--verify: the peer's READ passes differ");
      const bool ok = verify_post_run(size, first, count, nullptr);
      // Tell the responder either way, so that it stops too when this side found a bad byte.
      std::string e2;
      send_record(oob_, Record{kPassResult, ok ? 0u : 1u, vfy_.bad_msg, vfy_.bad_off}, &e2);
      if (!ok) return false;
    } else {
      for (uint64_t k = 0; k < count; ++k) pat.fill(region + k * size, first + k, size);
      if (!send_record(oob_, Record{kReadReady, first, count, 0}, &err) ||
          !recv_record(oob_, kPassResult, &r, &err)) {
        return fail(err);
      }
      if (r.a != 0) {
        return fail("verification FAILED at the client: READ message " + std::to_string(r.b) +
                    " (size " + std::to_string(size) + ") offset " + std::to_string(r.c));
      }
      vfy_.bytes += count * size;
      vfy_.messages += count;
    }
    ++vfy_.passes;
  }
  return verified_run_done(t0);
}

bool PerfTest::verify_send(uint64_t size) {
  const Pattern pat = pattern_for(Verb::kSend, size);
  std::string err;
  Record r;
  if (oob_.is_client()) {
    const uint64_t t0 = StallWatch::now_ns();
    if (!verify_post_run(size, 0, o_.iters, nullptr)) return false;
    if (!recv_record(oob_, kPassResult, &r, &err)) return fail(err);
    if (r.a != 0) {
      return fail("verification FAILED at the server: SEND message " + std::to_string(r.b) +
                  " (size " + std::to_string(size) + ") offset " + std::to_string(r.c));
    }
    vfy_.bytes += o_.iters * size;
    return verified_run_done(t0);
  }
  // Receiver: message m arrives in order, in whichever slot its receive WQE named.
  uint64_t rcnt = 0, posted = rx_posted_;
  bool first_rx = true;
  uint64_t bad_msg = 0, bad_off = 0;
  std::string why;
  StallWatch watch = stall_watch(false);
  // After a bad message the rest is still received (not checked), so the sender completes
  // and both sides can report.
  while (rcnt < o_.iters) {
    t_.progress();
    const int ne = t_.poll_recv(wc_.data(), static_cast<int>(wc_.size()));
    if (ne <= 0) {
      t_.relax();
      if (watch.stalled()) {
        return fail("no SEND " + watch.for_text() + " (" + std::to_string(rcnt) + " of " +
                    std::to_string(o_.iters) + " received)");
      }
      if (interrupted()) return fail("interrupted");
      continue;
    }
    watch.progress();
    if (first_rx) {
      tposted_[0] = StallWatch::now_ns();
      first_rx = false;
    }
    for (int i = 0; i < ne; ++i) {
      const Completion& c = wc_[static_cast<size_t>(i)];
      if (c.status != WcStatus::kSuccess) return completion_error(c, "server", rcnt, o_.iters);
      const uint64_t j = c.wr_id;
      auto* slot = reinterpret_cast<uint8_t*>(layout_[0].recv + j * size);
      if (c.byte_len == size) maybe_corrupt(o_, rcnt, slot, size);
      uint8_t want = 0;
      const int64_t off =
          c.byte_len != size || !why.empty() ? -1 : pat.check(slot, rcnt, size, &want);
      if (c.byte_len != size && why.empty()) {
        bad_msg = rcnt;
        why = "verification FAILED: SEND message " + std::to_string(rcnt) + " has " +
              std::to_string(c.byte_len) + " bytes, expected " + std::to_string(size);
      } else if (off >= 0) {
        bad_msg = rcnt;
        bad_off = static_cast<uint64_t>(off);
        why = "verification FAILED: SEND message " + std::to_string(rcnt) + " (size " +
              std::to_string(size) + ") offset " + std::to_string(off) + ": expected " +
              hex2(want) + ", got " + hex2(slot[off]);
      }
      ++rcnt;
      vfy_.bytes += size;
      ++vfy_.messages;
      if (posted < o_.iters) {
        RecvRequest rr{j, layout_[0].recv + j * size, static_cast<uint32_t>(size), mr_.lkey};
        if (const int rc = t_.post_recv(0, &rr, 1)) {
          return fail("Couldn't post recv: " + std::string(std::strerror(rc)));
        }
        ++posted;
      }
    }
  }
  tcompleted_[0] = StallWatch::now_ns();
  measured_iters_ = o_.iters;
  if (!send_record(oob_, Record{kPassResult, why.empty() ? 0u : 1u, bad_msg, bad_off}, &err)) {
    return fail(err);
  }
  if (!why.empty()) return fail(why);
  return true;
}

void PerfTest::print_verify_summary() const {
  std::printf(" Verified: %llu bytes in %llu messages", static_cast<unsigned long long>(vfy_.bytes),
              static_cast<unsigned long long>(vfy_.messages));
  if (vfy_.passes) std::printf(" (%llu passes)", static_cast<unsigned long long>(vfy_.passes));
  std::printf(": OK\n");
  std::fflush(stdout);
}

}  // namespace roce::perf
