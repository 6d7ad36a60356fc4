/*
 * Internals of the egress proxy, shared by egress.c (service, runs,
 * resolvers, records) and egress_conn.c (the connection state machine).
 * Everything here belongs to the loop thread unless it is under e->mu.
 */
#ifndef SKILLD_NET_EGRESS_INT_H
#define SKILLD_NET_EGRESS_INT_H

#include "net/egress.h"
#include "net/pin.h"

#include <netinet/in.h>
#include <openssl/ssl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>

#define SKD__EGRESS_PIPE (256 * 1024) /* bytes buffered each way per connection (a pipe) */
#define SKD__EGRESS_MAX_ADDRS 8       /* addresses tried per destination */
#define SKD__EGRESS_MAX_RECORDS 128   /* destination records kept per run */
#define SKD__EGRESS_MAX_CONNS 4096    /* connections at once, all runs together */
#define SKD__EGRESS_RESOLVERS 2
#define SKD__EGRESS_REPLY_MS 2000 /* time to deliver a refusal before closing */

enum { EP_WAKE, EP_LISTEN, EP_CLIENT, EP_UPSTREAM };

struct skd_egress_run;
struct egress_conn;

/* What an epoll event points at. */
struct egress_ep {
    int kind;
    struct skd_egress_run *run; /* EP_LISTEN */
    struct egress_conn *conn;   /* EP_CLIENT, EP_UPSTREAM */
};

struct egress_addr {
    struct sockaddr_storage sa;
    socklen_t salen;
};

/* One destination and verdict of a run, summed over its connections. */
struct egress_record {
    char host[SKD_EGRESS_HOST_MAX + 1];
    int port;
    char addr[INET6_ADDRSTRLEN];
    const char *verdict; /* static: allowed, refused, cut, failed */
    char reason[200];
    int64_t connections, bytes_up, bytes_down;
    uint64_t used, elsewhere; /* secrets put in; placeholders left as they were */
};

enum { CMD_NONE, CMD_ATTACH, CMD_DETACH };

struct skd_egress_run {
    int lfd;
    struct egress_ep ep;
    skd_egress_policy policy; /* strings owned (strs) */
    char *strs[2 * SKD_EGRESS_MAX_LISTS];
    size_t nstrs;
    skd_secret *secrets; /* owned: the key's secrets (values wiped at free) */
    size_t nsecrets;
    int listed;           /* lfd is in the epoll set */
    _Atomic int nconns;   /* live connections (read by skd__egress_open_conns) */
    _Atomic int64_t up;   /* bytes from the sandbox so far (workers add too) */
    _Atomic int64_t down; /* bytes to the sandbox so far */
    int nworkers;         /* connections served by a worker thread */
    int closing;          /* detach waits for the workers to finish */
    /* under rec_mu: written by the loop, taken by skd__egress_take */
    pthread_mutex_t rec_mu;
    struct egress_record records[SKD__EGRESS_MAX_RECORDS];
    size_t nrecords;
    int64_t records_dropped;
    /* under e->mu */
    int cmd;
    struct skd_egress_run *cmd_next;
    int detach, detached;
};

/* One direction of a connection: a pipe that bytes are spliced into from
 * the source socket and out of to the destination, so they never cross
 * into user memory. len counts the bytes in it; the last `hold` of them
 * came past a byte cap and are never forwarded. */
struct xpipe {
    int r, w; /* -1 until made */
    size_t cap, len, hold;
};

/* CONN_WORKER: a connection that carries a secret, served by a thread of
 * its own (egress_worker.c) that owns its descriptors until it is done. */
enum conn_state {
    CONN_HEAD,
    CONN_RESOLVING,
    CONN_CONNECTING,
    CONN_TUNNEL,
    CONN_REPLY,
    CONN_WORKER
};

struct egress_conn {
    struct egress_conn *next, *prev; /* e->conns */
    struct skd_egress_run *run;      /* not valid once dead */
    uint64_t id;
    int dead;
    enum conn_state st;
    int cfd, ufd;
    struct egress_ep cep, uep;
    char *head; /* CONN_HEAD: SKD_EGRESS_HEAD_MAX bytes */
    size_t head_len;
    skd_egress_req req;
    struct egress_addr addrs[SKD__EGRESS_MAX_ADDRS];
    size_t naddrs, ai;
    char addr_text[INET6_ADDRSTRLEN];
    char why[640]; /* the last guard refusal or connect error */
    int blocked;   /* why is a guard refusal */
    struct xpipe up, down;
    int c_rd, c_wr, u_rd, u_wr; /* readiness seen (edge-triggered) */
    int c_eof, u_eof, u_shut, cut;
    int again;           /* pump stopped at its round limit with bytes to move */
    const char *verdict; /* NULL until decided */
    char reason[200];
    int64_t started, last_io;
    int64_t bytes_up, bytes_down;
    uint64_t used, elsewhere; /* secrets put in; placeholders left as they were */
    int intercept;            /* served by a worker: TLS terminated, or a secret put in */
    struct egress_worker *worker;
};

/* A worker thread's connection (egress_worker.c). The loop hands it the
 * descriptors and reads the results once it is on e->wdone. */
struct egress_worker {
    struct egress_worker *next;
    pthread_t th;
    skd_egress *e;
    struct egress_conn *c; /* the loop's; the worker reads only what is set below */
    int cfd, ufd, tls, no_body;
    char host[SKD_EGRESS_HOST_MAX + 1];
    char *pre; /* plain HTTP: the head (and body bytes) for the upstream */
    size_t prelen;
    const skd_secret *secrets; /* the run's (it outlives its workers) */
    size_t nsecrets;
    skd_egress_limits lim;
    _Atomic int64_t *run_up, *run_down;
    size_t scrub_max;
    /* results */
    int64_t bytes_up, bytes_down;
    uint64_t used, elsewhere;
    const char *verdict; /* NULL: allowed */
    char reason[200];
};

struct skd__egress_tls; /* egress_tls.c */

struct egress_job {
    struct egress_job *next;
    uint64_t conn_id;
    char host[SKD_EGRESS_HOST_MAX + 1];
    int port;
    struct egress_addr addrs[SKD__EGRESS_MAX_ADDRS];
    size_t naddrs;
    char why[640];
};

struct skd_egress {
    skd_net_guard *guard;
    struct skd__pin *pins; /* the SKILLS_OUTBOUND_RESOLVE pins, parsed once */
    size_t npins;
    int epfd, wakefd;
    struct egress_ep wake_ep;
    pthread_t loop;
    int nthreads;
    pthread_t resolvers[SKD__EGRESS_RESOLVERS];
    int nresolvers;
    /* loop thread only */
    struct egress_conn *conns;
    int nconns;
    uint64_t next_id;
    int again;                           /* some connection has c->again */
    char fwd[SKD_EGRESS_HEAD_MAX + 512]; /* the head to send upstream */
    char sub[SKD_EGRESS_SUBST_MAX];      /* the same with placeholders replaced */
    /* under mu */
    pthread_mutex_t mu;
    pthread_cond_t jobs_cv, done_cv;
    int sync_ready;
    int stop;
    int loop_done; /* the loop thread has ended: nothing is served any more */
    struct skd_egress_run *cmds;
    struct egress_job *jobs, *answers;
    int active;
    struct egress_worker *wdone; /* finished workers, for the loop */
    struct skd__egress_tls *tls; /* the CA, made on the first run with secrets */
    const skd_config *cfg;
    size_t scrub_max;
};

void skd__egress_wake(skd_egress *e);
/* Start resolving c's host: 0 when c->addrs is filled at once (a pin), 1
 * when a resolver will answer, SKD_ENOMEM. */
int skd__egress_lookup(skd_egress *e, struct egress_conn *c);
/* Count a refusal or a cut for /metrics, when it is decided (before the
 * client can see its effect). */
void skd__egress_count(const char *verdict);
/* Add c (NULL: a connection refused before its head was read) to the run's
 * records under verdict and reason. */
void skd__egress_record(struct skd_egress_run *run, const struct egress_conn *c,
                        const char *verdict, const char *reason);

/* egress_tls.c: the CA in DATA_DIR (made when missing), the leaf minting,
 * and the two TLS contexts. */
int skd__egress_tls_new(const skd_config *cfg, struct skd__egress_tls **out, skd_err *err);
void skd__egress_tls_free(struct skd__egress_tls *t); /* NULL ok */
const char *skd__egress_tls_ca_pem(const struct skd__egress_tls *t);
/* An SSL that presents host's leaf on fd; NULL on failure. */
SSL *skd__egress_tls_accept_new(struct skd__egress_tls *t, const char *host, int fd);
/* An SSL that connects to host on fd and verifies it (name and chain). */
SSL *skd__egress_tls_connect_new(struct skd__egress_tls *t, const char *host, int fd);

/* egress_worker.c: hand c (connected) to a worker thread; 0, or -1 (c is
 * then ended). */
int skd__egress_worker_start(skd_egress *e, struct egress_conn *c);
/* Loop thread (or after the loop ended): record the finished workers and
 * end their connections. */
void skd__egress_workers_take(skd_egress *e);
/* Stop (shutdown their sockets) and wait for the workers of run (NULL:
 * all), then take them. Only when the loop is not running; the caller
 * holds e->mu. */
void skd__egress_workers_stop(skd_egress *e, struct skd_egress_run *run);

/* egress_conn.c */
void skd__egress_accept(skd_egress *e, struct skd_egress_run *run);
void skd__egress_conn_event(skd_egress *e, struct egress_conn *c, int kind, uint32_t events);
void skd__egress_resolved(skd_egress *e, struct egress_conn *c, const char *why);
/* Close c's descriptors, record it (why: the reason when nothing was decided
 * yet) and mark it dead; skd__egress_reap frees it. */
void skd__egress_conn_end(skd_egress *e, struct egress_conn *c, const char *verdict,
                          const char *why);
/* Expire connections past a deadline; the next deadline, or -1. */
int64_t skd__egress_timers(skd_egress *e, int64_t now);
void skd__egress_reap(skd_egress *e);
/* Pump the connections that stopped at their round limit. */
void skd__egress_again(skd_egress *e);

#endif
