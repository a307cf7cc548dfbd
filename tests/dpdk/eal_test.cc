// EAL start-up: the default arguments, and a start with them on this machine.
#include "dpdk/eal.h"
#include "dpdk/intr_sync.h"
#include "dpdk/testing.h"

#include "dpdk/dpdk_port.h"
#include "dpdk/ring_pair.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace roce::dpdk {
namespace {

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

size_t count_prefix(const std::vector<std::string>& v, const std::string& prefix) {
  return std::count_if(v.begin(), v.end(),
                       [&](const std::string& s) { return s.starts_with(prefix); });
}

TEST(EalArgs, DefaultsWorkWithoutHugepagesOrNic) {
  const auto args = build_eal_args(EalOptions{}, /*hugepages_available=*/false);
  ASSERT_FALSE(args.empty());
  EXPECT_EQ(args[0], "roce");
  EXPECT_TRUE(contains(args, "--no-huge"));
  EXPECT_TRUE(contains(args, "-m"));
  EXPECT_TRUE(contains(args, "1024"));
  EXPECT_TRUE(contains(args, "--no-pci"));
  EXPECT_TRUE(contains(args, "--no-telemetry"));
  EXPECT_TRUE(contains(args, "--file-prefix=roce-" + std::to_string(getpid())));
  EXPECT_TRUE(contains(args, "--log-level=*:warning"));
  EXPECT_FALSE(contains(args, "--in-memory"));  // EAL refuses it together with --no-huge
  EXPECT_EQ(count_prefix(args, "--lcores"), 0u);
}

TEST(EalArgs, UsesHugepagesWhenAvailable) {
  const auto args = build_eal_args(EalOptions{}, /*hugepages_available=*/true);
  EXPECT_FALSE(contains(args, "--no-huge"));
  EXPECT_FALSE(contains(args, "-m"));
  EXPECT_TRUE(contains(args, "--in-memory"));

  EalOptions off;
  off.huge_pages = HugePages::kOff;
  EXPECT_TRUE(contains(build_eal_args(off, true), "--no-huge"));
  EalOptions on;
  on.huge_pages = HugePages::kOn;
  EXPECT_FALSE(contains(build_eal_args(on, false), "--no-huge"));
}

TEST(EalArgs, CallerArgumentsReplaceMatchingDefaults) {
  EalOptions o;
  o.extra_args = {"--file-prefix=mine",
                  "-m",
                  "512",
                  "--no-huge",
                  "-a",
                  "0000:01:00.0",
                  "--log-level=pmd.net.af_packet:debug",
                  "-l",
                  "0-1"};
  o.lcores = "0@0,1@1";
  const auto args = build_eal_args(o, false);
  EXPECT_EQ(count_prefix(args, "--file-prefix"), 1u);
  EXPECT_TRUE(contains(args, "--file-prefix=mine"));
  EXPECT_EQ(std::count(args.begin(), args.end(), "-m"), 1);
  EXPECT_EQ(std::count(args.begin(), args.end(), "--no-huge"), 1);
  EXPECT_FALSE(contains(args, "1024"));
  EXPECT_FALSE(contains(args, "--no-pci"));  // an allow-list means: scan the PCI bus
  EXPECT_EQ(count_prefix(args, "--log-level"), 1u);
  EXPECT_EQ(count_prefix(args, "--lcores"), 0u);  // -l given
  // Caller's arguments come last, in order.
  EXPECT_EQ(args.back(), "0-1");

  EalOptions glued;
  glued.extra_args = {"-m512", "--file-prefix", "x"};
  const auto g = build_eal_args(glued, false);
  EXPECT_TRUE(contains(g, "--no-huge"));  // -m sets the size only
  EXPECT_FALSE(contains(g, "-m"));
  EXPECT_EQ(count_prefix(g, "--file-prefix"), 1u);

  EalOptions lcores;
  lcores.lcores = "0@0,1@1";
  EXPECT_TRUE(contains(build_eal_args(lcores, false), "--lcores=0@0,1@1"));
  lcores.extra_args = {"-c", "0x3"};  // a core mask names the lcores too
  EXPECT_EQ(count_prefix(build_eal_args(lcores, false), "--lcores"), 0u);
}

// "-m 2048" is what a pool too large for the default memory asks for ("raise EAL -m"): it
// replaces our -m, not the memory mode. Without hugepages EAL then still needs --no-huge: alone,
// "-m 2048" made EAL look for hugepages and fail ("Cannot get hugepage information").
TEST(EalArgs, AMemorySizeReplacesOnlyOurSize) {
  EalOptions o;
  o.extra_args = {"-m", "2048"};
  const auto no_huge = build_eal_args(o, /*hugepages_available=*/false);
  EXPECT_EQ(std::count(no_huge.begin(), no_huge.end(), "--no-huge"), 1);
  EXPECT_EQ(std::count(no_huge.begin(), no_huge.end(), "-m"), 1);
  EXPECT_FALSE(contains(no_huge, "1024"));
  EXPECT_TRUE(contains(no_huge, "2048"));
  const auto huge = build_eal_args(o, /*hugepages_available=*/true);
  EXPECT_TRUE(contains(huge, "--in-memory"));
  EXPECT_FALSE(contains(huge, "--no-huge"));
  // The caller's choice of memory mode replaces ours; with --no-huge alone our size stays.
  EalOptions mode;
  mode.extra_args = {"--no-huge"};
  const auto m = build_eal_args(mode, /*hugepages_available=*/true);
  EXPECT_EQ(std::count(m.begin(), m.end(), "--no-huge"), 1);
  EXPECT_FALSE(contains(m, "--in-memory"));
  EXPECT_TRUE(contains(m, "1024"));
  // --socket-mem means hugepages (EAL refuses it with --no-huge): no mode, no size of ours.
  EalOptions socket;
  socket.extra_args = {"--socket-mem=512"};
  const auto sm = build_eal_args(socket, /*hugepages_available=*/false);
  EXPECT_FALSE(contains(sm, "--no-huge"));
  EXPECT_FALSE(contains(sm, "-m"));
}

// pci and telemetry turn our --no-pci and --no-telemetry off; a caller's own telemetry option
// replaces ours.
TEST(EalArgs, PciAndTelemetryWhenAskedFor) {
  EalOptions o;
  o.pci = true;
  o.telemetry = true;
  const auto args = build_eal_args(o, false);
  EXPECT_FALSE(contains(args, "--no-pci"));
  EXPECT_FALSE(contains(args, "--no-telemetry"));
  EalOptions t;
  t.extra_args = {"--telemetry"};
  const auto ta = build_eal_args(t, false);
  EXPECT_FALSE(contains(ta, "--no-telemetry"));
  EXPECT_TRUE(contains(ta, "--no-pci"));
}

// Each of the caller's memory-mode options replaces our mode: no --no-huge or --in-memory of
// ours beside it (EAL refuses --in-memory with --no-huge, and the per-socket options with it).
TEST(EalArgs, EveryMemoryModeOptionOfTheCallerReplacesOurs) {
  for (const char* opt : {"--huge-dir=/mnt/h", "--in-memory", "--legacy-mem", "--socket-mem=512",
                          "--socket-limit=512"}) {
    for (const bool hugepages : {false, true}) {
      EalOptions o;
      o.extra_args = {opt};
      const auto args = build_eal_args(o, hugepages);
      EXPECT_FALSE(contains(args, "--no-huge")) << opt << " hugepages " << hugepages;
      EXPECT_EQ(std::count(args.begin(), args.end(), "--in-memory"),
                std::string_view(opt) == "--in-memory" ? 1 : 0)
          << opt << " hugepages " << hugepages;
      EXPECT_FALSE(contains(args, "-m")) << opt;
    }
  }
}

TEST(Eal, PortsRefuseToOpenBeforeEalRuns) {
  std::string error;
  EXPECT_EQ(DpdkPort::open("net_ring0", PortConfig{}, &error), nullptr);
  EXPECT_NE(error.find("EAL is not running"), std::string::npos) << error;
  EXPECT_EQ(RingPair::create("x", PortConfig{}, &error), nullptr);
  EXPECT_NE(error.find("EAL is not running"), std::string::npos) << error;
}

// Runs only where hugepages are set up (not the default here): shared/notes/dpdk-here.md.
TEST(Eal, UsesHugepagesWhenMountedAndFree) {
  if (!hugepages_available(EalOptions{}.memory_mb)) {
    GTEST_SKIP() << "no hugetlbfs mount with 1 GiB of free hugepages";
  }
  std::string error;
  ASSERT_TRUE(Eal::init(EalOptions{}, &error)) << error;
  EXPECT_TRUE(Eal::uses_hugepages());
  EXPECT_TRUE(contains(Eal::args(), "--in-memory"));
  Eal::cleanup();
}

TEST(Eal, StartsWithTheNoHugepageDefaultsAndCleansUp) {
  EalOptions o;
  o.huge_pages = HugePages::kOff;
  std::string error;
  ASSERT_TRUE(Eal::init(o, &error)) << error;
  EXPECT_TRUE(Eal::running());
  EXPECT_FALSE(Eal::uses_hugepages());
  EXPECT_TRUE(contains(Eal::args(), "--no-huge"));
  // A second init is a no-op that reports success.
  EXPECT_TRUE(Eal::init(o, &error)) << error;
  // The runtime directory carries our per-process prefix...
  const std::filesystem::path dir =
      std::filesystem::path("/var/run/dpdk") / ("roce-" + std::to_string(getpid()));
  const bool had_dir = std::filesystem::exists(dir);
  Eal::cleanup();
  EXPECT_FALSE(Eal::running());
  // ...and is gone after cleanup, so test runs don't pile up directories.
  if (had_dir) {
    EXPECT_FALSE(std::filesystem::exists(dir));
  }
  // EAL cannot start twice in one process; the error says so.
  EXPECT_FALSE(Eal::init(o, &error));
  EXPECT_NE(error.find("cannot start again"), std::string::npos) << error;
}

// A process that was killed leaves its runtime directory (~12 MiB with --no-huge): the next
// EAL start removes those of our naming whose process is gone, and nothing else.
TEST(Eal, RemovesTheRuntimeDirectoriesOfProcessesThatAreGone) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (/var/run/dpdk)";
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) _exit(0);
  ASSERT_EQ(waitpid(child, nullptr, 0), child);  // its PID now names no process
  const std::filesystem::path base("/var/run/dpdk");
  std::filesystem::create_directories(base);
  const auto make = [&](const std::string& name) {
    std::filesystem::create_directories(base / name);
    std::ofstream(base / name / "config") << "x";
    return base / name;
  };
  const auto gone = make("roce-" + std::to_string(child));
  const auto alive = make("roce-" + std::to_string(getppid()));  // ctest, still running
  const auto other = make("notroce-" + std::to_string(child));
  const auto zero = make("roce-0" + std::to_string(child));  // not a name Eal::init makes
  std::string error;
  ASSERT_TRUE(Eal::init(EalOptions{}, &error)) << error;
  EXPECT_FALSE(std::filesystem::exists(gone));
  EXPECT_TRUE(std::filesystem::exists(alive));
  EXPECT_TRUE(std::filesystem::exists(other));
  EXPECT_TRUE(std::filesystem::exists(zero));
  std::filesystem::remove_all(alive);
  std::filesystem::remove_all(other);
  std::filesystem::remove_all(zero);
  Eal::cleanup();
}

// EAL makes its runtime directory while it parses its arguments, and a later step that fails
// (here its memory set-up: hugepages from a directory that does not exist) left it behind.
TEST(Eal, AFailedStartLeavesNoRuntimeDirectory) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (/var/run/dpdk)";
  EalOptions o;
  o.huge_pages = HugePages::kOff;
  o.extra_args = {"--socket-mem=64"};  // hugepages, then: none are mounted there
  std::string error;
  const bool started = Eal::init(o, &error);
  if (started) {
    Eal::cleanup();
    GTEST_SKIP() << "EAL started with --socket-mem: this machine has hugepages";
  }
  const std::filesystem::path dir =
      std::filesystem::path("/var/run/dpdk") / ("roce-" + std::to_string(getpid()));
  EXPECT_FALSE(std::filesystem::exists(dir)) << error;
  // rte_eal_init failed past the point where it can be called again: a second start is refused
  // in our words, without calling it.
  EXPECT_FALSE(Eal::init(EalOptions{}, &error));
  EXPECT_NE(error.find("cannot start again"), std::string::npos) << error;
}

// The runtime directory of a prefix the caller chose is the caller's: cleanup leaves it.
TEST(Eal, CleanupLeavesTheRuntimeDirectoryOfTheCallersPrefix) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (/var/run/dpdk)";
  EalOptions o;
  o.file_prefix = "roce-test-" + std::to_string(getpid());
  std::string error;
  ASSERT_TRUE(Eal::init(o, &error)) << error;
  const std::filesystem::path dir = std::filesystem::path("/var/run/dpdk") / o.file_prefix;
  ASSERT_TRUE(std::filesystem::exists(dir));
  Eal::cleanup();
  EXPECT_TRUE(std::filesystem::exists(dir));
  std::filesystem::remove_all(dir);
}

TEST(Eal, StartsTheCallerThreadAsAnLcoreAndRegistersOthers) {
  std::string error;
  ASSERT_TRUE(Eal::init(EalOptions{}, &error)) << error;
  bool registered = false;
  std::string thread_error;
  std::thread t([&] {
    registered = Eal::register_current_thread(&thread_error);
    Eal::unregister_current_thread();
  });
  t.join();
  EXPECT_TRUE(registered) << thread_error;
  Eal::cleanup();
}

// Waits up to 5 s for `state` (set by occupy_interrupt_thread: 1 holding, 2 released) to be
// `want`; true if it got there.
bool wait_for_state(const std::atomic<int>& state, int want) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (state.load() != want && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return state.load() == want;
}

// Holds the interrupt thread for 300 ms (as a memif peer's teardown does); returns once the
// hold has begun.
bool hold_interrupt_thread(std::atomic<int>* state) {
  state->store(0);
  return occupy_interrupt_thread(std::chrono::milliseconds(300), state) &&
         wait_for_state(*state, 1);
}

// run_on_interrupt_thread returns once the interrupt thread is done with what it was handling,
// not before.
TEST(Eal, RunOnInterruptThreadWaitsForWhatTheThreadIsHandling) {
  const auto sync = [](std::chrono::milliseconds timeout) {
    return Eal::run_on_interrupt_thread([] {}, timeout);
  };
  EXPECT_TRUE(sync(std::chrono::milliseconds(10)));  // EAL not running
  std::string error;
  ASSERT_TRUE(Eal::init(EalOptions{}, &error)) << error;
  EXPECT_TRUE(sync(std::chrono::seconds(5)));  // an idle thread
  std::atomic<int> state{0};
  ASSERT_TRUE(hold_interrupt_thread(&state));
  EXPECT_TRUE(sync(std::chrono::seconds(5)));
  EXPECT_EQ(state.load(), 2);
  // A thread held past the timeout: false, and the function does not run later.
  ASSERT_TRUE(hold_interrupt_thread(&state));
  EXPECT_FALSE(sync(std::chrono::milliseconds(20)));
  EXPECT_TRUE(wait_for_state(state, 2));
  EXPECT_TRUE(sync(std::chrono::seconds(5)));
  Eal::cleanup();
}

// run_on_interrupt_thread runs the function once, on the interrupt thread, after what that
// thread is handling; a thread held past the timeout never runs it.
TEST(Eal, RunOnInterruptThreadRunsThereOnceOrNotAtAll) {
  const std::thread::id caller = std::this_thread::get_id();
  std::atomic<int> runs{0};
  std::thread::id where{};
  auto fn = [&] {
    where = std::this_thread::get_id();
    runs.fetch_add(1);
  };
  EXPECT_TRUE(Eal::run_on_interrupt_thread(fn, std::chrono::milliseconds(10)));  // no EAL
  EXPECT_EQ(runs.load(), 1);
  EXPECT_EQ(where, caller);
  std::string error;
  ASSERT_TRUE(Eal::init(EalOptions{}, &error)) << error;
  EXPECT_TRUE(Eal::run_on_interrupt_thread(fn, std::chrono::seconds(5)));
  EXPECT_EQ(runs.load(), 2);
  EXPECT_NE(where, caller);
  const std::thread::id interrupt_thread = where;
  // Held: the function runs after the hold, on the same thread.
  std::atomic<int> state{0};
  ASSERT_TRUE(hold_interrupt_thread(&state));
  EXPECT_TRUE(Eal::run_on_interrupt_thread(
      [&] {
        fn();
        EXPECT_EQ(state.load(), 2);
      },
      std::chrono::seconds(5)));
  EXPECT_EQ(runs.load(), 3);
  EXPECT_EQ(where, interrupt_thread);
  // Held past the timeout: false, and the function does not run later either.
  ASSERT_TRUE(hold_interrupt_thread(&state));
  EXPECT_FALSE(Eal::run_on_interrupt_thread(fn, std::chrono::milliseconds(20)));
  EXPECT_TRUE(wait_for_state(state, 2));
  EXPECT_TRUE(Eal::run_on_interrupt_thread([] {}, std::chrono::seconds(5)));
  EXPECT_EQ(runs.load(), 3);
  Eal::cleanup();
}

size_t open_descriptors() {
  return static_cast<size_t>(std::distance(std::filesystem::directory_iterator("/proc/self/fd"),
                                           std::filesystem::directory_iterator{}));
}

// The way onto the interrupt thread is set up once (an eventfd and an interrupt handle kept for
// the life of the process), not per call: each registration makes the thread rebuild its epoll
// set, and each call would leave a descriptor behind.
TEST(Eal, RunOnInterruptThreadSetsUpItsChannelOnce) {
  std::string error;
  ASSERT_TRUE(Eal::init(EalOptions{}, &error)) << error;
  ASSERT_TRUE(Eal::run_on_interrupt_thread([] {}, std::chrono::seconds(5)));
  const size_t fds = open_descriptors();
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(Eal::run_on_interrupt_thread([] {}, std::chrono::seconds(5)));
  }
  EXPECT_EQ(open_descriptors(), fds);
  Eal::cleanup();
}

// settle_eal_interrupt_thread (Eal::cleanup calls it) waits for what the thread was handling,
// once anything of ours has run there; before that it has nothing to wait for and registers
// nothing (a registration would itself make the thread rebuild its epoll set).
TEST(Eal, SettleWaitsForTheInterruptThreadOnceWeHaveUsedIt) {
  std::string error;
  ASSERT_TRUE(Eal::init(EalOptions{}, &error)) << error;
  std::atomic<int> state{0};
  ASSERT_TRUE(hold_interrupt_thread(&state));
  EXPECT_TRUE(settle_eal_interrupt_thread(std::chrono::milliseconds(20)));
  EXPECT_EQ(state.load(), 1);  // returned while the thread was still held
  EXPECT_TRUE(wait_for_state(state, 2));
  EXPECT_TRUE(Eal::run_on_interrupt_thread([] {}, std::chrono::seconds(5)));
  ASSERT_TRUE(hold_interrupt_thread(&state));
  EXPECT_TRUE(settle_eal_interrupt_thread(std::chrono::seconds(5)));
  EXPECT_EQ(state.load(), 2);
  ASSERT_TRUE(hold_interrupt_thread(&state));
  EXPECT_FALSE(settle_eal_interrupt_thread(std::chrono::milliseconds(20)));
  EXPECT_TRUE(wait_for_state(state, 2));
  Eal::cleanup();
}

// A port EAL probed itself (--vdev here; the PCI scan for a real NIC) is released when its
// DpdkPort closes it: a DpdkPort opened on it again (the verbs shim closes a device with its last
// context and opens it with the next one) must still find it.
TEST(Eal, APortEalProbedOpensAgainAfterItsDpdkPortClosed) {
  EalOptions o;
  o.extra_args = {"--vdev=net_null0"};
  std::string error;
  ASSERT_TRUE(Eal::init(o, &error)) << error;
  for (int round = 0; round < 3; ++round) {
    auto port = DpdkPort::open("net_null0", PortConfig{}, &error);
    ASSERT_NE(port, nullptr) << "round " << round << ": " << error;
    EXPECT_EQ(port->driver(), "net_null");
  }
  Eal::cleanup();
}

// ...and with the arguments EAL probed it with, every time: net_null's size= is the length of
// the frames it delivers.
TEST(Eal, APortEalProbedOpensAgainWithItsArguments) {
  EalOptions o;
  o.extra_args = {"--vdev=net_null0,size=100"};
  std::string error;
  ASSERT_TRUE(Eal::init(o, &error)) << error;
  for (int round = 0; round < 3; ++round) {
    auto port = DpdkPort::open("net_null0", PortConfig{}, &error);
    ASSERT_NE(port, nullptr) << "round " << round << ": " << error;
    PktBuf bufs[4];
    const uint16_t n = port->rx_burst(bufs, 4);
    ASSERT_GT(n, 0) << "round " << round;
    EXPECT_EQ(bufs[0].len, 100u) << "round " << round;
    port->free(bufs, n);
  }
  Eal::cleanup();
}

// A port opened by its id is closed when its DpdkPort goes, also when the device stays
// (kKeepDevice): closing releases the ethdev port, whose id then names no port.
TEST(Eal, APortOpenedByIdIsClosedWhenItsDpdkPortGoes) {
  EalOptions o;
  o.extra_args = {"--vdev=net_null0"};
  std::string error;
  ASSERT_TRUE(Eal::init(o, &error)) << error;
  {
    auto port = DpdkPort::open_port_id(0, PortConfig{}, &error);
    ASSERT_NE(port, nullptr) << error;
    EXPECT_EQ(port->name(), "net_null0");
  }
  EXPECT_EQ(DpdkPort::open_port_id(0, PortConfig{}, &error), nullptr);
  EXPECT_NE(error.find("no such ethdev port"), std::string::npos) << error;
  EXPECT_TRUE(Eal::device_listed("net_null0"));  // the device stayed
  Eal::cleanup();
}

// A failed rte_eal_init leaves EAL unusable in that process, so it runs in a child.
TEST(EalDeathTest, FailureIsOneClearLine) {
  EXPECT_EXIT(
      {
        EalOptions o;
        o.extra_args = {"--no-such-eal-flag"};
        std::string error;
        const bool ok = Eal::init(o, &error);
        std::fprintf(stderr, "<<%s>>\n", error.c_str());
        std::exit(ok ? 0 : 3);
      },
      ::testing::ExitedWithCode(3), "<<EAL init failed: [^\n]*--no-such-eal-flag>>");
}

}  // namespace
}  // namespace roce::dpdk
