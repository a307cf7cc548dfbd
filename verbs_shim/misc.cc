// The rest of libibverbs' exported API: strings, rate conversions, fork support, sysfs helpers,
// the kernel-ABI marshalling helpers librdmacm uses, and the verbs a software NIC does not
// offer (they fail cleanly with EOPNOTSUPP, never crash).
// shim.h first: it includes verbs.h with default visibility (sa.h would include it first).
#include "verbs_shim/shim.h"

#include <fcntl.h>
#include <infiniband/sa.h>
#include <rdma/ib_user_sa.h>
#include <rdma/ib_user_verbs.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

template <size_t N>
const char* lookup(const char* const (&table)[N], int v) {
  return v >= 0 && static_cast<size_t>(v) < N && table[v] ? table[v] : "unknown";
}

// ibv_rate, its bandwidth in Mb/s, and its multiple of 2.5 Gb/s where rdma-core defines one.
struct RateInfo {
  ibv_rate rate;
  int mbps;
  int mult;
};
constexpr RateInfo kRates[] = {
    {IBV_RATE_2_5_GBPS, 2500, 1},       {IBV_RATE_5_GBPS, 5000, 2},
    {IBV_RATE_10_GBPS, 10000, 4},       {IBV_RATE_20_GBPS, 20000, 8},
    {IBV_RATE_30_GBPS, 30000, 12},      {IBV_RATE_40_GBPS, 40000, 16},
    {IBV_RATE_60_GBPS, 60000, 24},      {IBV_RATE_80_GBPS, 80000, 32},
    {IBV_RATE_120_GBPS, 120000, 48},    {IBV_RATE_14_GBPS, 14062, -1},
    {IBV_RATE_56_GBPS, 56250, -1},      {IBV_RATE_112_GBPS, 112500, -1},
    {IBV_RATE_168_GBPS, 168750, -1},    {IBV_RATE_25_GBPS, 25781, -1},
    {IBV_RATE_100_GBPS, 103125, -1},    {IBV_RATE_200_GBPS, 206250, -1},
    {IBV_RATE_300_GBPS, 309375, -1},    {IBV_RATE_28_GBPS, 28125, 11},
    {IBV_RATE_50_GBPS, 53125, 20},      {IBV_RATE_400_GBPS, 425000, 160},
    {IBV_RATE_600_GBPS, 637500, 240},   {IBV_RATE_800_GBPS, 850000, 320},
    {IBV_RATE_1200_GBPS, 1275000, 480},
};

}  // namespace

// --- strings (the texts applications print; they match rdma-core's) ----------------------------

const char* ibv_node_type_str(ibv_node_type t) {
  static const char* const kNames[] = {"InfiniBand channel adapter",
                                       "InfiniBand switch",
                                       "InfiniBand router",
                                       "iWARP NIC",
                                       "usNIC",
                                       "usNIC UDP",
                                       "unspecified"};
  return t >= IBV_NODE_CA ? lookup(kNames, static_cast<int>(t) - 1) : "unknown";
}

const char* ibv_port_state_str(ibv_port_state s) {
  static const char* const kNames[] = {"no state change (NOP)", "down", "init", "armed", "active",
                                       "active defer"};
  return lookup(kNames, static_cast<int>(s));
}

const char* ibv_event_type_str(ibv_event_type e) {
  static const char* const kNames[] = {"CQ error",
                                       "local work queue catastrophic error",
                                       "invalid request local work queue error",
                                       "local access violation work queue error",
                                       "communication established",
                                       "send queue drained",
                                       "path migrated",
                                       "path migration request error",
                                       "local catastrophic error",
                                       "port active",
                                       "port error",
                                       "LID change",
                                       "P_Key change",
                                       "SM change",
                                       "SRQ catastrophic error",
                                       "SRQ limit reached",
                                       "last WQE reached",
                                       "client reregistration",
                                       "GID table change",
                                       "WQ fatal"};
  return lookup(kNames, static_cast<int>(e));
}

const char* ibv_wc_status_str(ibv_wc_status s) {
  static const char* const kNames[] = {"success",
                                       "local length error",
                                       "local QP operation error",
                                       "local EE context operation error",
                                       "local protection error",
                                       "Work Request Flushed Error",
                                       "memory management operation error",
                                       "bad response error",
                                       "local access error",
                                       "remote invalid request error",
                                       "remote access error",
                                       "remote operation error",
                                       "transport retry counter exceeded",
                                       "RNR retry counter exceeded",
                                       "local RDD violation error",
                                       "remote invalid RD request",
                                       "aborted error",
                                       "invalid EE context number",
                                       "invalid EE context state",
                                       "fatal error",
                                       "response timeout error",
                                       "general error",
                                       "TM error",
                                       "TM software rendezvous"};
  return lookup(kNames, static_cast<int>(s));
}

// --- rates
// ------------------------------------------------------------------------------------------

int ibv_rate_to_mult(ibv_rate rate) {
  for (const RateInfo& r : kRates) {
    if (r.rate == rate) return r.mult;
  }
  return -1;
}

ibv_rate mult_to_ibv_rate(int mult) {
  for (const RateInfo& r : kRates) {
    if (r.mult == mult && mult > 0) return r.rate;
  }
  return IBV_RATE_MAX;
}

int ibv_rate_to_mbps(ibv_rate rate) {
  for (const RateInfo& r : kRates) {
    if (r.rate == rate) return r.mbps;
  }
  return -1;
}

ibv_rate mbps_to_ibv_rate(int mbps) {
  for (const RateInfo& r : kRates) {
    if (r.mbps == mbps) return r.rate;
  }
  return IBV_RATE_MAX;
}

// --- fork support: registrations are not pinned, so a fork needs no preparation ------------------

int ibv_fork_init(void) { return 0; }
ibv_fork_status ibv_is_fork_initialized(void) { return IBV_FORK_UNNEEDED; }
int ibv_dontfork_range(void*, size_t) { return 0; }
int ibv_dofork_range(void*, size_t) { return 0; }

// --- sysfs helpers (generic; the stack's devices have no sysfs entries)
// ----------------------------

const char* ibv_get_sysfs_path(void) {
  static const char* path = [] {
    const char* env = getuid() == geteuid() ? std::getenv("SYSFS_PATH") : nullptr;
    if (!env || !*env) return "/sys";
    char* dup = strndup(env, IBV_SYSFS_PATH_MAX);
    if (!dup) return "/sys";
    for (size_t n = std::strlen(dup); n > 1 && dup[n - 1] == '/'; --n) dup[n - 1] = '\0';
    return static_cast<const char*>(dup);
  }();
  return path;
}

int ibv_read_sysfs_file(const char* dir, const char* file, char* buf, size_t size) {
  char path[IBV_SYSFS_PATH_MAX * 2];
  if (!dir || !file || !buf || size == 0 ||
      std::snprintf(path, sizeof path, "%s/%s", dir, file) >= static_cast<int>(sizeof path)) {
    errno = EINVAL;
    return -1;
  }
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t len = read(fd, buf, size);
  close(fd);
  if (len <= 0) return static_cast<int>(len);
  if (buf[len - 1] == '\n') {
    buf[--len] = '\0';
  } else if (static_cast<size_t>(len) < size) {
    buf[len] = '\0';
  } else {
    return -1;  // no room for the terminating NUL
  }
  return static_cast<int>(len);
}

// --- kernel-ABI marshalling (librdmacm converts what the kernel's rdma_cm returns) --------------

void ibv_copy_ah_attr_from_kern(ibv_ah_attr* dst, ib_uverbs_ah_attr* src) {
  std::memcpy(dst->grh.dgid.raw, src->grh.dgid, 16);
  dst->grh.flow_label = src->grh.flow_label;
  dst->grh.sgid_index = src->grh.sgid_index;
  dst->grh.hop_limit = src->grh.hop_limit;
  dst->grh.traffic_class = src->grh.traffic_class;
  dst->dlid = src->dlid;
  dst->sl = src->sl;
  dst->src_path_bits = src->src_path_bits;
  dst->static_rate = src->static_rate;
  dst->is_global = src->is_global;
  dst->port_num = src->port_num;
}

void ibv_copy_qp_attr_from_kern(ibv_qp_attr* dst, ib_uverbs_qp_attr* src) {
  dst->cur_qp_state = static_cast<ibv_qp_state>(src->cur_qp_state);
  dst->path_mtu = static_cast<ibv_mtu>(src->path_mtu);
  dst->path_mig_state = static_cast<ibv_mig_state>(src->path_mig_state);
  dst->qkey = src->qkey;
  dst->rq_psn = src->rq_psn;
  dst->sq_psn = src->sq_psn;
  dst->dest_qp_num = src->dest_qp_num;
  dst->qp_access_flags = src->qp_access_flags;
  dst->cap = ibv_qp_cap{src->max_send_wr, src->max_recv_wr, src->max_send_sge, src->max_recv_sge,
                        src->max_inline_data};
  ibv_copy_ah_attr_from_kern(&dst->ah_attr, &src->ah_attr);
  ibv_copy_ah_attr_from_kern(&dst->alt_ah_attr, &src->alt_ah_attr);
  dst->pkey_index = src->pkey_index;
  dst->alt_pkey_index = src->alt_pkey_index;
  dst->en_sqd_async_notify = src->en_sqd_async_notify;
  dst->sq_draining = src->sq_draining;
  dst->max_rd_atomic = src->max_rd_atomic;
  dst->max_dest_rd_atomic = src->max_dest_rd_atomic;
  dst->min_rnr_timer = src->min_rnr_timer;
  dst->port_num = src->port_num;
  dst->timeout = src->timeout;
  dst->retry_cnt = src->retry_cnt;
  dst->rnr_retry = src->rnr_retry;
  dst->alt_port_num = src->alt_port_num;
  dst->alt_timeout = src->alt_timeout;
}

namespace {
// The path record fields are the same in both directions; only the GIDs change type.
template <typename D, typename S>
void copy_path_fields(D* dst, const S* src) {
  dst->dlid = src->dlid;
  dst->slid = src->slid;
  dst->raw_traffic = src->raw_traffic;
  dst->flow_label = src->flow_label;
  dst->hop_limit = src->hop_limit;
  dst->traffic_class = src->traffic_class;
  dst->reversible = src->reversible;
  dst->numb_path = src->numb_path;
  dst->pkey = src->pkey;
  dst->sl = src->sl;
  dst->mtu_selector = src->mtu_selector;
  dst->mtu = src->mtu;
  dst->rate_selector = src->rate_selector;
  dst->rate = src->rate;
  dst->packet_life_time = src->packet_life_time;
  dst->preference = src->preference;
  dst->packet_life_time_selector = src->packet_life_time_selector;
}
}  // namespace

void ibv_copy_path_rec_from_kern(ibv_sa_path_rec* dst, ib_user_path_rec* src) {
  std::memcpy(dst->dgid.raw, src->dgid, 16);
  std::memcpy(dst->sgid.raw, src->sgid, 16);
  copy_path_fields(dst, src);
}

void ibv_copy_path_rec_to_kern(ib_user_path_rec* dst, ibv_sa_path_rec* src) {
  std::memcpy(dst->dgid, src->dgid.raw, 16);
  std::memcpy(dst->sgid, src->sgid.raw, 16);
  copy_path_fields(dst, src);
}

// --- provider registration: providers are not loaded (the stack is the only device) ------------

void ibv_register_driver(const char*, void*) {}

// --- what a software NIC without a kernel device does not offer
// ------------------------------------

int ibv_resolve_eth_l2_from_gid(ibv_context* context, ibv_ah_attr*, uint8_t[6], uint16_t*) {
  // The stack resolves neighbours itself (ARP / ND) when a QP or AH is created.
  return context ? EOPNOTSUPP : EINVAL;
}

ibv_context* ibv_import_device(int) {
  errno = EOPNOTSUPP;  // no uverbs command fd to share
  return nullptr;
}
ibv_pd* ibv_import_pd(ibv_context*, uint32_t) {
  errno = EOPNOTSUPP;
  return nullptr;
}
void ibv_unimport_pd(ibv_pd*) {}
ibv_mr* ibv_import_mr(ibv_pd*, uint32_t) {
  errno = EOPNOTSUPP;
  return nullptr;
}
void ibv_unimport_mr(ibv_mr*) {}
ibv_dm* ibv_import_dm(ibv_context*, uint32_t) {
  errno = EOPNOTSUPP;
  return nullptr;
}
void ibv_unimport_dm(ibv_dm*) {}
