/*
 * One proxy connection, from accept to close (see egress_int.h). Runs on
 * the egress loop thread only.
 *
 *   CONN_HEAD        reading the request head (at most SKD_EGRESS_HEAD_MAX)
 *   CONN_RESOLVING   a resolver thread looks the host up
 *   CONN_CONNECTING  a non-blocking connect() to an address the guard let by
 *   CONN_TUNNEL      bytes spliced both ways through two pipes (flow_once)
 *   CONN_REPLY       an error answer (403 with the reason, 502, ...) is
 *                    written, then the connection is closed
 *
 * Descriptors are edge-triggered; pump() moves bytes until every side would
 * block or every pipe is full or empty, so no readiness is lost. Tunnel
 * bytes are spliced socket -> pipe -> socket (splice(2)) and never copied
 * into this process: memory per connection is two kernel pipes. Byte caps
 * are enforced at the read: a read never takes more than the run has left
 * plus one byte, and that one byte is what tells a cut from an exact fit.
 */
#include "net/egress_int.h"
#include "skilld/log.h"
#include "skilld/util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#define ET_EVENTS (EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET)

static size_t xlen(const struct xpipe *b)
{
    return b->len - b->hold;
}

static size_t xspace(const struct xpipe *b)
{
    return b->r >= 0 ? b->cap - b->len : 0;
}

/* Make the pipe (non-blocking, SKD__EGRESS_PIPE bytes if the kernel lets
 * this user have that much). 0 or -1. */
static int xopen(struct xpipe *b)
{
    int p[2];
    if (b->r >= 0)
        return 0;
    if (pipe2(p, O_NONBLOCK | O_CLOEXEC) != 0)
        return -1;
    b->r = p[0];
    b->w = p[1];
    int cap = fcntl(b->w, F_SETPIPE_SZ, SKD__EGRESS_PIPE);
    if (cap < 0)
        cap = fcntl(b->w, F_GETPIPE_SZ);
    b->cap = cap > 0 ? (size_t)cap : 4096;
    b->len = b->hold = 0;
    return 0;
}

static void xclose(struct xpipe *b)
{
    if (b->r >= 0)
        close(b->r);
    if (b->w >= 0)
        close(b->w);
    b->r = b->w = -1;
    b->len = b->hold = 0;
}

/* Put n bytes of our own (a reply, the rewritten head); n is at most a few
 * KiB, always below a fresh pipe's capacity. */
static void xput(struct xpipe *b, const void *p, size_t n)
{
    while (n && xspace(b) >= n) {
        ssize_t w = write(b->w, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        b->len += (size_t)w;
        p = (const char *)p + w;
        n -= (size_t)w;
    }
}

static const char *status_text(int status)
{
    switch (status) {
    case 400:
        return "Bad Request";
    case 403:
        return "Forbidden";
    case 414:
        return "URI Too Long";
    case 429:
        return "Too Many Requests";
    case 431:
        return "Request Header Fields Too Large";
    case 501:
        return "Not Implemented";
    case 502:
        return "Bad Gateway";
    case 504:
        return "Gateway Timeout";
    default:
        return "Error";
    }
}

/* A short HTTP answer with the reason as its body, into buf. */
static size_t format_reply(char *buf, size_t cap, int status, const char *verdict,
                           const char *reason)
{
    char body[300];
    int bl = snprintf(body, sizeof(body), "skilld egress proxy: %s\n", reason);
    if (bl < 0 || (size_t)bl >= sizeof(body))
        bl = (int)sizeof(body) - 1;
    int n = snprintf(buf, cap,
                     "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\n"
                     "Content-Length: %d\r\nConnection: close\r\nX-Skilld-Egress: %s\r\n\r\n%.*s",
                     status, status_text(status), bl, verdict, bl, body);
    return n < 0 ? 0 : (size_t)n >= cap ? cap - 1 : (size_t)n;
}

static void pump_reply(skd_egress *e, struct egress_conn *c);
static int give(int fd, struct xpipe *b);

static void unwatch(skd_egress *e, int *fd)
{
    if (*fd >= 0) {
        epoll_ctl(e->epfd, EPOLL_CTL_DEL, *fd, NULL);
        close(*fd);
        *fd = -1;
    }
}

void skd__egress_conn_end(skd_egress *e, struct egress_conn *c, const char *verdict,
                          const char *why)
{
    if (c->dead)
        return;
    if (verdict && !c->verdict) {
        c->verdict = verdict;
        skd_strlcpy(c->reason, why ? why : "", sizeof(c->reason));
    }
    if (!c->verdict && c->req.host[0]) {
        c->verdict = "failed";
        skd_strlcpy(c->reason, why ? why : "closed", sizeof(c->reason));
    }
    if (c->verdict)
        skd__egress_record(c->run, c, c->verdict,
                           strcmp(c->verdict, "allowed") == 0 ? "" : c->reason);
    /* Closed after the record is counted, so a client that sees the close
     * also sees the counters. */
    unwatch(e, &c->cfd);
    unwatch(e, &c->ufd);
    c->run->nconns--;
    e->nconns--;
    c->dead = 1;
    c->run = NULL;
}

void skd__egress_reap(skd_egress *e)
{
    struct egress_conn **pp = &e->conns;
    while (*pp) {
        struct egress_conn *c = *pp;
        if (!c->dead) {
            pp = &c->next;
            continue;
        }
        *pp = c->next;
        free(c->head);
        xclose(&c->up);
        xclose(&c->down);
        free(c);
    }
}

/* Answer with status and reason, then close. */
static void reply(skd_egress *e, struct egress_conn *c, int status, const char *verdict,
                  const char *reason)
{
    c->verdict = verdict;
    skd_strlcpy(c->reason, reason, sizeof(c->reason));
    skd__egress_count(verdict);
    if (strcmp(verdict, "refused") == 0)
        skd_info("egress: refused %s %s:%d: %s", c->req.connect ? "CONNECT" : "request",
                 c->req.host[0] ? c->req.host : "?", c->req.port, reason);
    unwatch(e, &c->ufd);
    free(c->head);
    c->head = NULL;
    xclose(&c->down); /* nothing of an upstream's is sent after a refusal */
    char buf[1024];
    size_t n = format_reply(buf, sizeof(buf), status, verdict, reason);
    if (xopen(&c->down) != 0) {
        skd__egress_conn_end(e, c, NULL, NULL);
        return;
    }
    xput(&c->down, buf, n);
    c->st = CONN_REPLY;
    c->c_wr = 1;
    c->u_shut = 0;
    c->last_io = skd_mono_ms();
    pump_reply(e, c);
}

static void addr_to_text(const struct sockaddr *sa, char *buf, size_t cap)
{
    const void *src = sa->sa_family == AF_INET
                          ? (const void *)&((const struct sockaddr_in *)sa)->sin_addr
                          : (const void *)&((const struct sockaddr_in6 *)sa)->sin6_addr;
    if (!inet_ntop(sa->sa_family, src, buf, (socklen_t)cap))
        skd_strlcpy(buf, "?", cap);
}

/* Connect to the next address the guard allows; reply when none is left. */
static void try_connect(skd_egress *e, struct egress_conn *c)
{
    while (c->ai < c->naddrs) {
        struct egress_addr *a = &c->addrs[c->ai++];
        const struct sockaddr *sa = (const struct sockaddr *)&a->sa;
        skd_err ge = {0};
        addr_to_text(sa, c->addr_text, sizeof(c->addr_text));
        if (skd_net_guard_check_addr(e->guard, c->req.host, sa, a->salen, &ge)) {
            skd_strlcpy(c->why, ge.msg, sizeof(c->why));
            c->blocked = 1;
            continue;
        }
        int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            snprintf(c->why, sizeof(c->why), "socket: %s", strerror(errno));
            continue;
        }
        if (connect(fd, sa, a->salen) != 0 && errno != EINPROGRESS) {
            snprintf(c->why, sizeof(c->why), "cannot connect to %s port %d (%s): %s", c->req.host,
                     c->req.port, c->addr_text, strerror(errno));
            c->blocked = 0;
            close(fd);
            continue;
        }
        struct epoll_event ev = {.events = ET_EVENTS, .data.ptr = &c->uep};
        if (epoll_ctl(e->epfd, EPOLL_CTL_ADD, fd, &ev)) {
            snprintf(c->why, sizeof(c->why), "epoll: %s", strerror(errno));
            close(fd);
            continue;
        }
        c->ufd = fd;
        c->st = CONN_CONNECTING;
        return;
    }
    if (c->blocked)
        reply(e, c, 403, "refused", c->why);
    else
        reply(e, c, 502, "failed", c->why[0] ? c->why : "no address to connect to");
}

void skd__egress_resolved(skd_egress *e, struct egress_conn *c, const char *why)
{
    if (why) {
        reply(e, c, 502, "failed", why);
        return;
    }
    c->ai = 0;
    try_connect(e, c);
}

/* The head is complete and acceptable: check the host, then look it up. */
static void head_done(skd_egress *e, struct egress_conn *c, const char *fwd, size_t fwdlen)
{
    skd_err pe = {0};
    if (skd__egress_policy_check_host(&c->run->policy, c->req.host, &pe) ||
        skd_net_guard_check_host(e->guard, c->req.host, &pe)) {
        reply(e, c, 403, "refused", pe.msg);
        return;
    }
    if (xopen(&c->up) || xopen(&c->down)) {
        skd__egress_conn_end(e, c, "failed", "out of pipes");
        return;
    }
    /* Plain HTTP with secrets: placeholders in the headers become values
     * when the host (the URI's, as resolved here) is bound to them; the
     * connection then goes to a worker that scrubs the response. A CONNECT
     * to a bound host is intercepted (TLS terminated) by a worker. */
    if (!c->req.connect && c->run->nsecrets) {
        size_t sublen = 0, fl = 0;
        if (skd__egress_subst_head(c->run->secrets, c->run->nsecrets, c->req.host, fwd, fwdlen,
                                   e->sub, sizeof(e->sub), &sublen, &c->used, &c->elsewhere) ||
            (c->used && skd__egress_close_head(e->sub, sublen, e->fwd, sizeof(e->fwd), &fl))) {
            reply(e, c, 431, "refused",
                  "the request head is too large once its secrets are put in");
            return;
        }
        fwd = c->used ? e->fwd : e->sub;
        fwdlen = c->used ? fl : sublen;
        c->intercept = c->used != 0;
    } else if (c->req.connect && c->run->nsecrets) {
        c->intercept =
            skd__egress_secrets_bound(c->run->secrets, c->run->nsecrets, c->req.host) != 0;
    }
    /* What goes upstream first: the rewritten head, then whatever the client
     * sent after its head (both bounded, so they fit a fresh pipe). */
    size_t extra = c->head_len - c->req.head_len;
    xput(&c->up, fwd, fwdlen);
    xput(&c->up, c->head + c->req.head_len, extra);
    c->bytes_up = (int64_t)c->req.head_len + (int64_t)extra;
    c->run->up += c->bytes_up;
    free(c->head);
    c->head = NULL;
    c->st = CONN_RESOLVING;
    int rc = skd__egress_lookup(e, c);
    if (rc < 0)
        skd__egress_conn_end(e, c, "failed", "out of memory");
    else if (rc == 0)
        skd__egress_resolved(e, c, NULL);
}

/* Read the head; parse after every read. */
static void read_head(skd_egress *e, struct egress_conn *c)
{
    char *fwd = e->fwd;
    while (c->c_rd && c->head_len < SKD_EGRESS_HEAD_MAX) {
        ssize_t n = recv(c->cfd, c->head + c->head_len, SKD_EGRESS_HEAD_MAX - c->head_len, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            c->c_rd = 0;
            break;
        }
        if (n <= 0) {
            skd__egress_conn_end(e, c, NULL, "the client closed before its request");
            return;
        }
        c->head_len += (size_t)n;
        c->last_io = skd_mono_ms();
        size_t fwdlen = 0;
        int rc =
            skd__egress_parse_head(c->head, c->head_len, &c->req, fwd, sizeof(e->fwd), &fwdlen);
        if (rc == 1)
            continue;
        if (rc < 0)
            reply(e, c, c->req.status, "refused", c->req.reason);
        else
            head_done(e, c, fwd, fwdlen);
        return;
    }
}

/* A cap of the run is reached on this connection. */
static void cut(struct egress_conn *c, const char *what, int64_t cap, const char *setting)
{
    c->cut = 1;
    c->verdict = "cut";
    skd__egress_count("cut");
    snprintf(c->reason, sizeof(c->reason), "%s byte cap of %lld bytes reached (%s)", what,
             (long long)cap, setting);
}

/* Splice from fd into b, keeping at most `allow` bytes; returns the bytes
 * kept, 0 on EOF, -1 when the socket would block, -3 when the pipe is full
 * (the socket stays readable: try again once b drained), -2 on an error,
 * and sets *over when the source had more than allowed (that byte stays
 * held in b). */
static ssize_t take(int fd, struct xpipe *b, int64_t allow, int *over)
{
    size_t want = xspace(b);
    if (allow < 0)
        allow = 0;
    if ((int64_t)want > allow + 1)
        want = (size_t)allow + 1;
    ssize_t n;
    do
        n = splice(fd, NULL, b->w, NULL, want, SPLICE_F_NONBLOCK | SPLICE_F_MOVE);
    while (n < 0 && errno == EINTR);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        /* Either the socket has nothing, or the pipe has no free slot
         * (its capacity is in pages, and a short segment takes a whole
         * one): the two need different waits. */
        int avail = 0;
        if (b->len && ioctl(fd, FIONREAD, &avail) == 0 && avail > 0)
            return -3;
        /* (With an empty pipe, bytes counted now came after the EAGAIN:
         * their arrival is an edge of its own.) */
        return -1;
    }
    if (n < 0)
        return -2;
    b->len += (size_t)n;
    if (n > allow) {
        *over = 1;
        b->hold = (size_t)(n - allow);
        n = (ssize_t)allow;
    }
    return n;
}

/* Splice from b to fd; returns 1 on progress, 0 when it would block, -1 on
 * an error. */
static int give(int fd, struct xpipe *b)
{
    ssize_t n;
    do
        n = splice(b->r, NULL, fd, NULL, xlen(b), SPLICE_F_NONBLOCK | SPLICE_F_MOVE);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
    b->len -= (size_t)n;
    return n > 0;
}

/* CONN_REPLY: write the answer, then half-close and read what the client
 * still sends until it closes (closing with unread bytes would reset the
 * connection and could lose the answer); the reply deadline ends it. */
static void pump_reply(skd_egress *e, struct egress_conn *c)
{
    char sink[4096];
    for (int i = 0; i < 16 && c->c_rd && !c->c_eof; i++) {
        ssize_t n = recv(c->cfd, sink, sizeof(sink), 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            c->c_rd = 0;
        else if (n <= 0)
            c->c_eof = 1;
    }
    if (c->c_wr && xlen(&c->down)) {
        int r = give(c->cfd, &c->down);
        if (r < 0) {
            skd__egress_conn_end(e, c, NULL, NULL);
            return;
        }
        c->c_wr = r;
    }
    if (!xlen(&c->down) && !c->u_shut) {
        shutdown(c->cfd, SHUT_WR);
        c->u_shut = 1;
    }
    if (!xlen(&c->down) && c->c_eof)
        skd__egress_conn_end(e, c, NULL, NULL);
}

/* One direction of a tunnel: bytes from src are spliced into the pipe b,
 * and from b to dst. rd and eof belong to src, wr to dst; every pointer is
 * borrowed from the connection or its run. */
struct flow {
    int src, dst;
    struct xpipe *b;
    int *rd, *eof, *wr;
    int64_t *conn_bytes; /* counted when taken */
    _Atomic int64_t *run_bytes;
    int64_t cap;                /* the run's byte cap this way */
    const char *what, *setting; /* for the cut's reason */
};

/* Move what one direction can move now: take from src (never past the
 * run's cap), then give to dst. Returns 1 on progress, 0 on none, -1 when
 * the connection has ended (it is dead: touch nothing of it). */
static int flow_once(skd_egress *e, struct egress_conn *c, const struct flow *f)
{
    int progress = 0;
    if (*f->rd && !*f->eof && !c->cut && xspace(f->b)) {
        int over = 0;
        ssize_t n = take(f->src, f->b, f->cap - *f->run_bytes, &over);
        if (n == -1)
            *f->rd = 0;
        else if (n == -2 || (n == 0 && !over))
            *f->eof = 1;
        if (n > 0) {
            *f->conn_bytes += n;
            *f->run_bytes += n;
            progress = 1;
        }
        if (over)
            cut(c, f->what, f->cap, f->setting);
    }
    if (*f->wr && xlen(f->b)) {
        int r = give(f->dst, f->b);
        if (r < 0) {
            skd__egress_conn_end(e, c, NULL, NULL);
            return -1;
        }
        *f->wr = r;
        progress |= r;
    }
    return progress;
}

/* Move bytes both ways until nothing more can move, or for PUMP_ROUNDS
 * rounds: then the connection is marked to go again after the other
 * events, so one fast transfer cannot hold the loop. */
#define PUMP_ROUNDS 32
static void pump(skd_egress *e, struct egress_conn *c)
{
    if (c->st == CONN_REPLY) {
        pump_reply(e, c);
        return;
    }
    if (c->st != CONN_TUNNEL)
        return;
    struct skd_egress_run *run = c->run;
    const skd_egress_limits *lim = &run->policy.limits;
    const struct flow flows[2] = {
        {c->cfd, c->ufd, &c->up, &c->c_rd, &c->c_eof, &c->u_wr, &c->bytes_up, &run->up,
         lim->max_bytes_up, "upload", "SKILLS_SANDBOX_EGRESS_MAX_BYTES_UP"},
        {c->ufd, c->cfd, &c->down, &c->u_rd, &c->u_eof, &c->c_wr, &c->bytes_down, &run->down,
         lim->max_bytes_down, "download", "SKILLS_SANDBOX_EGRESS_MAX_BYTES_DOWN"},
    };
    c->again = 0;
    for (int round = 0;; round++) {
        if (round == PUMP_ROUNDS) {
            c->again = 1;
            e->again = 1;
            break;
        }
        int progress = 0;
        for (int i = 0; i < 2; i++) {
            int r = flow_once(e, c, &flows[i]);
            if (r < 0)
                return;
            progress |= r;
        }
        if (!progress)
            break;
        c->last_io = skd_mono_ms();
    }
    if (c->c_eof && !xlen(&c->up) && !c->u_shut) {
        shutdown(c->ufd, SHUT_WR);
        c->u_shut = 1;
    }
    /* The upstream is done (or cut) and the client has every byte: nothing
     * more can flow that anyone would read. */
    if ((c->u_eof || c->cut) && !xlen(&c->down) && (!xlen(&c->up) || c->cut))
        skd__egress_conn_end(e, c, NULL, NULL);
}

static void connected(skd_egress *e, struct egress_conn *c)
{
    int err = 0;
    socklen_t el = sizeof(err);
    if (getsockopt(c->ufd, SOL_SOCKET, SO_ERROR, &err, &el) || err) {
        snprintf(c->why, sizeof(c->why), "cannot connect to %s port %d (%s): %s", c->req.host,
                 c->req.port, c->addr_text, strerror(err ? err : errno));
        c->blocked = 0;
        unwatch(e, &c->ufd);
        try_connect(e, c);
        return;
    }
    c->verdict = "allowed";
    if (c->intercept) {
        if (skd__egress_worker_start(e, c))
            skd__egress_conn_end(e, c, "failed", "cannot start a worker thread");
        return;
    }
    c->st = CONN_TUNNEL;
    c->u_rd = c->u_wr = c->c_rd = c->c_wr = 1;
    if (c->req.connect) {
        static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
        xput(&c->down, ok, sizeof(ok) - 1);
    }
    pump(e, c);
}

void skd__egress_conn_event(skd_egress *e, struct egress_conn *c, int kind, uint32_t events)
{
    if (c->dead)
        return;
    int in = (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0;
    int out = (events & (EPOLLOUT | EPOLLHUP | EPOLLERR)) != 0;
    if (kind == EP_CLIENT) {
        c->c_rd |= in;
        c->c_wr |= out;
    } else {
        c->u_rd |= in;
        c->u_wr |= out;
    }
    switch (c->st) {
    case CONN_HEAD:
        read_head(e, c);
        break;
    case CONN_RESOLVING:
    case CONN_CONNECTING:
        if (kind == EP_CLIENT && (events & (EPOLLHUP | EPOLLERR))) {
            skd__egress_conn_end(e, c, NULL, "the client went away");
            break;
        }
        if (kind == EP_UPSTREAM && c->st == CONN_CONNECTING && out)
            connected(e, c);
        break;
    case CONN_TUNNEL:
    case CONN_REPLY:
        pump(e, c);
        break;
    case CONN_WORKER: /* its thread owns the sockets */
        break;
    }
}

void skd__egress_accept(skd_egress *e, struct skd_egress_run *run)
{
    for (int i = 0; i < 64; i++) {
        int fd = accept4(run->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED)
                skd_warn("egress: accept: %s", strerror(errno));
            return;
        }
        if (run->nconns >= run->policy.limits.max_conns || e->nconns >= SKD__EGRESS_MAX_CONNS) {
            char why[120], buf[600];
            snprintf(why, sizeof(why),
                     "too many connections at once (SKILLS_SANDBOX_EGRESS_MAX_CONNECTIONS=%d)",
                     run->policy.limits.max_conns);
            skd__egress_count("refused");
            skd__egress_record(run, NULL, "refused", why);
            size_t n = format_reply(buf, sizeof(buf), 429, "refused", why);
            ssize_t w = send(fd, buf, n, MSG_NOSIGNAL | MSG_DONTWAIT);
            (void)w; /* a fresh socket takes 600 bytes; if not, the client sees a close */
            close(fd);
            continue;
        }
        struct egress_conn *c = calloc(1, sizeof(*c));
        if (c)
            c->head = malloc(SKD_EGRESS_HEAD_MAX);
        if (!c || !c->head) {
            free(c);
            close(fd);
            continue;
        }
        c->id = ++e->next_id;
        c->up.r = c->up.w = c->down.r = c->down.w = -1;
        c->run = run;
        c->cfd = fd;
        c->ufd = -1;
        c->cep = (struct egress_ep){.kind = EP_CLIENT, .conn = c};
        c->uep = (struct egress_ep){.kind = EP_UPSTREAM, .conn = c};
        c->started = c->last_io = skd_mono_ms();
        c->c_rd = 1;
        struct epoll_event ev = {.events = ET_EVENTS, .data.ptr = &c->cep};
        if (epoll_ctl(e->epfd, EPOLL_CTL_ADD, fd, &ev)) {
            free(c->head);
            free(c);
            close(fd);
            continue;
        }
        c->next = e->conns;
        e->conns = c;
        run->nconns++;
        e->nconns++;
        read_head(e, c);
    }
}

void skd__egress_again(skd_egress *e)
{
    e->again = 0;
    for (struct egress_conn *c = e->conns; c; c = c->next)
        if (!c->dead && c->again)
            pump(e, c);
}

int64_t skd__egress_timers(skd_egress *e, int64_t now)
{
    int64_t next = -1;
    for (struct egress_conn *c = e->conns; c; c = c->next) {
        if (c->dead || c->st == CONN_WORKER) /* a worker keeps its own time */
            continue;
        const skd_egress_limits *lim = &c->run->policy.limits;
        int64_t idle = c->st == CONN_REPLY ? SKD__EGRESS_REPLY_MS : lim->idle_ms;
        int64_t d_idle = c->last_io + idle, d_total = c->started + lim->conn_ms;
        int64_t d = d_idle < d_total ? d_idle : d_total;
        if (now >= d) {
            char why[200];
            int total = now >= d_total;
            snprintf(why, sizeof(why), "%s %lld ms (%s)",
                     total ? "the connection was open longer than" : "no byte moved for",
                     (long long)(total ? lim->conn_ms : idle),
                     total ? "SKILLS_SANDBOX_EGRESS_CONN_MS" : "SKILLS_SANDBOX_EGRESS_IDLE_MS");
            if (c->st == CONN_TUNNEL) {
                c->verdict = "cut";
                skd__egress_count("cut");
                skd_strlcpy(c->reason, why, sizeof(c->reason));
                skd__egress_conn_end(e, c, NULL, NULL);
            } else if (c->st == CONN_RESOLVING || c->st == CONN_CONNECTING) {
                reply(e, c, 504, "failed", why);
                if (!c->dead && (next < 0 || now + SKD__EGRESS_REPLY_MS < next))
                    next = now + SKD__EGRESS_REPLY_MS; /* the reply's own deadline */
            } else {
                skd__egress_conn_end(e, c, NULL, why);
            }
            continue;
        }
        if (next < 0 || d < next)
            next = d;
    }
    return next;
}
