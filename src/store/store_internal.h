/*
 * Library-internal view of the store for the files in src/store/ and for
 * other parts that keep a table here (they append a migration to both
 * dialects in src/store/migrations.c and run their statements through the
 * query API below).
 *
 * The store is a pool of connections to one of two backends, SQLite (a file
 * in WAL mode) or PostgreSQL (libpq). A thread takes a connection for the
 * length of one operation and gives it back; no lock is held while the
 * database itself waits (SQLite's busy handler, a PostgreSQL round trip), so
 * one slow statement never stalls the others. Each connection keeps its own
 * prepared statements, so a statement is parsed once per connection, not
 * once per call.
 *
 * Every statement is written once as an skd__sql with ?N parameters (SQLite
 * dialect); where PostgreSQL needs other words it gets its own text, else
 * its ?N become $N. Results are read by column number as text or integers.
 * Every failure of the database, reading or writing, comes back as
 * SKD_ESTORE (store_unavailable), never as "no rows".
 */
#ifndef SKILLD_STORE_INTERNAL_H
#define SKILLD_STORE_INTERNAL_H

#include <pthread.h>
#include <stdint.h>

#include "skilld/store.h"

enum skd__store_kind { SKD__STORE_SQLITE = 1, SKD__STORE_PG = 2 };

/* Statements a process may define (slots in each connection's cache). */
#define SKD__MAX_STMTS 128
/* Parameters one statement may take. */
#define SKD__MAX_PARAMS 16

/* A statement's text, defined once by the file that runs it (static
 * storage). slot is assigned on first use. */
typedef struct skd__sql {
    const char *text; /* SQLite dialect with ?N parameters */
    const char *pg;   /* PostgreSQL text when it differs ($N), else NULL */
    int slot;         /* 0 until first use, then 1..SKD__MAX_STMTS */
} skd__sql;
#define SKD__SQL(t)                                                                                \
    {                                                                                              \
        (t), NULL, 0                                                                               \
    }
#define SKD__SQL2(t, p)                                                                            \
    {                                                                                              \
        (t), (p), 0                                                                                \
    }

typedef struct skd__conn skd__conn;

struct skd_store {
    int kind;    /* enum skd__store_kind */
    char *where; /* path or connection URL (owned) */
    skd_store_opts opts;
    pthread_mutex_t mu; /* guards the free list and counters below only */
    pthread_cond_t cv;
    skd__conn **conns; /* opts.pool_size entries */
    int nfree;
    skd__conn **free_list;
    int64_t prepares; /* statements parsed, for tests of the cache */
    int64_t connects; /* connections opened */
    int closing;
    struct skd__replica *rep; /* runs.c; created on first use under rep_mu */
    pthread_mutex_t rep_mu;
    int draining;
    struct skd__auditq *aq;   /* audit.c: the queue and its writer thread */
    struct skd__keycache *kc; /* keys.c: authentication cache */
};

/* The key cache (keys.c). */
int skd__keycache_init(skd_store *st, skd_err *err);
void skd__keycache_free(skd_store *st);
/* The replica thread's check, every round, on its connection c: forget the
 * cached generation when the row no longer holds it (a revoker that died
 * between its commit and its signal). */
void skd__keycache_poll(skd_store *st, skd__conn *c);

/* The audit queue (audit.c): created at open, flushed and stopped at close. */
int skd__audit_init(skd_store *st, skd_err *err);
void skd__audit_free(skd_store *st);

/* Bump the change counter of topic and tell the other replicas
 * (PostgreSQL NOTIFY); on c when not NULL (inside its transaction). */
int skd__store_changed(skd_store *st, const char *topic, skd_err *err);
/* A live sandbox row's detail: {url, sandbox} as JSON text (caller
 * frees), or NULL (no memory). live_rows.c. */
char *skd__live_detail(const char *url, const json_t *sandbox);
/* Stop and free the replica thread (store close). */
void skd__replica_free(skd_store *st);

/* A statement being run on a connection (caller's storage). */
typedef struct skd__q {
    skd__conn *c;
    skd__sql *sql;
    void *stmt; /* sqlite3_stmt *, or NULL for PostgreSQL */
    /* PostgreSQL: parameters as text, and the result being read */
    const char *pv[SKD__MAX_PARAMS];
    char ibuf[SKD__MAX_PARAMS][24];
    int np;
    void *res; /* PGresult * */
    int row, nrows, ran;
    int64_t changes;
} skd__q;

/* Take a connection (connecting it first when needed), waiting up to the
 * busy timeout when every one is in use. SKD_ESTORE when the database cannot
 * be reached. */
int skd__conn_get(skd_store *st, skd__conn **c, skd_err *err);
/* Give c back (NULL ok). A connection that failed is closed here and
 * reopened by the next skd__conn_get. */
void skd__conn_put(skd_store *st, skd__conn *c);
/* The backend kind of c's store. */
int skd__conn_kind(const skd__conn *c);

/* Prepare (or take from c's cache) sql and bind nothing yet. */
int skd__q_start(skd__conn *c, skd__sql *sql, skd__q *q, skd_err *err);
/* Bind parameter i (1-based). Text is borrowed until skd__q_end; NULL binds
 * SQL NULL. */
void skd__q_text(skd__q *q, int i, const char *s);
void skd__q_int(skd__q *q, int i, int64_t v);
/* Step: 1 a row is ready, 0 done, else SKD_ESTORE (the database failed) or
 * SKD_EEXISTS (a uniqueness constraint refused a write). */
int skd__q_step(skd__q *q, skd_err *err);
/* Column col (0-based) of the current row: text (NULL for SQL NULL;
 * valid until the next step) or an integer. */
const char *skd__q_col(skd__q *q, int col);
int64_t skd__q_col_int(skd__q *q, int col);
int skd__q_col_null(skd__q *q, int col);
/* Rows the last write changed. */
int64_t skd__q_changes(const skd__q *q);
/* Reset q for the next use of its statement (q may be unstarted). */
void skd__q_end(skd__q *q);

/* Now, in ms since the epoch, on the database's clock (leases are measured
 * on it, so replicas whose clocks disagree still agree on who is late). */
#define NOW_SQLITE "CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)"
#define NOW_PG "CAST(extract(epoch from clock_timestamp()) * 1000 AS BIGINT)"

/* The two ends of a listing. skd__list_start: a new empty array into *arr
 * (NULL and SKD_ENOMEM when there is none), a connection into *c and sql
 * started as q. skd__list_end: q and c given back (either may be unstarted
 * or NULL), and arr (stolen) returned when rc is 0, else freed and NULL. */
int skd__list_start(skd_store *st, skd__sql *sql, skd__conn **c, skd__q *q, json_t **arr,
                    skd_err *err);
json_t *skd__list_end(skd_store *st, skd__conn *c, skd__q *q, json_t *arr, int rc);

/* Run a statement without results to its end; *changes may be NULL. */
int skd__q_run(skd__q *q, int64_t *changes, skd_err *err);

/* Run literal SQL (no parameters, no results) on c: transactions and
 * migrations. */
int skd__conn_exec(skd__conn *c, const char *sql, skd_err *err);
/* BEGIN IMMEDIATE (SQLite) / BEGIN (PostgreSQL); COMMIT; ROLLBACK. */
int skd__conn_begin(skd__conn *c, skd_err *err);
int skd__conn_commit(skd__conn *c, skd_err *err);
void skd__conn_rollback(skd__conn *c);

/* Statements parsed and connections opened so far (tests). */
void skd__store_counters(skd_store *st, int64_t *prepares, int64_t *connects);

/* Pool construction and teardown (store.c). */
int skd__pool_init(skd_store *st, skd_err *err);
void skd__pool_free(skd_store *st);

/* Migrations (src/store/migrations.c): bring the schema up to date on c,
 * under one transaction that rereads the version first. */
int skd__store_migrate(skd__conn *c, skd_err *err);

/* Backends (src/store/sqlite.c, src/store/pg.c). */
struct skd__conn {
    skd_store *st;
    void *db;                    /* sqlite3 * or PGconn * */
    int broken;                  /* the connection failed: close it when it comes back */
    int in_tx;                   /* between skd__conn_begin and commit/rollback */
    int busy;                    /* SQLite: the last failure was SQLITE_BUSY or SQLITE_LOCKED */
    void *stmts[SKD__MAX_STMTS]; /* SQLite: sqlite3_stmt *; PG: non-NULL once prepared */
};
int skd__sqlite_connect(skd__conn *c, skd_err *err);
void skd__sqlite_disconnect(skd__conn *c);
int skd__sqlite_start(skd__q *q, skd_err *err);
void skd__sqlite_bind(skd__q *q, int i, const char *s, const int64_t *v);
int skd__sqlite_step(skd__q *q, skd_err *err);
int skd__sqlite_exec(skd__conn *c, const char *sql, skd_err *err);
const char *skd__sqlite_col(skd__q *q, int col);
void skd__sqlite_end(skd__q *q);
void skd__sqlite_release(skd__conn *c);

int skd__pg_connect(skd__conn *c, skd_err *err);
void skd__pg_disconnect(skd__conn *c);
int skd__pg_start(skd__q *q, skd_err *err);
void skd__pg_bind(skd__q *q, int i, const char *s, const int64_t *v);
int skd__pg_step(skd__q *q, skd_err *err);
int skd__pg_exec(skd__conn *c, const char *sql, skd_err *err);
const char *skd__pg_col(skd__q *q, int col);
void skd__pg_end(skd__q *q);
/* 0 when c's server closed it while it sat in the pool. */
int skd__pg_alive(skd__conn *c);
/* Roll back a transaction left open before c goes back to the pool. */
void skd__pg_release(skd__conn *c);

#endif
