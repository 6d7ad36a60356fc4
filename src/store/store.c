/*
 * The store (see include/skilld/store.h): opening either backend, the
 * pool's size and timeouts, and the health check. The schema lives in
 * migrations.c, the pool and query API in pool.c, the backends in sqlite.c
 * and pg.c; the tables' own files (keys.c, audit.c, ...) run their
 * statements through the query API and never see which backend answers.
 */
#include "store/store_internal.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

int skd_store_is_url(const char *where)
{
    return where &&
           (strncmp(where, "postgresql://", 13) == 0 || strncmp(where, "postgres://", 11) == 0);
}

const char *skd_store_backend(const skd_store *st)
{
    return st && st->kind == SKD__STORE_PG ? "postgresql" : "sqlite";
}

static void defaults(skd_store_opts *o)
{
    if (o->pool_size <= 0)
        o->pool_size = 8;
    if (o->busy_timeout_ms <= 0)
        o->busy_timeout_ms = 5000;
    if (o->connect_timeout_s <= 0)
        o->connect_timeout_s = 2;
    if (o->statement_timeout_ms <= 0)
        o->statement_timeout_ms = 5000;
    if (o->audit_flush_ms <= 0)
        o->audit_flush_ms = 20;
}

/* First connection: WAL (SQLite; persistent, and not allowed inside a
 * transaction) and the migrations.
 *
 * Switching a fresh SQLite database to WAL needs its exclusive lock, and
 * SQLite does not call the busy handler for that lock: when several
 * processes open a new database at once, all but one can get "database is
 * locked" at once (seen in test_store_concurrency). So a busy or locked
 * failure here is tried again, every 20 ms, until the busy timeout. */
static int prepare_schema(skd_store *st, skd_err *err)
{
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        skd__conn *c = NULL;
        int rc = skd__conn_get(st, &c, err);
        if (rc)
            return rc;
        c->busy = 0;
        if (st->kind == SKD__STORE_SQLITE)
            rc = skd__conn_exec(c, "PRAGMA journal_mode=WAL;", err);
        if (rc == 0)
            rc = skd__store_migrate(c, err);
        int again = rc != 0 && st->kind == SKD__STORE_SQLITE && c->busy;
        skd__conn_put(st, c);
        clock_gettime(CLOCK_MONOTONIC, &now);
        long ms = (now.tv_sec - t0.tv_sec) * 1000L + (now.tv_nsec - t0.tv_nsec) / 1000000L;
        if (!again || ms >= st->opts.busy_timeout_ms)
            return rc;
        struct timespec nap = {0, 20 * 1000000L};
        nanosleep(&nap, NULL);
    }
}

int skd_store_open_opts(const char *where, const skd_store_opts *opts, skd_store **out,
                        skd_err *err)
{
    *out = NULL;
    if (!where || !*where)
        return skd_err_set(err, SKD_ECONFIG, "store: no database path or URL given");
    skd_store *st = calloc(1, sizeof(*st));
    if (!st)
        return skd_err_set(err, SKD_ENOMEM, "out of memory");
    int rc;
    pthread_mutex_init(&st->mu, NULL);
    pthread_mutex_init(&st->rep_mu, NULL);
    pthread_cond_init(&st->cv, NULL);
    st->kind = skd_store_is_url(where) ? SKD__STORE_PG : SKD__STORE_SQLITE;
    if (opts)
        st->opts = *opts;
    defaults(&st->opts);
    if (!(st->where = strdup(where))) {
        rc = skd_err_set(err, SKD_ENOMEM, "out of memory");
        goto out;
    }
    if ((rc = skd__pool_init(st, err)) != 0 || (rc = prepare_schema(st, err)) != 0 ||
        (rc = skd__audit_init(st, err)) != 0 || (rc = skd__keycache_init(st, err)) != 0)
        goto out;
    *out = st;
    return 0;
out:
    skd_store_close(st);
    return rc;
}

int skd_store_open(const char *where, skd_store **out, skd_err *err)
{
    return skd_store_open_opts(where, NULL, out, err);
}

void skd_store_close(skd_store *st)
{
    if (!st)
        return;
    skd__audit_free(st); /* first: its last batch needs the pool */
    skd__replica_free(st);
    skd__pool_free(st);
    skd__keycache_free(st);
    pthread_cond_destroy(&st->cv);
    pthread_mutex_destroy(&st->mu);
    pthread_mutex_destroy(&st->rep_mu);
    free(st->where);
    free(st);
}

/* Reads a table page, so a file that went bad is noticed too. */
static skd__sql q_ping = SKD__SQL("SELECT 1 FROM api_keys LIMIT 1");

int skd_store_ping(skd_store *st, skd_err *err)
{
    skd__conn *c = NULL;
    skd__q q;
    int rc = skd__conn_get(st, &c, err);
    if (rc)
        return rc;
    if ((rc = skd__q_start(c, &q_ping, &q, err)) == 0) {
        rc = skd__q_step(&q, err);
        if (rc == 1)
            rc = 0;
        skd__q_end(&q);
    }
    skd__conn_put(st, c);
    return rc;
}

void skd_store_set_draining(skd_store *st, int on)
{
    __atomic_store_n(&st->draining, on ? 1 : 0, __ATOMIC_RELEASE);
}

int skd_store_draining(skd_store *st)
{
    return st ? __atomic_load_n(&st->draining, __ATOMIC_ACQUIRE) : 0;
}
