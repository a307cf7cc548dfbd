// Device, port, GID and P_Key queries. The numbers come from the engine's configuration and
// the stack's limits (stack/core/queues.h); the port looks like a RoCE port of an RDMA NIC:
// port 1, ACTIVE (DOWN once a link that was up is lost), Ethernet link layer, LID 0, RoCE v2 GIDs
// (IPv6 link-local first, then the IPv4-mapped and IPv6 addresses, as rxe shows them).
#include <arpa/inet.h>
#include <endian.h>

#include <algorithm>
#include <cstring>

#include "dpdk/device.h"
#include "verbs_shim/port_rate.h"
#include "verbs_shim/shim.h"

#undef ibv_query_port

namespace roce::verbs {

namespace {
constexpr uint32_t kVendorId = 0xFFFFFF;    // no IEEE OUI of our own (rxe uses the same value)
constexpr uint32_t kVendorPartId = 0x5243;  // "RC"
constexpr int kGidTypeSysfsRoceV2 = 1;

void fill_device_attr(ShimContext* ctx, ibv_device_attr* a) {
  std::memset(a, 0, sizeof *a);
  const EngineConfig& ec = ctx->engine->config();
  std::snprintf(a->fw_ver, sizeof a->fw_ver, "roce-stack 0.1.0");
  a->node_guid = node_guid_be(ctx->dev);
  a->sys_image_guid = a->node_guid;
  a->max_mr_size = UINT64_MAX;
  a->page_size_cap = 0xFFFFF000;  // any page size from 4 KiB: registrations are not pinned
  a->vendor_id = kVendorId;
  a->vendor_part_id = kVendorPartId;
  a->hw_ver = 0;
  a->max_qp = static_cast<int>(ec.max_qps - 0x11);
  a->max_qp_wr = static_cast<int>(kMaxQpWr);
  a->device_cap_flags =
      IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_SYS_IMAGE_GUID | IBV_DEVICE_CURR_QP_STATE_MOD;
  a->max_sge = static_cast<int>(kMaxSge);
  a->max_sge_rd = static_cast<int>(kMaxSge);
  a->max_cq = static_cast<int>(ec.max_cqs);
  a->max_cqe = static_cast<int>(kMaxCqe);
  a->max_mr = static_cast<int>(MrTable::kMaxRegions);
  a->max_pd = 0xFFFF;
  a->max_qp_rd_atom = kMaxRdAtomic;
  a->max_qp_init_rd_atom = kMaxRdAtomic;
  a->max_res_rd_atom = a->max_qp * kMaxRdAtomic;
  a->atomic_cap = IBV_ATOMIC_HCA;  // atomics are atomic among this engine's QPs
  a->max_ah = static_cast<int>(ec.max_ahs - 1);
  a->max_srq = static_cast<int>(ec.max_srqs);
  a->max_srq_wr = static_cast<int>(kMaxQpWr);
  a->max_srq_sge = static_cast<int>(kMaxSge);
  a->max_pkeys = 1;
  a->local_ca_ack_delay = 15;
  a->phys_port_cnt = 1;
}

const std::vector<Gid>& gids(ShimContext* ctx) { return ctx->device->gids(); }
}  // namespace

uint64_t node_guid_be(ShimDevice* dev) {
  // EUI-64 from the port's MAC (as rxe derives it), or from the configured MAC before the port
  // is open; without either, a stable locally administered value from the name.
  Mac m{};
  if (dev->mac_known) {
    m = dev->mac;
  } else if (dev->cfg.mac) {
    m = *dev->cfg.mac;
  } else {
    uint32_t h = 2166136261u;
    for (char c : dev->cfg.name) h = (h ^ static_cast<uint8_t>(c)) * 16777619u;
    m = Mac{0x02,
            0x52,
            static_cast<uint8_t>(h >> 24),
            static_cast<uint8_t>(h >> 16),
            static_cast<uint8_t>(h >> 8),
            static_cast<uint8_t>(h)};
  }
  const uint8_t b[8] = {
      static_cast<uint8_t>(m[0] ^ 0x02), m[1], m[2], 0xFF, 0xFE, m[3], m[4], m[5]};
  uint64_t be;
  std::memcpy(&be, b, 8);
  return be;
}

void fill_port_attr(ShimContext* ctx, ibv_port_attr* a) {
  std::memset(a, 0, sizeof *a);
  // Down once a link that was up is lost (events.cc: watch_link), active otherwise.
  const bool lost = ctx->device->link_lost();
  a->state = lost ? IBV_PORT_DOWN : IBV_PORT_ACTIVE;
  a->max_mtu = IBV_MTU_4096;
  a->active_mtu = static_cast<ibv_mtu>(ctx->device->active_mtu());
  a->gid_tbl_len = static_cast<int>(gids(ctx).size());
  a->port_cap_flags = IBV_PORT_CM_SUP | IBV_PORT_IP_BASED_GIDS;
  a->max_msg_sz = kMaxMsgSize;
  a->pkey_tbl_len = 1;
  a->lid = 0;
  a->sm_lid = 0;
  a->lmc = 0;
  a->max_vl_num = 1;  // VL0 only
  const PortRate rate = port_rate_for_mbps(ctx->device->link_speed_mbps());
  a->active_width = rate.width;
  a->active_speed = rate.speed;
  a->phys_state = lost ? 2 : 5;  // Polling (rxe's for a port up without carrier) : LinkUp
  a->link_layer = IBV_LINK_LAYER_ETHERNET;
  a->flags = IBV_QPF_GRH_REQUIRED;  // RoCE: every address handle is global
}

int op_query_device_ex(ibv_context* c, const ibv_query_device_ex_input* in,
                       ibv_device_attr_ex* attr, size_t attr_size) {
  return guard_errno([&] {
    if (in && in->comp_mask) return EINVAL;
    if (attr_size < sizeof(ibv_device_attr)) return EINVAL;
    ibv_device_attr_ex a;
    std::memset(&a, 0, sizeof a);
    fill_device_attr(to_ctx(c), &a.orig_attr);
    // Completion timestamps are the time a poll took the completion (CLOCK_MONOTONIC, ns).
    a.completion_timestamp_mask = UINT64_MAX;
    a.hca_core_clock = 1000000;  // kHz: 1 tick = 1 ns
    a.phys_port_cnt_ex = 1;
    // Per-QP rate limits (ibv_modify_qp with IBV_QP_RATE_LIMIT): the engine paces RC, UC and UD
    // QPs at them.
    a.packet_pacing_caps.qp_rate_limit_min = kMinRateLimitKbps;
    a.packet_pacing_caps.qp_rate_limit_max = kMaxRateLimitKbps;
    a.packet_pacing_caps.supported_qpts =
        (1u << IBV_QPT_RC) | (1u << IBV_QPT_UC) | (1u << IBV_QPT_UD);
    std::memcpy(attr, &a, std::min(attr_size, sizeof a));
    return 0;
  });
}

}  // namespace roce::verbs

using namespace roce;
using namespace roce::verbs;

int ibv_query_device(ibv_context* context, ibv_device_attr* device_attr) {
  return guard_errno([&] {
    if (!context || !device_attr) return EINVAL;
    fill_device_attr(to_ctx(context), device_attr);
    return 0;
  });
}

// The exported symbol old binaries call; new ones reach verbs_context::query_port through the
// ibv_query_port macro. The compatibility struct is ibv_port_attr up to link_layer plus one
// byte, so that is what is written.
int ibv_query_port(ibv_context* context, uint8_t port_num, _compat_ibv_port_attr* port_attr) {
  return guard_errno([&] {
    if (!context || !port_attr) return EINVAL;
    if (port_num != 1) return EINVAL;
    ibv_port_attr a;
    fill_port_attr(to_ctx(context), &a);
    std::memcpy(port_attr, &a, offsetof(ibv_port_attr, flags) + 1);
    return 0;
  });
}

int ibv_query_gid(ibv_context* context, uint8_t port_num, int index, ibv_gid* gid) {
  return guard_minus1([&] {
    if (!context || !gid || port_num != 1 || index < 0) return EINVAL;
    const auto& g = gids(to_ctx(context));
    if (static_cast<size_t>(index) >= g.size()) return EINVAL;
    std::memcpy(gid->raw, g[static_cast<size_t>(index)].data(), 16);
    return 0;
  });
}

int ibv_query_gid_type(ibv_context* context, uint8_t port_num, unsigned int index, int* type) {
  return guard_minus1([&] {
    if (!context || !type || port_num != 1) return EINVAL;
    if (index >= gids(to_ctx(context)).size()) return EINVAL;
    *type = kGidTypeSysfsRoceV2;
    return 0;
  });
}

int _ibv_query_gid_ex(ibv_context* context, uint32_t port_num, uint32_t gid_index,
                      ibv_gid_entry* entry, uint32_t flags, size_t entry_size) {
  return guard_errno([&] {
    if (!context || !entry || flags || entry_size < sizeof(ibv_gid_entry)) return EINVAL;
    if (port_num != 1) return EINVAL;
    const auto& g = gids(to_ctx(context));
    if (gid_index >= g.size()) return EINVAL;
    std::memset(entry, 0, entry_size);
    std::memcpy(entry->gid.raw, g[gid_index].data(), 16);
    entry->gid_index = gid_index;
    entry->port_num = 1;
    entry->gid_type = IBV_GID_TYPE_ROCE_V2;
    entry->ndev_ifindex = 0;  // no kernel netdev behind the port
    return 0;
  });
}

ssize_t _ibv_query_gid_table(ibv_context* context, ibv_gid_entry* entries, size_t max_entries,
                             uint32_t flags, size_t entry_size) {
  const int rc = guard_errno([&] {
    if (!context || flags || entry_size < sizeof(ibv_gid_entry)) return EINVAL;
    if (gids(to_ctx(context)).size() > max_entries) return EINVAL;
    return 0;
  });
  if (rc) return -rc;
  const auto& g = gids(to_ctx(context));
  for (size_t i = 0; i < g.size(); ++i) {
    auto* e =
        reinterpret_cast<ibv_gid_entry*>(reinterpret_cast<uint8_t*>(entries) + i * entry_size);
    _ibv_query_gid_ex(context, 1, static_cast<uint32_t>(i), e, 0, entry_size);
  }
  return static_cast<ssize_t>(g.size());
}

int ibv_query_pkey(ibv_context* context, uint8_t port_num, int index, __be16* pkey) {
  if (!context || !pkey || port_num != 1 || index != 0) {
    errno = EINVAL;
    return -1;
  }
  *pkey = htobe16(0xFFFF);  // the default partition, full member: the only P_Key
  return 0;
}

int ibv_get_pkey_index(ibv_context* context, uint8_t port_num, __be16 pkey) {
  __be16 p;
  if (ibv_query_pkey(context, port_num, 0, &p) == 0 && p == pkey) return 0;
  errno = ENOENT;
  return -1;
}

// The verbs of this file that also exist at IBVERBS_1.0 (compat_1_0.cc).
ROCE_DEFAULT_VERSION_1_1(ibv_query_device);
ROCE_DEFAULT_VERSION_1_1(ibv_query_gid);
ROCE_DEFAULT_VERSION_1_1(ibv_query_pkey);
ROCE_DEFAULT_VERSION_1_1(ibv_query_port);
