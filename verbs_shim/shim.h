// The verbs shim's internal model: every verbs object handed to an application is a struct
// whose first member is the verbs.h struct the application sees (so the pointer converts both
// ways), followed by what the shim keeps: the stack object it stands for, the per-queue lock
// that serialises concurrent posters/pollers (the stack's queue ends are single-producer /
// single-consumer), and the use counts behind the destroy-ordering checks.
//
// Threads: control verbs run their engine part on the engine thread (EngineRunner::run);
// post/poll verbs touch only the queue ends, under one spinlock per queue; the engine thread
// reaches the shim through CompletionQueue notifications (-> completion channels); a small
// per-device pump thread turns Engine::next_async_event() into async_fd events (and, in inline
// mode, keeps the engine moving while no application thread polls).
#pragma once

// verbs.h's declarations get default visibility, everything else in the shim is hidden
// (-fvisibility=hidden): the exported API is exactly what verbs.h declares plus the few
// symbols declared below, and the linker version script picks the nodes.
#pragma GCC visibility push(default)
#include <infiniband/verbs.h>
extern "C" {
// Symbols rdma-core exports without declaring them in verbs.h (driver.h / marshall.h /
// sysfs.h). enum ibv_gid_type_sysfs is int-sized: 0 = IB / RoCE v1, 1 = RoCE v2.
int ibv_query_gid_type(struct ibv_context* context, uint8_t port_num, unsigned int index,
                       int* type);
int ibv_read_sysfs_file(const char* dir, const char* file, char* buf, size_t size);
const char* ibv_get_sysfs_path(void);
struct ib_uverbs_qp_attr;
struct ib_uverbs_ah_attr;
struct ib_user_path_rec;
struct ibv_sa_path_rec;
void ibv_copy_qp_attr_from_kern(struct ibv_qp_attr* dst, struct ib_uverbs_qp_attr* src);
void ibv_copy_ah_attr_from_kern(struct ibv_ah_attr* dst, struct ib_uverbs_ah_attr* src);
void ibv_copy_path_rec_from_kern(struct ibv_sa_path_rec* dst, struct ib_user_path_rec* src);
void ibv_copy_path_rec_to_kern(struct ib_user_path_rec* dst, struct ibv_sa_path_rec* src);
void ibv_register_driver(const char* name, void* init_func);
int ibv_dontfork_range(void* base, size_t size);
int ibv_dofork_range(void* base, size_t size);
}
#pragma GCC visibility pop

// rdma-core exports these verbs twice: at IBVERBS_1.0 (the 2006 ABI, see compat_1_0.cc) and,
// as the default every binary binds to, at IBVERBS_1.1. The version script lists the name in
// both nodes; this gives the definition in the current file its default version.
#define ROCE_DEFAULT_VERSION_1_1(sym) __asm__(".symver " #sym ", " #sym "@@@IBVERBS_1.1")

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "stack/core/engine.h"
#include "stack/core/runner.h"
#include "stack/device_config.h"
#include "verbs_shim/event_file.h"

namespace roce::dpdk {
class Device;
}

namespace roce::verbs {

struct ShimContext;
struct ShimCq;
struct ShimQp;
struct ShimSrq;
struct ShimDevice;

// One thread per open device (events.cc). Every tick it moves the engine's asynchronous events
// to the contexts' async_fds and looks at the port's link (IBV_EVENT_PORT_ERR when a link that
// was up goes down, IBV_EVENT_PORT_ACTIVE when it comes back, to every context of the device).
// In inline mode it also drives the engine while no application thread does: once a tick, so
// that peers get their ACKs and READ responses even from an application that is not polling,
// and, while a CQ is armed on a completion channel, as the engine thread would
// (EngineRunner::standby), so that an application blocked on the channel gets its event as soon
// as the engine can raise it. It sleeps between ticks: an idle device costs a few hundred
// wake-ups a second (an inline one with an armed CQ and nothing arriving, the engine thread's
// idle sleeps: 5,000 a second).
class EventPump {
 public:
  EventPump(ShimDevice* dev, Engine* engine, EngineRunner* runner, bool inline_mode);
  ~EventPump();
  EventPump(const EventPump&) = delete;
  EventPump& operator=(const EventPump&) = delete;

 private:
  void loop();
  void dispatch();
  void deliver(const AsyncEvent& e);
  void watch_link();
  bool cq_armed_on_channel();  // inline mode: an application may be waiting for an event

  ShimDevice* dev_;
  Engine* engine_;
  EngineRunner* runner_;
  const bool inline_;
  bool link_lost_ = false;  // as last reported to the contexts (the pump's thread only)
  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// One configured device. Listed without being opened; the stack instance (EAL, port, engine)
// starts with the first ibv_open_device and stops when its last context closes.
struct ShimDevice {
  ibv_device dev;  // first: ibv_device* <-> ShimDevice*
  // Where rdma-core's struct verbs_device (driver.h) keeps its provider's ops, right after the
  // ibv_device. Provider libraries check it before they treat a device as theirs
  // (mlx5dv_is_supported, efadv's is_efa_dev): NULL matches no provider.
  const void* verbs_device_ops = nullptr;
  DeviceConfig cfg;
  int index = 0;

  std::mutex mu;  // open / close
  int open_contexts = 0;
  std::unique_ptr<dpdk::Device> device;
  std::unique_ptr<EventPump> pump;
  Mac mac{};  // the port's MAC once opened (for the node GUID)
  bool mac_known = false;

  // Engine object numbers -> shim objects, to route asynchronous events. reg_mu is taken
  // before the lock of a context's async event file.
  std::mutex reg_mu;
  std::unordered_map<uint32_t, ShimQp*> qps;
  std::unordered_map<uint32_t, ShimCq*> cqs;
  std::unordered_map<uint32_t, ShimSrq*> srqs;
  std::vector<ShimContext*> contexts;  // the open ones: port events go to each
};

// Objects a context created, destroyed with it if the application does not.
struct ContextObjects {
  std::unordered_set<struct ShimQp*> qps;
  std::unordered_set<struct ShimAh*> ahs;
  std::unordered_set<struct ShimSrq*> srqs;
  std::unordered_set<struct ShimMr*> mrs;
  std::unordered_set<struct ShimCq*> cqs;
  std::unordered_set<struct ShimPd*> pds;
  std::unordered_set<struct ShimChannel*> channels;
};

struct ShimContext {
  verbs_context vctx;  // first; applications see &vctx.context
  ShimDevice* dev = nullptr;
  dpdk::Device* device = nullptr;
  Engine* engine = nullptr;
  EngineRunner* runner = nullptr;
  bool inline_mode = false;

  // Asynchronous events, behind async_fd.
  EventFile<ibv_async_event> async_events;

  std::mutex obj_mu;
  ContextObjects objs;
};

struct ShimPd {
  ibv_pd pd;
  ShimContext* ctx = nullptr;
  uint32_t id = 0;
  std::atomic<int> users{0};  // MRs, QPs, SRQs, AHs
};

struct ShimMr {
  ibv_mr mr;
  ShimPd* pd = nullptr;
  uint32_t key = 0;
};

struct ShimAh {
  ibv_ah ah;
  ShimPd* pd = nullptr;
  uint32_t id = 0;
};

// A completion channel: CQs armed on it queue themselves in its event file (behind
// channel.fd) when they fire.
struct ShimChannel {
  ibv_comp_channel ch;
  ShimContext* ctx = nullptr;
  std::mutex mu;  // ch.refcnt
  EventFile<ShimCq*> events;
};

struct ShimCq {
  ibv_cq_ex cq;  // an ibv_cq_ex for every CQ: ibv_cq is its prefix
  ShimContext* ctx = nullptr;
  CompletionQueue* q = nullptr;
  ShimChannel* channel = nullptr;
  EngineRunner* runner = nullptr;
  bool inline_mode = false;
  uint64_t wc_flags = 0;                // cq_ex: what the application may read
  SpinLock poll_lock;                   // the consumer end (poll_cq, start/next/end_poll)
  uint32_t empty_polls = 0;             // consecutive polls that found nothing (under poll_lock)
  std::atomic<int> users{0};            // QPs using it
  uint32_t comp_events_delivered = 0;   // under cq.mutex
  uint32_t async_events_delivered = 0;  // under cq.mutex
  Cqe cur{};                            // cq_ex: the completion being read
  uint64_t cur_ts = 0;                  // its timestamp (ns, CLOCK_MONOTONIC at poll)
};

struct ShimSrq {
  ibv_srq srq;
  ShimContext* ctx = nullptr;
  ShimPd* pd = nullptr;
  SharedReceiveQueue* q = nullptr;
  SpinLock post_lock;
  std::atomic<int> users{0};            // QPs attached
  uint32_t async_events_delivered = 0;  // under srq.mutex
};

// The ibv_wr_* batch between ibv_wr_start and ibv_wr_complete: work requests are built here
// (inline data copied at once, as a NIC copies it into the WQE) and posted in one go.
struct WrBatch {
  static constexpr uint32_t kMaxWrs = 64;
  uint32_t cap = 0;            // WRs the arrays hold (<= kMaxWrs)
  uint32_t n = 0;              // WRs built
  uint32_t sge_per_wr = 0;     // SGE slots per WR
  uint32_t inline_per_wr = 0;  // inline bytes per WR
  int error = 0;               // first error while building: wr_complete returns it
  std::unique_ptr<SendWr[]> wrs;
  std::unique_ptr<Sge[]> sges;
  std::unique_ptr<uint8_t[]> inline_buf;
};

struct ShimQp {
  ibv_qp_ex qpx;  // an ibv_qp_ex for every QP, so ibv_qp_to_qp_ex works
  ShimContext* ctx = nullptr;
  Qp* q = nullptr;
  ShimPd* pd = nullptr;
  ShimCq* send_cq = nullptr;
  ShimCq* recv_cq = nullptr;
  ShimSrq* srq = nullptr;
  bool sq_sig_all = false;
  bool has_qp_ex_ops = false;  // created with send_ops_flags
  uint64_t send_ops_flags = 0;
  SpinLock send_lock;
  SpinLock recv_lock;
  WrBatch batch;
  uint32_t async_events_delivered = 0;  // under qp.mutex
};

// The bits of an enum field a C program filled in: any int may arrive there (a bad opcode, a
// state out of range), and in C++ loading a value outside the enum's range is undefined, so the
// shim checks the raw value before it converts it.
template <typename E>
inline uint32_t enum_bits(const E& field) {
  static_assert(std::is_enum_v<E> && sizeof(E) == sizeof(uint32_t));
  uint32_t v;
  std::memcpy(&v, &field, sizeof v);
  return v;
}

inline ShimContext* to_ctx(ibv_context* c) {
  return reinterpret_cast<ShimContext*>(verbs_get_ctx(c));
}
inline ShimDevice* to_dev(ibv_device* d) { return reinterpret_cast<ShimDevice*>(d); }
inline ShimPd* to_pd(ibv_pd* p) { return reinterpret_cast<ShimPd*>(p); }
inline ShimMr* to_mr(ibv_mr* m) { return reinterpret_cast<ShimMr*>(m); }
inline ShimAh* to_ah(ibv_ah* a) { return reinterpret_cast<ShimAh*>(a); }
inline ShimChannel* to_channel(ibv_comp_channel* c) { return reinterpret_cast<ShimChannel*>(c); }
inline ShimCq* to_cq(ibv_cq* c) { return reinterpret_cast<ShimCq*>(c); }
inline ShimCq* to_cq(ibv_cq_ex* c) { return reinterpret_cast<ShimCq*>(c); }
inline ShimSrq* to_srq(ibv_srq* s) { return reinterpret_cast<ShimSrq*>(s); }
inline ShimQp* to_qp(ibv_qp* q) { return reinterpret_cast<ShimQp*>(q); }
inline ShimQp* to_qp(ibv_qp_ex* q) { return reinterpret_cast<ShimQp*>(q); }

// --- fork() ---
// A child forked from a process that had started the stack (its EAL, engine, event pump)
// inherits the memory but none of the threads: a control verb would wait for ever on the
// engine thread, an inline poll would take the parent's packets off the shared port, and the
// library's exit handler would wait on threads that do not exist. In such a child every verb
// that reaches the stack (those under guard_*, posts, polls, CQ arming, completion-event reads)
// fails at once with EOPNOTSUPP (one line on stderr, the first time), and exit does nothing;
// the few that only read the shim's own memory (ibv_query_port, ibv_query_srq, the acks) still
// answer. Devices must be opened after fork(), or in a program fork() + exec() started.
inline std::atomic<bool> g_stack_started{false};  // a device open began (never cleared)
inline std::atomic<bool> g_forked_child{false};   // set in the child of a fork() after that
inline bool forked_child() { return g_forked_child.load(std::memory_order_relaxed); }
int refuse_in_forked_child();  // prints the line once; returns EOPNOTSUPP

// --- the C ABI boundary: no exception crosses it ---
// Runs f() (returning an errno value); an exception becomes ENOMEM.
template <typename F>
int guard_errno(F&& f) noexcept {
  if (forked_child()) return refuse_in_forked_child();
  try {
    return f();
  } catch (const std::bad_alloc&) {
    return ENOMEM;
  } catch (...) {
    return EIO;
  }
}
// Runs f() (returning a pointer, NULL with errno set on failure).
template <typename F>
auto guard_ptr(F&& f) noexcept -> decltype(f()) {
  if (forked_child()) {
    errno = refuse_in_forked_child();
    return nullptr;
  }
  try {
    return f();
  } catch (const std::bad_alloc&) {
    errno = ENOMEM;
  } catch (...) {
    errno = EIO;
  }
  return nullptr;
}
// For verbs that return -1 and set errno.
template <typename F>
int guard_minus1(F&& f) noexcept {
  const int rc = guard_errno(f);
  if (rc == 0) return 0;
  errno = rc;
  return -1;
}

// Runs fn on the engine's thread (or under the engine lock in inline mode).
template <typename F>
auto on_engine(ShimContext* ctx, F&& fn) {
  return ctx->runner->run(std::forward<F>(fn));
}

// --- shared between the shim's files ---
// devices.cc
bool config_debug();                                                // ROCE_DEBUG is set
void set_async_event(ShimContext* ctx, const ibv_async_event& ev);  // queue + signal
void register_qp(ShimQp* qp);
void register_cq(ShimCq* cq);
void register_srq(ShimSrq* srq);
// Forget an object for async events and drop its undelivered ones; with wait_acks, then wait
// until the application acknowledged those delivered (as rdma-core's destroy verbs do).
void unregister_qp(ShimQp* qp, bool wait_acks);
void unregister_srq(ShimSrq* srq, bool wait_acks);
// A CQ is forgotten before the engine destroys it (the pump reads its ring), its events are
// drained after (no notification can come any more).
void forget_cq(ShimCq* cq);
void drain_cq_events(ShimCq* cq, bool wait_acks);

// query.cc
void fill_port_attr(ShimContext* ctx, ibv_port_attr* a);
uint64_t node_guid_be(ShimDevice* dev);

// objects.cc / qp.cc: destruction once the usage checks passed (or at context close, where
// nothing waits for event acknowledgements: wait_acks false). Free the object on success.
int destroy_qp_now(ShimQp* qp, bool wait_acks);
int destroy_ah_now(ShimAh* ah);
int destroy_srq_now(ShimSrq* srq, bool wait_acks);
int dereg_mr_now(ShimMr* mr);
int destroy_cq_now(ShimCq* cq, bool wait_acks);
int dealloc_pd_now(ShimPd* pd);
void destroy_channel_now(ShimChannel* ch);

// datapath.cc: posts n send WRs (see the engine-bug note there); 0 or an errno, *bad = index
// of the first WR not posted.
int post_send_wrs(Qp* q, const SendWr* wrs, uint32_t n, uint32_t* bad);
// objects.cc: queues the CQ on its completion channel.
void signal_cq_event(ShimCq* cq);
// datapath.cc: the ops installed into every context
int op_poll_cq(ibv_cq* cq, int n, ibv_wc* wc);
int op_req_notify_cq(ibv_cq* cq, int solicited_only);
int op_post_send(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad);
int op_post_recv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad);
int op_post_srq_recv(ibv_srq* srq, ibv_recv_wr* wr, ibv_recv_wr** bad);
void install_cq_ex_ops(ShimCq* cq);
// wr_api.cc
void install_qp_ex_ops(ShimQp* qp);
bool init_wr_batch(ShimQp* qp, const QpCap& cap);
// conversions (qp.cc)
AhAttr to_ah_attr(const ibv_ah_attr& a);
void from_ah_attr(const AhAttr& a, ibv_ah_attr* out);

}  // namespace roce::verbs
