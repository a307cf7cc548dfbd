// roce-soak: memory, engine objects, the exchange of QP details with the peer, connecting, and
// taking it all down again.
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "apps/perf/oob.h"
#include "apps/soak/soak.h"
#include "dpdk/device.h"
#include "stack/core/connect.h"
#include "stack/core/engine.h"

namespace roce::soak {

namespace {

constexpr uint64_t kLine = 64;
constexpr uint64_t kMagic = 0x726f63652d736b01ull;  // "roce-sk" and the layout's revision

uint64_t round_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

// What each side tells the other: the run's parameters (which must agree: both derive the same
// plans from them), its memory and its QPs.
struct Hello {
  uint64_t magic = kMagic;
  uint64_t seed = 0, qps = 0, max_ops = 0, max_size = 0, area = 0;
  uint64_t base = 0, rkey = 0, mtu = 0;
  uint8_t gid[16] = {};
  uint32_t qpn[kMaxQps] = {};
};

uint32_t first_psn(uint64_t seed, uint32_t side, uint32_t q) {
  return static_cast<uint32_t>(key_of(seed, side, q, 0x95) & 0xffffff);
}

}  // namespace

Soak::Soak(const SoakOptions& o, dpdk::Device& dev, perf::OobChannel& oob)
    : o_(o), dev_(dev), oob_(oob), side_(o.server ? 0 : 1) {}

Soak::~Soak() {
  teardown();
  std::free(mem_);
}

uint8_t* Soak::area(uint32_t q) const { return mem_ + q * area_len_; }
uint8_t* Soak::ctrl(uint32_t q) const { return mem_ + ctrl_off_ + q * kLine; }
uint64_t* Soak::word(uint32_t q) const {
  return reinterpret_cast<uint64_t*>(mem_ + words_off_ + q * 8);
}
uint64_t Soak::peer_addr(const uint8_t* mine) const {
  return peer_base_ + static_cast<uint64_t>(mine - mem_);
}

bool Soak::setup(std::string* err) {
  area_len_ = round_up(o_.plan.area, kLine);
  read_off_ = o_.qps * area_len_;
  words_off_ = round_up(read_off_ + o_.plan.read_source, kLine);
  ctrl_off_ = round_up(words_off_ + 8 * o_.qps, kLine);
  mem_len_ = round_up(ctrl_off_ + kLine * o_.qps, 4096);
  mem_ = static_cast<uint8_t*>(std::aligned_alloc(4096, mem_len_));
  if (!mem_) {
    *err = "cannot allocate " + std::to_string(mem_len_) + " bytes";
    return false;
  }
  std::memset(mem_, 0, mem_len_);  // resident from the start: the samples watch for growth
  fill_pattern(mem_ + read_off_, o_.plan.read_source, read_source_key(o_.plan.seed, side_));
  for (uint32_t q = 0; q < o_.qps; ++q) *word(q) = initial_word(o_.plan.seed, q);
  const uint32_t depth = o_.qps * (o_.plan.max_ops + 2);
  return dev_.runner().run([&] {
    Engine& e = dev_.engine();
    pd_ = e.alloc_pd();
    have_pd_ = true;
    const uint32_t access =
        kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic;
    if (int rc = e.reg_mr(pd_, mem_, mem_len_, reinterpret_cast<uint64_t>(mem_), access, &lkey_)) {
      *err = "cannot register " + std::to_string(mem_len_) + " bytes: " + std::strerror(rc);
      return false;
    }
    have_mr_ = true;
    int rc = 0;
    send_cq_ = e.create_cq(depth, &rc);
    recv_cq_ = send_cq_ ? e.create_cq(depth, &rc) : nullptr;
    if (!recv_cq_) {
      *err = "cannot create CQs of " + std::to_string(depth) + ": " + std::strerror(rc);
      return false;
    }
    for (uint32_t q = 0; q < o_.qps; ++q) {
      QpInitAttr ia;
      ia.pd = pd_;
      ia.send_cq = send_cq_;
      ia.recv_cq = recv_cq_;
      ia.cap.max_send_wr = o_.plan.max_ops + 1;
      ia.cap.max_recv_wr = o_.plan.max_ops + 1;
      ia.cap.max_inline_data = o_.plan.max_inline;
      Qp* qp = e.create_qp(ia, &rc);
      if (!qp) {
        *err = "cannot create QP " + std::to_string(q) + ": " + std::strerror(rc);
        return false;
      }
      qps_.push_back(qp);
    }
    return true;
  });
}

bool Soak::connect(std::string* err) {
  Hello mine;
  mine.seed = o_.plan.seed;
  mine.qps = o_.qps;
  mine.max_ops = o_.plan.max_ops;
  mine.max_size = o_.plan.max_size;
  mine.area = o_.plan.area;
  mine.base = reinterpret_cast<uint64_t>(mem_);
  mine.rkey = lkey_;
  mine.mtu = static_cast<uint64_t>(dev_.active_mtu());
  if (o_.gid_index >= dev_.gids().size()) {
    *err = "--gid-index " + std::to_string(o_.gid_index) + ": the device has " +
           std::to_string(dev_.gids().size()) + " GIDs";
    return false;
  }
  std::memcpy(mine.gid, dev_.gids()[o_.gid_index].data(), 16);
  for (uint32_t q = 0; q < o_.qps; ++q) mine.qpn[q] = qps_[q]->qpn();
  Hello peer;
  if (!oob_.exchange(&mine, &peer, sizeof mine, err)) return false;
  if (peer.magic != kMagic || peer.seed != mine.seed || peer.qps != mine.qps ||
      peer.max_ops != mine.max_ops || peer.max_size != mine.max_size || peer.area != mine.area) {
    *err =
        "the peer runs with other parameters (both sides need the same --seed, --qps, "
        "--max-ops and --max-size): seed " +
        std::to_string(peer.seed) + ", " + std::to_string(peer.qps) + " QPs";
    return false;
  }
  peer_base_ = peer.base;
  peer_rkey_ = static_cast<uint32_t>(peer.rkey);
  ConnectParams p;
  p.access = kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic;
  std::memcpy(p.ah.dgid.data(), peer.gid, 16);
  p.ah.sgid_index = o_.gid_index;
  p.mtu = static_cast<Mtu>(std::min<uint64_t>(mine.mtu, peer.mtu));
  p.max_dest_rd_atomic = kMaxRdAtomic;
  p.max_rd_atomic = kMaxRdAtomic;
  p.timeout = o_.timeout;
  p.retry_cnt = o_.retry;
  p.rnr_retry = 7;
  const char* step = "INIT";
  uint32_t failed_q = 0;
  const int rc = dev_.runner().run([&] {
    for (uint32_t q = 0; q < o_.qps; ++q) {
      p.dest_qpn = peer.qpn[q];
      p.rq_psn = first_psn(o_.plan.seed, 1 - side_, q);
      p.sq_psn = first_psn(o_.plan.seed, side_, q);
      failed_q = q;
      if (int r = connect_qp(dev_.engine(), qps_[q], p, &step)) return r;
    }
    return 0;
  });
  if (rc) {
    *err = "cannot move QP " + std::to_string(failed_q) + " to " + step + ": " + std::strerror(rc);
    return false;
  }
  active_.assign(o_.qps, Active{});
  passive_.assign(o_.qps, Passive{});
  for (uint32_t q = 0; q < o_.qps; ++q) {
    active_[q].word = passive_[q].word = initial_word(o_.plan.seed, q);
    if (!is_active(q)) prepare_passive(q);  // batch 0's receives, before the peer may send
  }
  quiet_start_ = dev_.buffers_in_use();  // nothing sent yet but the neighbours' ARP
  // Both sides' receives are posted before either sends.
  uint64_t ready = kMagic, peer_ready = 0;
  return oob_.exchange(&ready, &peer_ready, sizeof ready, err);
}

void Soak::teardown() {
  if (!have_pd_) return;
  dev_.runner().run([this] {
    Engine& e = dev_.engine();
    for (Qp* q : qps_) e.destroy_qp(q);
    if (send_cq_) e.destroy_cq(send_cq_);
    if (recv_cq_) e.destroy_cq(recv_cq_);
    if (have_mr_) e.dereg_mr(lkey_);
    e.dealloc_pd(pd_);
  });
  qps_.clear();
  send_cq_ = recv_cq_ = nullptr;
  have_pd_ = have_mr_ = false;
  dev_.runner().stop();  // nothing polls the port any more; the device closes after
}

}  // namespace roce::soak
