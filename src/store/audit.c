/*
 * The execution audit: one row per skill call with a digest of the input,
 * never the input itself. Reads are always scoped to one key.
 *
 * Rows are written in batches: skd_store_audit_add copies the row into a
 * bounded queue and returns; one writer thread per store (started with the
 * first row) waits audit_flush_ms after the oldest queued row and writes
 * everything queued in one transaction, so a call costs no transaction of
 * its own. A crash (kill -9, power loss) loses at most the rows of that
 * window; a clean close (SIGTERM ends in skd_store_close) writes them all,
 * and so does every reader of the audit in this process before it reads.
 * Writes are kept in order by flush_mu. A batch the store refuses
 * (unavailable, locked) stays queued and is tried again a window later;
 * when the queue is full the caller flushes it itself, and when even that
 * fails it writes its own row at once and gets the store's error (the
 * engine logs it): nothing is dropped silently. audit_sync writes each row
 * before returning, unbatched.
 */
#include "skilld/log.h"
#include "skilld/util.h"
#include "store/store_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define AUDIT_COLS                                                                                 \
    "id,key_id,skill,version,status,error_code,duration_ms,created_ms,input_sha256,egress,"        \
    "sandbox_runs,cpu_us,mem_peak_bytes,egress_bytes,workspace_bytes"
/* Rows queued at most before a caller flushes the queue itself. */
#define QUEUE_CAP 1024

static skd__sql q_add = SKD__SQL("INSERT INTO executions(" AUDIT_COLS
                                 ") VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15)");
static skd__sql q_list = SKD__SQL("SELECT " AUDIT_COLS " FROM executions WHERE key_id=?1 "
                                  "ORDER BY created_ms DESC, rowid DESC LIMIT ?2");
static skd__sql q_get =
    SKD__SQL("SELECT " AUDIT_COLS " FROM executions WHERE (?1 = '' OR key_id=?1) AND id=?2");
static skd__sql q_query = SKD__SQL(
    "SELECT " AUDIT_COLS " FROM executions WHERE (?1 = '' OR key_id=?1) AND (?2 = '' OR skill=?2)"
    " AND (?3 = '' OR status=?3) AND created_ms >= ?4 AND created_ms < ?5"
    " ORDER BY created_ms DESC, rowid DESC LIMIT ?6");

struct row {
    struct row *next;
    skd_audit a; /* its strings point into text */
    char text[];
};

struct skd__auditq {
    pthread_mutex_t mu;       /* guards everything below but flush_mu */
    pthread_cond_t cv;        /* CLOCK_MONOTONIC: the writer waits here */
    pthread_mutex_t flush_mu; /* one batch at a time, in queue order */
    struct row *head, **tail;
    int n;
    int64_t due_ms; /* mono time the queue is to be written by */
    int started, stop;
    pthread_t thread;
    int flush_ms, sync;
};

/* One row on c (in its transaction, or on its own). */
static int insert_row(skd__conn *c, const skd_audit *a, skd_err *err)
{
    skd__q q = {0};
    int rc = skd__q_start(c, &q_add, &q, err);
    if (rc)
        return rc;
    skd__q_text(&q, 1, a->id);
    skd__q_text(&q, 2, a->key_id);
    skd__q_text(&q, 3, a->skill ? a->skill : "");
    skd__q_text(&q, 4, a->version ? a->version : "");
    skd__q_text(&q, 5, a->status);
    skd__q_text(&q, 6, a->error_code);
    skd__q_int(&q, 7, a->duration_ms);
    skd__q_int(&q, 8, a->created_ms);
    skd__q_text(&q, 9, a->input_digest ? a->input_digest : "");
    skd__q_text(&q, 10, a->egress); /* NULL for a call without network */
    skd__q_int(&q, 11, a->sandbox_runs);
    skd__q_int(&q, 12, a->cpu_us);
    skd__q_int(&q, 13, a->mem_peak_bytes);
    skd__q_int(&q, 14, a->egress_bytes);
    skd__q_int(&q, 15, a->workspace_bytes);
    rc = skd__q_run(&q, NULL, err);
    skd__q_end(&q);
    return rc;
}

static int write_one(skd_store *st, const skd_audit *a, skd_err *err)
{
    skd__conn *c = NULL;
    int rc = skd__conn_get(st, &c, err);
    if (rc == 0)
        rc = insert_row(c, a, err);
    skd__conn_put(st, c);
    return rc;
}

static void free_rows(struct row *r)
{
    while (r) {
        struct row *next = r->next;
        free(r);
        r = next;
    }
}

/* Write the rows of list; *left gets those still to write (the store
 * failed: SKD_ESTORE). A batch refused for one row (a duplicate id) is
 * written row by row, and the row refused is logged and dropped. */
static int write_batch(skd_store *st, struct row *list, struct row **left, skd_err *err)
{
    skd__conn *c = NULL;
    *left = list;
    int rc = skd__conn_get(st, &c, err);
    if (rc)
        return rc;
    if ((rc = skd__conn_begin(c, err)) == 0) {
        for (struct row *r = list; r && rc == 0; r = r->next)
            rc = insert_row(c, &r->a, err);
        if (rc == 0 && (rc = skd__conn_commit(c, err)) == 0) {
            *left = NULL;
            skd__conn_put(st, c);
            free_rows(list);
            return 0;
        }
        skd__conn_rollback(c);
    }
    if (rc == SKD_EEXISTS) {
        rc = 0;
        while (list && rc != SKD_ESTORE) {
            skd_err e1 = {0};
            rc = insert_row(c, &list->a, &e1);
            if (rc == SKD_ESTORE) {
                skd_err_set(err, rc, "%s", e1.msg);
                break;
            }
            if (rc)
                skd_warn("audit row %s not written: %s", list->a.id, skd_err_msg(&e1));
            struct row *next = list->next;
            free(list);
            list = next;
        }
        *left = list;
        rc = list ? SKD_ESTORE : 0;
    }
    skd__conn_put(st, c);
    return rc;
}

int skd_store_audit_flush(skd_store *st, skd_err *err)
{
    struct skd__auditq *aq = st->aq;
    if (!aq)
        return 0;
    pthread_mutex_lock(&aq->flush_mu);
    pthread_mutex_lock(&aq->mu);
    struct row *list = aq->head;
    aq->head = NULL;
    aq->tail = &aq->head;
    aq->n = 0;
    pthread_mutex_unlock(&aq->mu);
    int rc = 0;
    if (list) {
        struct row *left = NULL;
        rc = write_batch(st, list, &left, err);
        if (left) { /* back in front of what came meanwhile, tried again later */
            int k = 0;
            struct row **end = &left;
            while (*end) {
                end = &(*end)->next;
                k++;
            }
            pthread_mutex_lock(&aq->mu);
            *end = aq->head;
            if (!aq->head)
                aq->tail = end;
            aq->head = left;
            aq->n += k;
            aq->due_ms = skd_mono_ms() + (aq->flush_ms > 100 ? aq->flush_ms : 100);
            pthread_mutex_unlock(&aq->mu);
        }
    }
    pthread_mutex_unlock(&aq->flush_mu);
    return rc;
}

static void *writer(void *arg)
{
    skd_store *st = arg;
    struct skd__auditq *aq = st->aq;
    pthread_mutex_lock(&aq->mu);
    while (!aq->stop) {
        if (aq->n == 0) {
            pthread_cond_wait(&aq->cv, &aq->mu);
            continue;
        }
        int64_t now = skd_mono_ms();
        if (now < aq->due_ms) {
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            int64_t ms = aq->due_ms - now;
            ts.tv_sec += ms / 1000;
            ts.tv_nsec += (ms % 1000) * 1000000L;
            if (ts.tv_nsec >= 1000000000L) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000L;
            }
            pthread_cond_timedwait(&aq->cv, &aq->mu, &ts);
            continue;
        }
        pthread_mutex_unlock(&aq->mu);
        skd_err err = {0};
        if (skd_store_audit_flush(st, &err))
            skd_debug("audit rows not written yet (tried again in a moment): %s",
                      skd_err_msg(&err));
        pthread_mutex_lock(&aq->mu);
    }
    pthread_mutex_unlock(&aq->mu);
    return NULL;
}

int skd__audit_init(skd_store *st, skd_err *err)
{
    struct skd__auditq *aq = calloc(1, sizeof(*aq));
    if (!aq)
        return skd_err_set(err, SKD_ENOMEM, "out of memory");
    pthread_mutex_init(&aq->mu, NULL);
    pthread_mutex_init(&aq->flush_mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&aq->cv, &ca);
    pthread_condattr_destroy(&ca);
    aq->tail = &aq->head;
    aq->flush_ms = st->opts.audit_flush_ms;
    aq->sync = st->opts.audit_sync;
    st->aq = aq;
    return 0;
}

void skd__audit_free(skd_store *st)
{
    struct skd__auditq *aq = st->aq;
    if (!aq)
        return;
    pthread_mutex_lock(&aq->mu);
    aq->stop = 1;
    pthread_cond_signal(&aq->cv);
    int started = aq->started;
    pthread_mutex_unlock(&aq->mu);
    if (started)
        pthread_join(aq->thread, NULL);
    skd_err err = {0};
    if (skd_store_audit_flush(st, &err) != 0)
        skd_warn("%d audit row(s) not written at close: %s", aq->n, skd_err_msg(&err));
    free_rows(aq->head);
    pthread_cond_destroy(&aq->cv);
    pthread_mutex_destroy(&aq->mu);
    pthread_mutex_destroy(&aq->flush_mu);
    free(aq);
    st->aq = NULL;
}

/* a copied into one allocation. */
static struct row *copy_row(const skd_audit *a)
{
    const char *src[8] = {a->id,     a->key_id,     a->skill,        a->version,
                          a->status, a->error_code, a->input_digest, a->egress};
    size_t len[8], total = 0;
    for (int i = 0; i < 8; i++) {
        len[i] = src[i] ? strlen(src[i]) + 1 : 0;
        total += len[i];
    }
    struct row *r = malloc(sizeof(*r) + total);
    if (!r)
        return NULL;
    const char *dst[8];
    char *p = r->text;
    for (int i = 0; i < 8; i++) {
        dst[i] = src[i] ? p : NULL;
        if (src[i]) {
            memcpy(p, src[i], len[i]);
            p += len[i];
        }
    }
    r->next = NULL;
    r->a = *a;
    r->a.id = dst[0];
    r->a.key_id = dst[1];
    r->a.skill = dst[2];
    r->a.version = dst[3];
    r->a.status = dst[4];
    r->a.error_code = dst[5];
    r->a.input_digest = dst[6];
    r->a.egress = dst[7];
    return r;
}

int skd_store_audit_add(skd_store *st, const skd_audit *a, skd_err *err)
{
    struct skd__auditq *aq = st->aq;
    if (!aq || aq->sync)
        return write_one(st, a, err);
    struct row *r = copy_row(a);
    if (!r)
        return write_one(st, a, err);
    pthread_mutex_lock(&aq->mu);
    if (aq->n >= QUEUE_CAP) { /* the writer is behind: help it */
        pthread_mutex_unlock(&aq->mu);
        skd_store_audit_flush(st, NULL);
        pthread_mutex_lock(&aq->mu);
    }
    if (aq->stop || aq->n >= QUEUE_CAP) { /* closing, or the store is down */
        pthread_mutex_unlock(&aq->mu);
        free(r);
        return write_one(st, a, err);
    }
    if (!aq->started) {
        if (pthread_create(&aq->thread, NULL, writer, st) != 0) {
            pthread_mutex_unlock(&aq->mu);
            free(r);
            return write_one(st, a, err);
        }
        aq->started = 1;
    }
    *aq->tail = r;
    aq->tail = &r->next;
    if (aq->n++ == 0) {
        aq->due_ms = skd_mono_ms() + aq->flush_ms;
        pthread_cond_signal(&aq->cv);
    }
    pthread_mutex_unlock(&aq->mu);
    return 0;
}

static const char *col(skd__q *q, int i)
{
    const char *s = skd__q_col(q, i);
    return s ? s : "";
}

static json_t *row_json(skd__q *q)
{
    json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:I, s:I, s:s}", "id", col(q, 0), "keyId",
                          col(q, 1), "skill", col(q, 2), "version", col(q, 3), "status", col(q, 4),
                          "durationMs", (json_int_t)skd__q_col_int(q, 6), "createdAt",
                          (json_int_t)skd__q_col_int(q, 7), "inputSha256", col(q, 8));
    if (o) {
        const char *code = skd__q_col(q, 5);
        json_object_set_new(o, "errorCode", code ? json_string(code) : json_null());
        /* The egress record as the engine wrote it from the run's result; a
         * row without one has no "egress". */
        const char *eg = skd__q_col(q, 9);
        json_t *ej = eg ? json_loads(eg, 0, NULL) : NULL;
        if (json_is_array(ej))
            json_object_set_new(o, "egress", ej);
        else
            json_decref(ej);
        /* What the call used, as metered (skd_usage). */
        json_object_set_new(o, "usage",
                            json_pack("{s:I, s:I, s:I, s:I, s:I}", "sandboxRuns",
                                      (json_int_t)skd__q_col_int(q, 10), "sandboxCpuMs",
                                      (json_int_t)(skd__q_col_int(q, 11) / 1000),
                                      "sandboxMemoryPeakBytes", (json_int_t)skd__q_col_int(q, 12),
                                      "egressBytes", (json_int_t)skd__q_col_int(q, 13),
                                      "workspaceBytes", (json_int_t)skd__q_col_int(q, 14)));
    }
    return o;
}

json_t *skd_store_audit_list(skd_store *st, const char *key_id, int limit, skd_err *err)
{
    skd__conn *c = NULL;
    skd__q q = {0};
    json_t *arr = NULL;
    int rc;
    if (limit <= 0 || limit > 1000)
        limit = 100;
    /* Rows of calls already answered are read too. */
    if ((rc = skd_store_audit_flush(st, err)) ||
        (rc = skd__list_start(st, &q_list, &c, &q, &arr, err)))
        goto out;
    skd__q_text(&q, 1, key_id);
    skd__q_int(&q, 2, limit);
    while ((rc = skd__q_step(&q, err)) == 1)
        json_array_append_new(arr, row_json(&q));
out:
    return skd__list_end(st, c, &q, arr, rc);
}

json_t *skd_store_audit_query(skd_store *st, const skd_audit_filter *f, skd_err *err)
{
    skd__conn *c = NULL;
    skd__q q = {0};
    json_t *arr = NULL;
    int rc;
    int limit = f->limit <= 0 || f->limit > 1000 ? 100 : f->limit;
    if ((rc = skd_store_audit_flush(st, err)) ||
        (rc = skd__list_start(st, &q_query, &c, &q, &arr, err)))
        goto out;
    skd__q_text(&q, 1, f->key_id ? f->key_id : "");
    skd__q_text(&q, 2, f->skill ? f->skill : "");
    skd__q_text(&q, 3, f->status ? f->status : "");
    skd__q_int(&q, 4, f->since_ms);
    skd__q_int(&q, 5, f->until_ms > 0 ? f->until_ms : INT64_MAX / 2);
    skd__q_int(&q, 6, limit);
    while ((rc = skd__q_step(&q, err)) == 1)
        json_array_append_new(arr, row_json(&q));
out:
    return skd__list_end(st, c, &q, arr, rc);
}

json_t *skd_store_audit_get(skd_store *st, const char *key_id, const char *id, skd_err *err)
{
    skd__conn *c = NULL;
    skd__q q = {0};
    json_t *o = NULL;
    int rc;
    if ((rc = skd_store_audit_flush(st, err)) || (rc = skd__conn_get(st, &c, err)) ||
        (rc = skd__q_start(c, &q_get, &q, err)))
        goto out;
    skd__q_text(&q, 1, key_id ? key_id : "");
    skd__q_text(&q, 2, id);
    rc = skd__q_step(&q, err);
    if (rc == 1)
        o = row_json(&q);
    else if (rc == 0)
        skd_err_set(err, SKD_ENOENT, "no execution %s for this key", id);
out:
    skd__q_end(&q);
    skd__conn_put(st, c);
    return o;
}
