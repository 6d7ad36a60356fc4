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
#include <pthread.h>
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
    int listed;   /* lfd is in the epoll set */
    int nconns;   /* live connections */
    int64_t up;   /* bytes from the sandbox so far */
    int64_t down; /* bytes to the sandbox so far */
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

enum conn_state { CONN_HEAD, CONN_RESOLVING, CONN_CONNECTING, CONN_TUNNEL, CONN_REPLY };

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
};

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
