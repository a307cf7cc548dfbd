// Starting and stopping DPDK's Environment Abstraction Layer, once per process.
//
// rte_eal_init can run only once in a process (not even again after rte_eal_cleanup), and two
// processes on one machine must not share a --file-prefix, even in different network namespaces
// (/var/run/dpdk is shared). Eal::init therefore supplies defaults that work on a machine
// without hugepages or a NIC and with a prefix unique to the process; the caller's own arguments
// replace the matching default (see build_eal_args).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace roce::dpdk {

enum class HugePages : uint8_t {
  kAuto,  // use hugepages if hugetlbfs is mounted and has free pages for `memory_mb`, else
          // --no-huge
  kOff,   // always --no-huge
  kOn,    // never --no-huge (EAL fails if it finds no hugepages)
};

struct EalOptions {
  std::string program_name = "roce";  // argv[0]
  // --file-prefix; empty: "roce-<pid>", unique per process.
  std::string file_prefix;
  // Memory for --no-huge (-m). 1024 MB holds two 8 k-mbuf pools of 8 KiB buffers; 512 is too
  // small for one 16 k pool (shared/notes/dpdk-here.md). With hugepages EAL grows on demand.
  uint32_t memory_mb = 1024;
  HugePages huge_pages = HugePages::kAuto;
  // --lcores, e.g. "0@0,1@1"; empty: not passed (EAL takes every core of the affinity mask).
  std::string lcores;
  // --log-level; empty: not passed (EAL's default, INFO, prints a dozen start-up lines).
  std::string log_level = "*:warning";
  // Scan the PCI bus. Off by default: on a VM, EAL would otherwise probe (and fail on) the VM's
  // own virtio NIC. Turn on, with "-a <pci address>" in extra_args, to drive a real NIC.
  bool pci = false;
  // DPDK telemetry (a socket in the runtime directory and a thread serving it, for
  // dpdk-telemetry.py). Off by default: nothing here reads it, and it is one thread less.
  bool telemetry = false;
  // Appended last, verbatim. An option given here replaces our default for the same thing
  // (--file-prefix; -m for the size of --no-huge memory; --no-huge/--huge-dir/--in-memory/
  // --legacy-mem/--socket-mem/--socket-limit for the memory mode; --lcores/-l/-c, --log-level,
  // -a/--allow/-b/--block for --no-pci, --telemetry).
  std::vector<std::string> extra_args;
};

// The argument vector Eal::init passes to rte_eal_init (argv[0] first). `hugepages_available`
// stands for what HugePages::kAuto would detect, so the merge rules can be tested without EAL.
std::vector<std::string> build_eal_args(const EalOptions& options, bool hugepages_available);

// True if a hugetlbfs is mounted and the kernel has at least `memory_mb` of free hugepages.
bool hugepages_available(uint32_t memory_mb);

class Eal {
 public:
  // Starts EAL with build_eal_args(options, ...). Returns true if EAL runs (also when an earlier
  // call started it: later options are then ignored). On failure returns false and sets *error
  // to one line naming the cause and the arguments.
  static bool init(const EalOptions& options, std::string* error);
  // Starts EAL with exactly `args` (argv[0] first): no defaults added.
  static bool init_raw(const std::vector<std::string>& args, std::string* error);
  static bool running();
  // The arguments EAL was started with (empty before init).
  static const std::vector<std::string>& args();
  // Whether EAL uses hugepages (false with --no-huge).
  static bool uses_hugepages();
  // Whether EAL lists a device of this name (its devargs: probed at start-up or since, and not
  // removed).
  static bool device_listed(const std::string& name);
  // rte_eal_cleanup. Every port and pool must be closed first. EAL cannot be started again in
  // this process afterwards. First waits for EAL's interrupt thread to finish what it was asked
  // (settle_eal_interrupt_thread, dpdk/intr_sync.h). Also removes the runtime directory
  // (/var/run/dpdk/<prefix>) if EAL left it behind and the prefix is one Eal chose.
  static void cleanup();
  // Makes the calling (non-EAL) thread an EAL thread: it gets an lcore id and so a mempool
  // cache. Threads not registered still work, only without the per-lcore cache.
  static bool register_current_thread(std::string* error);
  static void unregister_current_thread();
  // run_on_eal_interrupt_thread (dpdk/intr_sync.h): fn() on EAL's interrupt thread, where
  // net_memif handles a peer's connect and disconnect (DpdkPort's memif stop and close run
  // there). True when fn ran; false when the thread did not get to it within `timeout` (fn then
  // never runs). Without EAL running, or called on the interrupt thread itself, fn runs at once
  // on the caller's thread.
  static bool run_on_interrupt_thread(const std::function<void()>& fn,
                                      std::chrono::milliseconds timeout);
};

}  // namespace roce::dpdk
