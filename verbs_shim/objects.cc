// Protection domains, memory regions, completion channels, completion queues, shared receive
// queues and address handles. Each verb checks its arguments, runs the engine part on the
// engine thread, and keeps the use counts that make destroying an object still in use fail
// with EBUSY (the engine checks too; the shim's counts are what the application's view is).
#include <endian.h>

#include <cstring>

#include "verbs_shim/shim.h"

#undef ibv_reg_mr
#undef ibv_reg_mr_iova

namespace roce::verbs {

namespace {
template <typename T>
void track(ShimContext* ctx, std::unordered_set<T*> ContextObjects::*set, T* obj) {
  std::lock_guard<std::mutex> lock(ctx->obj_mu);
  (ctx->objs.*set).insert(obj);
}
template <typename T>
void untrack(ShimContext* ctx, std::unordered_set<T*> ContextObjects::*set, T* obj) {
  std::lock_guard<std::mutex> lock(ctx->obj_mu);
  (ctx->objs.*set).erase(obj);
}

// Engine thread: an armed CQ got a completion.
void on_cq_notify(void* arg, CompletionQueue*) { signal_cq_event(static_cast<ShimCq*>(arg)); }

ShimCq* create_cq_common(ibv_context* context, uint32_t cqe, void* cq_context,
                         ibv_comp_channel* channel, uint32_t comp_vector, uint64_t wc_flags) {
  ShimContext* ctx = to_ctx(context);
  if (cqe == 0 || cqe > kMaxCqe ||
      comp_vector >= static_cast<uint32_t>(context->num_comp_vectors)) {
    errno = EINVAL;
    return nullptr;
  }
  if (channel && channel->context != context) {
    errno = EINVAL;
    return nullptr;
  }
  auto cq = std::make_unique<ShimCq>();
  std::memset(&cq->cq, 0, sizeof cq->cq);
  cq->ctx = ctx;
  cq->channel = channel ? to_channel(channel) : nullptr;
  cq->runner = ctx->runner;
  cq->inline_mode = ctx->inline_mode;
  cq->wc_flags = wc_flags;
  int err = 0;
  ShimCq* raw = cq.get();
  CompletionQueue* q = on_engine(ctx, [&]() -> CompletionQueue* {
    CompletionQueue* c = ctx->engine->create_cq(cqe, &err);
    if (c && raw->channel) c->set_notify(&on_cq_notify, raw);
    return c;
  });
  if (!q) {
    errno = err ? err : ENOMEM;
    return nullptr;
  }
  cq->q = q;
  ibv_cq_ex& c = cq->cq;
  c.context = context;
  c.channel = channel;
  c.cq_context = cq_context;
  c.handle = q->cqn();
  c.cqe = static_cast<int>(q->depth());
  pthread_mutex_init(&c.mutex, nullptr);
  pthread_cond_init(&c.cond, nullptr);
  install_cq_ex_ops(raw);
  if (ShimChannel* ch = raw->channel) {
    std::lock_guard<std::mutex> lock(ch->mu);
    ++ch->ch.refcnt;
  }
  register_cq(raw);
  track(ctx, &ContextObjects::cqs, raw);
  return cq.release();
}

// Reads the addresses out of a UD receive buffer's 40-byte GRH area: the IPv6 header, or (RoCEv2
// over IPv4) the 20-byte IPv4 header at offset 20 (rdma-core's convention, and the engine's).
bool grh_addresses(const ibv_grh* grh, Gid* src, Gid* dst, uint8_t* tclass, uint32_t* flow) {
  const auto* raw = reinterpret_cast<const uint8_t*>(grh);
  const uint8_t* v4 = raw + 20;
  if ((v4[0] >> 4) == 4 && (v4[0] & 0xF) == 5) {
    static constexpr uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF};
    std::memcpy(src->data(), kMapped, 12);
    std::memcpy(dst->data(), kMapped, 12);
    std::memcpy(src->data() + 12, v4 + 12, 4);
    std::memcpy(dst->data() + 12, v4 + 16, 4);
    *tclass = v4[1];
    *flow = 0;
    return true;
  }
  if ((raw[0] >> 4) == 6) {
    std::memcpy(src->data(), grh->sgid.raw, 16);
    std::memcpy(dst->data(), grh->dgid.raw, 16);
    const uint32_t vtf = be32toh(grh->version_tclass_flow);
    *tclass = static_cast<uint8_t>(vtf >> 20);
    *flow = vtf & 0xFFFFF;
    return true;
  }
  return false;
}
}  // namespace

void signal_cq_event(ShimCq* cq) { cq->channel->events.push(cq); }

// --- destruction (usage already checked) ------------------------------------------------------

int dealloc_pd_now(ShimPd* pd) {
  ShimContext* ctx = pd->ctx;
  const int rc = on_engine(ctx, [&] { return ctx->engine->dealloc_pd(pd->id); });
  if (rc) return rc;
  untrack(ctx, &ContextObjects::pds, pd);
  delete pd;
  return 0;
}

int dereg_mr_now(ShimMr* mr) {
  ShimContext* ctx = mr->pd->ctx;
  const int rc = on_engine(ctx, [&] { return ctx->engine->dereg_mr(mr->key); });
  if (rc) return rc;
  --mr->pd->users;
  untrack(ctx, &ContextObjects::mrs, mr);
  delete mr;
  return 0;
}

int destroy_cq_now(ShimCq* cq, bool wait_acks) {
  ShimContext* ctx = cq->ctx;
  forget_cq(cq);
  const int rc = on_engine(ctx, [&] { return ctx->engine->destroy_cq(cq->q); });
  if (rc) {
    register_cq(cq);
    return rc;
  }
  // No notification can come any more: drop queued events, wait for acknowledgements.
  drain_cq_events(cq, wait_acks);
  if (ShimChannel* ch = cq->channel) {
    std::lock_guard<std::mutex> lock(ch->mu);
    --ch->ch.refcnt;
  }
  untrack(ctx, &ContextObjects::cqs, cq);
  pthread_mutex_destroy(&cq->cq.mutex);
  pthread_cond_destroy(&cq->cq.cond);
  delete cq;
  return 0;
}

int destroy_srq_now(ShimSrq* srq, bool wait_acks) {
  ShimContext* ctx = srq->ctx;
  const int rc = on_engine(ctx, [&] { return ctx->engine->destroy_srq(srq->q); });
  if (rc) return rc;
  unregister_srq(srq, wait_acks);
  --srq->pd->users;
  untrack(ctx, &ContextObjects::srqs, srq);
  pthread_mutex_destroy(&srq->srq.mutex);
  pthread_cond_destroy(&srq->srq.cond);
  delete srq;
  return 0;
}

int destroy_ah_now(ShimAh* ah) {
  ShimContext* ctx = ah->pd->ctx;
  const int rc = on_engine(ctx, [&] { return ctx->engine->destroy_ah(ah->id); });
  if (rc) return rc;
  --ah->pd->users;
  untrack(ctx, &ContextObjects::ahs, ah);
  delete ah;
  return 0;
}

void destroy_channel_now(ShimChannel* ch) {
  untrack(ch->ctx, &ContextObjects::channels, ch);
  ch->events.close();
  delete ch;
}

// --- cq_ex creation (verbs_context::create_cq_ex) ---------------------------------------------

ibv_cq_ex* op_create_cq_ex(ibv_context* context, ibv_cq_init_attr_ex* attr) {
  return guard_ptr([&]() -> ibv_cq_ex* {
    constexpr uint64_t kSupported = static_cast<uint64_t>(IBV_WC_STANDARD_FLAGS) |
                                    IBV_WC_EX_WITH_COMPLETION_TIMESTAMP |
                                    IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK;
    if (!attr || (attr->comp_mask &
                  ~static_cast<uint32_t>(IBV_CQ_INIT_ATTR_MASK_FLAGS | IBV_CQ_INIT_ATTR_MASK_PD))) {
      errno = EINVAL;
      return nullptr;
    }
    if ((attr->wc_flags & ~kSupported) ||
        ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_PD) && attr->parent_domain)) {
      errno = EOPNOTSUPP;
      return nullptr;
    }
    if ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) &&
        (attr->flags & ~static_cast<uint32_t>(IBV_CREATE_CQ_ATTR_SINGLE_THREADED))) {
      errno = EOPNOTSUPP;  // IGNORE_OVERRUN: an overrun is always a CQ error here
      return nullptr;
    }
    ShimCq* cq = create_cq_common(context, attr->cqe, attr->cq_context, attr->channel,
                                  attr->comp_vector, attr->wc_flags);
    return cq ? &cq->cq : nullptr;
  });
}

}  // namespace roce::verbs

using namespace roce;
using namespace roce::verbs;

// --- protection domains
// ---------------------------------------------------------------------------

ibv_pd* ibv_alloc_pd(ibv_context* context) {
  return guard_ptr([&]() -> ibv_pd* {
    if (!context) {
      errno = EINVAL;
      return nullptr;
    }
    ShimContext* ctx = to_ctx(context);
    auto pd = std::make_unique<ShimPd>();
    std::memset(&pd->pd, 0, sizeof pd->pd);
    pd->ctx = ctx;
    pd->id = on_engine(ctx, [&] { return ctx->engine->alloc_pd(); });
    pd->pd.context = context;
    pd->pd.handle = pd->id;
    track(ctx, &ContextObjects::pds, pd.get());
    return &pd.release()->pd;
  });
}

int ibv_dealloc_pd(ibv_pd* pd) {
  return guard_errno([&] {
    if (!pd) return EINVAL;
    ShimPd* p = to_pd(pd);
    if (p->users.load() != 0) return EBUSY;
    return dealloc_pd_now(p);
  });
}

// --- memory regions
// ----------------------------------------------------------------------------------

ibv_mr* ibv_reg_mr_iova2(ibv_pd* pd, void* addr, size_t length, uint64_t iova,
                         unsigned int access) {
  return guard_ptr([&]() -> ibv_mr* {
    if (!pd) {
      errno = EINVAL;
      return nullptr;
    }
    ShimPd* p = to_pd(pd);
    ShimContext* ctx = p->ctx;
    uint32_t key = 0;
    // Optional access bits (IBV_ACCESS_OPTIONAL_RANGE, e.g. RELAXED_ORDERING) are hints: the
    // engine masks them.
    const int rc = on_engine(
        ctx, [&] { return ctx->engine->reg_mr(p->id, addr, length, iova, access, &key); });
    if (rc) {
      errno = rc;
      return nullptr;
    }
    auto mr = std::make_unique<ShimMr>();
    std::memset(&mr->mr, 0, sizeof mr->mr);
    mr->pd = p;
    mr->key = key;
    mr->mr.context = pd->context;
    mr->mr.pd = pd;
    mr->mr.addr = addr;
    mr->mr.length = length;
    mr->mr.handle = key;
    mr->mr.lkey = key;
    mr->mr.rkey = key;
    ++p->users;
    track(ctx, &ContextObjects::mrs, mr.get());
    return &mr.release()->mr;
  });
}

ibv_mr* ibv_reg_mr(ibv_pd* pd, void* addr, size_t length, int access) {
  return ibv_reg_mr_iova2(pd, addr, length, reinterpret_cast<uintptr_t>(addr),
                          static_cast<unsigned int>(access));
}

ibv_mr* ibv_reg_mr_iova(ibv_pd* pd, void* addr, size_t length, uint64_t iova, int access) {
  return ibv_reg_mr_iova2(pd, addr, length, iova, static_cast<unsigned int>(access));
}

ibv_mr* ibv_reg_dmabuf_mr(ibv_pd*, uint64_t, size_t, uint64_t, int, int) {
  errno = EOPNOTSUPP;  // no device memory behind a software NIC
  return nullptr;
}

int ibv_dereg_mr(ibv_mr* mr) {
  return guard_errno([&] { return mr ? dereg_mr_now(to_mr(mr)) : EINVAL; });
}

// In place: the keys stay (rxe and mlx5 keep them, and a peer holding the rkey goes on using
// the region), and so does what the flags do not change: the PD, the translation (address,
// length and IOVA, a custom one from ibv_reg_mr_iova included) and the access. A new
// translation's IOVA is its address, as rdma-core's rereg command passes it (hca_va = addr).
int ibv_rereg_mr(ibv_mr* mr, int flags, ibv_pd* pd, void* addr, size_t length, int access) {
  if (!mr || (flags & ~IBV_REREG_MR_FLAGS_SUPPORTED) ||
      ((flags & IBV_REREG_MR_CHANGE_TRANSLATION) && (!addr || !length)) ||
      (access && !(flags & IBV_REREG_MR_CHANGE_ACCESS)) ||
      ((flags & IBV_REREG_MR_CHANGE_PD) && !pd)) {
    errno = EINVAL;
    return IBV_REREG_MR_ERR_INPUT;
  }
  const int rc = guard_errno([&] {
    ShimMr* m = to_mr(mr);
    ShimPd* new_pd = (flags & IBV_REREG_MR_CHANGE_PD) ? to_pd(pd) : m->pd;
    const bool translate = flags & IBV_REREG_MR_CHANGE_TRANSLATION;
    void* new_addr = translate ? addr : mr->addr;
    const size_t new_len = translate ? length : mr->length;
    ShimContext* ctx = m->pd->ctx;
    const int r = on_engine(ctx, [&] {
      const MemoryRegion* region = ctx->engine->mrs().find(m->key);
      if (!region) return EINVAL;
      const uint64_t iova = translate ? reinterpret_cast<uintptr_t>(addr) : region->iova;
      const uint32_t acc =
          (flags & IBV_REREG_MR_CHANGE_ACCESS) ? static_cast<uint32_t>(access) : region->access;
      return ctx->engine->rereg_mr(m->key, new_pd->id, new_addr, new_len, iova, acc);
    });
    if (r) return r;
    --m->pd->users;
    ++new_pd->users;
    m->pd = new_pd;
    mr->pd = &new_pd->pd;
    mr->addr = new_addr;
    mr->length = new_len;
    return 0;
  });
  if (rc) {
    errno = rc;
    return IBV_REREG_MR_ERR_CMD;
  }
  return 0;
}

// --- completion channels ------------------------------------------------------------------------

ibv_comp_channel* ibv_create_comp_channel(ibv_context* context) {
  return guard_ptr([&]() -> ibv_comp_channel* {
    if (!context) {
      errno = EINVAL;
      return nullptr;
    }
    auto ch = std::make_unique<ShimChannel>();
    std::memset(&ch->ch, 0, sizeof ch->ch);
    ch->ctx = to_ctx(context);
    ch->ch.context = context;
    // A real, pollable fd, blocking by default like the kernel's completion event file
    // (event_file.h).
    if (int e = ch->events.open()) {
      errno = e;
      return nullptr;
    }
    ch->ch.fd = ch->events.fd();
    track(ch->ctx, &ContextObjects::channels, ch.get());
    return &ch.release()->ch;
  });
}

int ibv_destroy_comp_channel(ibv_comp_channel* channel) {
  return guard_errno([&] {
    if (!channel) return EINVAL;
    ShimChannel* ch = to_channel(channel);
    {
      std::lock_guard<std::mutex> lock(ch->mu);
      if (channel->refcnt) return EBUSY;  // CQs still use it
    }
    destroy_channel_now(ch);
    return 0;
  });
}

// --- completion queues
// ----------------------------------------------------------------------------

ibv_cq* ibv_create_cq(ibv_context* context, int cqe, void* cq_context, ibv_comp_channel* channel,
                      int comp_vector) {
  return guard_ptr([&]() -> ibv_cq* {
    if (!context || cqe <= 0 || comp_vector < 0) {
      errno = EINVAL;
      return nullptr;
    }
    ShimCq* cq = create_cq_common(context, static_cast<uint32_t>(cqe), cq_context, channel,
                                  static_cast<uint32_t>(comp_vector), IBV_WC_STANDARD_FLAGS);
    return cq ? reinterpret_cast<ibv_cq*>(&cq->cq) : nullptr;
  });
}

// A new ring, the pending completions moved into it in order (CompletionQueue::resize: EINVAL
// below what is pending, as rxe). The engine's thread does it, the producer side, while this
// thread holds the consumer side's lock, so neither end moves meanwhile. Work posted before the
// call is processed first (engine polls while they find work, boundedly), as a NIC would long
// have done: its completions count as pending, as they would on rxe or mlx5.
int ibv_resize_cq(ibv_cq* cq, int cqe) {
  return guard_errno([&] {
    if (!cq || cqe <= 0) return EINVAL;
    ShimCq* c = to_cq(cq);
    std::lock_guard<SpinLock> polls(c->poll_lock);
    const int rc = on_engine(c->ctx, [&] {
      for (int i = 0; i < 1024 && c->ctx->engine->poll(); ++i) {
      }
      return c->q->resize(static_cast<uint32_t>(cqe));
    });
    if (rc == 0) cq->cqe = static_cast<int>(c->q->depth());
    return rc;
  });
}

int ibv_destroy_cq(ibv_cq* cq) {
  return guard_errno([&] {
    if (!cq) return EINVAL;
    ShimCq* c = to_cq(cq);
    if (c->users.load() != 0) return EBUSY;  // QPs still complete into it
    return destroy_cq_now(c, true);
  });
}

// --- shared receive queues
// ------------------------------------------------------------------------

ibv_srq* ibv_create_srq(ibv_pd* pd, ibv_srq_init_attr* init) {
  return guard_ptr([&]() -> ibv_srq* {
    if (!pd || !init) {
      errno = EINVAL;
      return nullptr;
    }
    ShimPd* p = to_pd(pd);
    ShimContext* ctx = p->ctx;
    ibv_srq_attr& a = init->attr;
    if (a.srq_limit > a.max_wr) {
      errno = EINVAL;
      return nullptr;
    }
    int err = 0;
    SharedReceiveQueue* q =
        on_engine(ctx, [&] { return ctx->engine->create_srq(p->id, a.max_wr, a.max_sge, &err); });
    if (!q) {
      errno = err ? err : ENOMEM;
      return nullptr;
    }
    if (a.srq_limit) q->set_limit(a.srq_limit);
    auto srq = std::make_unique<ShimSrq>();
    std::memset(&srq->srq, 0, sizeof srq->srq);
    srq->ctx = ctx;
    srq->pd = p;
    srq->q = q;
    srq->srq.context = pd->context;
    srq->srq.srq_context = init->srq_context;
    srq->srq.pd = pd;
    srq->srq.handle = q->srqn();
    pthread_mutex_init(&srq->srq.mutex, nullptr);
    pthread_cond_init(&srq->srq.cond, nullptr);
    a.max_wr = q->max_wr();
    a.max_sge = q->max_sge();
    ++p->users;
    register_srq(srq.get());
    track(ctx, &ContextObjects::srqs, srq.get());
    return &srq.release()->srq;
  });
}

int ibv_modify_srq(ibv_srq* srq, ibv_srq_attr* attr, int mask) {
  if (!srq || !attr) return EINVAL;
  ShimSrq* s = to_srq(srq);
  if (mask & ~(IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT)) return EINVAL;
  if (mask & IBV_SRQ_MAX_WR) return EINVAL;  // no IBV_DEVICE_SRQ_RESIZE
  if (mask & IBV_SRQ_LIMIT) {
    if (attr->srq_limit > s->q->max_wr()) return EINVAL;
    // Arms the limit event (IBA 10.2.9.2): raised once when fewer WQEs remain, then disarmed.
    s->q->set_limit(attr->srq_limit);
  }
  return 0;
}

int ibv_query_srq(ibv_srq* srq, ibv_srq_attr* attr) {
  if (!srq || !attr) return EINVAL;
  ShimSrq* s = to_srq(srq);
  attr->max_wr = s->q->max_wr();
  attr->max_sge = s->q->max_sge();
  attr->srq_limit = s->q->limit();
  return 0;
}

int ibv_destroy_srq(ibv_srq* srq) {
  return guard_errno([&] {
    if (!srq) return EINVAL;
    ShimSrq* s = to_srq(srq);
    if (s->users.load() != 0) return EBUSY;  // QPs still attached
    return destroy_srq_now(s, true);
  });
}

// --- address handles
// -----------------------------------------------------------------------------------

ibv_ah* ibv_create_ah(ibv_pd* pd, ibv_ah_attr* attr) {
  return guard_ptr([&]() -> ibv_ah* {
    if (!pd || !attr) {
      errno = EINVAL;
      return nullptr;
    }
    // RoCE address handles are global (the GRH becomes the IP header).
    if (!attr->is_global || (attr->port_num != 1 && attr->port_num != 0)) {
      errno = EINVAL;
      return nullptr;
    }
    ShimPd* p = to_pd(pd);
    ShimContext* ctx = p->ctx;
    const AhAttr a = to_ah_attr(*attr);
    uint32_t id = 0;
    const int rc = on_engine(ctx, [&] { return ctx->engine->create_ah(p->id, a, &id); });
    if (rc) {
      errno = rc;
      return nullptr;
    }
    auto ah = std::make_unique<ShimAh>();
    std::memset(&ah->ah, 0, sizeof ah->ah);
    ah->pd = p;
    ah->id = id;
    ah->ah.context = pd->context;
    ah->ah.pd = pd;
    ah->ah.handle = id;
    ++p->users;
    track(ctx, &ContextObjects::ahs, ah.get());
    return &ah.release()->ah;
  });
}

int ibv_destroy_ah(ibv_ah* ah) {
  return guard_errno([&] { return ah ? destroy_ah_now(to_ah(ah)) : EINVAL; });
}

int ibv_init_ah_from_wc(ibv_context* context, uint8_t port_num, ibv_wc* wc, ibv_grh* grh,
                        ibv_ah_attr* ah_attr) {
  return guard_minus1([&] {
    if (!context || !wc || !grh || !ah_attr || port_num != 1) return EINVAL;
    if (!(wc->wc_flags & IBV_WC_GRH)) return EINVAL;  // RoCE needs the GRH to answer
    Gid src{}, dst{};
    uint8_t tclass = 0;
    uint32_t flow = 0;
    if (!grh_addresses(grh, &src, &dst, &tclass, &flow)) return EINVAL;
    // The answer leaves from the GID the request was sent to.
    int sgid_index = -1;
    for (int i = 0;; ++i) {
      ibv_gid g;
      if (ibv_query_gid(context, port_num, i, &g) != 0) break;
      if (std::memcmp(g.raw, dst.data(), 16) == 0) {
        sgid_index = i;
        break;
      }
    }
    if (sgid_index < 0) return ENOENT;
    std::memset(ah_attr, 0, sizeof *ah_attr);
    ah_attr->is_global = 1;
    ah_attr->port_num = port_num;
    ah_attr->sl = wc->sl;
    ah_attr->dlid = wc->slid;
    std::memcpy(ah_attr->grh.dgid.raw, src.data(), 16);
    ah_attr->grh.sgid_index = static_cast<uint8_t>(sgid_index);
    ah_attr->grh.hop_limit = 0xFF;
    ah_attr->grh.traffic_class = tclass;
    ah_attr->grh.flow_label = flow;
    return 0;
  });
}

ibv_ah* ibv_create_ah_from_wc(ibv_pd* pd, ibv_wc* wc, ibv_grh* grh, uint8_t port_num) {
  if (!pd) {
    errno = EINVAL;
    return nullptr;
  }
  ibv_ah_attr attr;
  if (ibv_init_ah_from_wc(pd->context, port_num, wc, grh, &attr)) return nullptr;
  return ibv_create_ah(pd, &attr);
}

// The verbs of this file that also exist at IBVERBS_1.0 (compat_1_0.cc).
ROCE_DEFAULT_VERSION_1_1(ibv_alloc_pd);
ROCE_DEFAULT_VERSION_1_1(ibv_create_ah);
ROCE_DEFAULT_VERSION_1_1(ibv_create_cq);
ROCE_DEFAULT_VERSION_1_1(ibv_create_srq);
ROCE_DEFAULT_VERSION_1_1(ibv_dealloc_pd);
ROCE_DEFAULT_VERSION_1_1(ibv_dereg_mr);
ROCE_DEFAULT_VERSION_1_1(ibv_destroy_ah);
ROCE_DEFAULT_VERSION_1_1(ibv_destroy_cq);
ROCE_DEFAULT_VERSION_1_1(ibv_destroy_srq);
ROCE_DEFAULT_VERSION_1_1(ibv_modify_srq);
ROCE_DEFAULT_VERSION_1_1(ibv_query_srq);
ROCE_DEFAULT_VERSION_1_1(ibv_reg_mr);
ROCE_DEFAULT_VERSION_1_1(ibv_resize_cq);
