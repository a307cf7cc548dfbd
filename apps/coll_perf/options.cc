#include "apps/coll_perf/options.h"

#include <CLI/CLI.hpp>

#include <cstring>
#include <stdexcept>

namespace roce::coll::perf {
namespace {

struct Named {
  Collective op;
  const char* name;
};
constexpr Named kOps[] = {
    {Collective::kAllReduce, "all_reduce"},
    {Collective::kAllGather, "all_gather"},
    {Collective::kReduceScatter, "reduce_scatter"},
    {Collective::kBroadcast, "broadcast"},
    {Collective::kReduce, "reduce"},
    {Collective::kAllToAll, "alltoall"},
    {Collective::kAllToAllV, "alltoallv"},
    {Collective::kSendRecv, "sendrecv"},
};

bool op_from(std::string name, Collective* op) {
  if (name.size() > 5 && name.compare(name.size() - 5, 5, "_perf") == 0) {
    name.resize(name.size() - 5);
  }
  for (const Named& n : kOps) {
    if (name == n.name) return *op = n.op, true;
  }
  return false;
}

template <typename T, typename F>
std::vector<T> list_of(const std::string& s, const char* flag, std::vector<T> all, F parse) {
  if (s == "all") return all;
  auto v = parse(s);
  if (!v) throw std::invalid_argument(std::string(flag) + " '" + s + "': unknown");
  return {*v};
}

}  // namespace

const char* op_name(Collective c) {
  for (const Named& n : kOps) {
    if (n.op == c) return n.name;
  }
  return "?";
}

size_t parse_size(const std::string& s) {
  size_t pos = 0;
  double v = 0;
  try {
    v = std::stod(s, &pos);
  } catch (const std::exception&) {
    throw std::invalid_argument("size '" + s + "': not a number");
  }
  const std::string unit = s.substr(pos);
  double scale = 1;
  if (unit == "K" || unit == "k")
    scale = 1024.0;
  else if (unit == "M" || unit == "m")
    scale = 1024.0 * 1024;
  else if (unit == "G" || unit == "g")
    scale = 1024.0 * 1024 * 1024;
  else if (!unit.empty())
    throw std::invalid_argument("size '" + s + "': the suffixes are K, M, G");
  if (v < 0) throw std::invalid_argument("size '" + s + "': negative");
  return static_cast<size_t>(v * scale);
}

std::vector<size_t> sweep_sizes(size_t min, size_t max, double factor, size_t step) {
  std::vector<size_t> v;
  for (size_t b = min; b <= max;) {
    v.push_back(b);
    const size_t next = factor > 1 ? size_t(double(b) * factor) : b + step;
    if (next <= b) break;
    b = next;
  }
  return v;
}

bool take_sweep_flag(const std::string& flag, const std::string& value, BaselineSweep& s) {
  if (flag == "-b")
    s.min_bytes = parse_size(value);
  else if (flag == "-e")
    s.max_bytes = parse_size(value);
  else if (flag == "-f")
    s.factor = std::stod(value);
  else if (flag == "-n")
    s.iters = std::stoi(value);
  else if (flag == "-w")
    s.warmup = std::stoi(value);
  else
    return false;
  return true;
}

Options parse_options(int argc, char** argv) {
  Options o;
  const char* base = std::strrchr(argv[0], '/');
  std::string prog = base ? base + 1 : argv[0];
  const bool named = op_from(prog, &o.op);
  CLI::App app{
      "roce-coll-perf OP [nccl-tests' flags]: the collectives' bandwidth and latency, "
      "in nccl-tests' table; OP is all_reduce, all_gather, reduce_scatter, broadcast, "
      "reduce, alltoall, alltoallv or sendrecv (or run it as all_reduce_perf, ...)"};
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);  // as getopt
  std::string op_arg, b = "32M", e = "32M", i = "1M", redop = "sum", dtype = "float";
  int threads = 1, gpus = 1;
  if (!named) app.add_option("OP", op_arg, "the collective")->required();
  app.add_option("-b,--minbytes", b, "smallest size (bytes; K, M, G)");
  app.add_option("-e,--maxbytes", e, "largest size");
  app.add_option("-i,--stepbytes", i, "step between sizes (without -f)");
  app.add_option("-f,--stepfactor", o.step_factor, "factor between sizes");
  app.add_option("-n,--iters", o.iters, "timed iterations per size")->check(CLI::Range(1, 1 << 30));
  app.add_option("-w,--warmup_iters", o.warmup, "untimed iterations first")
      ->check(CLI::Range(0, 1 << 30));
  app.add_option("-c,--check", o.check, "checked iterations per size (0: no check)")
      ->check(CLI::Range(0, 1 << 20));
  app.add_option("-o,--op", redop, "sum, prod, min, max, avg or all");
  app.add_option("-d,--datatype", dtype, "int8 ... double, or all");
  app.add_option("-r,--root", o.root, "root of broadcast and reduce");
  app.add_option("-a,--average", o.average, "time over ranks: 0 rank 0, 1 mean, 2 min, 3 max")
      ->check(CLI::Range(0, 3));
  app.add_option("-z,--blocking", o.blocking, "0: start them all, then wait; 1: one at a time")
      ->check(CLI::Range(0, 1));
  app.add_option("-J,--output_file", o.json_file, "also write the results as JSON here");
  app.add_option("-t,--nthreads", threads, "threads per process: 1 (start ranks as processes)")
      ->check(CLI::Range(1, 1));
  app.add_option("-g,--ngpus", gpus, "devices per thread: 1")->check(CLI::Range(1, 1));
  app.add_flag("--test-corrupt", o.test_corrupt, "tests only: spoil one element on rank 0")
      ->group("");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::fputs(app.help().c_str(), stdout);
    std::exit(0);
  } catch (const CLI::ParseError& err) {
    throw std::invalid_argument(err.what());
  }
  if (!named && !op_from(op_arg, &o.op)) {
    throw std::invalid_argument("OP '" + op_arg +
                                "': not one of all_reduce, all_gather, "
                                "reduce_scatter, broadcast, reduce, alltoall, alltoallv, sendrecv");
  }
  o.program = std::string(op_name(o.op)) + "_perf";
  o.min_bytes = parse_size(b), o.max_bytes = parse_size(e), o.step_bytes = parse_size(i);
  if (o.min_bytes > o.max_bytes) {
    throw std::invalid_argument("-b " + b + " is larger than -e " + e);
  }
  if (o.step_factor <= 1 && o.step_bytes == 0) {
    throw std::invalid_argument("-i 0 without -f > 1: the sizes would never grow");
  }
  o.redops = list_of<ReduceOp>(
      redop, "-o",
      {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMax, ReduceOp::kMin, ReduceOp::kAvg},
      [](const std::string& s) { return parse_reduce_op(s); });
  o.types =
      list_of<DataType>(dtype, "-d",
                        {DataType::kInt8, DataType::kUint8, DataType::kInt32, DataType::kUint32,
                         DataType::kInt64, DataType::kUint64, DataType::kFloat16,
                         DataType::kFloat32, DataType::kFloat64, DataType::kBfloat16},
                        [](const std::string& s) { return parse_data_type(s); });
  return o;
}

}  // namespace roce::coll::perf
