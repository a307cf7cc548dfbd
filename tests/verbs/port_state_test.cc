// The port's state follows its link once the link was up: a net_memif peer process that is
// killed takes the link down, which the shim reports as rdma-core's providers report a lost
// carrier (IBV_EVENT_PORT_ERR on every context's async_fd, ibv_query_port DOWN), and a new
// peer brings it back (IBV_EVENT_PORT_ACTIVE, ACTIVE). Before the first peer connects the port
// counts as active: programs such as perftest check it as they start, before their peer runs.
// The peer is a process of its own (memif_peer.cc) over the same shim. No network namespace is
// needed: the link is a Unix socket in the test's directory.
#include <gtest/gtest.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

#include "rc_connect.h"

extern char** environ;

namespace roce::verbs_test {
namespace {

// MEMIF_PEER with its stdin and stdout on pipes.
struct Peer {
  pid_t pid = -1;
  FILE* out = nullptr;  // what it prints
  int in = -1;          // what it reads
  bool start(const std::vector<std::string>& args) {
    int to[2], from[2];
    if (pipe(to) || pipe(from)) return false;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, to[0], 0);
    posix_spawn_file_actions_adddup2(&fa, from[1], 1);
    for (int fd : {to[0], to[1], from[0], from[1]}) posix_spawn_file_actions_addclose(&fa, fd);
    std::vector<char*> argv{const_cast<char*>(ROCE_MEMIF_PEER)};
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    const int rc = posix_spawn(&pid, ROCE_MEMIF_PEER, &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    close(to[0]);
    close(from[1]);
    in = to[1];
    out = fdopen(from[0], "r");
    return rc == 0 && out;
  }
  // The next line it prints ("" at its end).
  std::string line() {
    char buf[128];
    if (!std::fgets(buf, sizeof buf, out)) return "";
    std::string s(buf);
    if (!s.empty() && s.back() == '\n') s.pop_back();
    return s;
  }
  void kill_it() {
    if (pid > 0) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
      pid = -1;
    }
    if (out) std::fclose(out);
    if (in >= 0) close(in);
    out = nullptr;
    in = -1;
  }
  ~Peer() { kill_it(); }
};

// The next async event within `seconds`; IBV_EVENT_DEVICE_FATAL (never raised here) if none.
ibv_event_type next_event(ibv_context* ctx, int seconds, int* port = nullptr) {
  pollfd p{ctx->async_fd, POLLIN, 0};
  if (poll(&p, 1, seconds * 1000) != 1) return IBV_EVENT_DEVICE_FATAL;
  ibv_async_event ev{};
  if (ibv_get_async_event(ctx, &ev) != 0) return IBV_EVENT_DEVICE_FATAL;
  if (port) *port = ev.element.port_num;
  const ibv_event_type t = ev.event_type;
  ibv_ack_async_event(&ev);
  return t;
}

ibv_port_attr port_attr(ibv_context* ctx) {
  ibv_port_attr a{};
  EXPECT_EQ(ibv_query_port(ctx, 1, &a), 0);
  return a;
}

TEST(VerbsPortState, AMemifPeerThatDiesTakesThePortDownAndANewOneBringsItBack) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (EAL)";
  const std::string base = ::testing::TempDir() + "roce-port-state-" + std::to_string(getpid());
  const std::string config = base + ".conf", sock = base + ".sock";
  {
    std::ofstream f(config);
    for (int i = 0; i < 2; ++i) {
      f << "[device " << (i ? "roceB" : "roceA") << "]\n"
        << "port = net_memif0,role=" << (i ? "client" : "server") << ",socket=" << sock
        << ",socket-abstract=no\nmtu = 1500\nmac = 02:00:00:0c:00:0" << i + 1 << "\nipv4 = 10.12.0."
        << i + 1 << "/24\n";
    }
  }
  setenv("ROCE_CONFIG", config.c_str(), 1);
  unsetenv("ROCE_DEVICE");
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  ASSERT_EQ(n, 2);
  ibv_context* ctx = ibv_open_device(list[0]);  // roceA, the memif server
  ibv_free_device_list(list);
  ASSERT_NE(ctx, nullptr) << std::strerror(errno);

  // No peer yet: active all the same, and no event.
  ibv_port_attr a = port_attr(ctx);
  EXPECT_EQ(a.state, IBV_PORT_ACTIVE);
  EXPECT_EQ(a.phys_state, 5);

  // A peer connects, and one SEND crosses the link: it is up.
  static char buf[64];
  ibv_pd* pd = ibv_alloc_pd(ctx);
  ASSERT_NE(pd, nullptr);
  ibv_mr* mr = ibv_reg_mr(pd, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE);
  ibv_cq* cq = ibv_create_cq(ctx, 16, nullptr, nullptr, 0);
  ASSERT_TRUE(mr && cq);
  ibv_qp* qp = small_rc_qp(pd, cq);
  ASSERT_NE(qp, nullptr);
  Peer first;
  ASSERT_TRUE(first.start({"roceB", "10.12.0.1"}));
  const std::string hello = first.line();
  unsigned peer_qpn = 0;
  ASSERT_EQ(std::sscanf(hello.c_str(), "qpn %u", &peer_qpn), 1) << "the peer said: " << hello;
  const std::string mine = std::to_string(qp->qp_num) + "\n";
  ASSERT_EQ(write(first.in, mine.data(), mine.size()), static_cast<ssize_t>(mine.size()));
  ASSERT_EQ(connect_rc_to(qp, peer_qpn, ipv4_gid("10.12.0.2"), 1, IBV_MTU_1024), 0);
  ibv_sge sge{reinterpret_cast<uintptr_t>(buf), 8, mr->lkey};
  ibv_send_wr wr{};
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED;
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(qp, &wr, &bad), 0);
  ibv_wc wc{};
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  int got = 0;
  while ((got = ibv_poll_cq(cq, 1, &wc)) == 0 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  ASSERT_EQ(got, 1) << "the SEND did not complete";
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_EQ(first.line(), "received");
  EXPECT_EQ(port_attr(ctx).state, IBV_PORT_ACTIVE);

  // The peer dies: PORT_ERR on port 1, and the port is down (rxe's physical state for a port
  // without carrier: Polling).
  first.kill_it();
  int port = 0;
  EXPECT_EQ(next_event(ctx, 10, &port), IBV_EVENT_PORT_ERR);
  EXPECT_EQ(port, 1);
  a = port_attr(ctx);
  EXPECT_EQ(a.state, IBV_PORT_DOWN);
  EXPECT_EQ(a.phys_state, 2);

  // A new peer: PORT_ACTIVE, and active again.
  Peer second;
  ASSERT_TRUE(second.start({"roceB"}));
  EXPECT_EQ(second.line(), "open");
  EXPECT_EQ(next_event(ctx, 10, &port), IBV_EVENT_PORT_ACTIVE);
  EXPECT_EQ(port, 1);
  a = port_attr(ctx);
  EXPECT_EQ(a.state, IBV_PORT_ACTIVE);
  EXPECT_EQ(a.phys_state, 5);
  second.kill_it();

  EXPECT_EQ(ibv_destroy_qp(qp), 0);
  EXPECT_EQ(ibv_destroy_cq(cq), 0);
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
  EXPECT_EQ(ibv_dealloc_pd(pd), 0);
  EXPECT_EQ(ibv_close_device(ctx), 0);
  std::remove(config.c_str());
  std::remove(sock.c_str());
}

}  // namespace
}  // namespace roce::verbs_test
