// Transport over <infiniband/verbs.h>: the calls an RDMA application makes, linked against our
// drop-in libibverbs (verbs_shim/, target `ibverbs`), so roce-perf measures what the shim adds
// to the stack's native API (native_transport.h) with the same loops. Nothing here knows the
// stack: the shim finds its device in ROCE_CONFIG / ROCE_DEVICE, as for any verbs program.
#pragma once

#include <infiniband/verbs.h>

#include <memory>
#include <string>
#include <vector>

#include "apps/perf/transport.h"

namespace roce::perf {

class VerbsTransport final : public Transport {
 public:
  // Opens the ibv device named `name` (the first one if empty). `inline_engine`: the device is
  // configured with mode = inline, so polling a CQ is what drives the engine.
  static std::unique_ptr<VerbsTransport> open(const std::string& name, bool inline_engine,
                                              std::string* err);
  ~VerbsTransport() override;

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
  // The verbs API has no link state to wait for (our ibv_query_port reports ACTIVE until a link
  // that was up is lost, as perftest requires): the engine readies the link when it sees it
  // come up.
  bool wait_link(double, std::string*) override { return true; }
  // Port 1's state is not active (ibv_query_port).
  bool link_lost() const override;
  bool inline_engine() const override { return inline_; }
  bool enable_events(std::string* err) override;
  int await_completion(unsigned cqs, double timeout_s, std::string* err) override;

  std::string counters_text() override;
  void quiesce() override;
  void close() override;

 private:
  VerbsTransport() = default;
  bool alloc_pd(std::string* err);
  uint32_t probe_max_inline();

  ibv_context* ctx_ = nullptr;
  ibv_pd* pd_ = nullptr;
  ibv_cq* send_cq_ = nullptr;
  ibv_cq* recv_cq_ = nullptr;
  ibv_srq* srq_ = nullptr;
  std::vector<ibv_qp*> qps_;
  ibv_qp_type type_ = IBV_QPT_RC;
  // UD: where each QP's SENDs go (its address handle, the peer's QPN and Q_Key), set by connect.
  struct UdDest {
    ibv_ah* ah = nullptr;
    uint32_t qpn = 0;
    uint32_t qkey = 0;
  };
  std::vector<UdDest> ud_dest_;
  std::vector<ibv_mr*> mrs_;
  DeviceInfo info_;
  bool inline_ = false;
  // Scratch for one post / poll call: sized once in create_qps.
  std::vector<ibv_send_wr> wr_scratch_;
  std::vector<ibv_recv_wr> rwr_scratch_;
  std::vector<ibv_sge> sge_scratch_;
  std::vector<ibv_wc> wc_scratch_;
  // Inline mode: completions progress() took from the send CQ while driving the engine,
  // handed out by the next poll_send (in order).
  std::vector<ibv_wc> stash_;
  int stash_head_ = 0, stash_len_ = 0;
  bool polled_ = false;  // a CQ was polled (the engine driven) since the last progress()
  // -e: the completion channel of both CQs; await_completion looks for a completion by
  // polling one into stash_ (send CQ) or rstash_ (receive CQ), handed out by the next poll.
  ibv_comp_channel* channel_ = nullptr;
  ibv_wc rstash_{};
  bool rstash_full_ = false;
  bool peek(unsigned cq);
};

}  // namespace roce::perf
