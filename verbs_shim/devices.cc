// Devices and contexts: the device list from the stack's configuration (no DPDK started for
// listing), opening a device (the stack instance is shared by every context of the process and
// stops with the last one), closing, and clean-up at process exit.
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <sys/auxv.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "dpdk/device.h"
#include "dpdk/eal.h"
#include "verbs_shim/shim.h"

namespace roce::verbs {

// --- the device registry ----------------------------------------------------------------------

namespace {

struct Registry {
  std::mutex mu;
  // Devices live as long as the process: contexts and ibv_device pointers handed out stay valid.
  std::vector<std::unique_ptr<ShimDevice>> devices;
};

Registry& registry() {
  static Registry* r = new Registry();  // never destroyed: contexts may outlive static destructors
  return *r;
}

void fill_ibv_device(ShimDevice* d) {
  std::memset(&d->dev, 0, sizeof d->dev);
  d->dev.node_type = IBV_NODE_CA;
  d->dev.transport_type = IBV_TRANSPORT_IB;  // RoCE is the IB transport over Ethernet
  std::snprintf(d->dev.name, sizeof d->dev.name, "%s", d->cfg.name.c_str());
  // The device file: rdma-core opens /dev/infiniband/<dev_name> as the context's cmd_fd, and
  // middleware checks it exists as a character device the user may read and write before it
  // lists the device (UCX 1.13: uct_ib_device_is_accessible). The stack has no kernel device;
  // its contexts' cmd_fd is /dev/null (ibv_open_device), so that is the file named here, which
  // every user may open, as every user may use the stack. The path resolves only where
  // /dev/infiniband exists (a kernel with the RDMA core loaded; verbs_shim/README.md). A
  // uverbsN name would stand for another (kernel) device's file where one exists.
  std::snprintf(d->dev.dev_name, sizeof d->dev.dev_name, "../null");
  // Nothing exists at these paths (no kernel device, no sysfs entry): sysfs reads fail cleanly.
  std::snprintf(d->dev.dev_path, sizeof d->dev.dev_path, "/sys/class/infiniband_verbs/uverbs%d",
                d->index);
  std::snprintf(d->dev.ibdev_path, sizeof d->dev.ibdev_path, "/sys/class/infiniband/%s",
                d->cfg.name.c_str());
}

// EAL pins the thread that starts it to the main lcore's CPUs, and threads started afterwards
// (the engine's) inherit that. Unless the configuration says otherwise, lcore 0 gets every CPU
// the process may use, so starting the stack inside a verbs call does not pin the application.
// Returns what to add to the configuration's eal arguments.
std::vector<std::string> eal_defaults_for(const DeviceConfig& cfg) {
  std::vector<std::string> args;
  for (const auto& a : cfg.eal_args) {
    if (a.rfind("--lcores", 0) == 0 || a.rfind("-l", 0) == 0 || a.rfind("-c", 0) == 0) {
      return args;
    }
  }
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return args;
  std::string cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (!CPU_ISSET(c, &set)) continue;
    int e = c;
    while (e + 1 < CPU_SETSIZE && CPU_ISSET(e + 1, &set)) ++e;
    if (!cpus.empty()) cpus += ',';
    cpus += e == c ? std::to_string(c) : std::to_string(c) + "-" + std::to_string(e);
    c = e;
  }
  if (!cpus.empty()) args.push_back("--lcores=0@(" + cpus + ")");
  return args;
}

}  // namespace

bool config_debug() {
  const char* v = std::getenv("ROCE_DEBUG");
  return v && *v && std::strcmp(v, "0") != 0;
}

int refuse_in_forked_child() {
  static std::atomic<bool> told{false};
  if (!told.exchange(true)) {
    std::fprintf(stderr,
                 "libibverbs (roce): process %d was forked from process %d after that one had "
                 "opened an RDMA device; a device cannot be used across fork() (open it after "
                 "forking, or exec): every verb fails with EOPNOTSUPP here\n",
                 static_cast<int>(getpid()), static_cast<int>(getppid()));
  }
  return EOPNOTSUPP;
}

// --- opening and closing
// ----------------------------------------------------------------------------

namespace {

// The pthread_atfork child handler: only an atomic store, whatever locks the parent held.
void on_fork_child() {
  if (g_stack_started.load(std::memory_order_relaxed)) {
    g_forked_child.store(true, std::memory_order_relaxed);
  }
}

// Starts the device's stack instance if this is its first context. 0 or an errno.
int acquire_device(ShimDevice* d) {
  std::lock_guard<std::mutex> lock(d->mu);
  if (d->open_contexts == 0) {
    static const int atfork = pthread_atfork(nullptr, nullptr, &on_fork_child);
    if (atfork != 0) return atfork;
    g_stack_started.store(true, std::memory_order_relaxed);
    const DeviceConfig& cfg = d->cfg;
    std::string err;
    d->device = dpdk::Device::open(cfg, &err, eal_defaults_for(cfg));
    if (!d->device) {
      std::fprintf(stderr, "libibverbs (roce): cannot open device %s: %s\n", cfg.name.c_str(),
                   err.c_str());
      return ENODEV;
    }
    d->mac = d->device->mac();
    d->mac_known = true;
    d->pump =
        std::make_unique<EventPump>(d, &d->device->engine(), &d->device->runner(), cfg.inline_mode);
  }
  ++d->open_contexts;
  return 0;
}

void release_device(ShimDevice* d) {
  std::lock_guard<std::mutex> lock(d->mu);
  if (--d->open_contexts > 0) return;
  d->pump.reset();
  d->device.reset();
  std::lock_guard<std::mutex> rlock(d->reg_mu);
  d->qps.clear();
  d->cqs.clear();
  d->srqs.clear();
}

int op_query_port(ibv_context* c, uint8_t port, ibv_port_attr* attr, size_t attr_len) {
  if (port != 1) return EINVAL;
  ibv_port_attr a;
  fill_port_attr(to_ctx(c), &a);
  std::memcpy(attr, &a, std::min(attr_len, sizeof a));
  return 0;
}

}  // namespace

// query.cc
int op_query_device_ex(ibv_context* c, const ibv_query_device_ex_input* in,
                       ibv_device_attr_ex* attr, size_t attr_size);
// qp.cc / objects.cc
ibv_qp* op_create_qp_ex(ibv_context* c, ibv_qp_init_attr_ex* attr);
int op_modify_qp_rate_limit(ibv_qp* qp, ibv_qp_rate_limit_attr* attr);
ibv_cq_ex* op_create_cq_ex(ibv_context* c, ibv_cq_init_attr_ex* attr);

}  // namespace roce::verbs

using namespace roce;
using namespace roce::verbs;

ibv_device** ibv_get_device_list(int* num_devices) {
  return guard_ptr([&]() -> ibv_device** {
    std::vector<DeviceConfig> cfgs;
    std::string err;
    // A set-user-ID program must not take a device (and with it EAL arguments) from its
    // caller's environment.
    if (getauxval(AT_SECURE)) {
      if (config_debug()) std::fprintf(stderr, "libibverbs (roce): ignoring ROCE_* (setuid)\n");
    } else if (!devices_from_env(&cfgs, &err)) {
      std::fprintf(stderr, "libibverbs (roce): %s\n", err.c_str());
      cfgs.clear();
    }
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    std::vector<ShimDevice*> listed;
    for (const DeviceConfig& c : cfgs) {
      if (!validate(c, &err)) {
        std::fprintf(stderr, "libibverbs (roce): %s\n", err.c_str());
        continue;
      }
      ShimDevice* d = nullptr;
      for (auto& existing : r.devices) {
        if (existing->cfg.name == c.name) d = existing.get();
      }
      if (!d) {
        r.devices.push_back(std::make_unique<ShimDevice>());
        d = r.devices.back().get();
        d->index = static_cast<int>(r.devices.size() - 1);
        d->cfg = c;
        fill_ibv_device(d);
      } else {
        std::lock_guard<std::mutex> dlock(d->mu);
        if (d->open_contexts == 0) d->cfg = c;  // a later configuration applies at next open
      }
      if (std::find(listed.begin(), listed.end(), d) == listed.end()) listed.push_back(d);
    }
    if (cfgs.empty() && config_debug()) {
      std::fprintf(stderr,
                   "libibverbs (roce): no devices configured: set ROCE_CONFIG=<file> or "
                   "ROCE_DEVICE=\"port=<DPDK devargs>; ipv4=<addr/len>; mtu=<bytes>\"\n");
    }
    auto** list = static_cast<ibv_device**>(std::calloc(listed.size() + 1, sizeof(ibv_device*)));
    if (!list) {
      errno = ENOMEM;
      return nullptr;
    }
    for (size_t i = 0; i < listed.size(); ++i) list[i] = &listed[i]->dev;
    if (num_devices) *num_devices = static_cast<int>(listed.size());
    return list;
  });
}

void ibv_free_device_list(ibv_device** list) { std::free(list); }

const char* ibv_get_device_name(ibv_device* device) { return device ? device->name : nullptr; }

int ibv_get_device_index(ibv_device*) {
  return -1;  // no kernel device index (as rdma-core answers on kernels without netlink)
}

__be64 ibv_get_device_guid(ibv_device* device) { return device ? node_guid_be(to_dev(device)) : 0; }

ibv_context* ibv_open_device(ibv_device* device) {
  return guard_ptr([&]() -> ibv_context* {
    if (!device) {
      errno = EINVAL;
      return nullptr;
    }
    ShimDevice* d = to_dev(device);
    auto ctx = std::make_unique<ShimContext>();  // allocated first: nothing to undo if it fails
    if (int rc = acquire_device(d)) {
      errno = rc;
      return nullptr;
    }
    std::memset(&ctx->vctx, 0, sizeof ctx->vctx);
    ctx->dev = d;
    ctx->device = d->device.get();
    ctx->engine = &d->device->engine();
    ctx->runner = &d->device->runner();
    ctx->inline_mode = d->device->config().inline_mode;

    verbs_context& v = ctx->vctx;
    v.sz = sizeof(verbs_context);
    v.query_port = &op_query_port;
    v.query_device_ex = &op_query_device_ex;
    v.create_qp_ex = &op_create_qp_ex;
    v.modify_qp_rate_limit = &op_modify_qp_rate_limit;
    v.create_cq_ex = &op_create_cq_ex;
    ibv_context& c = v.context;
    c.device = device;
    c.abi_compat = __VERBS_ABI_IS_EXTENDED;
    // rdma-core's cmd_fd is the uverbs device the context talks to; there is none here, but
    // callers treat it as an open fd (pyverbs dup()s it to try ibv_import_device, which then
    // fails with EOPNOTSUPP; with -1 the dup fails first, with EBADF). /dev/null, read-only
    // and owned by the context: a uverbs write() fails (EBADF), an ioctl() too (ENOTTY), a
    // read() sees end of file.
    c.cmd_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (c.cmd_fd < 0) {
      const int e = errno;
      release_device(d);
      errno = e;
      return nullptr;
    }
    c.num_comp_vectors = 1;
    c.ops.poll_cq = &op_poll_cq;
    c.ops.req_notify_cq = &op_req_notify_cq;
    c.ops.post_send = &op_post_send;
    c.ops.post_recv = &op_post_recv;
    c.ops.post_srq_recv = &op_post_srq_recv;
    // Blocking by default, as the kernel's uverbs event file is; applications that want
    // non-blocking reads set O_NONBLOCK themselves (ibv_get_async_event(3)).
    if (int e = ctx->async_events.open()) {
      ::close(c.cmd_fd);
      release_device(d);
      errno = e;
      return nullptr;
    }
    c.async_fd = ctx->async_events.fd();
    pthread_mutex_init(&c.mutex, nullptr);
    {
      std::lock_guard<std::mutex> lock(d->reg_mu);
      d->contexts.push_back(ctx.get());
    }
    return &ctx.release()->vctx.context;
  });
}

int ibv_close_device(ibv_context* context) {
  return guard_errno([&] {
    if (!context) return EINVAL;
    ShimContext* ctx = to_ctx(context);
    // What the application left behind goes now, in dependency order (the kernel does the same
    // for a closed uverbs file).
    ContextObjects objs;
    {
      std::lock_guard<std::mutex> lock(ctx->obj_mu);
      objs = std::move(ctx->objs);
    }
    for (ShimQp* o : objs.qps) destroy_qp_now(o, false);
    for (ShimAh* o : objs.ahs) destroy_ah_now(o);
    for (ShimSrq* o : objs.srqs) destroy_srq_now(o, false);
    for (ShimMr* o : objs.mrs) dereg_mr_now(o);
    for (ShimCq* o : objs.cqs) destroy_cq_now(o, false);
    for (ShimPd* o : objs.pds) dealloc_pd_now(o);
    for (ShimChannel* o : objs.channels) destroy_channel_now(o);
    ctx->async_events.close();
    ::close(context->cmd_fd);
    pthread_mutex_destroy(&context->mutex);
    ShimDevice* d = ctx->dev;
    {
      std::lock_guard<std::mutex> lock(d->reg_mu);
      std::erase(d->contexts, ctx);
    }
    delete ctx;
    release_device(d);
    return 0;
  });
}

__attribute__((destructor)) static void roce_verbs_unload() {
  if (forked_child()) return;  // the stack and its threads are the parent's
  try {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    bool any_open = false;
    for (auto& d : r.devices) {
      std::lock_guard<std::mutex> dlock(d->mu);
      if (d->device) {
        // A program that exits without closing its device still gets its counters file.
        d->device->write_counters();
        d->device->flush_capture();  // the capture's buffer is its own: exit() does not write it
        d->pump.reset();
        d->device->runner().stop();
        any_open = true;
      }
    }
    if (!roce::dpdk::Eal::running()) return;
    if (!any_open) {
      roce::dpdk::Eal::cleanup();
      return;
    }
    const std::string ours = "--file-prefix=roce-" + std::to_string(getpid());
    const auto& args = roce::dpdk::Eal::args();
    if (std::find(args.begin(), args.end(), ours) == args.end()) return;  // not our prefix
    const char* xdg = std::getenv("XDG_RUNTIME_DIR");
    const std::string base = geteuid() == 0 ? "/var/run" : (xdg && *xdg ? xdg : "/tmp");
    std::error_code ec;
    std::filesystem::remove_all(base + "/dpdk/" + ours.substr(std::strlen("--file-prefix=")), ec);
  } catch (...) {
  }
}

// The verbs of this file that also exist at IBVERBS_1.0 (compat_1_0.cc).
ROCE_DEFAULT_VERSION_1_1(ibv_get_device_list);
ROCE_DEFAULT_VERSION_1_1(ibv_free_device_list);
ROCE_DEFAULT_VERSION_1_1(ibv_get_device_name);
ROCE_DEFAULT_VERSION_1_1(ibv_get_device_guid);
ROCE_DEFAULT_VERSION_1_1(ibv_open_device);
ROCE_DEFAULT_VERSION_1_1(ibv_close_device);
