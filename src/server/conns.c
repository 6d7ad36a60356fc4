/*
 * The connection table (see conns.h). One mutex guards two lists: every
 * entry (for the watcher's scans and hang-up lookups) and the idle entries
 * in the order they became idle (so the head is the longest idle, and the
 * eviction is O(1)). The entry of a connection lives from MHD's "started"
 * to its "closed" notification; the watcher's epoll carries entry ids, not
 * pointers, so an event for an entry that is gone is simply not found.
 *
 * Lock order: an SSE stream's mutex may be held while this table's is
 * taken (a producer resuming its connection), never the other way round;
 * the watcher therefore collects streams and cancel tokens under the table
 * mutex and acts on them after releasing it.
 */
#include "server/conns.h"
#include "server/sse.h"

#include "skilld/util.h"

#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#define TICK_MS 250
#define MAX_EVENTS 64
#define MAX_POKES 256
/* Give memory back after a crowd leaves: when the number of connections
 * falls to a quarter of its peak since the last trim, and that peak was at
 * least TRIM_PEAK. Each connection's buffers (MHD's memory pool, about
 * 16 KiB) come from the heap of the worker thread that accepted it, and
 * glibc returns freed pages only from the top of a heap; malloc_trim(0)
 * returns the free pages of every arena. */
#define TRIM_PEAK 1024

enum phase {
    P_IDLE,   /* waiting for a request's headers */
    P_BODY,   /* headers in, body arriving */
    P_WORK,   /* the request is read: handled, or its reply is going out */
    P_STREAM, /* the reply is an SSE stream */
};

struct skd_conn {
    skd_conn *prev, *next;           /* all entries */
    skd_conn *idle_prev, *idle_next; /* idle entries, oldest first */
    struct MHD_Connection *mhd;
    uint64_t id;
    int fd;
    enum phase phase;
    int64_t since_ms;    /* start of the phase */
    int64_t susp_ms;     /* when suspended */
    int in_idle;         /* on the idle list */
    int evicted;         /* shut down by us; closing */
    int watched;         /* in the watcher's epoll set */
    int suspended;       /* MHD connection suspended by us */
    int hung_up;         /* the client went away while suspended */
    int firing;          /* the watcher is firing cancel */
    skd_cancel *cancel;  /* borrowed from the request */
    struct skd_sse *sse; /* a reference while the reply streams */
};

struct skd_conns {
    skd_conns_opts o;
    pthread_mutex_t mu;
    pthread_cond_t cv; /* firing ended; a suspension ended */
    skd_conn *all;
    skd_conn *idle_head, *idle_tail;
    size_t n, live; /* entries; entries not evicted */
    size_t peak;    /* most entries since the last trim */
    size_t nsuspended;
    uint64_t next_id;
    int ep, wake_fd;
    int quit, stopping;
    pthread_t watcher;
    int watcher_running;
};

/* ---- lists (t->mu held) ----------------------------------------------- */

static void idle_remove(skd_conns *t, skd_conn *c)
{
    if (!c->in_idle)
        return;
    if (c->idle_prev)
        c->idle_prev->idle_next = c->idle_next;
    else
        t->idle_head = c->idle_next;
    if (c->idle_next)
        c->idle_next->idle_prev = c->idle_prev;
    else
        t->idle_tail = c->idle_prev;
    c->idle_prev = c->idle_next = NULL;
    c->in_idle = 0;
}

static void idle_append(skd_conns *t, skd_conn *c)
{
    idle_remove(t, c);
    c->idle_prev = t->idle_tail;
    c->idle_next = NULL;
    if (t->idle_tail)
        t->idle_tail->idle_next = c;
    else
        t->idle_head = c;
    t->idle_tail = c;
    c->in_idle = 1;
}

/* Close c: shutdown(2) makes MHD see the end of the stream and close it. */
static void evict(skd_conns *t, skd_conn *c, const char *why)
{
    if (c->evicted)
        return;
    c->evicted = 1;
    t->live--;
    idle_remove(t, c);
    skd_debug("http: closing connection %llu (%s)", (unsigned long long)c->id, why);
    if (c->fd >= 0)
        shutdown(c->fd, SHUT_RDWR);
}

static void unwatch(skd_conns *t, skd_conn *c)
{
    if (c->watched) {
        epoll_ctl(t->ep, EPOLL_CTL_DEL, c->fd, NULL);
        c->watched = 0;
    }
}

/* ---- MHD notifications ------------------------------------------------- */

static void conn_started(skd_conns *t, struct MHD_Connection *mc, void **ctx)
{
    const union MHD_ConnectionInfo *fi =
        MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CONNECTION_FD);
    skd_conn *c = calloc(1, sizeof(*c));
    if (!c) {
        /* Without an entry nothing bounds this connection: refuse it. */
        if (fi)
            shutdown(fi->connect_fd, SHUT_RDWR);
        return;
    }
    c->mhd = mc;
    c->fd = fi ? fi->connect_fd : -1;
    c->phase = P_IDLE;
    c->since_ms = skd_mono_ms();
    pthread_mutex_lock(&t->mu);
    c->id = ++t->next_id;
    c->next = t->all;
    if (t->all)
        t->all->prev = c;
    t->all = c;
    t->n++;
    t->live++;
    if (t->n > t->peak)
        t->peak = t->n;
    /* Over the cap: the longest-idle connection goes, else this one. */
    if (t->live > t->o.cap)
        evict(t, t->idle_head ? t->idle_head : c, "connection cap reached");
    if (!c->evicted)
        idle_append(t, c);
    pthread_mutex_unlock(&t->mu);
    *ctx = c;
}

static void conn_closed(skd_conns *t, skd_conn *c)
{
    pthread_mutex_lock(&t->mu);
    while (c->firing)
        pthread_cond_wait(&t->cv, &t->mu);
    idle_remove(t, c);
    unwatch(t, c);
    if (c->prev)
        c->prev->next = c->next;
    else
        t->all = c->next;
    if (c->next)
        c->next->prev = c->prev;
    t->n--;
    if (!c->evicted)
        t->live--;
    struct skd_sse *sse = c->sse;
    c->sse = NULL;
    pthread_mutex_unlock(&t->mu);
    skd__sse_unref(sse);
    free(c);
}

void skd__conns_notify(void *cls, struct MHD_Connection *mc, void **socket_context,
                       enum MHD_ConnectionNotificationCode code)
{
    skd_conns *t = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED)
        conn_started(t, mc, socket_context);
    else if (code == MHD_CONNECTION_NOTIFY_CLOSED && *socket_context) {
        conn_closed(t, *socket_context);
        *socket_context = NULL;
    }
}

skd_conn *skd__conns_of(struct MHD_Connection *mc)
{
    const union MHD_ConnectionInfo *i =
        MHD_get_connection_info(mc, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return i ? i->socket_context : NULL;
}

/* ---- request phases --------------------------------------------------- */

void skd__conn_request_begin(skd_conns *t, skd_conn *c, skd_cancel *cancel)
{
    if (!c)
        return;
    pthread_mutex_lock(&t->mu);
    idle_remove(t, c);
    c->phase = P_BODY;
    c->since_ms = skd_mono_ms();
    c->cancel = cancel;
    c->hung_up = 0;
    pthread_mutex_unlock(&t->mu);
}

void skd__conn_request_read(skd_conns *t, skd_conn *c)
{
    if (!c)
        return;
    pthread_mutex_lock(&t->mu);
    c->phase = P_WORK;
    pthread_mutex_unlock(&t->mu);
}

void skd__conn_request_stream(skd_conns *t, skd_conn *c, struct skd_sse *sse)
{
    if (!c)
        return;
    skd__sse_ref(sse);
    pthread_mutex_lock(&t->mu);
    struct skd_sse *old = c->sse;
    c->sse = sse;
    c->phase = P_STREAM;
    pthread_mutex_unlock(&t->mu);
    skd__sse_unref(old);
}

void skd__conn_request_end(skd_conns *t, skd_conn *c)
{
    if (!c)
        return;
    pthread_mutex_lock(&t->mu);
    while (c->firing)
        pthread_cond_wait(&t->cv, &t->mu);
    c->cancel = NULL;
    struct skd_sse *sse = c->sse;
    c->sse = NULL;
    c->phase = P_IDLE;
    c->since_ms = skd_mono_ms();
    if (!c->evicted)
        idle_append(t, c);
    pthread_mutex_unlock(&t->mu);
    skd__sse_unref(sse);
}

void skd__conn_suspend(skd_conns *t, skd_conn *c)
{
    if (!c)
        return;
    pthread_mutex_lock(&t->mu);
    c->suspended = 1;
    c->susp_ms = skd_mono_ms();
    t->nsuspended++;
    if (!c->watched && c->fd >= 0) {
        /* Hang-ups only: data a client pipelines behind this request must
         * not wake the watcher. */
        struct epoll_event ev = {.events = EPOLLRDHUP | EPOLLONESHOT, .data.u64 = c->id};
        if (epoll_ctl(t->ep, EPOLL_CTL_ADD, c->fd, &ev) == 0)
            c->watched = 1;
    }
    pthread_mutex_unlock(&t->mu);
    MHD_suspend_connection(c->mhd);
}

void skd__conn_resume(skd_conns *t, skd_conn *c)
{
    if (!c)
        return;
    pthread_mutex_lock(&t->mu);
    unwatch(t, c);
    if (c->suspended) {
        c->suspended = 0;
        t->nsuspended--;
        pthread_cond_broadcast(&t->cv);
    }
    pthread_mutex_unlock(&t->mu);
    MHD_resume_connection(c->mhd);
}

int skd__conn_hung_up(skd_conns *t, skd_conn *c)
{
    if (!c)
        return 0;
    pthread_mutex_lock(&t->mu);
    int h = c->hung_up;
    pthread_mutex_unlock(&t->mu);
    return h;
}

size_t skd__conns_count(skd_conns *t)
{
    pthread_mutex_lock(&t->mu);
    size_t n = t->n;
    pthread_mutex_unlock(&t->mu);
    return n;
}

/* ---- the watcher ------------------------------------------------------- */

struct poke {
    struct skd_sse *sse; /* a reference */
    int hung_up;
};

static skd_conn *find(skd_conns *t, uint64_t id)
{
    for (skd_conn *c = t->all; c; c = c->next)
        if (c->id == id)
            return c;
    return NULL;
}

/* A client hung up while suspended: fire its request's token outside the
 * lock (the hook may take other locks), with c->firing holding off the
 * end of the request, which frees the token. */
static void hang_up(skd_conns *t, skd_conn *c, struct poke *pokes, size_t *np)
{
    c->hung_up = 1;
    unwatch(t, c);
    if (c->sse && *np < MAX_POKES) {
        skd__sse_ref(c->sse);
        pokes[(*np)++] = (struct poke){c->sse, 1};
    }
    if (c->cancel) {
        skd_cancel *k = c->cancel;
        c->firing = 1;
        pthread_mutex_unlock(&t->mu);
        skd_cancel_fire(k);
        pthread_mutex_lock(&t->mu);
        c->firing = 0;
        pthread_cond_broadcast(&t->cv);
    }
}

static void *watcher_main(void *arg)
{
    skd_conns *t = arg;
    struct epoll_event evs[MAX_EVENTS];
    struct poke pokes[MAX_POKES];
    int64_t last_scan = 0;
    for (;;) {
        int n = epoll_wait(t->ep, evs, MAX_EVENTS, TICK_MS);
        size_t np = 0;
        pthread_mutex_lock(&t->mu);
        if (t->quit) {
            pthread_mutex_unlock(&t->mu);
            break;
        }
        for (int i = 0; i < n; i++) {
            if (evs[i].data.u64 == 0) { /* the wake eventfd */
                uint64_t v;
                if (read(t->wake_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
                    skd_debug("http: watcher wake read failed");
                continue;
            }
            skd_conn *c = find(t, evs[i].data.u64);
            if (c && c->watched)
                hang_up(t, c, pokes, &np);
        }
        int64_t now = skd_mono_ms();
        if (now - last_scan >= TICK_MS || t->stopping) {
            last_scan = now;
            for (skd_conn *c = t->all; c; c = c->next) {
                if (c->evicted)
                    continue;
                if (c->phase == P_IDLE && now - c->since_ms > t->o.header_ms)
                    evict(t, c, "header timeout");
                else if (c->phase == P_BODY && now - c->since_ms > t->o.body_ms)
                    evict(t, c, "body timeout");
                else if (c->phase == P_STREAM && c->sse && c->suspended && np < MAX_POKES &&
                         (t->stopping || now - c->susp_ms >= t->o.keepalive_ms)) {
                    skd__sse_ref(c->sse);
                    pokes[np++] = (struct poke){c->sse, 0};
                }
            }
        }
        int stopping = t->stopping;
        int trim = t->peak >= TRIM_PEAK && t->n <= t->peak / 4;
        if (trim)
            t->peak = t->n;
        pthread_mutex_unlock(&t->mu);
        for (size_t i = 0; i < np; i++) {
            skd__sse_poke(pokes[i].sse, now, pokes[i].hung_up || stopping);
            skd__sse_unref(pokes[i].sse);
        }
        if (trim) {
            skd_debug("http: connections fell to a quarter of their peak; returning free memory");
            malloc_trim(0);
        }
    }
    return NULL;
}

static void wake(skd_conns *t)
{
    uint64_t one = 1;
    if (write(t->wake_fd, &one, sizeof(one)) < 0)
        skd_debug("http: watcher wake failed");
}

size_t skd__conns_quiesce(skd_conns *t, int wait_ms)
{
    int64_t deadline = skd_mono_ms() + wait_ms;
    pthread_mutex_lock(&t->mu);
    t->stopping = 1;
    pthread_mutex_unlock(&t->mu);
    wake(t);
    pthread_mutex_lock(&t->mu);
    while (t->nsuspended > 0 && skd_mono_ms() < deadline) {
        pthread_mutex_unlock(&t->mu);
        wake(t); /* streams suspended after the last scan end too */
        usleep(20 * 1000);
        pthread_mutex_lock(&t->mu);
    }
    size_t left = t->nsuspended;
    pthread_mutex_unlock(&t->mu);
    return left;
}

int skd__conns_new(const skd_conns_opts *o, skd_conns **out, skd_err *err)
{
    *out = NULL;
    skd_conns *t = calloc(1, sizeof(*t));
    if (!t)
        return skd_err_set(err, SKD_ENOMEM, "out of memory");
    t->o = *o;
    t->ep = t->wake_fd = -1;
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->cv, NULL);
    t->ep = epoll_create1(EPOLL_CLOEXEC);
    t->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = 0};
    if (t->ep < 0 || t->wake_fd < 0 || epoll_ctl(t->ep, EPOLL_CTL_ADD, t->wake_fd, &ev) != 0) {
        skd__conns_free(t);
        return skd_err_set(err, SKD_EINTERNAL, "cannot create the connection watcher: %s",
                           strerror(errno));
    }
    if (pthread_create(&t->watcher, NULL, watcher_main, t) != 0) {
        skd__conns_free(t);
        return skd_err_set(err, SKD_EINTERNAL, "cannot start the connection watcher");
    }
    t->watcher_running = 1;
    *out = t;
    return 0;
}

void skd__conns_free(skd_conns *t)
{
    if (!t)
        return;
    if (t->watcher_running) {
        pthread_mutex_lock(&t->mu);
        t->quit = 1;
        pthread_mutex_unlock(&t->mu);
        wake(t);
        pthread_join(t->watcher, NULL);
    }
    /* MHD has stopped and closed every connection by now. */
    while (t->all) {
        skd_conn *c = t->all;
        t->all = c->next;
        skd__sse_unref(c->sse);
        free(c);
    }
    if (t->ep >= 0)
        close(t->ep);
    if (t->wake_fd >= 0)
        close(t->wake_fd);
    pthread_cond_destroy(&t->cv);
    pthread_mutex_destroy(&t->mu);
    free(t);
}
