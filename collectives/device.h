// The device, port and GID a communicator uses, chosen as NCCL does: the named device or the
// first one with an ACTIVE port; on it a RoCE v2 GID that is IPv4-mapped, else global IPv6,
// never link-local unless asked (CommOptions). Also the RC QP's path to a peer: path MTU = the
// smaller of the two active MTUs (and of CommOptions::mtu), the hop limit, traffic class, local
// ACK timeout and retry count of the options.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <string>

#include "collectives/config.h"

namespace roce::coll {

// What a peer needs to reach one of our QPs.
struct QpAddress {
  ibv_gid gid{};
  uint32_t qpn = 0;
  uint32_t psn = 0;
  uint8_t active_mtu = 0;  // enum ibv_mtu
};

class Device {
 public:
  // Opens and chooses; throws Error(kSystem / kInvalidArgument) saying what was found.
  explicit Device(const CommOptions& options);
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  ibv_context* context() const { return ctx_; }
  ibv_pd* pd() const { return pd_; }
  uint8_t port() const { return port_; }
  int gid_index() const { return gid_index_; }
  const ibv_gid& gid() const { return gid_; }
  uint8_t active_mtu() const { return active_mtu_; }
  const std::string& name() const { return name_; }
  // "roce0 port 1 GID 1 ::ffff:10.0.0.1 MTU 4096" (the benchmark's header prints it).
  std::string describe() const;

  // An RC QP on `cq`, in INIT, with `depth` send and receive WRs.
  ibv_qp* create_rc_qp(ibv_cq* cq, uint32_t depth, uint32_t* max_inline) const;
  // INIT -> RTR -> RTS toward `peer`, its packets in `traffic_class`; throws Error(kSystem)
  // naming the step and the errno.
  void connect(ibv_qp* qp, const QpAddress& self, const QpAddress& peer, int traffic_class) const;

 private:
  void choose_port(int wanted);
  void choose_gid(int wanted);

  const CommOptions& options_;
  ibv_context* ctx_ = nullptr;
  ibv_pd* pd_ = nullptr;
  std::string name_;
  uint8_t port_ = 1;
  int gid_index_ = -1;
  ibv_gid gid_{};
  uint8_t active_mtu_ = IBV_MTU_1024;
};

std::string gid_to_string(const ibv_gid& gid);

}  // namespace roce::coll
