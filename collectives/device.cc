#include "collectives/device.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string_view>

#include "collectives/error.h"

namespace roce::coll {
namespace {

[[noreturn]] void fail(const std::string& what, int err) {
  throw Error(ErrorKind::kSystem, what + ": " + std::strerror(err));
}

bool ipv4_mapped(const ibv_gid& g) {
  static constexpr uint8_t kPrefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return std::memcmp(g.raw, kPrefix, sizeof kPrefix) == 0;
}
bool link_local(const ibv_gid& g) { return g.raw[0] == 0xfe && (g.raw[1] & 0xc0) == 0x80; }
bool zero(const ibv_gid& g) {
  return std::all_of(std::begin(g.raw), std::end(g.raw), [](uint8_t b) { return b == 0; });
}

}  // namespace

std::string gid_to_string(const ibv_gid& gid) {
  char buf[INET6_ADDRSTRLEN] = {};
  inet_ntop(AF_INET6, gid.raw, buf, sizeof buf);
  return buf;
}

Device::Device(const CommOptions& options) : options_(options) {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (!list) fail("ibv_get_device_list", errno);
  std::string seen;
  for (int i = 0; i < n && !ctx_; ++i) {
    const std::string name = ibv_get_device_name(list[i]);
    seen += (seen.empty() ? "" : ", ") + name;
    if (!options.device.empty() && name != options.device) continue;
    ibv_context* ctx = ibv_open_device(list[i]);
    if (!ctx) {
      const int err = errno;
      ibv_free_device_list(list);
      fail("ibv_open_device(" + name + ")", err);
    }
    ctx_ = ctx;
    name_ = name;
    try {
      choose_port(options.port);
    } catch (const Error&) {
      ibv_close_device(ctx_);
      ctx_ = nullptr;
      if (!options.device.empty()) {
        ibv_free_device_list(list);
        throw;
      }
    }
  }
  ibv_free_device_list(list);
  if (!ctx_) {
    if (n == 0) {
      throw Error(ErrorKind::kSystem,
                  "no RDMA device (ibv_get_device_list found none; for this project's stack set "
                  "ROCE_DEVICE or ROCE_CONFIG, see verbs_shim/README.md)");
    }
    if (!options.device.empty()) {
      throw Error(ErrorKind::kInvalidArgument, "ROCE_COLL_DEVICE='" + options.device +
                                                   "': no such device (there are: " + seen + ")");
    }
    if (options.port) {
      throw Error(ErrorKind::kInvalidArgument,
                  "ROCE_COLL_PORT=" + std::to_string(options.port) +
                      ": no device has that port ACTIVE (devices: " + seen + ")");
    }
    throw Error(ErrorKind::kSystem, "no device has an ACTIVE port (devices: " + seen + ")");
  }
  choose_gid(options.gid_index);
  pd_ = ibv_alloc_pd(ctx_);
  if (!pd_) {
    const int err = errno;
    ibv_close_device(ctx_);
    fail("ibv_alloc_pd(" + name_ + ")", err);
  }
}

Device::~Device() {
  if (pd_) ibv_dealloc_pd(pd_);
  if (ctx_) ibv_close_device(ctx_);
}

void Device::choose_port(int wanted) {
  ibv_device_attr da{};
  if (int rc = ibv_query_device(ctx_, &da)) fail("ibv_query_device(" + name_ + ")", rc);
  for (int p = wanted ? wanted : 1; p <= (wanted ? wanted : da.phys_port_cnt); ++p) {
    ibv_port_attr pa{};
    if (ibv_query_port(ctx_, static_cast<uint8_t>(p), &pa)) continue;
    if (pa.state != IBV_PORT_ACTIVE) continue;
    port_ = static_cast<uint8_t>(p);
    active_mtu_ = static_cast<uint8_t>(pa.active_mtu);
    return;
  }
  if (wanted) {
    throw Error(ErrorKind::kInvalidArgument,
                "ROCE_COLL_PORT=" + std::to_string(wanted) + ": port is not ACTIVE on " + name_);
  }
  throw Error(ErrorKind::kSystem, name_ + ": no ACTIVE port");
}

// RoCE v2 GIDs only (UDP-encapsulated, routable). An IPv4-mapped one is preferred, as NCCL
// does: it is what IPv4 fabrics route, and Linux lists it for every address of the netdev.
void Device::choose_gid(int wanted) {
  ibv_port_attr pa{};
  if (int rc = ibv_query_port(ctx_, port_, &pa)) fail("ibv_query_port", rc);
  int best = -1, best_rank = 0;
  for (int i = 0; i < pa.gid_tbl_len; ++i) {
    ibv_gid_entry e{};
    if (ibv_query_gid_ex(ctx_, port_, static_cast<uint32_t>(i), &e, 0)) continue;
    ibv_gid g;
    std::memcpy(g.raw, e.gid.raw, sizeof g.raw);
    if (wanted >= 0) {
      if (i == wanted) {
        best = i;
        break;
      }
      continue;
    }
    if (e.gid_type != IBV_GID_TYPE_ROCE_V2 || zero(g)) continue;
    const int rank = ipv4_mapped(g) ? 3 : !link_local(g) ? 2 : options_.allow_link_local ? 1 : 0;
    if (rank > best_rank) best = i, best_rank = rank;
  }
  if (best < 0) {
    if (wanted >= 0) {
      throw Error(ErrorKind::kInvalidArgument, "ROCE_COLL_GID_INDEX=" + std::to_string(wanted) +
                                                   ": no such GID on " + name_ + " port " +
                                                   std::to_string(port_));
    }
    throw Error(ErrorKind::kSystem,
                name_ + " port " + std::to_string(port_) +
                    ": no RoCE v2 GID with an IPv4 or global IPv6 address (give the netdev an "
                    "address, or set ROCE_COLL_ALLOW_LINK_LOCAL=1 or ROCE_COLL_GID_INDEX)");
  }
  gid_index_ = best;
  if (int rc = ibv_query_gid(ctx_, port_, best, &gid_)) fail("ibv_query_gid", rc);
}

std::string Device::describe() const {
  static constexpr int kMtuBytes[] = {0, 256, 512, 1024, 2048, 4096};
  return name_ + " port " + std::to_string(port_) + " GID " + std::to_string(gid_index_) + " " +
         gid_to_string(gid_) + " MTU " +
         std::to_string(kMtuBytes[active_mtu_ <= 5 ? active_mtu_ : 0]);
}

ibv_qp* Device::create_rc_qp(ibv_cq* cq, uint32_t depth, uint32_t* max_inline) const {
  ibv_qp_init_attr a{};
  a.send_cq = a.recv_cq = cq;
  a.qp_type = IBV_QPT_RC;
  a.cap.max_send_wr = a.cap.max_recv_wr = depth;
  a.cap.max_send_sge = a.cap.max_recv_sge = 1;
  a.cap.max_inline_data = 64;
  ibv_qp* qp = ibv_create_qp(pd_, &a);
  if (!qp) {  // a provider without inline data
    a.cap.max_inline_data = 0;
    qp = ibv_create_qp(pd_, &a);
  }
  if (!qp) fail("ibv_create_qp(RC, " + std::to_string(depth) + " WRs)", errno);
  *max_inline = a.cap.max_inline_data;
  ibv_qp_attr at{};
  at.qp_state = IBV_QPS_INIT;
  at.port_num = port_;
  at.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  if (int rc = ibv_modify_qp(
          qp, &at, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) {
    ibv_destroy_qp(qp);
    fail("ibv_modify_qp(INIT)", rc);
  }
  return qp;
}

void Device::connect(ibv_qp* qp, const QpAddress& self, const QpAddress& peer,
                     int traffic_class) const {
  int mtu = std::min(self.active_mtu, peer.active_mtu);
  if (options_.mtu) mtu = std::min(mtu, ibv_mtu_of_bytes(options_.mtu));
  ibv_qp_attr at{};
  at.qp_state = IBV_QPS_RTR;
  at.path_mtu = static_cast<ibv_mtu>(mtu);
  at.dest_qp_num = peer.qpn;
  at.rq_psn = peer.psn;
  at.max_dest_rd_atomic = 1;
  at.min_rnr_timer = 12;  // 0.64 ms
  at.ah_attr.is_global = 1;
  at.ah_attr.port_num = port_;
  at.ah_attr.grh.dgid = peer.gid;
  at.ah_attr.grh.sgid_index = static_cast<uint8_t>(gid_index_);
  at.ah_attr.grh.hop_limit = static_cast<uint8_t>(options_.hop_limit);
  at.ah_attr.grh.traffic_class = static_cast<uint8_t>(traffic_class);
  if (int rc =
          ibv_modify_qp(qp, &at,
                        IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                            IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)) {
    fail(
        "ibv_modify_qp(RTR) toward " + gid_to_string(peer.gid) + " QPN " + std::to_string(peer.qpn),
        rc);
  }
  at = ibv_qp_attr{};
  at.qp_state = IBV_QPS_RTS;
  at.sq_psn = self.psn;
  at.timeout = static_cast<uint8_t>(options_.ib_timeout);
  at.retry_cnt = static_cast<uint8_t>(options_.retry_count);
  at.rnr_retry = 7;  // receives are reposted as they complete; never give up on one
  at.max_rd_atomic = 1;
  if (int rc = ibv_modify_qp(qp, &at,
                             IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                 IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC)) {
    fail("ibv_modify_qp(RTS)", rc);
  }
}

}  // namespace roce::coll
