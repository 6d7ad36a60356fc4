/*
 * The egress proxy service (see src/net/egress.h): one epoll event loop that
 * serves every run's listening socket, its connections and their upstreams,
 * plus two resolver threads for the blocking getaddrinfo.
 *
 * What it trusts: nothing from a proxy socket (the head goes through the
 * bounded parser in egress_parse.c; tunnel bytes are only copied, never
 * read), and no host name as text: every address is put through the
 * outbound guard right before connect(). The configuration is trusted.
 *
 * Memory is bounded per connection (a head buffer while the head is read,
 * then two fixed buffers, one each way) and per run (at most max_conns
 * connections, at most MAX_RECORDS destination records), so a download of
 * any size passes in constant memory: when a buffer is full the loop stops
 * reading its source until the other side has taken the bytes.
 *
 * Threads: all connection and run state belongs to the loop thread. Other
 * threads talk to it through a command list and an eventfd (attach, detach,
 * resolver answers). The connection state machine is in egress_conn.c.
 */
#include "net/egress_int.h"
#include "skilld/log.h"
#include "skilld/util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

static _Atomic uint64_t refused_total, cut_total;

uint64_t skd_egress_refused_total(void)
{
    return atomic_load(&refused_total);
}

uint64_t skd_egress_cut_total(void)
{
    return atomic_load(&cut_total);
}

void skd__egress_wake(skd_egress *e)
{
    uint64_t one = 1;
    ssize_t n = write(e->wakefd, &one, sizeof(one));
    (void)n; /* a full counter still wakes the loop */
}

void skd__egress_count(const char *verdict)
{
    if (strcmp(verdict, "refused") == 0)
        atomic_fetch_add(&refused_total, 1);
    else if (strcmp(verdict, "cut") == 0)
        atomic_fetch_add(&cut_total, 1);
}

/* ---- records ---------------------------------------------------------- */

void skd__egress_record(struct skd_egress_run *run, const struct egress_conn *c,
                        const char *verdict, const char *reason)
{
    const char *host = c ? c->req.host : "";
    int port = c ? c->req.port : 0;
    const char *addr = c ? c->addr_text : "";
    struct egress_record *r = NULL;
    pthread_mutex_lock(&run->rec_mu);
    for (size_t i = 0; i < run->nrecords; i++) {
        struct egress_record *x = &run->records[i];
        if (x->port == port && strcmp(x->host, host) == 0 && strcmp(x->addr, addr) == 0 &&
            strcmp(x->verdict, verdict) == 0 && strcmp(x->reason, reason) == 0) {
            r = x;
            break;
        }
    }
    if (!r) {
        if (run->nrecords >= SKD__EGRESS_MAX_RECORDS) {
            run->records_dropped++;
            pthread_mutex_unlock(&run->rec_mu);
            return;
        }
        r = &run->records[run->nrecords++];
        memset(r, 0, sizeof(*r));
        skd_strlcpy(r->host, host, sizeof(r->host));
        r->port = port;
        skd_strlcpy(r->addr, addr, sizeof(r->addr));
        r->verdict = verdict;
        skd_strlcpy(r->reason, reason, sizeof(r->reason));
    }
    r->connections++;
    if (c) {
        r->bytes_up += c->bytes_up;
        r->bytes_down += c->bytes_down;
        r->used |= c->used;
        r->elsewhere |= c->elsewhere;
    }
    pthread_mutex_unlock(&run->rec_mu);
}

/* The names of the run's secrets whose bits are set in m, or NULL. */
static json_t *secret_names(const struct skd_egress_run *run, uint64_t m)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < run->nsecrets && i < SKD_EGRESS_MAX_SECRETS; i++)
        if (m >> i & 1)
            json_array_append_new(a, json_string(run->secrets[i].name));
    return a;
}

static json_t *records_json(const struct skd_egress_run *run)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < run->nrecords; i++) {
        const struct egress_record *r = &run->records[i];
        json_t *o = json_pack("{s:s, s:i, s:s, s:I, s:I, s:I, s:s}", "host", r->host, "port",
                              r->port, "address", r->addr, "connections",
                              (json_int_t)r->connections, "bytesUp", (json_int_t)r->bytes_up,
                              "bytesDown", (json_int_t)r->bytes_down, "verdict", r->verdict);
        if (o && r->reason[0])
            json_object_set_new(o, "reason", json_string(r->reason));
        if (o && r->used)
            json_object_set_new(o, "substituted", secret_names(run, r->used));
        if (o && r->elsewhere)
            json_object_set_new(o, "placeholderElsewhere", secret_names(run, r->elsewhere));
        if (!o || json_array_append_new(a, o)) {
            json_decref(a);
            return NULL;
        }
    }
    if (a && run->records_dropped) {
        json_t *o = json_pack("{s:s, s:s, s:I}", "verdict", "omitted", "reason",
                              "more destinations than are recorded per run", "connections",
                              (json_int_t)run->records_dropped);
        if (!o || json_array_append_new(a, o)) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

/* ---- resolver threads -------------------------------------------------- */

/* Resolve job->host:port into job's addresses (blocking). */
static void resolve(struct egress_job *job)
{
    struct addrinfo hints = {0}, *res = NULL;
    char port[8];
    snprintf(port, sizeof(port), "%d", job->port);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_protocol = IPPROTO_TCP;
    int rc = getaddrinfo(job->host, port, &hints, &res);
    if (rc) {
        snprintf(job->why, sizeof(job->why), "cannot resolve %s: %s", job->host, gai_strerror(rc));
        return;
    }
    for (struct addrinfo *ai = res; ai && job->naddrs < SKD__EGRESS_MAX_ADDRS; ai = ai->ai_next) {
        if (ai->ai_addrlen > sizeof(job->addrs[0].sa))
            continue;
        memcpy(&job->addrs[job->naddrs].sa, ai->ai_addr, ai->ai_addrlen);
        job->addrs[job->naddrs++].salen = ai->ai_addrlen;
    }
    freeaddrinfo(res);
    if (!job->naddrs)
        snprintf(job->why, sizeof(job->why), "%s has no address", job->host);
}

static void *resolver_main(void *arg)
{
    skd_egress *e = arg;
    pthread_mutex_lock(&e->mu);
    for (;;) {
        while (!e->stop && !e->jobs)
            pthread_cond_wait(&e->jobs_cv, &e->mu);
        if (e->stop)
            break;
        struct egress_job *job = e->jobs;
        e->jobs = job->next;
        pthread_mutex_unlock(&e->mu);
        resolve(job);
        pthread_mutex_lock(&e->mu);
        job->next = e->answers;
        e->answers = job;
        skd__egress_wake(e);
    }
    pthread_mutex_unlock(&e->mu);
    return NULL;
}

int skd__egress_lookup(skd_egress *e, struct egress_conn *c)
{
    for (size_t i = 0; i < e->npins; i++) {
        if (e->pins[i].port == c->req.port && strcmp(e->pins[i].host, c->req.host) == 0) {
            c->naddrs = 1;
            c->addrs[0].sa = e->pins[i].sa;
            c->addrs[0].salen = e->pins[i].salen;
            return 0; /* answered at once */
        }
    }
    struct egress_job *job = calloc(1, sizeof(*job));
    if (!job)
        return SKD_ENOMEM;
    job->conn_id = c->id;
    skd_strlcpy(job->host, c->req.host, sizeof(job->host));
    job->port = c->req.port;
    pthread_mutex_lock(&e->mu);
    job->next = e->jobs;
    e->jobs = job;
    pthread_cond_signal(&e->jobs_cv);
    pthread_mutex_unlock(&e->mu);
    return 1; /* the answer comes later */
}

/* Hand the resolvers' answers to their connections (loop thread). */
static void take_answers(skd_egress *e)
{
    pthread_mutex_lock(&e->mu);
    struct egress_job *list = e->answers;
    e->answers = NULL;
    pthread_mutex_unlock(&e->mu);
    while (list) {
        struct egress_job *job = list;
        list = job->next;
        struct egress_conn *c = e->conns;
        while (c && c->id != job->conn_id)
            c = c->next;
        if (c && !c->dead && c->st == CONN_RESOLVING) {
            c->naddrs = job->naddrs;
            memcpy(c->addrs, job->addrs, sizeof(c->addrs));
            skd__egress_resolved(e, c, job->naddrs ? NULL : job->why);
        }
        free(job);
    }
}

/* ---- runs --------------------------------------------------------------- */

static void run_free(struct skd_egress_run *run)
{
    if (!run)
        return;
    pthread_mutex_destroy(&run->rec_mu);
    for (size_t i = 0; i < run->nstrs; i++)
        free(run->strs[i]);
    skd_secrets_free(run->secrets, run->nsecrets);
    free(run);
}

/* Copy a policy string into run (kept until run_free). */
static const char *run_keep(struct skd_egress_run *run, const char *s)
{
    if (!s)
        return NULL;
    char *copy = strdup(s);
    if (!copy)
        return NULL;
    run->strs[run->nstrs++] = copy;
    return copy;
}

int skd__egress_attach(skd_egress *e, int listen_fd, const skd_egress_policy *p,
                       skd_egress_run **out, skd_err *err)
{
    *out = NULL;
    struct skd_egress_run *run = NULL;
    int rc;
    int type = 0;
    socklen_t tl = sizeof(type);
    if (listen_fd < 0 || getsockopt(listen_fd, SOL_SOCKET, SO_TYPE, &type, &tl) ||
        type != SOCK_STREAM) {
        rc = skd_err_set(err, SKD_EINVAL, "the egress socket is not a stream socket");
        goto fail;
    }
    int bad = p->limits.max_conns < 1 || p->nallow < 1 || p->nallow > SKD_EGRESS_MAX_LISTS ||
              p->ndeny > SKD_EGRESS_MAX_LISTS;
    for (size_t i = 0; !bad && i < p->nallow; i++)
        bad = p->allow[i] == NULL;
    if (bad) {
        rc = skd_err_set(err, SKD_EINVAL, "bad egress policy");
        goto fail;
    }
    int fl = fcntl(listen_fd, F_GETFL);
    if (fl < 0 || fcntl(listen_fd, F_SETFL, fl | O_NONBLOCK) < 0) {
        rc = skd_err_set(err, SKD_EIO, "egress socket: %s", strerror(errno));
        goto fail;
    }
    if (!(run = calloc(1, sizeof(*run)))) {
        rc = skd_err_set(err, SKD_ENOMEM, "out of memory");
        goto fail;
    }
    pthread_mutex_init(&run->rec_mu, NULL);
    run->lfd = listen_fd;
    run->policy.limits = p->limits;
    for (size_t i = 0; i < p->nallow; i++)
        if (!(run->policy.allow[run->policy.nallow++] = run_keep(run, p->allow[i])))
            goto nomem;
    for (size_t i = 0; i < p->ndeny; i++)
        if (p->deny[i] && !(run->policy.deny[run->policy.ndeny++] = run_keep(run, p->deny[i])))
            goto nomem;
    /* A run with secrets needs the CA (made on the first such run). */
    if (p->nsecrets && (rc = skd__egress_ca_pem(e, NULL, err)) < 0)
        goto fail;
    size_t nsec = p->nsecrets < SKD_EGRESS_MAX_SECRETS ? p->nsecrets : SKD_EGRESS_MAX_SECRETS;
    if (skd_secrets_copy(p->secrets, nsec, &run->secrets))
        goto nomem;
    run->nsecrets = nsec;
    run->ep.kind = EP_LISTEN;
    run->ep.run = run;
    pthread_mutex_lock(&e->mu);
    if (e->loop_done) {
        pthread_mutex_unlock(&e->mu);
        rc = skd_err_set(err, SKD_ESANDBOX, "the egress proxy has stopped");
        goto fail;
    }
    run->cmd = CMD_ATTACH;
    run->cmd_next = e->cmds;
    e->cmds = run;
    e->active++;
    pthread_mutex_unlock(&e->mu);
    skd__egress_wake(e);
    *out = run;
    return 0;
nomem:
    rc = skd_err_set(err, SKD_ENOMEM, "out of memory");
fail:
    if (listen_fd >= 0)
        close(listen_fd);
    run_free(run);
    return rc;
}

static void run_close(skd_egress *e, struct skd_egress_run *run);

json_t *skd__egress_detach(skd_egress *e, skd_egress_run *run)
{
    if (!run)
        return NULL;
    pthread_mutex_lock(&e->mu);
    run->detach = 1;
    if (run->cmd == CMD_NONE) {
        run->cmd = CMD_DETACH;
        run->cmd_next = e->cmds;
        e->cmds = run;
    }
    skd__egress_wake(e);
    while (!run->detached && !e->loop_done)
        pthread_cond_wait(&e->done_cv, &e->mu);
    if (!run->detached) {
        /* The loop ended first: its state is still, so close the run's
         * sockets and connections here (under mu: one detacher at a time),
         * and take it out of the command list. */
        for (struct skd_egress_run **pp = &e->cmds; *pp; pp = &(*pp)->cmd_next)
            if (*pp == run) {
                *pp = run->cmd_next;
                break;
            }
        skd__egress_workers_stop(e, run);
        run_close(e, run);
        skd__egress_reap(e);
    }
    e->active--;
    pthread_mutex_unlock(&e->mu);
    json_t *a = records_json(run);
    run_free(run);
    return a;
}

int skd__egress_open_conns(skd_egress_run *run)
{
    return run ? atomic_load(&run->nconns) : 0;
}

json_t *skd__egress_take(skd_egress_run *run)
{
    if (!run)
        return NULL;
    pthread_mutex_lock(&run->rec_mu);
    json_t *a = records_json(run);
    if (a) {
        run->nrecords = 0;
        run->records_dropped = 0;
    }
    pthread_mutex_unlock(&run->rec_mu);
    return a;
}

int skd__egress_ca_pem(skd_egress *e, char **pem, skd_err *err)
{
    int rc = 0;
    pthread_mutex_lock(&e->mu);
    if (!e->tls)
        rc = skd__egress_tls_new(e->cfg, &e->tls, err);
    if (rc == 0 && pem && !(*pem = strdup(skd__egress_tls_ca_pem(e->tls))))
        rc = skd_err_set(err, SKD_ENOMEM, "out of memory");
    pthread_mutex_unlock(&e->mu);
    return rc;
}

int skd__egress_active_runs(skd_egress *e)
{
    pthread_mutex_lock(&e->mu);
    int n = e->active;
    pthread_mutex_unlock(&e->mu);
    return n;
}

/* Close a run's listening socket and connections (loop thread). */
static void run_close(skd_egress *e, struct skd_egress_run *run)
{
    if (run->lfd >= 0) {
        epoll_ctl(e->epfd, EPOLL_CTL_DEL, run->lfd, NULL);
        close(run->lfd);
        run->lfd = -1;
    }
    for (struct egress_conn *c = e->conns; c; c = c->next) {
        if (c->run != run || c->dead)
            continue;
        if (c->st == CONN_WORKER) { /* its thread ends, then the loop ends it */
            shutdown(c->cfd, SHUT_RDWR);
            shutdown(c->ufd, SHUT_RDWR);
        } else {
            skd__egress_conn_end(e, c, NULL, "the run ended");
        }
    }
    run->listed = 0;
}

/* Carry out attach and detach commands (loop thread). */
static void take_commands(skd_egress *e)
{
    pthread_mutex_lock(&e->mu);
    struct skd_egress_run *list = e->cmds;
    e->cmds = NULL;
    pthread_mutex_unlock(&e->mu);
    while (list) {
        struct skd_egress_run *run = list;
        list = run->cmd_next;
        pthread_mutex_lock(&e->mu);
        run->cmd = CMD_NONE;
        int detach = run->detach;
        pthread_mutex_unlock(&e->mu);
        if (!run->listed && !detach) {
            struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &run->ep};
            if (epoll_ctl(e->epfd, EPOLL_CTL_ADD, run->lfd, &ev) == 0) {
                run->listed = 1;
            } else {
                skd_warn("egress: cannot watch a proxy socket: %s", strerror(errno));
                close(run->lfd);
                run->lfd = -1;
            }
        }
        if (detach) {
            run_close(e, run);
            pthread_mutex_lock(&e->mu);
            if (run->nworkers) {
                run->closing = 1; /* detached when its last worker is taken */
            } else {
                run->detached = 1;
                pthread_cond_broadcast(&e->done_cv);
            }
            pthread_mutex_unlock(&e->mu);
        }
    }
}

/* ---- the loop ----------------------------------------------------------- */

static void *loop_main(void *arg)
{
    skd_egress *e = arg;
    struct epoll_event evs[64];
    for (;;) {
        int64_t now = skd_mono_ms();
        int64_t next = skd__egress_timers(e, now);
        int timeout = next < 0 ? -1 : (int)(next - now < 0 ? 0 : next - now + 1);
        if (e->again)
            timeout = 0;
        int n = epoll_wait(e->epfd, evs, 64, timeout);
        if (n < 0 && errno != EINTR) {
            skd_error("egress: epoll_wait: %s", strerror(errno));
            break;
        }
        for (int i = 0; i < n; i++) {
            struct egress_ep *ep = evs[i].data.ptr;
            if (ep->kind == EP_WAKE) {
                uint64_t v;
                ssize_t r = read(e->wakefd, &v, sizeof(v));
                (void)r;
            } else if (ep->kind == EP_LISTEN) {
                skd__egress_accept(e, ep->run);
            } else {
                skd__egress_conn_event(e, ep->conn, ep->kind, evs[i].events);
            }
        }
        if (e->again)
            skd__egress_again(e);
        skd__egress_workers_take(e);
        skd__egress_reap(e);
        take_answers(e);
        take_commands(e);
        skd__egress_reap(e);
        pthread_mutex_lock(&e->mu);
        int stop = e->stop;
        pthread_mutex_unlock(&e->mu);
        if (stop)
            break;
    }
    /* Whoever waits for a detach must not wait for a loop that is gone. */
    pthread_mutex_lock(&e->mu);
    e->loop_done = 1;
    pthread_cond_broadcast(&e->done_cv);
    pthread_mutex_unlock(&e->mu);
    return NULL;
}

int skd__egress_new(const skd_config *cfg, skd_egress **out, skd_err *err)
{
    *out = NULL;
    skd_egress *e = calloc(1, sizeof(*e));
    if (!e)
        return skd_err_set(err, SKD_ENOMEM, "out of memory");
    e->epfd = e->wakefd = -1;
    e->cfg = cfg;
    e->scrub_max = (size_t)skd_config_int(cfg, "SKILLS_EGRESS_SCRUB_MAX_BYTES");
    int rc = skd_net_guard_new(cfg, &e->guard, err);
    if (rc)
        goto fail;
    size_t npins = 0;
    const char *const *pins = skd_net_guard_pins(e->guard, &npins);
    e->pins = calloc(npins ? npins : 1, sizeof(*e->pins));
    if (!e->pins) {
        rc = skd_err_set(err, SKD_ENOMEM, "out of memory");
        goto fail;
    }
    for (size_t i = 0; i < npins; i++)
        if (skd__pin_parse(pins[i], &e->pins[e->npins]) == 0)
            e->npins++;
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->jobs_cv, NULL);
    pthread_cond_init(&e->done_cv, NULL);
    e->sync_ready = 1;
    e->epfd = epoll_create1(EPOLL_CLOEXEC);
    e->wakefd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (e->epfd < 0 || e->wakefd < 0) {
        rc = skd_err_set(err, SKD_EIO, "egress: %s", strerror(errno));
        goto fail;
    }
    e->wake_ep.kind = EP_WAKE;
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &e->wake_ep};
    if (epoll_ctl(e->epfd, EPOLL_CTL_ADD, e->wakefd, &ev)) {
        rc = skd_err_set(err, SKD_EIO, "egress: %s", strerror(errno));
        goto fail;
    }
    /* The threads take no signals: a splice to a socket whose peer closed
     * raises SIGPIPE in the thread that made it, and blocked it only
     * yields EPIPE. They inherit the mask from here. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    if (pthread_create(&e->loop, NULL, loop_main, e))
        rc = skd_err_set(err, SKD_EINTERNAL, "egress: cannot start the event loop");
    else
        e->nthreads = 1;
    for (int i = 0; rc == 0 && i < SKD__EGRESS_RESOLVERS; i++) {
        if (pthread_create(&e->resolvers[i], NULL, resolver_main, e))
            rc = skd_err_set(err, SKD_EINTERNAL, "egress: cannot start a resolver");
        else
            e->nresolvers++;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc)
        goto fail;
    *out = e;
    return 0;
fail:
    skd__egress_free(e);
    return rc;
}

void skd__egress_free(skd_egress *e)
{
    if (!e)
        return;
    if (e->sync_ready) {
        pthread_mutex_lock(&e->mu);
        e->stop = 1;
        pthread_cond_broadcast(&e->jobs_cv);
        pthread_mutex_unlock(&e->mu);
    }
    if (e->wakefd >= 0)
        skd__egress_wake(e);
    if (e->nthreads)
        pthread_join(e->loop, NULL);
    for (int i = 0; i < e->nresolvers; i++)
        pthread_join(e->resolvers[i], NULL);
    if (e->sync_ready) {
        pthread_mutex_lock(&e->mu);
        skd__egress_workers_stop(e, NULL);
        pthread_mutex_unlock(&e->mu);
    }
    /* Runs not detached: close their sockets; their handles stay valid for
     * nothing (skd__egress_detach must not be called after this). */
    for (struct egress_conn *c = e->conns; c; c = c->next)
        if (!c->dead)
            skd__egress_conn_end(e, c, NULL, "the proxy stopped");
    skd__egress_reap(e);
    for (struct egress_job *j = e->jobs, *n; j; j = n) {
        n = j->next;
        free(j);
    }
    for (struct egress_job *j = e->answers, *n; j; j = n) {
        n = j->next;
        free(j);
    }
    if (e->epfd >= 0)
        close(e->epfd);
    if (e->wakefd >= 0)
        close(e->wakefd);
    if (e->sync_ready) {
        pthread_mutex_destroy(&e->mu);
        pthread_cond_destroy(&e->jobs_cv);
        pthread_cond_destroy(&e->done_cv);
    }
    free(e->pins);
    skd_net_guard_free(e->guard);
    skd__egress_tls_free(e->tls);
    free(e);
}
