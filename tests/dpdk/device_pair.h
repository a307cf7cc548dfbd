// Test support for DPDK device tests: a veth pair in a private network namespace, and one
// side of an RC connection (PD, MR, CQ, QP) on a Device with the control calls made through
// its runner.
#pragma once

#include <sched.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "dpdk/device.h"
#include "stack/core/connect.h"

namespace roce::test {

inline bool sh(const std::string& cmd) {
  return std::system((cmd + " >/dev/null 2>&1").c_str()) == 0;
}

// Moves this process into a new network namespace with a veth pair dA <-> dB (MTU 9000, no
// kernel IPv6). Returns an empty string, or why it cannot (the test then skips).
inline std::string private_veth_pair() {
  if (geteuid() != 0) return "needs root (network namespace and veth)";
  if (unshare(CLONE_NEWNET) != 0) return "unshare(CLONE_NEWNET) failed";
  if (!sh("ip link add dA type veth peer name dB") || !sh("ip link set dA mtu 9000 up") ||
      !sh("ip link set dB mtu 9000 up") || !sh("ip link set lo up")) {
    return "cannot create a veth pair";
  }
  // The kernel must not answer for the stack's addresses or send its own IPv6 traffic here.
  sh("sysctl -w net.ipv6.conf.dA.disable_ipv6=1");
  sh("sysctl -w net.ipv6.conf.dB.disable_ipv6=1");
  return {};
}

// A device on veth end i (0: dA, 1: dB) with addresses 10.9.0.(i+1) and fd09::(i+1).
inline DeviceConfig veth_device(int i) {
  DeviceConfig c;
  std::string err;
  c.name = i ? "rB" : "rA";
  c.port = std::string("net_af_packet") + (i ? "1" : "0") + ",iface=" + (i ? "dB" : "dA") +
           ",blocksz=8192,framesz=8192,framecnt=512";
  c.mtu = 4200;
  apply_setting(c, "ipv4", i ? "10.9.0.2/24" : "10.9.0.1/24", &err);
  apply_setting(c, "ipv6", i ? "fd09::2/64" : "fd09::1/64", &err);
  c.mac = Mac{0x02, 0, 0, 0, 0x09, static_cast<uint8_t>(i + 1)};
  return c;
}

// A memif device of a link in this process: i 0 the server (net_memif<net>0), 1 the client
// (net_memif<net>1), addresses 10.<net>.0.(i+1), `extra` appended to the vdev's arguments.
inline DeviceConfig memif_device(int i, const std::string& sock, int net = 1,
                                 const std::string& extra = "") {
  DeviceConfig c;
  std::string err;
  const std::string n = std::to_string(net);
  c.name = "m" + n + (i ? "B" : "A");
  c.port = "net_memif" + n + (i ? "1" : "0") + ",role=" + (i ? "client" : "server") +
           ",socket=" + sock + ",socket-abstract=no" + extra;
  c.mtu = 4200;
  apply_setting(c, "ipv4", "10." + n + ".0." + (i ? "2" : "1") + "/24", &err);
  c.mac = Mac{0x02, 0, 0, 0, static_cast<uint8_t>(net), static_cast<uint8_t>(i + 1)};
  return c;
}

struct Side {
  dpdk::Device* d;
  uint32_t pd = 0, key = 0;
  CompletionQueue* cq = nullptr;
  Qp* qp = nullptr;
  std::vector<uint8_t> mem;
  uint64_t addr(uint64_t o = 0) { return reinterpret_cast<uint64_t>(mem.data()) + o; }
  // The QP goes before the memory it sends from: a test that fails half way leaves a QP still
  // retransmitting, which would otherwise read `mem` after it is freed.
  // A test that closes the device itself releases its sides first.
  ~Side() { release(); }
  void release() {
    if (!d || !qp) return;
    d->runner().run([&] {
      Engine& e = d->engine();
      e.destroy_qp(qp);
      e.destroy_cq(cq);
      e.dereg_mr(key);
      e.dealloc_pd(pd);
      return true;
    });
    qp = nullptr;
  }
};

inline bool setup_side(Side& s, size_t bytes) {
  s.mem.assign(bytes, 0);
  return s.d->runner().run([&] {
    Engine& e = s.d->engine();
    s.pd = e.alloc_pd();
    if (e.reg_mr(s.pd, s.mem.data(), bytes, s.addr(),
                 kAccessLocalWrite | kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic,
                 &s.key)) {
      return false;
    }
    int err = 0;
    s.cq = e.create_cq(1024, &err);
    QpInitAttr ia;
    ia.pd = s.pd;
    ia.send_cq = ia.recv_cq = s.cq;
    ia.cap.max_send_wr = ia.cap.max_recv_wr = 256;
    s.qp = e.create_qp(ia, &err);
    return s.qp != nullptr;
  });
}

inline int connect_side(Side& s, const Side& peer, int gid, Mtu mtu) {
  return s.d->runner().run([&] {
    const ConnectParams p{
        .access = kAccessRemoteWrite | kAccessRemoteRead | kAccessRemoteAtomic,
        .ah = {.dgid = peer.d->gids()[static_cast<size_t>(gid)],
               .sgid_index = static_cast<uint8_t>(gid)},
        .mtu = mtu,
        .dest_qpn = peer.qp->qpn(),
        .rq_psn = 0x1000,
        .max_dest_rd_atomic = 4,
        .min_rnr_timer = 12,
        .sq_psn = 0x1000,
        .timeout = 12,
        .retry_cnt = 7,
        .rnr_retry = 7,
        .max_rd_atomic = 4,
    };
    return roce::connect_qp(s.d->engine(), s.qp, p);
  });
}

inline bool wait_cqe(Side& s, Cqe* out, int seconds = 10) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (std::chrono::steady_clock::now() < end) {
    if (s.cq->poll(out, 1) == 1) return true;
    s.d->runner().poll();  // drives the engine in inline mode; no-op with an engine thread
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
  return false;
}

}  // namespace roce::test
