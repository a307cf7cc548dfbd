// Buffers, QPs, addresses and work request templates, laid out as perftest lays them out
// (perftest 6.06 src/perftest_resources.c alloc_ctx, create_mr, set_up_connection,
// ctx_connect, ctx_set_send_reg_wqes, ctx_set_recv_wqes), so a perftest peer's RDMA lands
// inside our buffer and ours inside its.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include "apps/perf/perf_test.h"

namespace roce::perf {

namespace {

bool is_v4_mapped(const Gid& g) {
  static constexpr uint8_t kPrefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF};
  return std::memcmp(g.data(), kPrefix, 12) == 0;
}

// perftest's get_best_gid_index: an IPv4 GID unless --ipv6 (then the first IPv6 one).
int best_gid_index(const std::vector<Gid>& gids, bool ipv6) {
  int best = 0;
  for (size_t i = 1; i < gids.size(); ++i) {
    const bool cur_v4 = is_v4_mapped(gids[static_cast<size_t>(best)]);
    const bool riv_v4 = is_v4_mapped(gids[i]);
    if (riv_v4 && !cur_v4 && !ipv6) best = static_cast<int>(i);
    if (!riv_v4 && cur_v4 && ipv6) best = static_cast<int>(i);
  }
  return best;
}

uint32_t qp_access(Verb v) {
  switch (v) {
    case Verb::kAtomic:
      return kAccessRemoteAtomic;
    case Verb::kRead:
      return kAccessRemoteRead;
    case Verb::kWrite:
      return kAccessRemoteWrite;
    case Verb::kSend:
      return kAccessRemoteWrite | kAccessLocalWrite;
  }
  return 0;
}

// Fast pseudo-random fill (perftest fills with rand(); the content does not matter).
void fill_random(uint8_t* p, uint64_t n) {
  uint64_t x = static_cast<uint64_t>(time(nullptr)) * 0x9E3779B97F4A7C15ull | 1;
  uint64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    std::memcpy(p + i, &x, 8);
  }
  for (; i < n; ++i) p[i] = static_cast<uint8_t>(x >> (8 * (i & 7)));
}

}  // namespace

uint64_t PerfTest::inc(uint64_t size) const {
  const auto cl = static_cast<uint64_t>(cache_line_);
  if (size <= cl) return cl;
  return size % cl == 0 ? size : cl * (size / cl + 1);
}

bool PerfTest::check_device() {
  const DeviceInfo& d = t_.info();
  if (d.gids.empty()) return fail(d.name + ": the device has no GID");
  if (o_.use_gid_user) {
    if (static_cast<size_t>(o_.gid_index) >= d.gids.size()) {
      return fail("gid-index: " + std::to_string(o_.gid_index) + " is out of range (" + d.name +
                      " has GIDs 0.." + std::to_string(d.gids.size() - 1) + ")",
                  2);
    }
    gid_index_ = o_.gid_index;
  } else {
    gid_index_ = best_gid_index(d.gids, o_.ipv6);
  }
  // set_mtu(): the requested MTU, capped by the port's active MTU.
  mtu_ = d.active_mtu;
  if (o_.mtu) {
    Mtu want = Mtu::k256;
    while (mtu_bytes(want) < static_cast<uint32_t>(o_.mtu))
      want = static_cast<Mtu>(static_cast<int>(want) + 1);
    if (static_cast<int>(want) > static_cast<int>(d.active_mtu)) {
      std::printf("Requested mtu is higher than active mtu \n");
      std::printf("Changing to active mtu - %d\n", static_cast<int>(d.active_mtu));
    } else {
      mtu_ = want;
    }
  }
  // ctx_set_out_reads(): READ and atomic tests default to the device's maximum.
  out_reads_ = 1;
  if (o_.verb == Verb::kRead || o_.verb == Verb::kAtomic) {
    const int max = static_cast<int>(d.max_rd_atomic);
    out_reads_ = o_.out_reads;
    if (out_reads_ > max) {
      std::printf("%s", kResultLine);
      std::fprintf(stderr, " Number of outstanding reads is above max = %d\n", max);
      std::fprintf(stderr, " Changing to that max value\n");
      out_reads_ = max;
    } else if (out_reads_ <= 0) {
      out_reads_ = max;
    }
  }
  if (static_cast<uint32_t>(o_.inline_size) > d.max_inline) {
    return fail("inline_size: " + std::to_string(o_.inline_size) + " is above " + d.name + "'s " +
                    std::to_string(d.max_inline) + " bytes",
                2);
  }
  cycle_buffer_ = static_cast<int>(sysconf(_SC_PAGESIZE));
  if (cycle_buffer_ <= 0) cycle_buffer_ = 4096;
  cache_line_ = static_cast<int>(sysconf(_SC_LEVEL1_DCACHE_LINESIZE));
  if (cache_line_ <= 0) cache_line_ = 64;
  return true;
}

bool PerfTest::clamp_ud_sizes() {
  if (!ud()) return true;
  const uint64_t mtu = mtu_bytes(mtu_);
  if (o_.run_all) {
    // send_bw.c / send_lat.c: with -a, UD runs the sizes 2 .. MTU.
    std::fprintf(stderr, " Max msg size in UD is MTU %lu\n", static_cast<unsigned long>(mtu));
    std::fprintf(stderr, " Changing to this MTU\n");
    std::erase_if(o_.size_list, [&](uint64_t s) { return s > mtu; });
  } else if (o_.multi_size) {
    for (uint64_t s : o_.size_list) {
      if (s > mtu) {
        return fail("--sizes: a UD message fits one packet (MTU " + std::to_string(mtu) +
                        " bytes); " + std::to_string(s) + " does not",
                    2);
      }
    }
  } else if (o_.size_list[0] > mtu) {
    o_.size_list[0] = mtu;  // perftest's check_link: the size becomes the MTU
  }
  o_.size = std::ranges::max(o_.size_list);  // the buffers are laid out for it
  return true;
}

bool PerfTest::allocate() {
  const auto nq = static_cast<uint64_t>(o_.num_qps);
  const uint64_t cb = static_cast<uint64_t>(cycle_buffer_);
  unit_ = o_.size < cb ? cb : o_.size;  // BUFF_SIZE(size, cycle_buffer)
  layout_.assign(nq, QpLayout{});
  if (o_.verify) {
    plan_verify();
    // verify.cc's layout: requester slots, then the target region (or receive slots).
    const uint64_t src = vfy_.src_slots * o_.size, region = vfy_.region_slots * o_.size;
    buf_len_ = src + region;
    layout_[0] = QpLayout{0, src, src};
  } else {
    buf_len_ = inc(unit_) * 2 * nq;
    // UD: each receive starts with the 40-byte GRH area, placed so that the message itself
    // starts on a cache line; the buffer grows by a line to make room (alloc_ctx,
    // ctx_set_recv_wqes).
    const uint64_t ud_shift = ud() ? static_cast<uint64_t>(cache_line_) - kUdAddition : 0;
    if (ud()) buf_len_ += static_cast<uint64_t>(cache_line_);
    for (uint64_t i = 0; i < nq; ++i) {
      layout_[i].send = i * unit_;
      layout_[i].target = (nq + i) * unit_;
      layout_[i].recv = (nq + i) * inc(unit_) + ud_shift;  // send_qp_buff_size
    }
  }
  // --use_hugepages: the buffer in huge pages of the default size (perftest: SysV shared memory
  // with SHM_HUGETLB, rounded up to 2 MiB), or perftest's error when none are free.
  const uint64_t page = o_.use_hugepages ? kHugePageSize : 4096;
  buf_len_ = (buf_len_ + page - 1) & ~(page - 1);
  const int huge = o_.use_hugepages ? MAP_HUGETLB : 0;
  void* p =
      mmap(nullptr, buf_len_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | huge, -1, 0);
  if (p == MAP_FAILED && o_.use_hugepages) {
    return fail("Failed to allocate hugepages. Please configure hugepages (" +
                std::to_string(buf_len_ >> 20) + " MiB: " + std::strerror(errno) + ")");
  }
  if (p == MAP_FAILED) return fail("cannot allocate " + std::to_string(buf_len_) + " bytes");
  buf_ = static_cast<uint8_t*>(p);
  // write_lat polls the last byte of its buffer: it starts at zero (create_single_mr).
  if (!(o_.verb == Verb::kWrite && o_.kind == TestKind::kLat)) fill_random(buf_, buf_len_);
  for (auto& l : layout_) {
    l.send += reinterpret_cast<uint64_t>(buf_);
    l.target += reinterpret_cast<uint64_t>(buf_);
    l.recv += reinterpret_cast<uint64_t>(buf_);
  }
  std::string err;
  const uint32_t access =
      kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic;
  if (!t_.reg_mr(buf_, buf_len_, access, &mr_, &err)) return fail(err);
  // --mr_per_qp (perftest's create_mr per QP): every QP registers the buffer again, so each has
  // keys of its own, and the peer addresses each QP's target through its own R_Key.
  qp_mrs_.clear();
  if (o_.mr_per_qp) {
    qp_mrs_.resize(nq);
    for (MemoryRegion& m : qp_mrs_) {
      if (!t_.reg_mr(buf_, buf_len_, access, &m, &err)) return fail(err);
    }
  }

  const bool send = o_.verb == Verb::kSend;
  QpSetup s;
  s.type = o_.conn == Conn::kUd ? QpType::kUd : o_.conn == Conn::kUc ? QpType::kUc : QpType::kRc;
  s.num_qps = static_cast<uint32_t>(nq);
  // Unsignalled WQEs hold their slot until acknowledged: room for a CQ-moderation batch more.
  s.max_send_wr = static_cast<uint32_t>(o_.tx_depth + o_.cq_mod);
  if (s.max_send_wr > t_.info().max_qp_wr) s.max_send_wr = t_.info().max_qp_wr;
  s.max_recv_wr = send ? static_cast<uint32_t>(o_.rx_depth) : 1;
  s.max_inline = static_cast<uint32_t>(o_.inline_size);
  s.send_cq_depth = static_cast<uint32_t>((o_.tx_depth + o_.cq_mod) * o_.num_qps) * 2;
  s.recv_cq_depth = send ? static_cast<uint32_t>(o_.rx_depth * o_.num_qps) * 2 : 0;
  if (o_.srq_exists()) s.srq_depth = static_cast<uint32_t>(o_.rx_depth);
  s.max_post_list = static_cast<uint32_t>(o_.post_list);
  s.events = o_.use_event;
  if (o_.use_event && o_.eq_num >= t_.info().num_comp_vectors) {
    const int n = t_.info().num_comp_vectors;
    return fail("-X " + std::to_string(o_.eq_num) + ": " + t_.info().name + " has " +
                std::to_string(n) + " completion vector" + (n == 1 ? "" : "s") + " (0 .. " +
                std::to_string(n - 1) + ")");
  }
  s.comp_vector = o_.eq_num;
  if (!t_.create_qps(s, &err)) return fail(err);
  if (o_.use_event && !t_.enable_events(&err)) return fail(err);

  // Sample arrays: one timestamp per message unless the peak is skipped (alloc_ctx).
  const uint64_t n = o_.duration_mode ? 1 : o_.iters * nq;
  const bool per_message = o_.kind == TestKind::kLat || !o_.no_peak;
  tposted_.assign(per_message ? n : 1, 0);
  tcompleted_.assign(per_message ? n : 1, 0);
  scratch_.assign(o_.kind == TestKind::kLat ? n : 0, 0);
  scnt_.assign(nq, 0);
  ccnt_.assign(nq, 0);
  wc_.assign(16, Completion{});  // CTX_POLL_BATCH
  wr_.assign(nq * static_cast<uint64_t>(o_.post_list), WorkRequest{});
  rwr_.assign(nq, RecvRequest{});
  return true;
}

void PerfTest::set_up_connection() {
  srand48(static_cast<long>(getpid()) * time(nullptr));
  const Gid gid = t_.info().gids[static_cast<size_t>(gid_index_)];
  my_dest_.assign(static_cast<size_t>(o_.num_qps), KeyMessage{});
  rem_dest_.assign(static_cast<size_t>(o_.num_qps), KeyMessage{});
  for (size_t i = 0; i < my_dest_.size(); ++i) {
    KeyMessage& k = my_dest_[i];
    k.lid = 0;  // RoCE has no LID
    k.qpn = t_.qpn(static_cast<uint32_t>(i));
    k.psn = static_cast<uint32_t>(lrand48()) & 0xFFFFFF;
    k.rkey = mr_of(i).rkey;
    k.out_reads = static_cast<uint32_t>(out_reads_);
    k.vaddr = layout_[i].target;
    k.gid = gid;
  }
}

bool PerfTest::connect_qps() {
  std::string err;
  const uint32_t max_rd = t_.info().max_rd_atomic;
  for (size_t i = 0; i < my_dest_.size(); ++i) {
    const KeyMessage& r = rem_dest_[i];
    ConnectAttr a;
    a.access = qp_access(o_.verb);
    a.qkey = kDefQkey;
    a.path_mtu = mtu_;
    a.dest_qpn = r.qpn;
    a.rq_psn = r.psn;
    a.sq_psn = my_dest_[i].psn;
    a.dgid = r.gid;
    a.sgid_index = static_cast<uint8_t>(gid_index_);
    a.hop_limit = kDefHopLimit;
    a.traffic_class = static_cast<uint8_t>(o_.traffic_class);
    a.sl = static_cast<uint8_t>(o_.sl);
    a.max_dest_rd_atomic = static_cast<uint8_t>(my_dest_[i].out_reads);
    // A perftest peer on another device may offer more outstanding reads than we can issue.
    a.max_rd_atomic = static_cast<uint8_t>(r.out_reads < max_rd ? r.out_reads : max_rd);
    if (a.max_rd_atomic == 0) a.max_rd_atomic = 1;
    a.min_rnr_timer = 12;  // MIN_RNR_TIMER
    a.timeout = static_cast<uint8_t>(o_.qp_timeout);
    a.rate_limit_kbps = o_.rate_limit_pp_kbps;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    // A bw server only answers, unless -b makes it send too.
    a.to_rts = o_.kind == TestKind::kLat || o_.client() || o_.duplex;
    if (!t_.connect(static_cast<uint32_t>(i), a, &err)) return fail(err);
  }
  return true;
}

void PerfTest::set_send_wqes(uint64_t size) {
  const auto pl = static_cast<size_t>(o_.post_list);
  const uint64_t cb = static_cast<uint64_t>(cycle_buffer_);
  const uint64_t slots = cb / inc(size);
  const bool cycle = o_.kind == TestKind::kBw && size <= cb / 2;
  Op op = Op::kWrite;
  switch (o_.verb) {
    case Verb::kSend:
      op = Op::kSend;
      break;
    case Verb::kWrite:
      op = Op::kWrite;
      break;
    case Verb::kRead:
      op = Op::kRead;
      break;
    case Verb::kAtomic:
      op = o_.atomic_type == AtomicType::kFetchAndAdd ? Op::kFetchAdd : Op::kCmpSwap;
      break;
  }
  for (size_t i = 0; i < layout_.size(); ++i) {
    for (size_t j = 0; j < pl; ++j) {
      WorkRequest& w = wr_[i * pl + j];
      w = WorkRequest{};
      w.wr_id = i;
      const uint64_t k = cycle && slots ? j % slots : 0;
      w.local_addr = layout_[i].send + k * inc(size);
      w.length = static_cast<uint32_t>(size);
      w.lkey = mr_of(i).lkey;
      w.op = op;
      w.signaled = (j + 1) % static_cast<size_t>(o_.cq_mod) == 0;
      if (o_.verb != Verb::kSend) {
        const uint64_t rk = (cycle || o_.verb == Verb::kAtomic) && slots ? j % slots : 0;
        w.remote_addr = rem_dest_[i].vaddr + rk * inc(size);
        w.rkey = rem_dest_[i].rkey;
      }
      if (o_.verb == Verb::kAtomic) {
        if (o_.atomic_type == AtomicType::kFetchAndAdd) w.compare_add = 1;  // ATOMIC_ADD_VALUE
        w.swap = 0;                                                         // ATOMIC_SWAP_VALUE
      }
      w.inline_data = (o_.verb == Verb::kSend || o_.verb == Verb::kWrite) &&
                      size <= static_cast<uint64_t>(o_.inline_size);
    }
  }
}

bool PerfTest::post_receives(uint64_t size) {
  const uint64_t cb = static_cast<uint64_t>(cycle_buffer_);
  const uint64_t slots = cb / inc(size);
  const bool cycle = o_.kind == TestKind::kBw && size <= cb / 2;
  // With --use-srq each QP's receives (wr_id: its index, its buffer) are its share of the SRQ's.
  rx_posted_ = static_cast<uint32_t>(o_.srq_exists() ? o_.rx_depth / o_.num_qps : o_.rx_depth);
  const auto len = static_cast<uint32_t>(recv_len(size));
  for (size_t i = 0; i < layout_.size(); ++i) {
    RecvRequest r{i, layout_[i].recv, len, mr_of(i).lkey};
    for (uint32_t j = 0; j < rx_posted_; ++j) {
      if (const int rc = t_.post_recv(static_cast<uint32_t>(i), &r, 1)) {
        return fail("Couldn't post recv Qp = " + std::to_string(i) +
                    ": counter=" + std::to_string(j) + ": " + std::strerror(rc));
      }
      if (cycle && ((j + 1) % slots) == 0) {
        r.addr = layout_[i].recv;
      } else if (cycle) {
        r.addr += inc(size);
      }
    }
    rwr_[i] = RecvRequest{i, layout_[i].recv, len, mr_of(i).lkey};
  }
  return true;
}

bool PerfTest::completion_error(const Completion& c, const char* where, uint64_t done,
                                uint64_t total) {
  return fail(std::string("completion with error at ") + where + ": " + to_string(c.status) +
              " (status " + std::to_string(static_cast<int>(c.status)) + ") on QP " +
              std::to_string(c.qp_num) + " after " + std::to_string(done) + " of " +
              std::to_string(total) + " messages");
}

bool PerfTest::await_cqs(unsigned cqs) {
  if (!o_.use_event || !cqs) return true;
  std::string err;
  if (t_.await_completion(cqs, kEventSliceS, &err) < 0) return fail(err);
  return true;
}

PerfTest::~PerfTest() {
  if (buf_) munmap(buf_, buf_len_);
}

}  // namespace roce::perf
