// Transport over the stack's native API: a roce::dpdk::Device (EAL, port, engine, neighbour
// agent, runner) and its engine's objects. Control operations run on the engine thread through
// the runner; posts and polls go straight to the QP and CQ rings from the caller's thread.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "apps/perf/transport.h"
#include "stack/core/queues.h"
#include "stack/device_config.h"

namespace roce {
class Qp;
namespace dpdk {
class Device;
}
}  // namespace roce

namespace roce::perf {

class NativeTransport final : public Transport {
 public:
  // Opens the device (starts EAL once per process); nullptr and *err on failure.
  static std::unique_ptr<NativeTransport> open(const DeviceConfig& cfg, std::string* err);
  ~NativeTransport() override;

  const DeviceInfo& info() const override { return info_; }
  bool create_qps(const QpSetup& setup, std::string* err) override;
  uint32_t qpn(uint32_t qp) const override;
  bool reg_mr(void* addr, uint64_t length, uint32_t access, MemoryRegion* out,
              std::string* err) override;
  bool connect(uint32_t qp, const ConnectAttr& attr, std::string* err) override;

  int post_send(uint32_t qp, const WorkRequest* wrs, uint32_t n) override;
  int post_recv(uint32_t qp, const RecvRequest* wrs, uint32_t n) override;
  int poll_send(Completion* out, int n) override;
  int poll_recv(Completion* out, int n) override;
  void progress() override;
  void relax() override;
  bool inline_engine() const override { return inline_; }
  bool wait_link(double timeout_s, std::string* err) override;
  bool link_lost() const override;
  bool enable_events(std::string* err) override;
  int await_completion(unsigned cqs, double timeout_s, std::string* err) override;

  std::string counters_text() override;
  void quiesce() override;
  void close() override;

 private:
  NativeTransport() = default;
  int poll_cq(CompletionQueue* cq, Completion* out, int n);

  std::unique_ptr<dpdk::Device> dev_;
  DeviceInfo info_;
  bool inline_ = false;
  uint32_t pd_ = 0;
  bool have_pd_ = false;
  CompletionQueue* send_cq_ = nullptr;
  CompletionQueue* recv_cq_ = nullptr;
  SharedReceiveQueue* srq_ = nullptr;
  std::vector<Qp*> qps_;
  QpType type_ = QpType::kRc;
  // UD: where each QP's SENDs go (its address handle, the peer's QPN and Q_Key), set by connect.
  struct UdDest {
    uint32_t ah = 0;
    uint32_t qpn = 0;
    uint32_t qkey = 0;
    bool valid = false;
  };
  std::vector<UdDest> ud_dest_;
  std::vector<uint32_t> mr_keys_;
  // Scratch for one post_send list: filled per call, sized once in create_qps.
  std::vector<SendWr> wr_scratch_;
  std::vector<Sge> sge_scratch_;
  std::vector<Cqe> cqe_scratch_;
  // -e: the engine's notification (on its thread) marks the CQ in fired_ and wakes event_fd_.
  static void on_notify(void* self, CompletionQueue* cq);
  int event_fd_ = -1;
  std::atomic<unsigned> fired_{0};
};

}  // namespace roce::perf
