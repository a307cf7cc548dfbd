// ECN marking for the bottleneck of scripts/coll-bottleneck.sh, as a tc egress program: the
// kernels this project runs on may have no RED or fq_codel (CONFIG_NET_SCH_RED, _FQ_CODEL), so
// the AQM is this. It keeps a virtual queue that drains at the shaper's rate (RATE_BPS, bytes a
// second, the rate of the TBF behind it: while the TBF is backlogged the two queues move alike)
// and marks CE on ECT frames as RED does on its queue: none below KMIN bytes, with probability
// rising linearly to PMAX_PCT percent at KMAX, every one above. Non-ECT frames are untouched
// (bpf_skb_ecn_set_ce marks only ECT(0) / ECT(1)). The TBF's own finite queue drops what
// overflows. Built by the script: clang -O2 -g -target bpf -DRATE_BPS=... -DKMIN=... ...
#include <linux/bpf.h>
#include <linux/pkt_cls.h>

#include <bpf/bpf_helpers.h>

#ifndef RATE_BPS
#define RATE_BPS 125000000ull
#endif
#ifndef KMIN
#define KMIN 60000ull
#endif
#ifndef KMAX
#define KMAX 180000ull
#endif
#ifndef PMAX_PCT
#define PMAX_PCT 20ull
#endif

struct vqueue {
  struct bpf_spin_lock lock;
  __u64 last_ns;
  __u64 backlog;  // bytes
};

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct vqueue);
} vq SEC(".maps");

SEC("tc")
int mark_ce(struct __sk_buff* skb) {
  __u32 key = 0;
  struct vqueue* q = bpf_map_lookup_elem(&vq, &key);
  if (!q) return TC_ACT_OK;
  const __u64 now = bpf_ktime_get_ns();
  bpf_spin_lock(&q->lock);
  const __u64 drained = (now - q->last_ns) * RATE_BPS / 1000000000ull;
  q->backlog = q->backlog > drained ? q->backlog - drained : 0;
  q->backlog += skb->len;
  q->last_ns = now;
  const __u64 backlog = q->backlog;
  bpf_spin_unlock(&q->lock);
  if (backlog <= KMIN) return TC_ACT_OK;
  if (backlog < KMAX) {
    const __u64 p = (backlog - KMIN) * PMAX_PCT * 100 / (KMAX - KMIN);  // in 1/10000
    if (bpf_get_prandom_u32() % 10000 >= p) return TC_ACT_OK;
  }
  bpf_skb_ecn_set_ce(skb);
  return TC_ACT_OK;
}

char LICENSE[] SEC("license") = "GPL";
