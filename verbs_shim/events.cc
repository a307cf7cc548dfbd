// Asynchronous events: the per-device pump that moves Engine::next_async_event() to the
// contexts' async_fds (event files, event_file.h), the registry that routes an event to its
// QP / CQ / SRQ, and ibv_get/ack_async_event with the acknowledgement counting that destroy
// verbs wait on (as rdma-core's do).
#include <pthread.h>

#include <cstring>

#include "dpdk/device.h"
#include "verbs_shim/shim.h"

namespace roce::verbs {

// --- the event pump -----------------------------------------------------------------------------

EventPump::EventPump(ShimDevice* dev, Engine* engine, EngineRunner* runner, bool inline_mode)
    : dev_(dev), engine_(engine), runner_(runner), inline_(inline_mode) {
  thread_ = std::thread([this] { loop(); });
}

EventPump::~EventPump() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_.store(true);
  }
  cv_.notify_all();
  runner_->kick_standby();  // inline mode: out of nap()
  thread_.join();
}

void EventPump::loop() {
  pthread_setname_np(pthread_self(), "roce-verbs-evt");
  constexpr uint64_t kInlineTickNs = 1'000'000;
  while (!stop_.load()) {
    // Inline mode: while a CQ is armed on a channel, an application thread may be blocked on
    // it, polling nothing: the pump stands in for the engine thread. Otherwise one round of
    // polls a tick, only while no application thread polls (one that does is not preempted).
    const bool standby = inline_ && cq_armed_on_channel();
    if (standby) {
      runner_->standby(kInlineTickNs);
    } else if (inline_) {
      runner_->poll_if_unattended(256);
    }
    dispatch();
    watch_link();
    if (standby) continue;
    if (inline_) {
      runner_->nap(kInlineTickNs);  // a CQ armed meanwhile cuts it short (kick_standby)
    } else {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_for(lock, std::chrono::milliseconds(2), [this] { return stop_.load(); });
    }
  }
}

bool EventPump::cq_armed_on_channel() {
  std::lock_guard<std::mutex> lock(dev_->reg_mu);
  for (const auto& [cqn, cq] : dev_->cqs) {
    if (cq->channel && cq->q->armed()) return true;
  }
  return false;
}

void EventPump::dispatch() {
  while (std::optional<AsyncEvent> e = engine_->next_async_event()) deliver(*e);
}

// A port whose link was up and went down is reported as rdma-core's providers report a port
// that loses its carrier, and again when it comes back. Before the link first comes up (a
// net_memif server waits for its client) the port counts as active: nothing was lost, and
// programs that check the port's state as they start (perftest does) must not fail for it.
void EventPump::watch_link() {
  const bool lost = dev_->device->link_lost();
  if (lost == link_lost_) return;
  link_lost_ = lost;
  ibv_async_event ev;
  std::memset(&ev, 0, sizeof ev);
  ev.event_type = lost ? IBV_EVENT_PORT_ERR : IBV_EVENT_PORT_ACTIVE;
  ev.element.port_num = 1;
  std::lock_guard<std::mutex> lock(dev_->reg_mu);
  for (ShimContext* ctx : dev_->contexts) set_async_event(ctx, ev);
}

void EventPump::deliver(const AsyncEvent& e) {
  ibv_async_event ev;
  std::memset(&ev, 0, sizeof ev);
  std::lock_guard<std::mutex> lock(dev_->reg_mu);
  ShimContext* ctx = nullptr;
  // Mapped one by one (the values agree, abi_checks.cc): the element differs by event.
  switch (e.type) {
    case AsyncEventType::kCqErr: {
      auto it = dev_->cqs.find(e.id);
      if (it == dev_->cqs.end()) return;
      ev.event_type = IBV_EVENT_CQ_ERR;
      ev.element.cq = reinterpret_cast<ibv_cq*>(&it->second->cq);
      ctx = it->second->ctx;
      break;
    }
    case AsyncEventType::kSrqLimitReached: {
      auto it = dev_->srqs.find(e.id);
      if (it == dev_->srqs.end()) return;
      ev.event_type = IBV_EVENT_SRQ_LIMIT_REACHED;
      ev.element.srq = &it->second->srq;
      ctx = it->second->ctx;
      break;
    }
    case AsyncEventType::kQpFatal:
    case AsyncEventType::kQpReqErr:
    case AsyncEventType::kQpAccessErr:
    case AsyncEventType::kSqDrained:
    case AsyncEventType::kQpLastWqeReached: {
      auto it = dev_->qps.find(e.id);
      if (it == dev_->qps.end()) return;
      ev.event_type = e.type == AsyncEventType::kQpFatal       ? IBV_EVENT_QP_FATAL
                      : e.type == AsyncEventType::kQpReqErr    ? IBV_EVENT_QP_REQ_ERR
                      : e.type == AsyncEventType::kQpAccessErr ? IBV_EVENT_QP_ACCESS_ERR
                      : e.type == AsyncEventType::kSqDrained   ? IBV_EVENT_SQ_DRAINED
                                                               : IBV_EVENT_QP_LAST_WQE_REACHED;
      ev.element.qp = &it->second->qpx.qp_base;
      ctx = it->second->ctx;
      break;
    }
    default:
      return;
  }
  set_async_event(ctx, ev);
}

void set_async_event(ShimContext* ctx, const ibv_async_event& ev) { ctx->async_events.push(ev); }

// --- registration for async events ---------------------------------------------------------------

void register_qp(ShimQp* qp) {
  std::lock_guard<std::mutex> lock(qp->ctx->dev->reg_mu);
  qp->ctx->dev->qps[qp->qpx.qp_base.qp_num] = qp;
}
void register_cq(ShimCq* cq) {
  std::lock_guard<std::mutex> lock(cq->ctx->dev->reg_mu);
  cq->ctx->dev->cqs[cq->cq.handle] = cq;
}
void register_srq(ShimSrq* srq) {
  std::lock_guard<std::mutex> lock(srq->ctx->dev->reg_mu);
  srq->ctx->dev->srqs[srq->srq.handle] = srq;
}

namespace {
bool is_qp_event(ibv_event_type t) {
  switch (t) {
    case IBV_EVENT_QP_FATAL:
    case IBV_EVENT_QP_REQ_ERR:
    case IBV_EVENT_QP_ACCESS_ERR:
    case IBV_EVENT_COMM_EST:
    case IBV_EVENT_SQ_DRAINED:
    case IBV_EVENT_PATH_MIG:
    case IBV_EVENT_PATH_MIG_ERR:
    case IBV_EVENT_QP_LAST_WQE_REACHED:
      return true;
    default:
      return false;
  }
}
// Under the lock of the context's async event file.
void count_delivery(const ibv_async_event& e) {
  pthread_mutex_t* mu = nullptr;
  uint32_t* counter = nullptr;
  if (e.event_type == IBV_EVENT_CQ_ERR) {
    mu = &e.element.cq->mutex;
    counter = &to_cq(e.element.cq)->async_events_delivered;
  } else if (e.event_type == IBV_EVENT_SRQ_LIMIT_REACHED || e.event_type == IBV_EVENT_SRQ_ERR) {
    mu = &e.element.srq->mutex;
    counter = &to_srq(e.element.srq)->async_events_delivered;
  } else if (is_qp_event(e.event_type)) {
    mu = &e.element.qp->mutex;
    counter = &to_qp(e.element.qp)->async_events_delivered;
  }
  if (!mu) return;
  pthread_mutex_lock(mu);
  ++*counter;
  pthread_mutex_unlock(mu);
}
}  // namespace

void unregister_qp(ShimQp* qp, bool wait_acks) {
  ShimDevice* dev = qp->ctx->dev;
  {
    std::lock_guard<std::mutex> lock(dev->reg_mu);
    auto it = dev->qps.find(qp->qpx.qp_base.qp_num);  // (the engine's Qp is gone already)
    if (it != dev->qps.end() && it->second == qp) dev->qps.erase(it);
  }
  ibv_qp* base = &qp->qpx.qp_base;
  qp->ctx->async_events.remove_if([base](const ibv_async_event& e) {
    return is_qp_event(e.event_type) && e.element.qp == base;
  });
  if (!wait_acks) return;
  pthread_mutex_lock(&base->mutex);
  while (base->events_completed != qp->async_events_delivered) {
    pthread_cond_wait(&base->cond, &base->mutex);
  }
  pthread_mutex_unlock(&base->mutex);
}

void forget_cq(ShimCq* cq) {
  ShimDevice* dev = cq->ctx->dev;
  std::lock_guard<std::mutex> lock(dev->reg_mu);
  auto it = dev->cqs.find(cq->cq.handle);  // the CQ number
  if (it != dev->cqs.end() && it->second == cq) dev->cqs.erase(it);
}

void drain_cq_events(ShimCq* cq, bool wait_acks) {
  ibv_cq* base = reinterpret_cast<ibv_cq*>(&cq->cq);
  cq->ctx->async_events.remove_if([base](const ibv_async_event& e) {
    return e.event_type == IBV_EVENT_CQ_ERR && e.element.cq == base;
  });
  // Completion events not yet read: the CQ is going away, they go with it (and the channel's
  // fd is not readable if none is left).
  if (ShimChannel* ch = cq->channel) ch->events.remove_if([cq](ShimCq* c) { return c == cq; });
  if (!wait_acks) return;
  pthread_mutex_lock(&base->mutex);
  while (base->comp_events_completed != cq->comp_events_delivered ||
         base->async_events_completed != cq->async_events_delivered) {
    pthread_cond_wait(&base->cond, &base->mutex);
  }
  pthread_mutex_unlock(&base->mutex);
}

void unregister_srq(ShimSrq* srq, bool wait_acks) {
  ShimDevice* dev = srq->ctx->dev;
  {
    std::lock_guard<std::mutex> lock(dev->reg_mu);
    auto it = dev->srqs.find(srq->srq.handle);  // the SRQ number
    if (it != dev->srqs.end() && it->second == srq) dev->srqs.erase(it);
  }
  ibv_srq* base = &srq->srq;
  srq->ctx->async_events.remove_if([base](const ibv_async_event& e) {
    return (e.event_type == IBV_EVENT_SRQ_LIMIT_REACHED || e.event_type == IBV_EVENT_SRQ_ERR) &&
           e.element.srq == base;
  });
  if (!wait_acks) return;
  pthread_mutex_lock(&base->mutex);
  while (base->events_completed != srq->async_events_delivered) {
    pthread_cond_wait(&base->cond, &base->mutex);
  }
  pthread_mutex_unlock(&base->mutex);
}

}  // namespace roce::verbs

using namespace roce;
using namespace roce::verbs;

int ibv_get_async_event(ibv_context* context, ibv_async_event* event) {
  return guard_minus1([&] {
    // Blocks unless the application made async_fd non-blocking (then EAGAIN). The delivery is
    // counted on the element while the queue is still locked: a destroy that purges the queue
    // afterwards then waits for this event's acknowledgement.
    return to_ctx(context)->async_events.take(event, count_delivery);
  });
}

void ibv_ack_async_event(ibv_async_event* event) {
  if (!event) return;
  pthread_mutex_t* mu = nullptr;
  pthread_cond_t* cond = nullptr;
  uint32_t* counter = nullptr;
  if (event->event_type == IBV_EVENT_CQ_ERR) {
    ibv_cq* cq = event->element.cq;
    mu = &cq->mutex, cond = &cq->cond, counter = &cq->async_events_completed;
  } else if (event->event_type == IBV_EVENT_SRQ_LIMIT_REACHED ||
             event->event_type == IBV_EVENT_SRQ_ERR) {
    ibv_srq* srq = event->element.srq;
    mu = &srq->mutex, cond = &srq->cond, counter = &srq->events_completed;
  } else if (is_qp_event(event->event_type)) {
    ibv_qp* qp = event->element.qp;
    mu = &qp->mutex, cond = &qp->cond, counter = &qp->events_completed;
  }
  if (!mu) return;  // port / device events carry nothing to count
  pthread_mutex_lock(mu);
  ++*counter;
  pthread_cond_signal(cond);
  pthread_mutex_unlock(mu);
}

// At unload (process exit): stop the engines of devices the application left open, and leave
// nothing behind in EAL's runtime directory (/var/run/dpdk/roce-<pid>): after a clean close
// EAL is cleaned up; with devices still open (an application that exits without closing, or
// on an error path) EAL cannot be, so its directory is removed by hand.
// The verbs of this file that also exist at IBVERBS_1.0 (compat_1_0.cc).
ROCE_DEFAULT_VERSION_1_1(ibv_get_async_event);
ROCE_DEFAULT_VERSION_1_1(ibv_ack_async_event);
