/*
 * The PostgreSQL backend of the store (libpq). Each pooled connection is
 * opened with bounds on every wait: connect_timeout, statement_timeout,
 * lock_timeout, TCP keepalives and tcp_user_timeout, so a database that is
 * down, stopped or unreachable gives a prompt SKD_ESTORE, never a hang.
 * Statements are prepared once per connection (named "s<slot>") and run
 * with text parameters and text results.
 *
 * A connection the server closed (a restart, an administrator's
 * pg_terminate_backend) is noticed before it is used: an idle pooled
 * connection whose socket turned readable is replaced. A statement that
 * still meets a dead connection outside a transaction is run once more on a
 * new one when that is safe: a read, or an insert (keyed rows: a duplicate
 * on the second run means the first had committed). Other writes fail with
 * SKD_ESTORE (they may have committed).
 */
#include "store/store_internal.h"

#include <ctype.h>
#include <libpq-fe.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static void quiet_notice(void *arg, const char *msg)
{
    (void)arg;
    (void)msg; /* "relation already exists, skipping" and the like */
}

static int conn_fail(skd__conn *c, PGresult *res, skd_err *err, const char *what)
{
    PGconn *db = c->db;
    const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    const char *msg = res ? PQresultErrorMessage(res) : "";
    if (!msg || !*msg)
        msg = db ? PQerrorMessage(db) : "no connection";
    char clean[300];
    snprintf(clean, sizeof(clean), "%s", msg);
    for (char *p = clean; *p; p++)
        if (*p == '\n')
            *p = ' ';
    if (!db || PQstatus(db) == CONNECTION_BAD)
        c->broken = 1;
    if (state && strcmp(state, "23505") == 0) /* unique_violation */
        return skd_err_set(err, SKD_EEXISTS, "store: %s: %s", what, clean);
    return skd_err_set(err, SKD_ESTORE, "store: %s: %s", what, clean);
}

int skd__pg_connect(skd__conn *c, skd_err *err)
{
    char ct[16], opts[128];
    snprintf(ct, sizeof(ct), "%d", c->st->opts.connect_timeout_s);
    snprintf(opts, sizeof(opts), "-c statement_timeout=%d -c lock_timeout=%d",
             c->st->opts.statement_timeout_ms, c->st->opts.statement_timeout_ms);
    /* Ours first: settings in the URL come later and win. */
    const char *keys[] = {"connect_timeout",
                          "options",
                          "keepalives",
                          "keepalives_idle",
                          "keepalives_interval",
                          "keepalives_count",
                          "tcp_user_timeout",
                          "application_name",
                          "dbname",
                          NULL};
    const char *vals[] = {ct, opts, "1", "5", "2", "2", "5000", "skilld", c->st->where, NULL};
    PGconn *db = PQconnectdbParams(keys, vals, 1);
    if (!db || PQstatus(db) != CONNECTION_OK) {
        char msg[300];
        snprintf(msg, sizeof(msg), "%s", db ? PQerrorMessage(db) : "out of memory");
        for (char *p = msg; *p; p++)
            if (*p == '\n')
                *p = ' ';
        PQfinish(db);
        return skd_err_set(err, SKD_ESTORE, "store: cannot connect to PostgreSQL: %s", msg);
    }
    PQsetNoticeProcessor(db, quiet_notice, NULL);
    c->db = db;
    memset(c->stmts, 0, sizeof(c->stmts));
    return 0;
}

void skd__pg_disconnect(skd__conn *c)
{
    PQfinish(c->db);
    memset(c->stmts, 0, sizeof(c->stmts));
}

/* An idle pooled connection has nothing to say: it never LISTENs and sets
 * nothing that the server would report. A socket that turned readable
 * carries the server's goodbye (a restart, pg_terminate_backend), whose
 * EOF libpq may not have seen yet: such a connection is not used again. */
int skd__pg_alive(skd__conn *c)
{
    PGconn *db = c->db;
    if (PQstatus(db) != CONNECTION_OK)
        return 0;
    struct pollfd p = {.fd = PQsocket(db), .events = POLLIN};
    if (p.fd < 0)
        return 0;
    return poll(&p, 1, 0) == 0;
}

/* Copy text, turning ?N into $N (SQL text of ours: no '?' in literals). */
static int pg_text(const char *in, char *out, size_t cap, int *nparams)
{
    size_t j = 0;
    *nparams = 0;
    for (size_t i = 0; in[i]; i++) {
        char ch = in[i];
        if ((ch == '?' || ch == '$') && isdigit((unsigned char)in[i + 1])) {
            int n = 0;
            for (size_t k = i + 1; isdigit((unsigned char)in[k]) && n < 1000; k++)
                n = n * 10 + (in[k] - '0');
            if (n > *nparams)
                *nparams = n;
            ch = '$';
        }
        if (j + 1 >= cap)
            return -1;
        out[j++] = ch;
    }
    out[j] = '\0';
    return 0;
}

/* The statement of q, prepared on its connection when it is not yet. */
static int prepare(skd__q *q, skd_err *err)
{
    skd__conn *c = q->c;
    int slot = q->sql->slot;
    char text[4096];
    if (pg_text(q->sql->pg ? q->sql->pg : q->sql->text, text, sizeof(text), &q->np) != 0)
        return skd_err_set(err, SKD_EINTERNAL, "store: statement too long");
    if (c->stmts[slot - 1])
        return 0;
    char name[16];
    snprintf(name, sizeof(name), "s%d", slot);
    PGresult *res = PQprepare(c->db, name, text, 0, NULL);
    int rc = 0;
    if (!res || PQresultStatus(res) != PGRES_COMMAND_OK)
        rc = conn_fail(c, res, err, "prepare");
    else
        c->stmts[slot - 1] = (void *)1;
    PQclear(res);
    if (rc == 0) {
        pthread_mutex_lock(&c->st->mu);
        c->st->prepares++;
        pthread_mutex_unlock(&c->st->mu);
    }
    return rc;
}

int skd__pg_start(skd__q *q, skd_err *err)
{
    q->stmt = NULL;
    return prepare(q, err);
}

void skd__pg_bind(skd__q *q, int i, const char *s, const int64_t *v)
{
    if (i < 1 || i > SKD__MAX_PARAMS)
        return;
    if (v) {
        snprintf(q->ibuf[i - 1], sizeof(q->ibuf[0]), "%lld", (long long)*v);
        q->pv[i - 1] = q->ibuf[i - 1];
    } else {
        q->pv[i - 1] = s;
    }
}

static PGresult *run(skd__q *q)
{
    char name[16];
    snprintf(name, sizeof(name), "s%d", q->sql->slot);
    int n = q->np > SKD__MAX_PARAMS ? SKD__MAX_PARAMS : q->np;
    return PQexecPrepared(q->c->db, name, n, q->pv, NULL, NULL, 0);
}

/* Statements that may run again on a fresh connection when the old one
 * died under them: reads, and inserts (every one of ours names its row by
 * a key, so a second run of one that did commit is refused as a duplicate,
 * which is then its success). */
static int retry_kind(const skd__sql *sql)
{
    const char *t = sql->pg ? sql->pg : sql->text;
    if (strncasecmp(t, "SELECT", 6) == 0)
        return 1;
    if (strncasecmp(t, "INSERT", 6) == 0)
        return 2;
    return 0;
}

int skd__pg_step(skd__q *q, skd_err *err)
{
    skd__conn *c = q->c;
    if (!q->ran) {
        q->ran = 1;
        PGresult *res = run(q);
        int retried = 0, kind = retry_kind(q->sql);
        /* Outside a transaction (ours are explicit: in_tx, since a dead
         * connection's status is UNKNOWN, not INTRANS), on a connection
         * that died: once more on a new one. */
        if (PQstatus(c->db) == CONNECTION_BAD && kind && !c->in_tx &&
            PQtransactionStatus(c->db) != PQTRANS_INTRANS) {
            PQclear(res);
            res = NULL;
            PQreset(c->db);
            memset(c->stmts, 0, sizeof(c->stmts));
            if (PQstatus(c->db) == CONNECTION_OK) {
                PQsetNoticeProcessor(c->db, quiet_notice, NULL);
                int rc = prepare(q, err);
                if (rc)
                    return rc;
                res = run(q);
                retried = 1;
            }
        }
        if (retried && kind == 2 && res && PQresultStatus(res) == PGRES_FATAL_ERROR) {
            const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
            if (state && strcmp(state, "23505") == 0) { /* the first run had committed */
                PQclear(res);
                q->changes = 1;
                return 0;
            }
        }
        ExecStatusType s = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
        if (s == PGRES_TUPLES_OK) {
            q->res = res;
            q->nrows = PQntuples(res);
            q->row = -1;
        } else if (s == PGRES_COMMAND_OK) {
            const char *n = PQcmdTuples(res);
            q->changes = n && *n ? strtoll(n, NULL, 10) : 0;
            PQclear(res);
            return 0;
        } else {
            int rc = conn_fail(c, res, err, "statement");
            PQclear(res);
            return rc;
        }
    }
    if (!q->res)
        return 0;
    if (++q->row < q->nrows)
        return 1;
    return 0;
}

const char *skd__pg_col(skd__q *q, int col)
{
    PGresult *res = q->res;
    if (!res || q->row < 0 || q->row >= q->nrows || col >= PQnfields(res) ||
        PQgetisnull(res, q->row, col))
        return NULL;
    return PQgetvalue(res, q->row, col);
}

void skd__pg_end(skd__q *q)
{
    PQclear(q->res);
    q->res = NULL;
}

int skd__pg_exec(skd__conn *c, const char *sql, skd_err *err)
{
    PGresult *res = PQexec(c->db, sql);
    ExecStatusType s = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
    int rc = 0;
    if (s != PGRES_COMMAND_OK && s != PGRES_TUPLES_OK)
        rc = conn_fail(c, res, err, "exec");
    PQclear(res);
    return rc;
}

void skd__pg_release(skd__conn *c)
{
    if (c->broken || !c->db)
        return;
    /* A transaction left open (an error between BEGIN and COMMIT) must not
     * follow the connection to its next user. */
    if (PQtransactionStatus(c->db) != PQTRANS_IDLE) {
        PGresult *res = PQexec(c->db, "ROLLBACK");
        PQclear(res);
        if (PQtransactionStatus(c->db) != PQTRANS_IDLE)
            c->broken = 1;
    }
}
