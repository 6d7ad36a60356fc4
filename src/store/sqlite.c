/*
 * The SQLite backend of the store: one database file in WAL mode, opened
 * once per pooled connection without SQLite's own mutex (the pool gives a
 * connection to one thread at a time). Each connection waits for the write
 * lock in its own busy handler, holding no lock of ours, and caches its
 * prepared statements by slot for the life of the connection.
 */
#include "store/store_internal.h"

#include <sqlite3.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

/* The wire error for SQLite result rc: a refused uniqueness constraint is
 * the caller's conflict, everything else means the store failed. */
static int fail(skd__conn *c, int rc, skd_err *err, const char *what)
{
    sqlite3 *db = c->db;
    int prim = rc & 0xff;
    c->busy = prim == SQLITE_BUSY || prim == SQLITE_LOCKED;
    if (prim == SQLITE_CONSTRAINT)
        return skd_err_set(err, SKD_EEXISTS, "store: %s: %s", what, sqlite3_errmsg(db));
    /* A corrupt or unreadable file may be repaired or replaced behind us:
     * start the next caller on a fresh connection. Busy and locked are
     * transient and keep the connection and its statements. */
    if (prim != SQLITE_BUSY && prim != SQLITE_LOCKED)
        c->broken = 1;
    return skd_err_set(err, SKD_ESTORE, "store: %s: %s", what,
                       db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
}

int skd__sqlite_connect(skd__conn *c, skd_err *err)
{
    sqlite3 *db = NULL;
    int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX;
    int rc = sqlite3_open_v2(c->st->where, &db, flags, NULL);
    if (rc != SQLITE_OK) {
        rc = skd_err_set(err, SKD_ESTORE, "store: cannot open %s: %s", c->st->where,
                         db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
        sqlite3_close(db);
        return rc;
    }
    sqlite3_busy_timeout(db, c->st->opts.busy_timeout_ms);
    sqlite3_extended_result_codes(db, 1);
    c->db = db;
    memset(c->stmts, 0, sizeof(c->stmts));
    if ((rc = skd__sqlite_exec(c, "PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;", err))) {
        skd__sqlite_disconnect(c);
        c->db = NULL;
    }
    return rc;
}

/* 1 when the closing connection may leave the WAL for the next opener: it
 * is small (opts.keep_wal_bytes). The next process that is first to open
 * the database rebuilds the WAL's index from all of it, with nothing marked
 * as checkpointed, so a WAL that is always left would never restart and
 * would grow without bound: past the bound, the close checkpoints and
 * deletes it as every close did before. */
static int keep_wal(const skd__conn *c)
{
    char wal[4096];
    struct stat sb;
    int64_t cap = c->st->opts.keep_wal_bytes;
    if (cap <= 0 || snprintf(wal, sizeof(wal), "%s-wal", c->st->where) >= (int)sizeof(wal))
        return 0;
    return stat(wal, &sb) == 0 && (int64_t)sb.st_size <= cap;
}

void skd__sqlite_disconnect(skd__conn *c)
{
    if (c->db && keep_wal(c))
        sqlite3_db_config(c->db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, NULL);
    for (int i = 0; i < SKD__MAX_STMTS; i++) {
        sqlite3_finalize(c->stmts[i]);
        c->stmts[i] = NULL;
    }
    sqlite3_close(c->db);
}

int skd__sqlite_start(skd__q *q, skd_err *err)
{
    skd__conn *c = q->c;
    int i = q->sql->slot - 1;
    if (!c->stmts[i]) {
        sqlite3_stmt *s = NULL;
        int rc = sqlite3_prepare_v3(c->db, q->sql->text, -1, SQLITE_PREPARE_PERSISTENT, &s, NULL);
        if (rc != SQLITE_OK)
            return fail(c, rc, err, "prepare");
        c->stmts[i] = s;
        pthread_mutex_lock(&c->st->mu);
        c->st->prepares++;
        pthread_mutex_unlock(&c->st->mu);
    }
    q->stmt = c->stmts[i];
    return 0;
}

void skd__sqlite_bind(skd__q *q, int i, const char *s, const int64_t *v)
{
    if (v)
        sqlite3_bind_int64(q->stmt, i, *v);
    else if (s)
        sqlite3_bind_text(q->stmt, i, s, -1, SQLITE_STATIC);
    else
        sqlite3_bind_null(q->stmt, i);
}

int skd__sqlite_step(skd__q *q, skd_err *err)
{
    int rc = sqlite3_step(q->stmt);
    if (rc == SQLITE_ROW)
        return 1;
    if (rc == SQLITE_DONE) {
        /* The connection is this thread's alone until it is given back, so
         * sqlite3_changes() answers for this statement. */
        q->changes = sqlite3_changes64(q->c->db);
        return 0;
    }
    return fail(q->c, rc, err, "statement");
}

const char *skd__sqlite_col(skd__q *q, int col)
{
    return (const char *)sqlite3_column_text(q->stmt, col);
}

void skd__sqlite_end(skd__q *q)
{
    if (!q->stmt)
        return;
    sqlite3_reset(q->stmt);
    sqlite3_clear_bindings(q->stmt);
    q->stmt = NULL;
}

int skd__sqlite_exec(skd__conn *c, const char *sql, skd_err *err)
{
    char *msg = NULL;
    int rc = sqlite3_exec(c->db, sql, NULL, NULL, &msg);
    if (rc == SQLITE_OK)
        return 0;
    int prim = rc & 0xff;
    c->busy = prim == SQLITE_BUSY || prim == SQLITE_LOCKED;
    if (prim != SQLITE_BUSY && prim != SQLITE_LOCKED && prim != SQLITE_CONSTRAINT)
        c->broken = 1;
    rc = skd_err_set(err, prim == SQLITE_CONSTRAINT ? SKD_EEXISTS : SKD_ESTORE, "store: %s",
                     msg ? msg : sqlite3_errstr(rc));
    sqlite3_free(msg);
    return rc;
}

void skd__sqlite_release(skd__conn *c)
{
    if (c->broken || !c->db)
        return;
    if (!sqlite3_get_autocommit(c->db) && sqlite3_exec(c->db, "ROLLBACK", NULL, NULL, NULL))
        c->broken = 1;
}
