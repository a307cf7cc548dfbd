#include "dpdk/testing.h"

#include <rte_alarm.h>
#include <rte_dev.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_log.h>
#include <rte_mbuf.h>

#include <atomic>
#include <cstring>
#include <thread>

#include "dpdk/dpdk_port.h"

namespace roce::dpdk {

std::unique_ptr<ChainedFrameSender> ChainedFrameSender::create(uint32_t segment_size,
                                                               uint32_t count, std::string* error) {
  static std::atomic<uint32_t> counter{0};
  const std::string name = "roce_chain_" + std::to_string(counter.fetch_add(1));
  std::unique_ptr<ChainedFrameSender> s(new ChainedFrameSender());
  s->segment_size_ = segment_size;
  s->pool_ = rte_pktmbuf_pool_create(name.c_str(), count, 0, 0,
                                     static_cast<uint16_t>(segment_size + RTE_PKTMBUF_HEADROOM),
                                     SOCKET_ID_ANY);
  if (s->pool_ == nullptr) {
    *error = "chained-frame pool: " + std::string(rte_strerror(rte_errno));
    return nullptr;
  }
  return s;
}

ChainedFrameSender::~ChainedFrameSender() {
  if (pool_ != nullptr && rte_mempool_in_use_count(pool_) == 0) rte_mempool_free(pool_);
}

uint32_t ChainedFrameSender::in_use() const { return rte_mempool_in_use_count(pool_); }

bool ChainedFrameSender::send(DpdkPort& port, std::span<const uint8_t> frame) {
  rte_mbuf* head = nullptr;
  size_t off = 0;
  while (off < frame.size()) {
    rte_mbuf* seg = rte_pktmbuf_alloc(pool_);
    if (seg == nullptr) {
      rte_pktmbuf_free(head);
      return false;
    }
    const size_t n = std::min<size_t>(segment_size_, frame.size() - off);
    std::memcpy(rte_pktmbuf_append(seg, static_cast<uint16_t>(n)), frame.data() + off, n);
    off += n;
    if (head == nullptr) {
      head = seg;
    } else if (rte_pktmbuf_chain(head, seg) != 0) {
      rte_pktmbuf_free(seg);
      rte_pktmbuf_free(head);
      return false;
    }
  }
  if (head == nullptr) return false;
  if (rte_eth_tx_burst(port.port_id(), 0, &head, 1) != 1) {
    rte_pktmbuf_free(head);
    return false;
  }
  return true;
}

namespace {
struct Occupation {
  std::chrono::milliseconds busy;
  std::atomic<int>* state;
};
void occupy(void* arg) {
  const auto* o = static_cast<Occupation*>(arg);
  o->state->store(1);
  std::this_thread::sleep_for(o->busy);
  std::atomic<int>* state = o->state;
  delete o;
  state->store(2);
}
}  // namespace

bool occupy_interrupt_thread(std::chrono::milliseconds busy, std::atomic<int>* state) {
  auto* o = new Occupation{busy, state};
  if (rte_eal_alarm_set(1, occupy, o) != 0) {
    delete o;
    return false;
  }
  return true;
}

EalLogCapture::EalLogCapture() : file_(std::tmpfile()) {
  if (file_ != nullptr) rte_openlog_stream(file_);
}

EalLogCapture::~EalLogCapture() {
  if (file_ == nullptr) return;
  rte_openlog_stream(nullptr);
  std::fclose(file_);
}

std::string EalLogCapture::text() {
  if (file_ == nullptr) return "(no log capture: tmpfile failed)";
  std::fflush(file_);
  const long end = std::ftell(file_);
  std::string out(end > 0 ? static_cast<size_t>(end) : 0, '\0');
  std::rewind(file_);
  out.resize(std::fread(out.data(), 1, out.size(), file_));
  std::fseek(file_, 0, SEEK_END);
  return out;
}

int probe_device(const std::string& devargs) { return rte_dev_probe(devargs.c_str()); }

bool remove_device(const std::string& devargs) {
  // Tests probe virtual devices only.
  const std::string name = devargs.substr(0, devargs.find(','));
  return rte_eal_hotplug_remove("vdev", name.c_str()) == 0;
}

}  // namespace roce::dpdk
