#include "apps/perf/options_flags.h"

namespace roce::perf::detail {

const char* const kUsage =
    "roce-perf: perftest-style bandwidth and latency tests over the userspace RoCEv2 stack.\n"
    "  roce-perf TEST [options]          server side\n"
    "  roce-perf TEST [options] SERVER   client side (SERVER: the server's IPv4 address)\n"
    "TEST: write_bw write_lat read_bw read_lat send_bw send_lat atomic_bw";

namespace {

// What runs, where, how long: the test, its peer and device, sizes, counts and depths.
void declare_test_flags(CLI::App& app, RawFlags* f, PerfOptions* o) {
  app.add_option("test", f->test, "test to run")->required()->type_name("TEST");
  app.add_option("server", f->server, "the server's IPv4 address or name (client side)")
      ->type_name("SERVER");
  app.add_option("-d,--ib-dev", f->dev, "device name (a [device NAME] of the configuration)")
      ->type_name("NAME");
  app.add_option("-i,--ib-port", f->ib_port, "port (1)")->type_name("N");
  app.add_option("-x,--gid-index", f->gid, "GID index (default: IPv4 GID if any, like perftest)")
      ->type_name("N");
  app.add_flag("--ipv6", o->ipv6, "prefer an IPv6 GID when choosing one");
  app.add_option("-s,--size", f->size, "message size (K/M suffix)")->type_name("BYTES");
  app.add_flag("-a,--all", f->all, "all sizes 2 .. 2^23");
  app.add_option("-n,--iters", f->iters, "iterations")->type_name("N");
  app.add_option("-D,--duration", f->duration, "run for this many seconds")->type_name("SECONDS");
  app.add_option("-f,--margin", f->margin, "margin (s) at both ends of a -D run")
      ->type_name("SECONDS");
  app.add_option("-q,--qp", f->qps, "number of QPs (bw tests)")->type_name("N");
  app.add_option("-m,--mtu", f->mtu, "path MTU: 256, 512, 1024, 2048, 4096")->type_name("BYTES");
  app.add_option("-t,--tx-depth", f->tx, "send queue depth")->type_name("N");
  app.add_option("-r,--rx-depth", f->rx, "receive queue depth (send tests)")->type_name("N");
  app.add_option("-p,--port", f->port, "TCP port of the exchange (18515)")->type_name("PORT");
  app.add_flag("-F,--CPU-freq", f->cpu_freq, "accepted, ignored (timestamps are nanoseconds)");
  app.add_flag("--report_gbits", f->gbits, "report Gb/s instead of MB/s");
}

// perftest's connection types, queue shapes and run modes.
void declare_perftest_modes(CLI::App& app, RawFlags* f) {
  app.add_option("-c,--connection", f->conn, "connection type: RC (default), UC, UD")
      ->type_name("RC|UC|UD");
  app.add_option("-A,--atomic_type", f->atomic, "CMP_AND_SWAP or FETCH_AND_ADD")->type_name("TYPE");
  app.add_option("-o,--outs", f->outs, "outstanding READs / atomics")->type_name("N");
  app.add_option("-I,--inline_size", f->inl, "largest message sent inline")->type_name("BYTES");
  app.add_option("-l,--post_list", f->post_list, "work requests per post (bw tests)")
      ->type_name("N");
  app.add_option("-Q,--cq-mod", f->cq_mod, "a completion every this many messages")->type_name("N");
  app.add_flag("-N,--noPeak", f->no_peak, "skip the peak bandwidth");
  app.add_flag("--mr_per_qp", f->mr_per_qp,
               "each QP registers the buffer in a memory region of its own and uses its keys");
  app.add_flag("--use-srq", f->use_srq,
               "SEND tests: the receiving side's QPs share one receive queue of -r entries");
  app.add_flag("--reversed", f->reversed,
               "the side given no SERVER sends and the other receives (both sides give it)");
  app.add_flag("--perform_warm_up", f->perform_warm_up,
               "write_bw, read_bw, atomic_bw: each QP sends a send queue's worth of messages, "
               "and waits for them, before each run");
  app.add_flag("--use_old_post_send", f->old_post_send,
               "accepted: roce-perf always posts with ibv_post_send (the banner's ibv_wr* API: "
               "OFF)");
  app.add_flag("--run_infinitely", f->run_infinitely,
               "bw tests: send until interrupted, printing the last -D seconds' result every -D "
               "seconds (default 5)");
}

// What the report shows, the QPs' network attributes, the rate limiter and the buffers.
void declare_report_flags(CLI::App& app, RawFlags* f, PerfOptions* o) {
  app.add_flag("-U,--report-unsorted", f->unsorted, "print every latency sample, unsorted");
  app.add_flag("-H,--report-histogrm", f->histogram, "print every latency sample, sorted");
  app.add_option("-u,--qp-timeout", f->qp_timeout, "local ACK timeout exponent (14)")
      ->type_name("N");
  app.add_option("-S,--sl", f->sl, "service level")->type_name("N");
  app.add_option("--tclass", f->tclass,
                 "traffic class of the QPs' GRH: the IP header's DSCP (its two ECN bits are the "
                 "device's: key ecn)")
      ->type_name("N");
  app.add_option("-L,--hop_limit", f->hop_limit,
                 "64 only, as perftest takes for RC / UC / UD QPs (RoCEv2 frames carry the "
                 "route's hop limit)")
      ->type_name("N");
  app.add_option("-T,--tos", f->tos, "refused, as perftest refuses it without rdma_cm")
      ->type_name("N");
  app.add_option("--rate_limit", f->rate_limit,
                 "bw tests: send at most this rate (--rate_units), in bursts of --burst_size "
                 "messages (perftest's SW limiter)")
      ->type_name("RATE");
  app.add_option("--rate_units", f->rate_units, "g: Gb/s (default), M: MB/s, p: messages/s")
      ->type_name("g|M|p");
  app.add_option("--rate_limit_type", f->rate_limit_type,
                 "SW (roce-perf's only: HW, the default, falls back to it as perftest's does "
                 "where the port takes no static rate)")
      ->type_name("SW|HW|PP");
  app.add_option("--burst_size", f->burst_size, "messages per burst of the rate limiter (-t)")
      ->type_name("N");
  app.add_flag("--use_hugepages", o->use_hugepages,
               "the buffer in huge pages (2 MiB; they must be reserved: vm.nr_hugepages)");
  app.add_flag("--out_json", o->out_json,
               "also write each result to --out_json_file, in perftest's format (its \"JSON\": "
               "unquoted keys), replacing the file's last one");
  app.add_option("--out_json_file", o->out_json_file,
                 "the --out_json file (perftest_out.json in the working directory)")
      ->type_name("FILE");
  app.add_flag("--cpu_util", f->cpu_util,
               "-D runs: add the CPU's use over the sample window, in percent, to the report "
               "(perftest's: user / (user + idle) time of /proc/stat)");
  app.add_option("--latency_gap", f->latency_gap,
                 "lat tests: wait this many microseconds before each post (the samples include "
                 "it, as perftest's)")
      ->type_name("USEC");
}

// Refused perftest flags, result limits, events and roce-perf's own (device, checks, waits).
void declare_stack_flags(CLI::App& app, RawFlags* f, PerfOptions* o) {
  app.add_flag("-R,--rdma_cm", f->rdma_cm, "not supported");
  app.add_flag("-z,--comm_rdma_cm", f->comm_rdma_cm, "not supported");
  app.add_option("--output", f->output,
                 "print only this number per result: bandwidth or message_rate (bw tests), "
                 "latency (lat tests: t_avg)")
      ->type_name("UNITS");
  app.add_option("-w,--limit_bw", f->limit_bw,
                 "fail (exit 1) unless the bandwidth reaches this (the report's unit)")
      ->type_name("VALUE");
  app.add_option("-y,--limit_msgrate", f->limit_msgrate,
                 "fail (exit 1) unless the message rate reaches this (Mpps)")
      ->type_name("VALUE");
  app.add_flag("-b,--bidirectional", f->bidir, "both sides send at once (bw tests)");
  app.add_flag("-e,--events", f->events, "sleep on completion events instead of polling");
  app.add_option("-X,--eq_num", f->eq_num, "completion vector of the CQs (with -e)")
      ->type_name("N");
  app.add_flag("--report-both", o->report_both,
               "with -b: also print each direction's result on its own (one size)");
  app.add_option("--config", o->config_file, "device configuration file (or ROCE_CONFIG)")
      ->type_name("FILE");
  app.add_option("--device", o->device_spec,
                 "device settings \"key=value; ...\" (port, ipv4, ipv6, mtu, mac, pcap, drop, "
                 "mode, cpu, ...), over ROCE_DEVICE")
      ->type_name("\"K=V; ...\"");
  app.add_flag("--verify", o->verify, "verify every byte (write_bw, read_bw, send_bw)");
  app.add_flag("--counters", o->counters, "print the device's counters at the end");
  app.add_flag("--inline-engine", o->inline_engine, "drive the engine from the test thread");
  app.add_option("--transport", o->transport,
                 "native: the stack's own API (roce-perf); verbs: <infiniband/verbs.h> over "
                 "our libibverbs (roce-perf-verbs)")
      ->check(CLI::IsMember({"native", "verbs"}))
      ->type_name("native|verbs");
  f->timeout =
      app.add_option("--timeout", o->timeout_s,
                     "bound every wait: connecting (a refused connection is retried until then), "
                     "each exchange with the peer, a transfer without progress (default: "
                     "exchanges wait for ever as perftest's do; a stalled transfer fails after "
                     "60 s; 0: no bound)")
          ->type_name("SECONDS");
  f->sizes_given =
      app.add_option("--sizes", f->sizes, "run these sizes in turn (comma-separated), like -a")
          ->type_name("LIST");
}

}  // namespace

void declare_flags(CLI::App& app, RawFlags* f, PerfOptions* o) {
  app.set_version_flag("-V,--version", std::string("Version: ") + kPerftestVersion +
                                           " (roce-perf, perftest-compatible)");
  declare_test_flags(app, f, o);
  declare_perftest_modes(app, f);
  declare_report_flags(app, f, o);
  declare_stack_flags(app, f, o);
  app.add_option("--test-corrupt", o->test_corrupt)->group("");  // test hook, see options.h
}

}  // namespace roce::perf::detail
