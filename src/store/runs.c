/*
 * Runs and replicas (see include/skilld/store.h). A run row names the
 * replica that runs it and carries a lease the replica renews every lease/3;
 * leases are measured on the database's clock, so replicas on hosts whose
 * clocks disagree still agree on who is late. A run whose lease ended is
 * "lost": its replica died (a replica that lives renews, and one that
 * restarts marks its former runs lost before serving).
 *
 * Caps are checked and the row inserted in one transaction that holds the
 * database's write lock (SQLite BEGIN IMMEDIATE; PostgreSQL a
 * transaction-scoped advisory lock), so two replicas can never both take
 * the last place. Expired leases do not count.
 *
 * One thread per process (started by skd_store_replica_start or the first
 * run) renews leases, marks expired ones lost, fires the cancel token of a
 * local run whose row was flagged, and calls the skills watcher when the
 * change counter moved. On PostgreSQL it LISTENs on channel "skilld" on a
 * connection of its own and wakes at once on a NOTIFY; polling every 200 ms
 * is the fallback (SQLite, or while that connection is down).
 */
#include "skilld/log.h"
#include "skilld/registry.h"
#include "skilld/util.h"
#include "store/store_internal.h"

#include <libpq-fe.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#define POLL_MS 200

struct local_run {
    char id[40];
    skd_cancel *cancel;
    int fired;
};

struct skd__replica {
    skd_store *st;
    char id[160];
    int lease_ms;
    int thread_started;
    int stop;
    int wake; /* eventfd: stop the thread's wait at once */
    pthread_t thread;
    pthread_mutex_t mu; /* guards runs, watch_fn/arg */
    struct local_run *runs;
    size_t n, cap;
    void (*watch_fn)(void *arg);
    void *watch_arg;
    int64_t skills_seq; /* -1 until first read */
    skd__conn listen;   /* PostgreSQL: LISTEN skilld */
    int64_t listen_retry_ms;
    int64_t next_prune_ms;
};

static skd__sql q_insert =
    SKD__SQL2("INSERT INTO runs(id,key_id,skill,replica,state,started_ms,lease_until_ms,kind) "
              "VALUES(?1,?2,?3,?4,'running'," NOW_SQLITE "," NOW_SQLITE "+?5,?6)",
              "INSERT INTO runs(id,key_id,skill,replica,state,started_ms,lease_until_ms,kind) "
              "VALUES($1,$2,$3,$4,'running'," NOW_PG "," NOW_PG "+$5,$6)");
static skd__sql q_count_key =
    SKD__SQL2("SELECT count(*) FROM runs WHERE state='running' AND kind='sandbox' AND key_id=?1 "
              "AND lease_until_ms > " NOW_SQLITE,
              "SELECT count(*) FROM runs WHERE state='running' AND kind='sandbox' AND key_id=$1 "
              "AND lease_until_ms > " NOW_PG);
/* Live sandboxes (kind 'live', live_rows.c) have caps of their own. */
static skd__sql q_count_live =
    SKD__SQL2("SELECT count(*) FROM runs WHERE state='running' AND kind='live' AND key_id=?1 "
              "AND lease_until_ms > " NOW_SQLITE,
              "SELECT count(*) FROM runs WHERE state='running' AND kind='live' AND key_id=$1 "
              "AND lease_until_ms > " NOW_PG);
static skd__sql q_count_all =
    SKD__SQL2("SELECT count(*) FROM runs WHERE state='running' AND kind='sandbox' AND "
              "lease_until_ms > " NOW_SQLITE,
              "SELECT count(*) FROM runs WHERE state='running' AND kind='sandbox' AND "
              "lease_until_ms > " NOW_PG);
/* A live sandbox's row is "paused" while it is paused: renewed and ended
 * as a running one while a replica holds it, not counted by the live cap,
 * and never lost (q_sweep). */
static skd__sql q_end = SKD__SQL2("UPDATE runs SET state=?2, ended_ms=" NOW_SQLITE
                                  " WHERE id=?1 AND state IN ('running','paused')",
                                  "UPDATE runs SET state=$2, ended_ms=" NOW_PG
                                  " WHERE id=$1 AND state IN ('running','paused')");
/* Only this replica's rows: a paused row another replica claimed is not
 * renewed for it; nor one let go (lease 0) since the round began. */
static skd__sql q_beat =
    SKD__SQL2("UPDATE runs SET lease_until_ms=" NOW_SQLITE "+?3 WHERE id=?1 AND replica=?2 AND "
              "(state='running' OR (state='paused' AND lease_until_ms > 0))",
              "UPDATE runs SET lease_until_ms=" NOW_PG "+$3 WHERE id=$1 AND replica=$2 AND "
              "(state='running' OR (state='paused' AND lease_until_ms > 0))");
/* A paused live sandbox whose holder stopped renewing is not lost: its
 * files are saved under the shared DATA_DIR, and the row waits, unheld,
 * for a replica to claim it (skd_store_live_claim). */
static skd__sql q_sweep = SKD__SQL2("UPDATE runs SET state='lost', ended_ms=" NOW_SQLITE
                                    " WHERE state='running' AND lease_until_ms < " NOW_SQLITE,
                                    "UPDATE runs SET state='lost', ended_ms=" NOW_PG
                                    " WHERE state='running' AND lease_until_ms < " NOW_PG);
/* Ended runs are kept a day for GET /v1/runs and the tests that read them. */
#define KEEP_ENDED_MS (24LL * 3600 * 1000)
static skd__sql q_prune =
    SKD__SQL2("DELETE FROM runs WHERE state<>'running' AND ended_ms < " NOW_SQLITE " - ?1",
              "DELETE FROM runs WHERE state<>'running' AND ended_ms < " NOW_PG " - $1");
static skd__sql q_mine_lost = SKD__SQL2(
    "UPDATE runs SET state='lost', ended_ms=" NOW_SQLITE " WHERE replica=?1 AND state='running'",
    "UPDATE runs SET state='lost', ended_ms=" NOW_PG " WHERE replica=$1 AND state='running'");
/* A restarted replica's paused rows: let go at once, as a stop does. */
static skd__sql q_mine_release = SKD__SQL(
    "UPDATE runs SET lease_until_ms=0 WHERE replica=?1 AND kind='live' AND state='paused'");
static skd__sql q_claim =
    SKD__SQL2("UPDATE runs SET replica=?3, lease_until_ms=" NOW_SQLITE
              "+?4, detail=?5 WHERE id=?1 AND key_id=?2 AND kind='live' AND state='paused' AND "
              "(lease_until_ms < " NOW_SQLITE " OR replica=?3)",
              "UPDATE runs SET replica=$3, lease_until_ms=" NOW_PG
              "+$4, detail=$5 WHERE id=$1 AND key_id=$2 AND kind='live' AND state='paused' AND "
              "(lease_until_ms < " NOW_PG " OR replica=$3)");
static skd__sql q_count_live_but =
    SKD__SQL2("SELECT count(*) FROM runs WHERE state='running' AND kind='live' AND key_id=?1 "
              "AND id<>?2 AND lease_until_ms > " NOW_SQLITE,
              "SELECT count(*) FROM runs WHERE state='running' AND kind='live' AND key_id=$1 "
              "AND id<>$2 AND lease_until_ms > " NOW_PG);
static skd__sql q_run_again =
    SKD__SQL("UPDATE runs SET state='running' WHERE id=?1 AND replica=?2 AND kind='live' AND "
             "state IN ('paused','running')");
static skd__sql q_release = SKD__SQL("UPDATE runs SET lease_until_ms=0 WHERE id=?1 AND replica=?2 "
                                     "AND kind='live' AND state='paused'");
static skd__sql q_cancel =
    SKD__SQL2("UPDATE runs SET cancel_requested=1 WHERE id=?1 AND (?2 IS NULL OR key_id=?2) AND "
              "state='running'",
              "UPDATE runs SET cancel_requested=1 WHERE id=$1 AND ($2::text IS NULL OR key_id=$2) "
              "AND state='running'");
static skd__sql q_cancels =
    SKD__SQL("SELECT id FROM runs WHERE replica=?1 AND state='running' AND cancel_requested=1");
static skd__sql q_state = SKD__SQL("SELECT state FROM runs WHERE id=?1 AND key_id=?2");
static skd__sql q_seq = SKD__SQL("SELECT seq FROM changes WHERE topic=?1");
static skd__sql q_bump = SKD__SQL("UPDATE changes SET seq=seq+1 WHERE topic=?1");
static skd__sql q_notify = SKD__SQL("SELECT pg_notify('skilld', ?1)");
#define RUN_COLS "id,key_id,skill,replica,state,started_ms,ended_ms,lease_until_ms,cancel_requested"
static skd__sql q_list = SKD__SQL2(
    "SELECT " RUN_COLS " FROM runs WHERE kind<>'live' AND (?1 IS NULL OR key_id=?1) AND "
    "(?2 IS NULL OR state=?2) "
    "ORDER BY started_ms DESC, id DESC LIMIT ?3",
    "SELECT " RUN_COLS " FROM runs WHERE kind<>'live' AND ($1::text IS NULL OR key_id=$1) AND "
    "($2::text IS NULL OR state=$2) ORDER BY started_ms DESC, id DESC LIMIT $3");

/* ---- small helpers ---- */

/* Run one statement with up to two text parameters and one integer. */
static int run1(skd__conn *c, skd__sql *sql, const char *a, const char *b, const int64_t *i,
                int ipos, int64_t *changes, skd_err *err)
{
    skd__q q;
    int rc = skd__q_start(c, sql, &q, err);
    if (rc)
        return rc;
    if (a)
        skd__q_text(&q, 1, a);
    if (b)
        skd__q_text(&q, 2, b);
    if (i)
        skd__q_int(&q, ipos, *i);
    rc = skd__q_run(&q, changes, err);
    skd__q_end(&q);
    return rc;
}

static int count1(skd__conn *c, skd__sql *sql, const char *a, int64_t *n, skd_err *err)
{
    skd__q q;
    int rc = skd__q_start(c, sql, &q, err);
    if (rc)
        return rc;
    if (a)
        skd__q_text(&q, 1, a);
    rc = skd__q_step(&q, err);
    if (rc == 1) {
        *n = skd__q_col_int(&q, 0);
        rc = 0;
    } else if (rc == 0) {
        rc = skd_err_set(err, SKD_ESTORE, "store: no count");
    }
    skd__q_end(&q);
    return rc;
}

/* ---- the replica object ---- */

static void *replica_main(void *arg);

/* The replica of st, created (not started) when absent. */
static struct skd__replica *replica(skd_store *st)
{
    pthread_mutex_lock(&st->rep_mu);
    struct skd__replica *r = st->rep;
    if (!r && (r = calloc(1, sizeof(*r)))) {
        r->st = st;
        r->wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        r->skills_seq = -1;
        r->listen.st = st;
        pthread_mutex_init(&r->mu, NULL);
        st->rep = r;
    }
    pthread_mutex_unlock(&st->rep_mu);
    return r;
}

/* Start the thread once, under id (default: the host name, with the pid
 * unless this is the serving process). */
static int ensure_started(skd_store *st, const char *id, int lease_ms, int serving, skd_err *err)
{
    struct skd__replica *r = replica(st);
    if (!r || r->wake < 0)
        return skd_err_set(err, SKD_ENOMEM, "out of memory");
    pthread_mutex_lock(&st->rep_mu);
    int rc = 0;
    if (!r->thread_started) {
        char host[64] = "localhost";
        gethostname(host, sizeof(host) - 1);
        if (id && *id)
            snprintf(r->id, sizeof(r->id), "%s", id);
        else if (serving)
            snprintf(r->id, sizeof(r->id), "%s", host);
        else
            snprintf(r->id, sizeof(r->id), "%s/%d", host, (int)getpid());
        r->lease_ms = lease_ms > 0 ? lease_ms : 10000;
        if (serving) {
            /* Our former life's runs died with it; its paused sandboxes
             * are anyone's to take. */
            skd__conn *c = NULL;
            if ((rc = skd__conn_get(st, &c, err)) == 0) {
                rc = run1(c, &q_mine_lost, r->id, NULL, NULL, 0, NULL, err);
                if (rc == 0)
                    rc = run1(c, &q_mine_release, r->id, NULL, NULL, 0, NULL, err);
                skd__conn_put(st, c);
            }
        }
        if (rc == 0 && pthread_create(&r->thread, NULL, replica_main, r) != 0)
            rc = skd_err_set(err, SKD_EINTERNAL, "cannot start the replica thread");
        if (rc == 0)
            r->thread_started = 1;
    }
    pthread_mutex_unlock(&st->rep_mu);
    return rc;
}

int skd_store_replica_start(skd_store *st, const char *id, int lease_ms, skd_err *err)
{
    return ensure_started(st, id, lease_ms, 1, err);
}

const char *skd_store_replica_id(skd_store *st)
{
    struct skd__replica *r = st ? st->rep : NULL;
    return r && r->thread_started ? r->id : "";
}

void skd_store_watch_skills(skd_store *st, void (*fn)(void *arg), void *arg)
{
    struct skd__replica *r = replica(st);
    if (!r)
        return;
    pthread_mutex_lock(&r->mu);
    r->watch_fn = fn;
    r->watch_arg = arg;
    pthread_mutex_unlock(&r->mu);
}

void skd__replica_free(skd_store *st)
{
    struct skd__replica *r = st->rep;
    if (!r)
        return;
    if (r->thread_started) {
        __atomic_store_n(&r->stop, 1, __ATOMIC_RELEASE);
        uint64_t one = 1;
        if (write(r->wake, &one, sizeof(one)) < 0) {
            /* the thread still sees stop within POLL_MS */
        }
        pthread_join(r->thread, NULL);
    }
    if (r->listen.db)
        skd__pg_disconnect(&r->listen);
    if (r->wake >= 0)
        close(r->wake);
    pthread_mutex_destroy(&r->mu);
    free(r->runs);
    free(r);
    st->rep = NULL;
}

/* ---- runs ---- */

static int local_add(struct skd__replica *r, const char *id, skd_cancel *cancel)
{
    pthread_mutex_lock(&r->mu);
    for (size_t i = 0; i < r->n; i++)
        if (strcmp(r->runs[i].id, id) == 0) { /* a claim of a row held already */
            pthread_mutex_unlock(&r->mu);
            return 0;
        }
    if (r->n == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 16;
        struct local_run *p = realloc(r->runs, cap * sizeof(*p));
        if (!p) {
            pthread_mutex_unlock(&r->mu);
            return SKD_ENOMEM;
        }
        r->runs = p;
        r->cap = cap;
    }
    struct local_run *lr = &r->runs[r->n++];
    memset(lr, 0, sizeof(*lr));
    snprintf(lr->id, sizeof(lr->id), "%s", id);
    lr->cancel = cancel;
    pthread_mutex_unlock(&r->mu);
    return 0;
}

static void local_remove(struct skd__replica *r, const char *id)
{
    pthread_mutex_lock(&r->mu);
    for (size_t i = 0; i < r->n; i++)
        if (strcmp(r->runs[i].id, id) == 0) {
            r->runs[i] = r->runs[--r->n];
            break;
        }
    pthread_mutex_unlock(&r->mu);
}

/* Fire the local run id's token; 1 when it is ours. */
static int local_fire(struct skd__replica *r, const char *id)
{
    int found = 0;
    pthread_mutex_lock(&r->mu);
    for (size_t i = 0; i < r->n; i++)
        if (strcmp(r->runs[i].id, id) == 0) {
            found = 1;
            if (!r->runs[i].fired && r->runs[i].cancel) {
                r->runs[i].fired = 1;
                skd_cancel_fire(r->runs[i].cancel);
            }
        }
    pthread_mutex_unlock(&r->mu);
    return found;
}

/* Begin a transaction that holds the caps' lock: SQLite's BEGIN
 * IMMEDIATE takes the write lock, PostgreSQL's an advisory lock. Nothing
 * is left open on failure. */
static int cap_begin(skd__conn *c, skd_err *err)
{
    int rc = skd__conn_begin(c, err);
    if (rc == 0 && skd__conn_kind(c) == SKD__STORE_PG &&
        (rc = skd__conn_exec(c, "SELECT pg_advisory_xact_lock(7431004)", err)))
        skd__conn_rollback(c);
    return rc;
}

/* One attempt: 1 when the run was recorded, 0 when a cap is full. */
static int try_begin(skd_store *st, struct skd__replica *r, const skd_run_req *q, skd_err *err)
{
    skd__conn *c = NULL;
    int rc = skd__conn_get(st, &c, err), placed = 0;
    if (rc)
        return rc;
    if ((rc = cap_begin(c, err)))
        goto out;
    int64_t n = 0;
    int live = q->kind && strcmp(q->kind, "live") == 0;
    if (q->per_key > 0) {
        if ((rc = count1(c, live ? &q_count_live : &q_count_key, q->key_id, &n, err)))
            goto fail;
        if (n >= q->per_key)
            goto fail; /* full: rc 0, placed 0 */
    }
    if (q->total > 0) {
        if ((rc = count1(c, &q_count_all, NULL, &n, err)))
            goto fail;
        if (n >= q->total)
            goto fail;
    }
    skd__q qq;
    if ((rc = skd__q_start(c, &q_insert, &qq, err)))
        goto fail;
    skd__q_text(&qq, 1, q->id);
    skd__q_text(&qq, 2, q->key_id);
    skd__q_text(&qq, 3, q->skill ? q->skill : "");
    skd__q_text(&qq, 4, r->id);
    skd__q_int(&qq, 5, r->lease_ms);
    skd__q_text(&qq, 6, q->kind ? q->kind : "sandbox");
    rc = skd__q_run(&qq, NULL, err);
    skd__q_end(&qq);
    if (rc || (rc = skd__conn_commit(c, err)))
        goto fail;
    placed = 1;
    goto out;
fail:
    skd__conn_rollback(c);
out:
    skd__conn_put(st, c);
    return rc ? rc : placed;
}

int skd_store_run_begin(skd_store *st, const skd_run_req *q, skd_err *err)
{
    int rc = ensure_started(st, NULL, 0, 0, err);
    if (rc)
        return rc;
    struct skd__replica *r = st->rep;
    int64_t deadline = skd_mono_ms() + (q->wait_ms > 0 ? q->wait_ms : 0);
    int backoff = 20;
    for (;;) {
        if (skd_cancel_is_set(q->cancel))
            return skd_err_set(err, SKD_ECANCELLED, "cancelled while waiting for a place");
        rc = try_begin(st, r, q, err);
        if (rc < 0)
            return rc;
        if (rc == 1)
            break;
        if (skd_mono_ms() >= deadline)
            return skd_err_set(err, SKD_EBUSY,
                               "the key's runs are at their cap (%d) over every replica; retry "
                               "later",
                               q->per_key);
        usleep((useconds_t)backoff * 1000);
        if (backoff < 100)
            backoff += 20;
    }
    if (local_add(r, q->id, q->cancel) != 0) {
        skd_store_run_end(st, q->id, "error");
        return skd_err_set(err, SKD_ENOMEM, "out of memory");
    }
    return 0;
}

void skd_store_run_end(skd_store *st, const char *id, const char *state)
{
    if (st->rep)
        local_remove(st->rep, id);
    skd__conn *c = NULL;
    skd_err err = {0};
    /* If the store is down now, the row's lease runs out and it is marked
     * lost: the safe side of a cap. */
    if (skd__conn_get(st, &c, &err) == 0) {
        run1(c, &q_end, id, state, NULL, 0, NULL, &err);
        skd__conn_put(st, c);
    }
}

int skd_store_live_claim(skd_store *st, const char *key_id, const char *id, const char *url,
                         const json_t *sandbox, skd_err *err)
{
    int rc = ensure_started(st, NULL, 0, 0, err);
    if (rc)
        return rc;
    struct skd__replica *r = st->rep;
    skd__conn *c = NULL;
    skd__q q = {0};
    int64_t changed = 0, lease = r->lease_ms;
    char *detail = skd__live_detail(url, sandbox);
    if (!detail)
        return skd_err_set(err, SKD_ENOMEM, "out of memory");
    if ((rc = skd__conn_get(st, &c, err))) {
        free(detail);
        return rc;
    }
    if ((rc = skd__q_start(c, &q_claim, &q, err)) == 0) {
        skd__q_text(&q, 1, id);
        skd__q_text(&q, 2, key_id);
        skd__q_text(&q, 3, r->id);
        skd__q_int(&q, 4, lease);
        skd__q_text(&q, 5, detail);
        rc = skd__q_run(&q, &changed, err);
        skd__q_end(&q);
    }
    skd__conn_put(st, c);
    free(detail);
    if (rc)
        return rc;
    if (changed == 0)
        return skd_err_set(err, SKD_EBUSY,
                           "sandbox %s is not paused and unheld (another replica took it first)",
                           id);
    if (local_add(r, id, NULL) != 0) {
        skd_store_live_release(st, id);
        return skd_err_set(err, SKD_ENOMEM, "out of memory");
    }
    return 0;
}

int skd_store_live_resume_place(skd_store *st, const char *key_id, const char *id, int per_key,
                                skd_err *err)
{
    skd__conn *c = NULL;
    int64_t n = 0;
    int rc = skd__conn_get(st, &c, err);
    if (rc)
        return rc;
    if ((rc = cap_begin(c, err)))
        goto out;
    if (per_key > 0) {
        skd__q q;
        if ((rc = skd__q_start(c, &q_count_live_but, &q, err)))
            goto fail;
        skd__q_text(&q, 1, key_id);
        skd__q_text(&q, 2, id);
        rc = skd__q_step(&q, err);
        if (rc == 1)
            n = skd__q_col_int(&q, 0);
        skd__q_end(&q);
        if (rc < 0)
            goto fail;
        if (n >= per_key) {
            rc = skd_err_set(err, SKD_EBUSY,
                             "this key runs %lld live sandboxes over every replica, its cap "
                             "(SKILLS_SANDBOX_MAX_LIVE_PER_KEY); delete or pause one first",
                             (long long)n);
            goto fail;
        }
    }
    int64_t changed = 0;
    if ((rc = run1(c, &q_run_again, id, skd_store_replica_id(st), NULL, 0, &changed, err)))
        goto fail;
    if (changed == 0) {
        rc =
            skd_err_set(err, SKD_EREPLICA,
                        "sandbox %s is no longer this replica's (another took it over); retry", id);
        goto fail;
    }
    if ((rc = skd__conn_commit(c, err)))
        goto fail;
    goto out;
fail:
    skd__conn_rollback(c);
out:
    skd__conn_put(st, c);
    return rc;
}

void skd_store_live_release(skd_store *st, const char *id)
{
    if (st->rep)
        local_remove(st->rep, id);
    skd__conn *c = NULL;
    skd_err err = {0};
    /* If the store is down now, the lease runs out instead. */
    if (skd__conn_get(st, &c, &err) == 0) {
        run1(c, &q_release, id, skd_store_replica_id(st), NULL, 0, NULL, &err);
        skd__conn_put(st, c);
    }
}

int skd_store_run_cancel(skd_store *st, const char *key_id, const char *id, skd_err *err)
{
    skd__conn *c = NULL;
    int64_t changed = 0;
    int rc = skd__conn_get(st, &c, err);
    if (rc)
        return rc;
    skd__q q;
    if ((rc = skd__q_start(c, &q_cancel, &q, err)) == 0) {
        skd__q_text(&q, 1, id);
        skd__q_text(&q, 2, key_id); /* NULL: any key's (skills:admin) */
        rc = skd__q_run(&q, &changed, err);
        skd__q_end(&q);
    }
    if (rc == 0 && changed == 0)
        rc = skd_err_set(err, SKD_ENOENT, "no running run %s for this key", id);
    if (rc == 0 && skd__conn_kind(c) == SKD__STORE_PG)
        run1(c, &q_notify, "cancel", NULL, NULL, 0, NULL, NULL);
    skd__conn_put(st, c);
    if (rc == 0 && st->rep)
        local_fire(st->rep, id); /* ours: no need to wait for the thread */
    return rc;
}

int skd_store_run_state(skd_store *st, const char *key_id, const char *id, char *state, size_t cap,
                        skd_err *err)
{
    skd__conn *c = NULL;
    skd__q q = {0};
    int rc;
    if ((rc = skd__conn_get(st, &c, err)) || (rc = skd__q_start(c, &q_state, &q, err)))
        goto out;
    skd__q_text(&q, 1, id);
    skd__q_text(&q, 2, key_id);
    rc = skd__q_step(&q, err);
    if (rc == 1) {
        const char *v = skd__q_col(&q, 0);
        snprintf(state, cap, "%s", v ? v : "");
        rc = 0;
    } else if (rc == 0) {
        rc = skd_err_set(err, SKD_ENOENT, "no run %s", id);
    }
out:
    skd__q_end(&q);
    skd__conn_put(st, c);
    return rc;
}

json_t *skd_store_run_list(skd_store *st, const char *key_id, const char *state, int limit,
                           skd_err *err)
{
    skd__conn *c = NULL;
    skd__q q = {0};
    json_t *arr = NULL;
    int rc;
    if (limit <= 0 || limit > 10000)
        limit = 100;
    if ((rc = skd__list_start(st, &q_list, &c, &q, &arr, err)))
        goto out;
    skd__q_text(&q, 1, key_id);
    skd__q_text(&q, 2, state);
    skd__q_int(&q, 3, limit);
    while ((rc = skd__q_step(&q, err)) == 1) {
        json_t *o = json_pack(
            "{s:s, s:s, s:s, s:s, s:s, s:I, s:o, s:I, s:b}", "id", skd__q_col(&q, 0), "keyId",
            skd__q_col(&q, 1), "skill", skd__q_col(&q, 2), "replica", skd__q_col(&q, 3), "state",
            skd__q_col(&q, 4), "startedAt", (json_int_t)skd__q_col_int(&q, 5), "endedAt",
            skd__q_col_null(&q, 6) ? json_null() : json_integer((json_int_t)skd__q_col_int(&q, 6)),
            "leaseUntil", (json_int_t)skd__q_col_int(&q, 7), "cancelRequested",
            (int)skd__q_col_int(&q, 8));
        if (o)
            json_array_append_new(arr, o);
    }
out:
    return skd__list_end(st, c, &q, arr, rc);
}

int skd__store_changed(skd_store *st, const char *topic, skd_err *err)
{
    skd__conn *c = NULL;
    int rc = skd__conn_get(st, &c, err);
    if (rc)
        return rc;
    rc = run1(c, &q_bump, topic, NULL, NULL, 0, NULL, err);
    if (rc == 0 && skd__conn_kind(c) == SKD__STORE_PG)
        run1(c, &q_notify, topic, NULL, NULL, 0, NULL, NULL);
    skd__conn_put(st, c);
    return rc;
}

/* ---- the replica thread ---- */

static void renew_and_sweep(struct skd__replica *r, skd__conn *c)
{
    char(*ids)[40] = NULL;
    size_t n = 0;
    pthread_mutex_lock(&r->mu);
    if (r->n && (ids = malloc(r->n * sizeof(*ids)))) {
        for (size_t i = 0; i < r->n; i++)
            memcpy(ids[i], r->runs[i].id, sizeof(ids[i]));
        n = r->n;
    }
    pthread_mutex_unlock(&r->mu);
    int64_t lease = r->lease_ms;
    /* One transaction for them all: a replica holding many live sandboxes
     * renews them in one commit. */
    int tx = n > 1 && skd__conn_begin(c, NULL) == 0;
    for (size_t i = 0; i < n; i++)
        run1(c, &q_beat, ids[i], r->id, &lease, 3, NULL, NULL);
    if (tx && skd__conn_commit(c, NULL) != 0)
        skd__conn_rollback(c);
    free(ids);
    int64_t lost = 0;
    if (run1(c, &q_sweep, NULL, NULL, NULL, 0, &lost, NULL) == 0 && lost > 0)
        skd_warn("store: %lld run(s) of a replica that stopped renewing marked lost",
                 (long long)lost);
    if (skd_mono_ms() >= r->next_prune_ms) { /* once a minute is plenty */
        int64_t keep = KEEP_ENDED_MS;
        run1(c, &q_prune, NULL, NULL, &keep, 1, NULL, NULL);
        r->next_prune_ms = skd_mono_ms() + 60000;
    }
}

static void act_on_cancels(struct skd__replica *r, skd__conn *c)
{
    skd__q q;
    if (skd__q_start(c, &q_cancels, &q, NULL))
        return;
    skd__q_text(&q, 1, r->id);
    while (skd__q_step(&q, NULL) == 1) {
        const char *id = skd__q_col(&q, 0);
        if (id)
            local_fire(r, id);
    }
    skd__q_end(&q);
}

static void check_changes(struct skd__replica *r, skd__conn *c)
{
    int64_t seq = -1;
    if (count1(c, &q_seq, "skills", &seq, NULL) != 0)
        return;
    int64_t last = r->skills_seq;
    r->skills_seq = seq;
    if (last < 0 || last == seq)
        return;
    pthread_mutex_lock(&r->mu);
    void (*fn)(void *) = r->watch_fn;
    void *arg = r->watch_arg;
    pthread_mutex_unlock(&r->mu);
    if (fn)
        fn(arg);
}

/* PostgreSQL: keep a LISTEN connection; -1 when there is none. */
static int listen_fd(struct skd__replica *r)
{
    if (r->st->kind != SKD__STORE_PG)
        return -1;
    if (r->listen.db && PQstatus(r->listen.db) != CONNECTION_OK) {
        skd__pg_disconnect(&r->listen);
        r->listen.db = NULL;
    }
    if (!r->listen.db && skd_mono_ms() >= r->listen_retry_ms) {
        r->listen_retry_ms = skd_mono_ms() + 2000;
        if (skd__pg_connect(&r->listen, NULL) == 0 &&
            skd__pg_exec(&r->listen, "LISTEN skilld", NULL) != 0) {
            skd__pg_disconnect(&r->listen);
            r->listen.db = NULL;
        }
    }
    return r->listen.db ? PQsocket(r->listen.db) : -1;
}

static void drain_listen(struct skd__replica *r)
{
    if (!r->listen.db || !PQconsumeInput(r->listen.db))
        return;
    PGnotify *n;
    while ((n = PQnotifies(r->listen.db)))
        PQfreemem(n);
}

static void *replica_main(void *arg)
{
    struct skd__replica *r = arg;
    skd_store *st = r->st;
    int64_t next_beat = 0;
    while (!__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE)) {
        struct pollfd p[2] = {{.fd = r->wake, .events = POLLIN},
                              {.fd = listen_fd(r), .events = POLLIN}};
        int np = p[1].fd >= 0 ? 2 : 1;
        if (poll(p, (nfds_t)np, POLL_MS) > 0 && np == 2 && (p[1].revents & (POLLIN | POLLHUP)))
            drain_listen(r);
        if (__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE))
            break;
        skd__conn *c = NULL;
        if (skd__conn_get(st, &c, NULL) != 0)
            continue; /* the store is down: try again next round */
        act_on_cancels(r, c);
        check_changes(r, c);
        skd__keycache_poll(st, c);
        if (skd_mono_ms() >= next_beat) {
            renew_and_sweep(r, c);
            next_beat = skd_mono_ms() + r->lease_ms / 3;
        }
        skd__conn_put(st, c);
    }
    return NULL;
}
