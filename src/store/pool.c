/*
 * The store's connection pool and the backend-neutral query API (see
 * store_internal.h). The pool's mutex guards only the free list: it is
 * never held while a backend works, so a statement waiting for SQLite's
 * write lock or for a PostgreSQL round trip stalls nobody but its caller.
 * Connections open lazily and a connection that failed is closed when it is
 * given back, so a database that went away is reconnected by the next
 * caller, not by a restart.
 */
#include "store/store_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int next_slot; /* statement slots handed out so far */

static int slot_of(skd__sql *sql, skd_err *err)
{
    int s = __atomic_load_n(&sql->slot, __ATOMIC_ACQUIRE);
    if (s)
        return s;
    int mine = __atomic_add_fetch(&next_slot, 1, __ATOMIC_ACQ_REL);
    if (mine > SKD__MAX_STMTS)
        return skd_err_set(err, SKD_EINTERNAL, "store: more than %d statements defined",
                           SKD__MAX_STMTS);
    int expected = 0;
    if (!__atomic_compare_exchange_n(&sql->slot, &expected, mine, 0, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE))
        return expected; /* another thread won; slot `mine` stays unused */
    return mine;
}

static void deadline_in(struct timespec *ts, int ms)
{
    clock_gettime(CLOCK_REALTIME, ts);
    ts->tv_sec += ms / 1000;
    ts->tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

static int connect_conn(skd__conn *c, skd_err *err)
{
    int rc = c->st->kind == SKD__STORE_PG ? skd__pg_connect(c, err) : skd__sqlite_connect(c, err);
    if (rc == 0) {
        pthread_mutex_lock(&c->st->mu);
        c->st->connects++;
        pthread_mutex_unlock(&c->st->mu);
    }
    return rc;
}

static void disconnect_conn(skd__conn *c)
{
    if (!c->db)
        return;
    if (c->st->kind == SKD__STORE_PG)
        skd__pg_disconnect(c);
    else
        skd__sqlite_disconnect(c);
    c->db = NULL;
    c->broken = 0;
}

int skd__conn_get(skd_store *st, skd__conn **out, skd_err *err)
{
    *out = NULL;
    struct timespec until;
    deadline_in(&until, st->opts.busy_timeout_ms);
    pthread_mutex_lock(&st->mu);
    while (st->nfree == 0 && !st->closing) {
        if (pthread_cond_timedwait(&st->cv, &st->mu, &until) == ETIMEDOUT && st->nfree == 0) {
            pthread_mutex_unlock(&st->mu);
            return skd_err_set(err, SKD_ESTORE, "store: all %d connections stayed busy for %d ms",
                               st->opts.pool_size, st->opts.busy_timeout_ms);
        }
    }
    if (st->closing) {
        pthread_mutex_unlock(&st->mu);
        return skd_err_set(err, SKD_ESTORE, "store: closing");
    }
    skd__conn *c = st->free_list[--st->nfree];
    pthread_mutex_unlock(&st->mu);
    if (c->db && st->kind == SKD__STORE_PG && !skd__pg_alive(c))
        disconnect_conn(c);
    if (!c->db) {
        int rc = connect_conn(c, err);
        if (rc) {
            skd__conn_put(st, c);
            return rc;
        }
    }
    *out = c;
    return 0;
}

void skd__conn_put(skd_store *st, skd__conn *c)
{
    if (!c)
        return;
    if (c->db) {
        if (st->kind == SKD__STORE_PG)
            skd__pg_release(c);
        else
            skd__sqlite_release(c);
    }
    if (c->broken)
        disconnect_conn(c);
    c->in_tx = 0;
    pthread_mutex_lock(&st->mu);
    st->free_list[st->nfree++] = c;
    pthread_cond_signal(&st->cv);
    pthread_mutex_unlock(&st->mu);
}

int skd__conn_kind(const skd__conn *c)
{
    return c->st->kind;
}

int skd__q_start(skd__conn *c, skd__sql *sql, skd__q *q, skd_err *err)
{
    memset(q, 0, sizeof(*q));
    int slot = slot_of(sql, err);
    if (slot < 0)
        return slot;
    q->c = c;
    q->sql = sql;
    int rc = c->st->kind == SKD__STORE_PG ? skd__pg_start(q, err) : skd__sqlite_start(q, err);
    if (rc)
        q->c = NULL;
    return rc;
}

int skd__list_start(skd_store *st, skd__sql *sql, skd__conn **c, skd__q *q, json_t **arr,
                    skd_err *err)
{
    int rc;
    if (!(*arr = json_array()))
        return skd_err_set(err, SKD_ENOMEM, "out of memory");
    if ((rc = skd__conn_get(st, c, err)) == 0)
        rc = skd__q_start(*c, sql, q, err);
    return rc;
}

json_t *skd__list_end(skd_store *st, skd__conn *c, skd__q *q, json_t *arr, int rc)
{
    skd__q_end(q);
    skd__conn_put(st, c);
    if (rc) {
        json_decref(arr);
        return NULL;
    }
    return arr;
}

void skd__q_text(skd__q *q, int i, const char *s)
{
    if (q->c->st->kind == SKD__STORE_PG)
        skd__pg_bind(q, i, s, NULL);
    else
        skd__sqlite_bind(q, i, s, NULL);
}

void skd__q_int(skd__q *q, int i, int64_t v)
{
    if (q->c->st->kind == SKD__STORE_PG)
        skd__pg_bind(q, i, NULL, &v);
    else
        skd__sqlite_bind(q, i, NULL, &v);
}

int skd__q_step(skd__q *q, skd_err *err)
{
    return q->c->st->kind == SKD__STORE_PG ? skd__pg_step(q, err) : skd__sqlite_step(q, err);
}

const char *skd__q_col(skd__q *q, int col)
{
    return q->c->st->kind == SKD__STORE_PG ? skd__pg_col(q, col) : skd__sqlite_col(q, col);
}

int64_t skd__q_col_int(skd__q *q, int col)
{
    const char *s = skd__q_col(q, col);
    return s ? strtoll(s, NULL, 10) : 0;
}

int skd__q_col_null(skd__q *q, int col)
{
    return skd__q_col(q, col) == NULL;
}

int64_t skd__q_changes(const skd__q *q)
{
    return q->changes;
}

void skd__q_end(skd__q *q)
{
    if (!q->c)
        return;
    if (q->c->st->kind == SKD__STORE_PG)
        skd__pg_end(q);
    else
        skd__sqlite_end(q);
    q->c = NULL;
}

int skd__q_run(skd__q *q, int64_t *changes, skd_err *err)
{
    int rc;
    while ((rc = skd__q_step(q, err)) == 1)
        ;
    if (rc == 0 && changes)
        *changes = q->changes;
    return rc;
}

int skd__conn_exec(skd__conn *c, const char *sql, skd_err *err)
{
    return c->st->kind == SKD__STORE_PG ? skd__pg_exec(c, sql, err) : skd__sqlite_exec(c, sql, err);
}

int skd__conn_begin(skd__conn *c, skd_err *err)
{
    int rc = skd__conn_exec(c, c->st->kind == SKD__STORE_PG ? "BEGIN" : "BEGIN IMMEDIATE", err);
    c->in_tx = rc == 0;
    return rc;
}

int skd__conn_commit(skd__conn *c, skd_err *err)
{
    int rc = skd__conn_exec(c, "COMMIT", err);
    if (rc == 0)
        c->in_tx = 0;
    return rc;
}

void skd__conn_rollback(skd__conn *c)
{
    skd__conn_exec(c, "ROLLBACK", NULL);
    c->in_tx = 0;
}

void skd__store_counters(skd_store *st, int64_t *prepares, int64_t *connects)
{
    pthread_mutex_lock(&st->mu);
    if (prepares)
        *prepares = st->prepares;
    if (connects)
        *connects = st->connects;
    pthread_mutex_unlock(&st->mu);
}

int skd__pool_init(skd_store *st, skd_err *err)
{
    int n = st->opts.pool_size;
    st->conns = calloc((size_t)n, sizeof(*st->conns));
    st->free_list = calloc((size_t)n, sizeof(*st->free_list));
    if (!st->conns || !st->free_list)
        return skd_err_set(err, SKD_ENOMEM, "out of memory");
    for (int i = 0; i < n; i++) {
        if (!(st->conns[i] = calloc(1, sizeof(skd__conn))))
            return skd_err_set(err, SKD_ENOMEM, "out of memory");
        st->conns[i]->st = st;
        st->free_list[st->nfree++] = st->conns[i];
    }
    return 0;
}

void skd__pool_free(skd_store *st)
{
    if (!st->conns)
        return;
    for (int i = 0; i < st->opts.pool_size; i++) {
        if (st->conns[i])
            disconnect_conn(st->conns[i]);
        free(st->conns[i]);
    }
    free(st->conns);
    free(st->free_list);
    st->conns = NULL;
    st->free_list = NULL;
}
