// Two processes, each with its own EAL and DpdkPort, exchanging frames: over a veth pair between
// two network namespaces (net_af_packet, net_pcap: the CI loopback), and over a memif socket.
// The sides are roce_dpdk_peer processes (EAL starts once per process); this test sets up the
// link, runs them with a deadline, and always tears the namespaces down again.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace std::chrono_literals;

const char* const kPeer = ROCE_DPDK_PEER;

int sh(const std::string& cmd) { return std::system((cmd + " >/dev/null 2>&1").c_str()); }

// Starts `argv` in a child process; returns its pid (or -1).
pid_t spawn(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    execvp(args[0], args.data());
    _exit(127);
  }
  return pid;
}

// Waits for `pid` until `deadline`; kills it (only it: we started it) when the deadline passes.
// Returns the exit code, or -1 if killed or crashed.
int wait_child(pid_t pid, std::chrono::steady_clock::time_point deadline) {
  int status = 0;
  while (true) {
    const pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (r < 0) return -1;
    if (std::chrono::steady_clock::now() >= deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(50ms);
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

struct Side {
  std::vector<std::string> prefix;  // e.g. {"ip", "netns", "exec", "ns"}
  std::string vdev;
};

// Runs a receiver and a sender; both must exit 0 within the deadline. `extra` goes to both
// (roce_dpdk_peer's options).
void exchange(const Side& recv, const Side& send, const std::string& sync_dir,
              const std::vector<std::string>& extra = {"--sizes", "60,1500,4200", "--count",
                                                       "32"}) {
  std::filesystem::create_directories(sync_dir);
  auto argv = [&](const Side& s, const char* role) {
    std::vector<std::string> v = s.prefix;
    v.insert(v.end(), {kPeer, "--vdev", s.vdev, "--role", role, "--sync-dir", sync_dir,
                       "--timeout-ms", "15000"});
    v.insert(v.end(), extra.begin(), extra.end());
    return v;
  };
  const pid_t r = spawn(argv(recv, "recv"));
  ASSERT_GT(r, 0);
  const pid_t s = spawn(argv(send, "send"));
  const auto deadline = std::chrono::steady_clock::now() + 45s;
  const int sender_rc = s > 0 ? wait_child(s, deadline) : -1;
  const int receiver_rc = wait_child(r, deadline);
  std::filesystem::remove_all(sync_dir);
  EXPECT_EQ(sender_rc, 0) << "sender failed or timed out (its output is above)";
  EXPECT_EQ(receiver_rc, 0) << "receiver failed or timed out (its output is above)";
}

std::string unique(const std::string& what) {
  return "roce-" + what + "-" + std::to_string(getpid());
}

// Two namespaces joined by a veth pair with MTU 9000, removed again by the destructor (which
// removes the veth with them).
class VethNamespaces : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root to create network namespaces";
    if (sh("ip netns list") != 0) GTEST_SKIP() << "'ip netns' is not available";
    ns_a_ = unique("a");
    ns_b_ = unique("b");
    // Interface names hold at most 15 characters.
    veth_a_ = "rd" + std::to_string(getpid()) + "a";
    veth_b_ = "rd" + std::to_string(getpid()) + "b";
    created_ = true;
    for (const std::string& cmd :
         {"ip netns add " + ns_a_, "ip netns add " + ns_b_,
          "ip link add " + veth_a_ + " type veth peer name " + veth_b_,
          "ip link set " + veth_a_ + " netns " + ns_a_,
          "ip link set " + veth_b_ + " netns " + ns_b_,
          // No IPv6 on the link: fewer frames of the kernel's own to filter out.
          "ip netns exec " + ns_a_ + " sysctl -qw net.ipv6.conf.all.disable_ipv6=1",
          "ip netns exec " + ns_b_ + " sysctl -qw net.ipv6.conf.all.disable_ipv6=1",
          "ip netns exec " + ns_a_ + " ip link set " + veth_a_ + " mtu 9000 up",
          "ip netns exec " + ns_b_ + " ip link set " + veth_b_ + " mtu 9000 up"}) {
      ASSERT_EQ(sh(cmd), 0) << "failed: " << cmd;
    }
  }
  void TearDown() override {
    if (!created_) return;
    sh("ip netns del " + ns_a_);
    sh("ip netns del " + ns_b_);
    sh("ip link del " + veth_a_);  // only if moving it into the namespace failed
  }
  std::vector<std::string> in(const std::string& ns) { return {"ip", "netns", "exec", ns}; }

  bool created_ = false;
  std::string ns_a_, ns_b_, veth_a_, veth_b_;
};

TEST_F(VethNamespaces, AfPacketCarriesFramesUpTo4200BytesByteIdentical) {
  // framesz 8192: with the default 2048 a 4200-byte frame vanishes on tx (dpdk-here.md).
  const std::string args = ",blocksz=8192,framesz=8192,framecnt=512";
  exchange({in(ns_b_), "net_af_packet0,iface=" + veth_b_ + args},
           {in(ns_a_), "net_af_packet0,iface=" + veth_a_ + args},
           ::testing::TempDir() + unique("afp-sync"));
}

TEST_F(VethNamespaces, PcapCarriesFramesUpTo4200BytesByteIdentical) {
  exchange({in(ns_b_), "net_pcap0,iface=" + veth_b_}, {in(ns_a_), "net_pcap0,iface=" + veth_a_},
           ::testing::TempDir() + unique("pcap-sync"));
}

// Same host namespace, no root needed: a memif server (receiver) and client (sender) on a
// socket file of their own. Each side also checks, once the link is up, that
// DpdkPort::prefault_shared_memory maps in every page of the shared regions (dpdk_peer.cc).
TEST(Memif, CarriesFramesUpTo4200BytesByteIdentical) {
  const std::string sock = ::testing::TempDir() + unique("memif") + ".sock";
  std::filesystem::remove(sock);  // a stale socket file makes the server fail
  const std::string common = ",socket=" + sock + ",socket-abstract=no";
  exchange({{}, "net_memif0,role=server" + common}, {{}, "net_memif0,role=client" + common},
           ::testing::TempDir() + unique("memif-sync"));
  std::filesystem::remove(sock);
}

// A 64-slot ring kept full by an unpaced sender and a slow receiver, with frames of up to
// 4200 B: every frame arrives once and intact. With memif's default 2048-byte buffers a
// 4200-byte frame spans three slots, and DPDK 22.11 then overruns a nearly full ring (frames
// lost, overwritten or received twice); DpdkPort sizes the buffers to hold a whole frame.
TEST(Memif, FullRingOfLargeFramesLosesAndRepeatsNothing) {
  const std::string sock = ::testing::TempDir() + unique("memif-full") + ".sock";
  std::filesystem::remove(sock);
  const std::string common = ",socket=" + sock + ",socket-abstract=no,rsize=6";
  exchange({{}, "net_memif0,role=server" + common}, {{}, "net_memif0,role=client" + common},
           ::testing::TempDir() + unique("memif-full-sync"),
           {"--sizes", "60,4200,1500,4200", "--count", "1500", "--flood", "--rx-delay-us", "20"});
  std::filesystem::remove(sock);
}

}  // namespace
