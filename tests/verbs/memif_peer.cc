// For VerbsPortState.*: the other process of a net_memif link, over the shim. Opens the device
// named by argv[1] (from ROCE_CONFIG) and then, with a peer IPv4 address as argv[2], makes an
// RC QP, prints "qpn N", reads the peer's QP number from stdin, connects to it, receives one
// SEND and prints "received". Without argv[2] it prints "open". Either way it then waits to be
// killed, as a peer that dies does. Exit status 1 with a line on stderr on any failure.
#include <infiniband/verbs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "rc_connect.h"

namespace {
int die(const char* what, int err) {
  std::fprintf(stderr, "memif_peer: %s: %s\n", what, std::strerror(err));
  return 1;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return die("usage: memif_peer DEVICE [PEER_IPV4]", EINVAL);
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  ibv_context* ctx = nullptr;
  for (int i = 0; list && i < n && !ctx; ++i) {
    if (std::strcmp(ibv_get_device_name(list[i]), argv[1]) == 0) ctx = ibv_open_device(list[i]);
  }
  if (!ctx) return die("ibv_open_device", errno ? errno : ENODEV);
  if (argc < 3) {
    std::printf("open\n");
    std::fflush(stdout);
    for (;;) pause();
  }
  static char buf[4096];
  ibv_pd* pd = ibv_alloc_pd(ctx);
  ibv_mr* mr = pd ? ibv_reg_mr(pd, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE) : nullptr;
  ibv_cq* cq = mr ? ibv_create_cq(ctx, 16, nullptr, nullptr, 0) : nullptr;
  if (!cq) return die("PD / MR / CQ", errno);
  ibv_qp* qp = roce::verbs_test::small_rc_qp(pd, cq);
  if (!qp) return die("ibv_create_qp", errno);
  std::printf("qpn %u\n", qp->qp_num);
  std::fflush(stdout);
  unsigned peer_qpn = 0;
  if (std::scanf("%u", &peer_qpn) != 1) return die("reading the peer's QP number", EIO);
  if (int rc = roce::verbs_test::connect_rc_to(qp, peer_qpn, roce::verbs_test::ipv4_gid(argv[2]), 1,
                                               IBV_MTU_1024))
    return die("connect", rc);
  ibv_sge sge{reinterpret_cast<uintptr_t>(buf), sizeof buf, mr->lkey};
  ibv_recv_wr rwr{};
  rwr.sg_list = &sge;
  rwr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  if (int rc = ibv_post_recv(qp, &rwr, &bad)) return die("ibv_post_recv", rc);
  ibv_wc wc{};
  int got = 0;
  while ((got = ibv_poll_cq(cq, 1, &wc)) == 0) usleep(100);
  if (got < 0 || wc.status != IBV_WC_SUCCESS) return die("the SEND's completion", EIO);
  std::printf("received\n");
  std::fflush(stdout);
  for (;;) pause();
}
