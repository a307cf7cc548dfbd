#include "dpdk/eal.h"

#include <rte_devargs.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_lcore.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <mutex>
#include <sstream>
#include <string_view>

#include "dpdk/intr_sync.h"

namespace roce::dpdk {
namespace {

// EAL keeps pointers into argv (e.g. for --file-prefix) for the life of the process, so the
// strings live here, never freed.
struct EalState {
  std::mutex mu;
  bool started = false;
  bool cleaned_up = false;
  bool prefix_is_ours = false;
  std::vector<std::string> args;
  std::vector<char*> argv;
};

EalState& state() {
  static EalState* s = new EalState();  // never destroyed: EAL may read argv at exit
  return *s;
}

// "--opt=value" and "--opt value" both count as "--opt"; short options like "-m" as well as
// "-m512" (EAL's getopt accepts both).
bool has_option(const std::vector<std::string>& args,
                std::initializer_list<std::string_view> names) {
  for (const std::string& a : args) {
    for (std::string_view n : names) {
      if (a == n) return true;
      if (n.starts_with("--")) {
        if (a.size() > n.size() && a.starts_with(n) && a[n.size()] == '=') return true;
      } else if (n.size() == 2 && a.size() > 2 && a.starts_with(n) && a[1] != '-') {
        return true;
      }
    }
  }
  return false;
}

std::string join(const std::vector<std::string>& args) {
  std::string out;
  for (size_t i = 1; i < args.size(); ++i) {
    if (i > 1) out += ' ';
    out += args[i];
  }
  return out;
}

// A hint for the causes we have met; rte_strerror covers the rest.
const char* hint_for(int err) {
  switch (err) {
    case EACCES:
      return " (needs root, or access to /dev/hugepages and /var/run/dpdk)";
    case EALREADY:
      return " (EAL already initialised in this process)";
    case EAGAIN:
      return " (another process holds this --file-prefix?)";
    case ENOMEM:
      return " (not enough memory: raise -m or add hugepages)";
    case EINVAL:
      return " (invalid EAL argument)";
    case ENODEV:
      return " (no device or driver found)";
    case ENOTSUP:
      return " (EAL feature unsupported here, e.g. --in-memory with --no-huge)";
    default:
      return "";
  }
}

uint64_t read_u64(const std::filesystem::path& p) {
  std::ifstream f(p);
  uint64_t v = 0;
  f >> v;
  return v;
}

}  // namespace

bool hugepages_available(uint32_t memory_mb) {
  // A hugetlbfs mount is what EAL maps its pages from; without one, free pages do not help.
  std::ifstream mounts("/proc/mounts");
  std::string dev, dir, type;
  bool mounted = false;
  std::string line;
  while (std::getline(mounts, line)) {
    std::istringstream ls(line);
    if (ls >> dev >> dir >> type && type == "hugetlbfs") {
      mounted = true;
      break;
    }
  }
  if (!mounted) return false;
  uint64_t free_bytes = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/sys/kernel/mm/hugepages", ec)) {
    // Directory names look like "hugepages-2048kB".
    const std::string name = entry.path().filename().string();
    const uint64_t kb = std::strtoull(name.c_str() + std::strlen("hugepages-"), nullptr, 10);
    free_bytes += read_u64(entry.path() / "free_hugepages") * kb * 1024;
  }
  return free_bytes >= static_cast<uint64_t>(memory_mb) << 20;
}

std::vector<std::string> build_eal_args(const EalOptions& o, bool hugepages_ok) {
  const std::vector<std::string>& extra = o.extra_args;
  std::vector<std::string> args{o.program_name};

  if (!has_option(extra, {"--file-prefix"})) {
    args.push_back("--file-prefix=" +
                   (o.file_prefix.empty() ? "roce-" + std::to_string(getpid()) : o.file_prefix));
  }
  // The memory mode (hugepages or not) and, without hugepages, its size are two defaults: a
  // caller's -m replaces only the size ("raise EAL -m" must not turn hugepages on); the
  // per-socket options are hugepage options (EAL refuses them with --no-huge).
  const bool caller_mode = has_option(extra, {"--no-huge", "--huge-dir", "--in-memory",
                                              "--legacy-mem", "--socket-mem", "--socket-limit"});
  bool no_huge = has_option(extra, {"--no-huge"});
  if (!caller_mode) {
    const bool huge =
        o.huge_pages == HugePages::kOn || (o.huge_pages == HugePages::kAuto && hugepages_ok);
    if (huge) {
      // --in-memory: no hugepage map files left in /dev/hugepages after exit (with a plain
      // --file-prefix they stay), and no -m so EAL maps pages as pools need them.
      args.push_back("--in-memory");
    } else {
      // --no-huge implies legacy memory, which --in-memory refuses; EAL picks IOVA as VA.
      args.push_back("--no-huge");
      no_huge = true;
    }
  }
  if (no_huge && !has_option(extra, {"-m"})) {
    args.push_back("-m");
    args.push_back(std::to_string(o.memory_mb));
  }
  if (!o.pci && !has_option(extra, {"--no-pci", "-a", "--allow", "-b", "--block"})) {
    args.push_back("--no-pci");
  }
  if (!o.telemetry && !has_option(extra, {"--telemetry", "--no-telemetry"})) {
    args.push_back("--no-telemetry");
  }
  if (!o.lcores.empty() && !has_option(extra, {"--lcores", "-l", "-c"})) {
    args.push_back("--lcores=" + o.lcores);
  }
  if (!o.log_level.empty() && !has_option(extra, {"--log-level"})) {
    args.push_back("--log-level=" + o.log_level);
  }
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

namespace {
// EAL's runtime directories (/var/run/dpdk/roce-<pid> as root) of processes that are gone: a
// process that was killed, or whose EAL failed to start after making its directory, ran no
// cleanup, and each directory keeps ~12 MiB of files with --no-huge. Only names this code makes
// up (roce-<pid>) whose process no longer exists (kill(pid, 0): ESRCH) are removed. (A process
// in another PID namespace sharing /var/run/dpdk would look gone; we use no secondary
// processes, and a live primary keeps its mappings.)
void remove_stale_runtime_dirs(const std::filesystem::path& base) {
  std::error_code ec;
  for (const auto& d : std::filesystem::directory_iterator(base, ec)) {
    const std::string name = d.path().filename().string();
    if (name.size() <= 5 || name.compare(0, 5, "roce-") != 0) continue;
    const char* digits = name.c_str() + 5;
    char* end = nullptr;
    const long pid = std::strtol(digits, &end, 10);
    if (*end != '\0' || pid <= 0 || *digits == '0') continue;
    if (kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;
    std::error_code rm;
    std::filesystem::remove_all(d.path(), rm);
  }
}

// The runtime directory EAL made for this process, if its name is the one Eal::init made up.
std::filesystem::path own_runtime_dir() {
  const char* dir = rte_eal_get_runtime_dir();
  if (dir == nullptr || *dir == '\0') return {};
  std::filesystem::path p(dir);
  if (p.filename() != "roce-" + std::to_string(getpid())) return {};
  return p;
}
}  // namespace

bool Eal::init(const EalOptions& options, std::string* error) {
  if (running()) return true;
  const bool auto_huge = options.huge_pages == HugePages::kAuto;
  std::vector<std::string> args =
      build_eal_args(options, auto_huge && hugepages_available(options.memory_mb));
  const bool ours =
      !has_option(options.extra_args, {"--file-prefix"}) && options.file_prefix.empty();
  if (!init_raw(args, error)) {
    // EAL makes its runtime directory early (argument parsing) and leaves it when a later
    // step fails (hugepages, memory).
    if (ours) {
      const std::filesystem::path dir = own_runtime_dir();
      std::error_code ec;
      if (!dir.empty()) std::filesystem::remove_all(dir, ec);
    }
    return false;
  }
  if (ours) {
    const std::filesystem::path dir = own_runtime_dir();
    if (!dir.empty()) remove_stale_runtime_dirs(dir.parent_path());
  }
  std::lock_guard<std::mutex> lock(state().mu);
  state().prefix_is_ours = ours;
  return true;
}

bool Eal::init_raw(const std::vector<std::string>& args, std::string* error) {
  EalState& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.started) return true;
  if (s.cleaned_up) {
    *error = "EAL init failed: EAL was cleaned up and cannot start again in this process";
    return false;
  }
  if (args.empty()) {
    *error = "EAL init failed: no arguments (argv[0] missing)";
    return false;
  }
  s.args = args;
  s.argv.clear();
  for (std::string& a : s.args) s.argv.push_back(a.data());
  s.argv.push_back(nullptr);
  // rte_eal_init permutes argv (getopt); hand it a copy of the pointer array.
  std::vector<char*> argv = s.argv;
  const int rc = rte_eal_init(static_cast<int>(s.args.size()), argv.data());
  if (rc < 0) {
    const int err = rte_errno;
    *error = std::string("EAL init failed: ") + rte_strerror(err) + hint_for(err) +
             "; args: " + join(s.args);
    s.args.clear();
    // A failed rte_eal_init cannot be retried either (EAL refuses with EALREADY).
    s.cleaned_up = true;
    return false;
  }
  s.started = true;
  return true;
}

bool Eal::device_listed(const std::string& name) {
  for (const rte_devargs* da = rte_devargs_next(nullptr, nullptr); da != nullptr;
       da = rte_devargs_next(nullptr, da)) {
    if (name == da->name) return true;
  }
  return false;
}

bool Eal::running() {
  std::lock_guard<std::mutex> lock(state().mu);
  return state().started;
}

const std::vector<std::string>& Eal::args() { return state().args; }

bool Eal::uses_hugepages() { return running() && rte_eal_has_hugepages() != 0; }

bool Eal::run_on_interrupt_thread(const std::function<void()>& fn,
                                  std::chrono::milliseconds timeout) {
  if (!running()) {
    fn();
    return true;
  }
  return run_on_eal_interrupt_thread(fn, timeout);
}

void Eal::cleanup() {
  EalState& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!s.started) return;
  // Read before cleanup: the string belongs to EAL.
  const std::string runtime_dir = rte_eal_get_runtime_dir();
  settle_eal_interrupt_thread(std::chrono::seconds(5));
  rte_eal_cleanup();
  s.started = false;
  s.cleaned_up = true;
  // DPDK 22.11 leaves /var/run/dpdk/<prefix>/ (config, fbarray files, mp socket) behind; one
  // directory per test process adds up. Remove it only if its name is one we made up.
  if (s.prefix_is_ours && !runtime_dir.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(runtime_dir, ec);
  }
}

bool Eal::register_current_thread(std::string* error) {
  if (rte_lcore_id() != LCORE_ID_ANY) return true;
  if (rte_thread_register() != 0) {
    *error = std::string("rte_thread_register failed: ") + rte_strerror(rte_errno) +
             " (all lcore ids in use? pass fewer --lcores)";
    return false;
  }
  return true;
}

void Eal::unregister_current_thread() { rte_thread_unregister(); }

}  // namespace roce::dpdk
