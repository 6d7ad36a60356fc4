/*
 * SSE streams (see sse.h). The producer (a worker thread running a skill,
 * the registry's change callback) appends whole frames to a capped buffer;
 * an MHD event thread copies them out in the reader callback. The reader
 * never blocks: with nothing to send it suspends its connection, and the
 * producer (a new frame, the end), the connection watcher (keep-alive due,
 * hang-up, server stop) resumes it. An SSE comment goes out after 15 s of
 * silence so proxies keep the stream open. Both sides hold a reference;
 * the last one frees.
 */
#include "server/sse.h"
#include "server/calls.h"
#include "server/conns.h"

#include "skilld/buf.h"
#include "skilld/util.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct skd_sse {
    atomic_int refs;
    pthread_mutex_t mu;
    skd_conns *conns; /* the connection streaming this, once bound */
    skd_conn *conn;
    int suspended; /* the reader suspended conn; resume it to go on */
    skd_buf q;     /* unsent bytes from pos */
    size_t pos;
    int closed; /* no more messages */
    int gone;   /* the client left or the stream ended */
    const atomic_int *stopping;
    int64_t last_sent_ms;
};

skd_sse *skd__sse_new(size_t max_bytes, const atomic_int *stopping)
{
    skd_sse *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    atomic_init(&s->refs, 1);
    pthread_mutex_init(&s->mu, NULL);
    skd_buf_init(&s->q, max_bytes);
    s->stopping = stopping;
    s->last_sent_ms = skd_mono_ms();
    return s;
}

void skd__sse_ref(skd_sse *s)
{
    atomic_fetch_add(&s->refs, 1);
}

void skd__sse_unref(skd_sse *s)
{
    if (!s || atomic_fetch_sub(&s->refs, 1) != 1)
        return;
    skd_buf_free(&s->q);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

/* Let the reader run again (s->mu held). */
static void wake(skd_sse *s)
{
    if (s->suspended) {
        s->suspended = 0;
        skd__conn_resume(s->conns, s->conn);
    }
}

void skd__sse_bind(skd_sse *s, skd_conns *conns, skd_conn *conn)
{
    pthread_mutex_lock(&s->mu);
    s->conns = conns;
    s->conn = conn;
    pthread_mutex_unlock(&s->mu);
}

void skd__sse_poke(skd_sse *s, int64_t now_ms, int end)
{
    pthread_mutex_lock(&s->mu);
    if (end)
        s->gone = 1;
    if (end || now_ms - s->last_sent_ms >= SKD__SSE_KEEPALIVE_MS)
        wake(s);
    pthread_mutex_unlock(&s->mu);
}

void skd__sse_send(void *arg, const json_t *msg)
{
    skd__sse_send_event(arg, "message", msg);
}

void skd__sse_send_event(void *arg, const char *event, const json_t *msg)
{
    skd_sse *s = arg;
    char *data = json_dumps(msg, JSON_COMPACT);
    if (!data)
        return;
    pthread_mutex_lock(&s->mu);
    if (!s->gone && !s->closed) {
        /* Compact JSON has no raw newline, so one data: line is enough.
         * Drop the bytes already sent first, so the cap counts unsent bytes
         * only: a client that keeps up, even a frame behind, is never cut. */
        if (s->pos > 0) {
            memmove(s->q.data, s->q.data + s->pos, s->q.len - s->pos);
            s->q.len -= s->pos;
            s->pos = 0;
        }
        size_t before = s->q.len;
        if (skd_buf_puts(&s->q, "event: ") || skd_buf_puts(&s->q, event) ||
            skd_buf_puts(&s->q, "\ndata: ") || skd_buf_puts(&s->q, data) ||
            skd_buf_puts(&s->q, "\n\n")) {
            s->q.len = before;
            s->gone = 1; /* too much unsent data: end the stream */
        }
        wake(s);
    }
    pthread_mutex_unlock(&s->mu);
    free(data);
}

void skd__sse_close(skd_sse *s)
{
    pthread_mutex_lock(&s->mu);
    s->closed = 1;
    wake(s);
    pthread_mutex_unlock(&s->mu);
}

int skd__sse_gone(skd_sse *s)
{
    pthread_mutex_lock(&s->mu);
    int g = s->gone;
    pthread_mutex_unlock(&s->mu);
    return g;
}

ssize_t skd__sse_read(skd_sse *s, char *buf, size_t max)
{
    ssize_t n = 0;
    pthread_mutex_lock(&s->mu);
    int64_t now = skd_mono_ms();
    if (s->pos < s->q.len) {
        size_t avail = s->q.len - s->pos;
        n = (ssize_t)(avail < max ? avail : max);
        memcpy(buf, s->q.data + s->pos, (size_t)n);
        s->pos += (size_t)n;
    } else if (s->gone || s->closed || (s->stopping && atomic_load(s->stopping))) {
        s->gone = 1;
        n = MHD_CONTENT_READER_END_OF_STREAM;
    } else if (now - s->last_sent_ms >= SKD__SSE_KEEPALIVE_MS && max >= 3) {
        memcpy(buf, ":\n\n", 3);
        n = 3;
    } else if (s->conn && !s->suspended) {
        /* Nothing to send: park the connection until there is. */
        s->suspended = 1;
        skd__conn_suspend(s->conns, s->conn);
    }
    if (n > 0)
        s->last_sent_ms = now;
    pthread_mutex_unlock(&s->mu);
    return n;
}

static ssize_t reader(void *cls, uint64_t offset, char *buf, size_t max)
{
    (void)offset;
    return skd__sse_read(cls, buf, max);
}

static void reader_free(void *cls)
{
    skd_sse *s = cls;
    pthread_mutex_lock(&s->mu);
    s->gone = 1;
    pthread_mutex_unlock(&s->mu);
    skd__sse_unref(s);
}

struct MHD_Response *skd__sse_response(skd_sse *s)
{
    skd__sse_ref(s);
    struct MHD_Response *r =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, reader, s, reader_free);
    if (!r) {
        skd__sse_unref(s);
        return NULL;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache, no-store");
    MHD_add_response_header(r, "X-Accel-Buffering", "no");
    return r;
}

struct sse_task {
    void (*run)(void *arg, skd_sse *sse);
    void *arg;
    skd_sse *sse;
};

static void sse_task_run(void *p)
{
    struct sse_task *t = p;
    t->run(t->arg, t->sse);
    skd__sse_close(t->sse);
    skd__sse_unref(t->sse);
    free(t);
}

int skd__sse_spawn(struct skd_calls *calls, size_t workers, size_t max_bytes,
                   void (*run)(void *arg, skd_sse *sse), void *arg, struct MHD_Response **resp,
                   skd_sse **stream)
{
    *resp = NULL;
    *stream = NULL;
    struct sse_task *t = calloc(1, sizeof(*t));
    skd_sse *sse = skd__sse_new(max_bytes, NULL);
    struct MHD_Response *r = sse ? skd__sse_response(sse) : NULL;
    if (!t || !r) {
        free(t);
        if (r)
            MHD_destroy_response(r);
        skd__sse_unref(sse);
        return SKD_ENOMEM;
    }
    *t = (struct sse_task){run, arg, sse};
    if (skd__calls_spawn(calls, workers, sse_task_run, t) != 0) {
        free(t);
        skd__sse_unref(sse);
        MHD_destroy_response(r);
        return SKD_EBUSY;
    }
    *resp = r; /* the response holds its own reference to the stream */
    *stream = sse;
    return 0;
}
