/*
 * A proxy connection that carries a secret (see egress_int.h): the
 * CONNECT to a host one of the run's secrets is bound to (TLS terminated
 * with a leaf of skilld's CA, and a TLS connection of skilld's own to the
 * upstream, verified), or a plain-HTTP request a value was put into. The
 * upstream is already connected: the host was checked against the policy
 * and every address against the outbound guard before this, so nothing
 * forbidden is ever spoken TLS to.
 *
 * One request per connection: its head is read (at most
 * SKD_EGRESS_HEAD_MAX), placeholders in its header lines become values,
 * it goes upstream with Connection: close; body bytes follow as they
 * come. The response is read whole, up to SKILLS_EGRESS_SCRUB_MAX_BYTES,
 * every value in it replaced by its placeholder, then given to the
 * sandbox; a larger one is cut (502 when nothing was sent yet).
 *
 * A thread per such connection, with blocking sockets and timeouts:
 * TLS on both sides is far simpler so, and these connections are few (at
 * most the run's connection cap). The thread owns the two descriptors
 * until it puts itself on e->wdone; the loop then records and closes.
 */
#include "net/egress_int.h"
#include "skilld/log.h"
#include "skilld/util.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/err.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

struct io {
    int fd;
    SSL *ssl;
};

/* Read at most n bytes: >0, 0 at the end, -1 on an error or timeout. */
static ssize_t io_read(struct io *x, void *buf, size_t n)
{
    if (x->ssl) {
        int r = SSL_read(x->ssl, buf, (int)(n > 65536 ? 65536 : n));
        if (r > 0)
            return r;
        int e = SSL_get_error(x->ssl, r);
        ERR_clear_error();
        return e == SSL_ERROR_ZERO_RETURN ? 0 : -1;
    }
    ssize_t r;
    do
        r = recv(x->fd, buf, n, 0);
    while (r < 0 && errno == EINTR);
    return r;
}

static int io_write(struct io *x, const void *buf, size_t n)
{
    const char *p = buf;
    while (n) {
        ssize_t w;
        if (x->ssl) {
            int r = SSL_write(x->ssl, p, (int)(n > 65536 ? 65536 : n));
            if (r <= 0) {
                ERR_clear_error();
                return -1;
            }
            w = r;
        } else {
            w = send(x->fd, p, n, MSG_NOSIGNAL);
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0)
                return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static int io_pending(struct io *x)
{
    return x->ssl && SSL_pending(x->ssl) > 0;
}

static void blocking(int fd, int64_t ms)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
        fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

static void set_verdict(struct egress_worker *w, const char *verdict, const char *reason)
{
    if (w->verdict)
        return;
    w->verdict = verdict;
    skd_strlcpy(w->reason, reason, sizeof(w->reason));
}

static void answer(struct io *cl, int status, const char *text, const char *why)
{
    char buf[512];
    int n = snprintf(buf, sizeof(buf),
                     "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\n"
                     "Content-Length: %zu\r\nConnection: close\r\n\r\nskilld egress proxy: %s\n",
                     status, text, strlen(why) + 22, why);
    if (n > 0 && (size_t)n < sizeof(buf))
        io_write(cl, buf, (size_t)n);
}

/* Count n bytes against the run's cap; 0, or -1 (cut, verdict set). */
static int charge(struct egress_worker *w, _Atomic int64_t *run, int64_t cap, int64_t *mine,
                  size_t n, const char *what, const char *setting)
{
    int64_t after = atomic_fetch_add(run, (int64_t)n) + (int64_t)n;
    *mine += (int64_t)n;
    if (after <= cap)
        return 0;
    char why[200];
    snprintf(why, sizeof(why), "%s byte cap of %lld bytes reached (%s)", what, (long long)cap,
             setting);
    set_verdict(w, "cut", why);
    return -1;
}

/* TLS: read the request head from the sandbox, put the values in, send
 * it (and the body bytes read with it) upstream. 0 or -1. */
static int forward_head(struct egress_worker *w, struct io *cl, struct io *up)
{
    char *head = malloc(SKD_EGRESS_HEAD_MAX), *sub = malloc(SKD_EGRESS_SUBST_MAX),
         *fin = malloc(SKD_EGRESS_SUBST_MAX + 128);
    size_t len = 0, end = 0, sl = 0, fl = 0;
    int rc = -1;
    if (!head || !sub || !fin)
        goto out;
    while (!end && len < SKD_EGRESS_HEAD_MAX) {
        ssize_t n = io_read(cl, head + len, SKD_EGRESS_HEAD_MAX - len);
        if (n <= 0) {
            set_verdict(w, "failed", "the client closed before its request");
            goto out;
        }
        len += (size_t)n;
        const char *p = memmem(head, len, "\r\n\r\n", 4);
        if (p)
            end = (size_t)(p - head) + 4;
    }
    if (!end) {
        answer(cl, 431, "Request Header Fields Too Large", "the request head is too large");
        set_verdict(w, "refused", "the request head is longer than 16384 bytes");
        goto out;
    }
    w->no_body = len >= 5 && memcmp(head, "HEAD ", 5) == 0;
    if (memchr(head, '\0', end) ||
        skd__egress_subst_head(w->secrets, w->nsecrets, w->host, head, end, sub,
                               SKD_EGRESS_SUBST_MAX, &sl, &w->used, &w->elsewhere) ||
        skd__egress_close_head(sub, sl, fin, SKD_EGRESS_SUBST_MAX + 128, &fl)) {
        answer(cl, 400, "Bad Request", "the request head cannot be forwarded");
        set_verdict(w, "refused", "a request head that cannot be forwarded with its secrets");
        goto out;
    }
    if (charge(w, w->run_up, w->lim.max_bytes_up, &w->bytes_up, len, "upload",
               "SKILLS_SANDBOX_EGRESS_MAX_BYTES_UP") ||
        io_write(up, fin, fl) || io_write(up, head + end, len - end))
        goto out;
    rc = 0;
out:
    if (sub)
        explicit_bzero(sub, SKD_EGRESS_SUBST_MAX);
    if (fin)
        explicit_bzero(fin, SKD_EGRESS_SUBST_MAX + 128);
    free(head);
    free(sub);
    free(fin);
    return rc;
}

/* Move body bytes up and read the response whole; then scrub and give
 * it to the sandbox. */
static void relay(struct egress_worker *w, struct io *cl, struct io *up)
{
    size_t cap = w->scrub_max, len = 0, sent = 0;
    char *resp = malloc(cap + 1), buf[16384];
    int c_eof = 0, u_eof = 0;
    int64_t deadline = skd_mono_ms() + w->lim.conn_ms;
    if (!resp) {
        set_verdict(w, "failed", "out of memory");
        return;
    }
    for (;;) {
        long done = skd__egress_resp_complete(resp + sent, len - sent, w->no_body);
        /* Interim answers (100 Continue) go on at once: a client may wait
         * for one before it sends its body. */
        int st = len - sent >= 12 ? skd__egress_resp_status(resp + sent, len - sent) : 0;
        if (done > 0 && st >= 100 && st < 200 && st != 101) {
            char *o = NULL;
            size_t ol = 0;
            int r =
                skd__egress_scrub(w->secrets, w->nsecrets, resp + sent, (size_t)done, 1, &o, &ol);
            if (io_write(cl, r == 1 ? o : resp + sent, r == 1 ? ol : (size_t)done)) {
                free(o);
                break;
            }
            free(o);
            sent += (size_t)done;
            continue;
        }
        if (done > 0 || u_eof)
            break;
        int64_t now = skd_mono_ms();
        if (now >= deadline) {
            set_verdict(w, "cut",
                        "the connection was open longer than SKILLS_SANDBOX_EGRESS_CONN_MS");
            break;
        }
        struct pollfd pf[2] = {{.fd = cl->fd, .events = c_eof ? 0 : POLLIN},
                               {.fd = up->fd, .events = POLLIN}};
        int t = io_pending(cl) || io_pending(up) ? 0 : (int)(w->lim.idle_ms);
        if (t && deadline - now < t)
            t = (int)(deadline - now);
        int pr = poll(pf, 2, t);
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr == 0 && !io_pending(cl) && !io_pending(up)) {
            set_verdict(w, "cut", "no byte moved for SKILLS_SANDBOX_EGRESS_IDLE_MS");
            break;
        }
        if (!c_eof && ((pf[0].revents & (POLLIN | POLLHUP | POLLERR)) || io_pending(cl))) {
            ssize_t n = io_read(cl, buf, sizeof(buf));
            if (n <= 0)
                c_eof = 1;
            else if (charge(w, w->run_up, w->lim.max_bytes_up, &w->bytes_up, (size_t)n, "upload",
                            "SKILLS_SANDBOX_EGRESS_MAX_BYTES_UP") ||
                     io_write(up, buf, (size_t)n))
                break;
        }
        if ((pf[1].revents & (POLLIN | POLLHUP | POLLERR)) || io_pending(up)) {
            if (len == cap) {
                char why[200];
                snprintf(why, sizeof(why),
                         "a response to a request that carried a secret is larger than %zu bytes "
                         "(SKILLS_EGRESS_SCRUB_MAX_BYTES)",
                         cap);
                if (!sent)
                    answer(cl, 502, "Bad Gateway", why);
                set_verdict(w, "cut", why);
                len = sent; /* nothing of it goes to the sandbox */
                break;
            }
            ssize_t n = io_read(up, resp + len, cap - len);
            if (n <= 0)
                u_eof = 1;
            else
                len += (size_t)n;
        }
    }
    if (len > sent) {
        char *o = NULL;
        size_t ol = 0;
        int r = skd__egress_scrub(w->secrets, w->nsecrets, resp + sent, len - sent, w->no_body, &o,
                                  &ol);
        const char *p = r == 1 ? o : resp + sent;
        size_t pl = r == 1 ? ol : len - sent;
        if (r < 0) {
            set_verdict(w, "failed", "out of memory");
        } else if (charge(w, w->run_down, w->lim.max_bytes_down, &w->bytes_down, pl, "download",
                          "SKILLS_SANDBOX_EGRESS_MAX_BYTES_DOWN") == 0) {
            io_write(cl, p, pl);
        }
        if (o)
            explicit_bzero(o, ol);
        free(o);
    }
    explicit_bzero(resp, len);
    free(resp);
}

static void *worker_main(void *arg)
{
    struct egress_worker *w = arg;
    skd_egress *e = w->e;
    struct io cl = {w->cfd, NULL}, up = {w->ufd, NULL};
    blocking(w->cfd, w->lim.idle_ms);
    blocking(w->ufd, w->lim.idle_ms);
    if (w->tls) {
        static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
        char why[200];
        if (io_write(&cl, ok, sizeof(ok) - 1))
            goto out;
        up.ssl = skd__egress_tls_connect_new(e->tls, w->host, w->ufd);
        if (!up.ssl || SSL_connect(up.ssl) != 1) {
            long v = up.ssl ? SSL_get_verify_result(up.ssl) : 0;
            snprintf(why, sizeof(why), "TLS to %.80s failed: %.100s", w->host,
                     v != X509_V_OK ? X509_verify_cert_error_string(v) : "handshake");
            ERR_clear_error();
            set_verdict(w, "failed", why);
            goto out;
        }
        cl.ssl = skd__egress_tls_accept_new(e->tls, w->host, w->cfd);
        if (!cl.ssl || SSL_accept(cl.ssl) != 1) {
            ERR_clear_error();
            set_verdict(w, "failed",
                        "the sandbox's TLS handshake with skilld's CA failed (does it trust "
                        "the trust bundle?)");
            goto out;
        }
        if (forward_head(w, &cl, &up))
            goto out;
    } else if (io_write(&up, w->pre, w->prelen)) {
        set_verdict(w, "failed", "the upstream closed");
        goto out;
    }
    relay(w, &cl, &up);
out:
    if (cl.ssl) {
        SSL_shutdown(cl.ssl);
        SSL_free(cl.ssl);
    }
    if (up.ssl)
        SSL_free(up.ssl);
    ERR_clear_error();
    if (w->pre) {
        explicit_bzero(w->pre, w->prelen);
        free(w->pre);
        w->pre = NULL;
    }
    pthread_mutex_lock(&e->mu);
    w->next = e->wdone;
    e->wdone = w;
    skd__egress_wake(e);
    pthread_cond_broadcast(&e->done_cv);
    pthread_mutex_unlock(&e->mu);
    return NULL;
}

int skd__egress_worker_start(skd_egress *e, struct egress_conn *c)
{
    struct egress_worker *w = calloc(1, sizeof(*w));
    if (!w)
        return -1;
    w->e = e;
    w->c = c;
    w->cfd = c->cfd;
    w->ufd = c->ufd;
    w->tls = c->req.connect;
    w->no_body = strcmp(c->req.method, "HEAD") == 0;
    skd_strlcpy(w->host, c->req.host, sizeof(w->host));
    w->secrets = c->run->secrets;
    w->nsecrets = c->run->nsecrets;
    w->lim = c->run->policy.limits;
    w->run_up = &c->run->up;
    w->run_down = &c->run->down;
    w->scrub_max = e->scrub_max;
    w->used = c->used;
    w->elsewhere = c->elsewhere;
    /* Plain HTTP: what the loop put in the up pipe (the head with its
     * values, and body bytes) goes first. */
    if (!w->tls && c->up.len) {
        if (!(w->pre = malloc(c->up.len))) {
            free(w);
            return -1;
        }
        ssize_t n = read(c->up.r, w->pre, c->up.len);
        w->prelen = n > 0 ? (size_t)n : 0;
        c->up.len = 0;
    }
    epoll_ctl(e->epfd, EPOLL_CTL_DEL, c->cfd, NULL);
    epoll_ctl(e->epfd, EPOLL_CTL_DEL, c->ufd, NULL);
    /* The thread takes no signals (the loop's mask is inherited). */
    if (pthread_create(&w->th, NULL, worker_main, w)) {
        free(w->pre);
        free(w);
        return -1;
    }
    c->worker = w;
    c->st = CONN_WORKER;
    c->run->nworkers++;
    return 0;
}

/* Record w's connection and end it. locked: the caller holds e->mu. */
static void finish(skd_egress *e, struct egress_worker *w, int locked)
{
    struct egress_conn *c = w->c;
    struct skd_egress_run *run = c->run;
    pthread_join(w->th, NULL);
    c->worker = NULL;
    c->bytes_up += w->bytes_up;
    c->bytes_down += w->bytes_down;
    c->used |= w->used;
    c->elsewhere |= w->elsewhere;
    if (w->verdict) {
        skd__egress_count(w->verdict);
        c->verdict = w->verdict;
        skd_strlcpy(c->reason, w->reason, sizeof(c->reason));
    }
    skd__egress_conn_end(e, c, NULL, NULL);
    run->nworkers--;
    if (run->closing && run->nworkers == 0) {
        if (!locked)
            pthread_mutex_lock(&e->mu);
        run->detached = 1;
        pthread_cond_broadcast(&e->done_cv);
        if (!locked)
            pthread_mutex_unlock(&e->mu);
    }
    free(w);
}

void skd__egress_workers_take(skd_egress *e)
{
    pthread_mutex_lock(&e->mu);
    struct egress_worker *list = e->wdone;
    e->wdone = NULL;
    pthread_mutex_unlock(&e->mu);
    while (list) {
        struct egress_worker *w = list;
        list = w->next;
        finish(e, w, 0);
    }
}

void skd__egress_workers_stop(skd_egress *e, struct skd_egress_run *run)
{
    for (struct egress_conn *c = e->conns; c; c = c->next)
        if (!c->dead && c->st == CONN_WORKER && (!run || c->run == run)) {
            shutdown(c->cfd, SHUT_RDWR);
            shutdown(c->ufd, SHUT_RDWR);
        }
    for (;;) {
        int left = 0;
        for (struct egress_conn *c = e->conns; c; c = c->next)
            left |= !c->dead && c->st == CONN_WORKER && (!run || c->run == run);
        if (!left)
            break;
        while (!e->wdone)
            pthread_cond_wait(&e->done_cv, &e->mu);
        struct egress_worker *list = e->wdone;
        e->wdone = NULL;
        while (list) {
            struct egress_worker *w = list;
            list = w->next;
            finish(e, w, 1);
        }
    }
}
