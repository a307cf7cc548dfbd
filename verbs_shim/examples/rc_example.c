/* An RC client and server written against <infiniband/verbs.h> only: SEND, RDMA WRITE (then a
 * SEND with immediate that tells the server the WRITE is there) and RDMA READ between two
 * processes, every byte checked. Connection details go over TCP as in rdma-core's examples.
 *
 *   server:  roce_verbs_rc_example [-d DEV] [-g GID_INDEX] [-s BYTES] [-p TCP_PORT]
 *   client:  roce_verbs_rc_example [-d DEV] [-g GID_INDEX] [-s BYTES] [-p TCP_PORT] SERVER
 *
 * Built against Debian's libibverbs-dev headers and linked with the stack's libibverbs.so.1.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <infiniband/verbs.h>
#include <netdb.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

struct peer_info {
  uint32_t qpn;
  uint32_t psn;
  uint32_t rkey;
  uint64_t addr;
  uint8_t gid[16];
};

struct conn {
  struct ibv_context* ctx;
  struct ibv_pd* pd;
  struct ibv_mr* mr;
  struct ibv_cq* cq;
  struct ibv_qp* qp;
  uint8_t* buf; /* three regions of `size` bytes: SEND target, WRITE target, READ source */
  size_t size;
};

static int fail(const char* what) {
  fprintf(stderr, "rc_example: %s: %s\n", what, strerror(errno));
  return 1;
}

static uint8_t pattern(int which, size_t i) { return (uint8_t)(which * 61 + i * 7 + (i >> 8)); }

/* Waits for one completion (10 s at most) and checks its status and opcode. */
static int wait_wc(struct conn* c, enum ibv_wc_opcode opcode, struct ibv_wc* out) {
  struct timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (;;) {
    int n = ibv_poll_cq(c->cq, 1, out);
    if (n < 0) return fail("ibv_poll_cq");
    if (n == 1) break;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (now.tv_sec - start.tv_sec > 10) {
      fprintf(stderr, "rc_example: no completion within 10 s\n");
      return 1;
    }
    usleep(10);
  }
  if (out->status != IBV_WC_SUCCESS || out->opcode != opcode) {
    fprintf(stderr, "rc_example: completion %s, opcode %d (wanted %d)\n",
            ibv_wc_status_str(out->status), out->opcode, opcode);
    return 1;
  }
  return 0;
}

static int post_recv(struct conn* c, size_t off) {
  struct ibv_sge sge = {(uintptr_t)(c->buf + off), (uint32_t)c->size, c->mr->lkey};
  struct ibv_recv_wr wr = {.wr_id = off, .sg_list = &sge, .num_sge = 1};
  struct ibv_recv_wr* bad;
  errno = ibv_post_recv(c->qp, &wr, &bad);
  return errno ? fail("ibv_post_recv") : 0;
}

static int post_send(struct conn* c, enum ibv_wr_opcode op, size_t off, uint32_t len,
                     const struct peer_info* peer, size_t remote_off, uint32_t imm) {
  struct ibv_sge sge = {(uintptr_t)(c->buf + off), len, c->mr->lkey};
  struct ibv_send_wr wr = {.wr_id = op,
                           .sg_list = &sge,
                           .num_sge = len ? 1 : 0,
                           .opcode = op,
                           .send_flags = IBV_SEND_SIGNALED};
  struct ibv_send_wr* bad;
  wr.imm_data = htonl(imm);
  if (peer) {
    wr.wr.rdma.remote_addr = peer->addr + remote_off;
    wr.wr.rdma.rkey = peer->rkey;
  }
  errno = ibv_post_send(c->qp, &wr, &bad);
  return errno ? fail("ibv_post_send") : 0;
}

static int exchange(int fd, const struct peer_info* mine, struct peer_info* theirs) {
  if (write(fd, mine, sizeof *mine) != (ssize_t)sizeof *mine) return fail("write");
  size_t got = 0;
  while (got < sizeof *theirs) {
    ssize_t n = read(fd, (char*)theirs + got, sizeof *theirs - got);
    if (n <= 0) return fail("read");
    got += (size_t)n;
  }
  return 0;
}

static int tcp_connect(const char* server, const char* port, int is_server) {
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
  struct addrinfo* res;
  if (is_server) hints.ai_flags = AI_PASSIVE;
  if (getaddrinfo(server, port, &hints, &res)) {
    fprintf(stderr, "rc_example: cannot resolve %s\n", server ? server : "(any)");
    return -1;
  }
  int fd = socket(res->ai_family, res->ai_socktype, 0);
  if (fd < 0) return -1;
  if (is_server) {
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, res->ai_addr, res->ai_addrlen) || listen(fd, 1)) {
      freeaddrinfo(res);
      return -1;
    }
    int c = accept(fd, NULL, NULL);
    close(fd);
    fd = c;
  } else {
    /* The server may still be starting its device: retry for a while. */
    int tries = 0;
    while (connect(fd, res->ai_addr, res->ai_addrlen) && ++tries < 100) usleep(100000);
    if (tries == 100) fd = -1;
  }
  freeaddrinfo(res);
  return fd;
}

static int connect_qp(struct conn* c, const struct peer_info* me, const struct peer_info* peer,
                      int gid_index) {
  struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT,
                          .port_num = 1,
                          .qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ};
  if ((errno = ibv_modify_qp(c->qp, &a,
                             IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)))
    return fail("modify to INIT");
  struct ibv_port_attr port;
  if ((errno = ibv_query_port(c->ctx, 1, &port))) return fail("ibv_query_port");
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = port.active_mtu;
  a.dest_qp_num = peer->qpn;
  a.rq_psn = peer->psn;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 12;
  a.ah_attr.is_global = 1;
  a.ah_attr.port_num = 1;
  a.ah_attr.grh.hop_limit = 64;
  a.ah_attr.grh.sgid_index = (uint8_t)gid_index;
  memcpy(a.ah_attr.grh.dgid.raw, peer->gid, 16);
  if ((errno = ibv_modify_qp(c->qp, &a,
                             IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                 IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)))
    return fail("modify to RTR");
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_RTS;
  a.sq_psn = me->psn;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  a.max_rd_atomic = 1;
  if ((errno = ibv_modify_qp(c->qp, &a,
                             IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                 IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC)))
    return fail("modify to RTS");
  return 0;
}

static int check(const struct conn* c, size_t off, int which, const char* what) {
  for (size_t i = 0; i < c->size; ++i) {
    if (c->buf[off + i] != pattern(which, i)) {
      fprintf(stderr, "rc_example: %s data differs at byte %zu\n", what, i);
      return 1;
    }
  }
  return 0;
}

int main(int argc, char** argv) {
  const char *dev_name = NULL, *tcp_port = "18517";
  int gid_index = 1, opt;
  struct conn c = {.size = 65536};
  while ((opt = getopt(argc, argv, "d:g:s:p:")) != -1) {
    switch (opt) {
      case 'd':
        dev_name = optarg;
        break;
      case 'g':
        gid_index = atoi(optarg);
        break;
      case 's':
        c.size = strtoul(optarg, NULL, 0);
        break;
      case 'p':
        tcp_port = optarg;
        break;
      default:
        fprintf(stderr, "usage: %s [-d dev] [-g gid] [-s bytes] [-p port] [server]\n", argv[0]);
        return 1;
    }
  }
  const char* server_host = optind < argc ? argv[optind] : NULL;
  const int is_client = server_host != NULL;
  if (c.size == 0 || c.size > (1u << 30)) {
    fprintf(stderr, "rc_example: -s must be 1..1073741824\n");
    return 1;
  }

  struct ibv_device** list = ibv_get_device_list(NULL);
  if (!list) return fail("ibv_get_device_list");
  struct ibv_device* dev = NULL;
  for (int i = 0; list[i]; ++i) {
    if (!dev_name || !strcmp(ibv_get_device_name(list[i]), dev_name)) {
      dev = list[i];
      break;
    }
  }
  if (!dev) {
    fprintf(stderr, "rc_example: no device %s\n", dev_name ? dev_name : "found");
    return 1;
  }
  if (!(c.ctx = ibv_open_device(dev))) return fail("ibv_open_device");
  ibv_free_device_list(list);
  if (!(c.pd = ibv_alloc_pd(c.ctx))) return fail("ibv_alloc_pd");
  if (posix_memalign((void**)&c.buf, 4096, 3 * c.size)) return fail("posix_memalign");
  memset(c.buf, 0, 3 * c.size);
  for (size_t i = 0; i < c.size; ++i) c.buf[2 * c.size + i] = pattern(is_client ? 4 : 3, i);
  c.mr = ibv_reg_mr(c.pd, c.buf, 3 * c.size,
                    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
  if (!c.mr) return fail("ibv_reg_mr");
  if (!(c.cq = ibv_create_cq(c.ctx, 16, NULL, NULL, 0))) return fail("ibv_create_cq");
  struct ibv_qp_init_attr qia = {
      .send_cq = c.cq,
      .recv_cq = c.cq,
      .qp_type = IBV_QPT_RC,
      .cap = {.max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1}};
  if (!(c.qp = ibv_create_qp(c.pd, &qia))) return fail("ibv_create_qp");

  struct peer_info me = {.qpn = c.qp->qp_num, .rkey = c.mr->rkey, .addr = (uintptr_t)c.buf};
  me.psn = (uint32_t)(getpid() * 7919) & 0xFFFFFF;
  union ibv_gid gid;
  if (ibv_query_gid(c.ctx, 1, gid_index, &gid)) return fail("ibv_query_gid");
  memcpy(me.gid, gid.raw, 16);

  int fd = tcp_connect(server_host, tcp_port, !is_client);
  if (fd < 0) return fail("tcp connection");
  struct peer_info peer;
  if (exchange(fd, &me, &peer) || connect_qp(&c, &me, &peer, gid_index)) return 1;
  if (!is_client && (post_recv(&c, 0) || post_recv(&c, c.size))) return 1; /* server receives */
  struct peer_info sync;
  if (exchange(fd, &me, &sync)) return 1; /* both QPs ready, receives posted */

  struct ibv_wc wc;
  if (is_client) {
    /* The client drives: SEND, WRITE + SEND_WITH_IMM, READ of the server's third region. */
    for (size_t i = 0; i < c.size; ++i) c.buf[i] = pattern(1, i);
    if (post_send(&c, IBV_WR_SEND, 0, (uint32_t)c.size, NULL, 0, 0) ||
        wait_wc(&c, IBV_WC_SEND, &wc))
      return 1;
    for (size_t i = 0; i < c.size; ++i) c.buf[c.size + i] = pattern(2, i);
    if (post_send(&c, IBV_WR_RDMA_WRITE, c.size, (uint32_t)c.size, &peer, c.size, 0) ||
        wait_wc(&c, IBV_WC_RDMA_WRITE, &wc))
      return 1;
    if (post_send(&c, IBV_WR_SEND_WITH_IMM, 0, 0, NULL, 0, 0x5eed) || wait_wc(&c, IBV_WC_SEND, &wc))
      return 1;
    memset(c.buf, 0, c.size);
    if (post_send(&c, IBV_WR_RDMA_READ, 0, (uint32_t)c.size, &peer, 2 * c.size, 0) ||
        wait_wc(&c, IBV_WC_RDMA_READ, &wc) || check(&c, 0, 3, "READ"))
      return 1;
  } else {
    if (wait_wc(&c, IBV_WC_RECV, &wc) || check(&c, 0, 1, "SEND")) return 1;
    if (wc.byte_len != c.size) {
      fprintf(stderr, "rc_example: received %u bytes, sent %zu\n", wc.byte_len, c.size);
      return 1;
    }
    /* The WRITE landed before the SEND that follows it completes here (RC ordering). */
    if (wait_wc(&c, IBV_WC_RECV, &wc) || !(wc.wc_flags & IBV_WC_WITH_IMM) ||
        ntohl(wc.imm_data) != 0x5eed || check(&c, c.size, 2, "WRITE")) {
      fprintf(stderr, "rc_example: WRITE check failed\n");
      return 1;
    }
  }
  if (exchange(fd, &me, &sync)) return 1; /* the client is done before the server tears down */
  close(fd);

  if ((errno = ibv_destroy_qp(c.qp))) return fail("ibv_destroy_qp");
  if ((errno = ibv_destroy_cq(c.cq))) return fail("ibv_destroy_cq");
  if ((errno = ibv_dereg_mr(c.mr))) return fail("ibv_dereg_mr");
  if ((errno = ibv_dealloc_pd(c.pd))) return fail("ibv_dealloc_pd");
  if ((errno = ibv_close_device(c.ctx))) return fail("ibv_close_device");
  free(c.buf);
  printf("rc_example: %s: SEND, RDMA WRITE and RDMA READ of %zu bytes verified\n",
         is_client ? "client" : "server", c.size);
  return 0;
}
