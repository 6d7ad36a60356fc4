/*
 * The store under concurrency and failure (issue 12 part 6), on a real
 * SQLite file, and with SKILLD_TEST_STORE=postgresql://... also the cases
 * that apply to PostgreSQL (scripts/test.sh runs this program in both rings):
 *   - a read that fails is store_unavailable, never "no rows" or "0 keys";
 *   - a thread waiting for SQLite's write lock holds no lock of ours, so
 *     another thread's read goes on meanwhile;
 *   - statements are prepared once per connection, not per call;
 *   - many threads creating, authenticating, auditing and revoking keys at
 *     once each get their own correct answers;
 *   - processes (here: threads) opening a fresh database at once run the
 *     migrations exactly once;
 *   - two store handles as two replicas: a per-key cap of 2 holds over
 *     both, a cancel request through one reaches the other's run, and a
 *     replica that stops renewing has its runs marked lost, and a key's
 *     rate bucket is one for both; each finds, in one query, the revoked
 *     keys of the live sandboxes it holds, and any sandbox's row state.
 */
#include "skilld/registry.h"
#include "skilld/store.h"
#include "store/store_internal.h"
#include "tap.h"

#include <fcntl.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static char dir[64];
static int seq;
static const char *pg_url; /* SKILLD_TEST_STORE, or NULL for SQLite */

/* A fresh store location: a new SQLite file, or the PostgreSQL database
 * (emptied by pg_reset). */
static void fresh_where(char *out, size_t cap)
{
    if (pg_url) {
        snprintf(out, cap, "%s", pg_url);
        return;
    }
    snprintf(out, cap, "%s/db%d.sqlite", dir, seq++);
}

static void pg_reset(void)
{
    if (!pg_url)
        return;
    /* Drop every table of ours through a store connection of its own. */
    skd_store *st = NULL;
    skd_err err = {0};
    if (skd_store_open(pg_url, &st, &err) != 0) {
        printf("# cannot open %s: %s\n", pg_url, err.msg);
        return;
    }
    skd__conn *c = NULL;
    if (skd__conn_get(st, &c, &err) == 0) {
        skd__conn_exec(c, "DROP SCHEMA public CASCADE; CREATE SCHEMA public;", &err);
        skd__conn_put(st, c);
    }
    skd_store_close(st);
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- a read error is store_unavailable (SQLite: a corrupted file) ---- */

TEST(read_error_is_store_unavailable)
{
    char path[128];
    fresh_where(path, sizeof(path));
    skd_store *st = NULL;
    skd_err err = {0};
    CHECK(skd_store_open(path, &st, &err) == 0);
    char *secret = NULL;
    skd_key_info info;
    CHECK(skd_store_key_create(st, "admin", SKD_SCOPE_ALL, &secret, &info, &err) == 0);
    skd_store_close(st);
    st = NULL;
    /* Keep the schema readable (page 1 and the pages sqlite_master spills
     * onto), overwrite the root page of every table and index, so opening
     * works and every read of a table fails. */
    int roots[256], nroots = 0, page = 4096;
    sqlite3 *db = NULL;
    sqlite3_stmt *q = NULL;
    CHECK(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK);
    CHECK(sqlite3_prepare_v2(db, "PRAGMA page_size", -1, &q, NULL) == SQLITE_OK);
    if (q && sqlite3_step(q) == SQLITE_ROW)
        page = sqlite3_column_int(q, 0);
    sqlite3_finalize(q);
    CHECK(sqlite3_prepare_v2(db, "SELECT rootpage FROM sqlite_master WHERE rootpage > 1", -1, &q,
                             NULL) == SQLITE_OK);
    while (q && nroots < 256 && sqlite3_step(q) == SQLITE_ROW)
        roots[nroots++] = sqlite3_column_int(q, 0);
    sqlite3_finalize(q);
    sqlite3_close(db);
    CHECK(nroots > 5);
    int fd = open(path, O_RDWR);
    CHECK(fd >= 0);
    char junk[65536];
    memset(junk, 0xA5, sizeof(junk));
    CHECK(page >= 512 && page <= (int)sizeof(junk));
    for (int i = 0; i < nroots; i++)
        CHECK(pwrite(fd, junk, (size_t)page, (off_t)(roots[i] - 1) * page) == (ssize_t)page);
    close(fd);

    CHECK(skd_store_open(path, &st, &err) == 0);
    if (!st) {
        free(secret);
        return;
    }
    int64_t count = 42;
    skd_err_clear(&err);
    CHECK_EQ_INT(skd_store_key_count(st, &count, &err), SKD_ESTORE);
    CHECK_STR(skd_errcode(err.code), "store_unavailable");
    skd_key_info k;
    CHECK_EQ_INT(skd_store_key_get(st, info.id, &k, NULL), SKD_ESTORE);
    CHECK_EQ_INT(skd_store_key_get(st, "0000000000000000", &k, NULL), SKD_ESTORE);
    CHECK_EQ_INT(skd_store_key_auth(st, secret, &k, NULL), SKD_ESTORE);
    CHECK_EQ_INT(skd_store_key_revoke(st, info.id, NULL), SKD_ESTORE);
    skd_err_clear(&err);
    CHECK(skd_store_key_list(st, &err) == NULL);
    CHECK_EQ_INT(err.code, SKD_ESTORE);
    skd_err_clear(&err);
    CHECK(skd_store_audit_list(st, info.id, 10, &err) == NULL);
    CHECK_EQ_INT(err.code, SKD_ESTORE);
    skd_err_clear(&err);
    CHECK(skd_store_skill_list(st, &err) == NULL);
    CHECK_EQ_INT(err.code, SKD_ESTORE);
    int64_t total = 0;
    skd_err_clear(&err);
    CHECK(skd_store_task_list(st, info.id, NULL, NULL, 0, 10, &total, &err) == NULL);
    CHECK_EQ_INT(err.code, SKD_ESTORE);
    char *v = NULL;
    CHECK_EQ_INT(skd_store_cache_get(st, "k", 1, &v, NULL), SKD_ESTORE);
    skd_store_close(st);
    free(secret);
}

/* ---- the busy wait holds no lock of ours (SQLite) ---- */

struct waiter {
    skd_store *st;
    int rc;
    volatile int done;
};

static void *write_key(void *arg)
{
    struct waiter *w = arg;
    char *secret = NULL;
    skd_key_info info;
    w->rc = skd_store_key_create(w->st, "waits", SKD_SCOPE_READ, &secret, &info, NULL);
    free(secret);
    __atomic_store_n(&w->done, 1, __ATOMIC_SEQ_CST);
    return NULL;
}

/* An outside connection that holds the write lock until released. */
static sqlite3 *hold_write_lock(const char *path)
{
    sqlite3 *db = NULL;
    if (sqlite3_open(path, &db) != SQLITE_OK)
        return NULL;
    if (sqlite3_exec(db, "BEGIN IMMEDIATE; DELETE FROM cache;", NULL, NULL, NULL) != SQLITE_OK) {
        sqlite3_close(db);
        return NULL;
    }
    return db;
}

TEST(busy_wait_does_not_block_readers)
{
    char path[128];
    fresh_where(path, sizeof(path));
    skd_store_opts o = {.pool_size = 4, .busy_timeout_ms = 4000};
    skd_store *st = NULL;
    skd_err err = {0};
    CHECK(skd_store_open_opts(path, &o, &st, &err) == 0);
    char *secret = NULL;
    skd_key_info info;
    CHECK(skd_store_key_create(st, "reader", SKD_SCOPE_READ, &secret, &info, &err) == 0);
    free(secret);
    sqlite3 *lock = hold_write_lock(path);
    CHECK(lock != NULL);
    struct waiter w = {.st = st};
    pthread_t t;
    pthread_create(&t, NULL, write_key, &w);
    usleep(300 * 1000); /* let the writer enter SQLite's busy wait */
    skd_key_info k;
    int64_t t0 = now_ms();
    CHECK_EQ_INT(skd_store_key_get(st, info.id, &k, &err), 0);
    int64_t count = 0;
    CHECK_EQ_INT(skd_store_key_count(st, &count, &err), 0);
    CHECK_EQ_INT(count, 1);
    /* Both reads finished while the writer still waits for the lock: no
     * lock of ours is held across its busy wait. */
    CHECK_EQ_INT(__atomic_load_n(&w.done, __ATOMIC_SEQ_CST), 0);
    printf("# reads during a busy wait took %lld ms\n", (long long)(now_ms() - t0));
    sqlite3_exec(lock, "COMMIT", NULL, NULL, NULL);
    sqlite3_close(lock);
    pthread_join(t, NULL);
    CHECK_EQ_INT(w.rc, 0);
    CHECK_EQ_INT(skd_store_key_count(st, &count, &err), 0);
    CHECK_EQ_INT(count, 2);
    skd_store_close(st);
}

TEST(locked_database_is_store_unavailable)
{
    char path[128];
    fresh_where(path, sizeof(path));
    /* audit_sync: the row is written before audit_add returns, so its
     * failure is the caller's to see (test_store_audit.c: batched rows wait). */
    skd_store_opts o = {.pool_size = 2, .busy_timeout_ms = 200, .audit_sync = 1};
    skd_store *st = NULL;
    skd_err err = {0};
    CHECK(skd_store_open_opts(path, &o, &st, &err) == 0);
    char *secret = NULL;
    skd_key_info info;
    CHECK(skd_store_key_create(st, "a", SKD_SCOPE_READ, &secret, &info, &err) == 0);
    free(secret);
    sqlite3 *lock = hold_write_lock(path);
    CHECK(lock != NULL);
    skd_err_clear(&err);
    CHECK_EQ_INT(skd_store_key_create(st, "b", SKD_SCOPE_READ, &secret, &info, &err), SKD_ESTORE);
    CHECK(secret == NULL);
    CHECK(strstr(err.msg, "locked") != NULL);
    /* A revoke of a real key that cannot be written is not "no such key". */
    CHECK_EQ_INT(skd_store_key_revoke(st, info.id, NULL), SKD_ESTORE);
    skd_audit a = {.id = "e1", .key_id = info.id, .skill = "s", .status = "success"};
    CHECK_EQ_INT(skd_store_audit_add(st, &a, NULL), SKD_ESTORE);
    sqlite3_exec(lock, "COMMIT", NULL, NULL, NULL);
    sqlite3_close(lock);
    /* The same connections work again once the lock is gone. */
    CHECK_EQ_INT(skd_store_key_revoke(st, info.id, NULL), 0);
    CHECK_EQ_INT(skd_store_audit_add(st, &a, NULL), 0);
    skd_store_close(st);
}

/* ---- prepared statements are cached ---- */

TEST(statements_are_prepared_once)
{
    char where[256];
    fresh_where(where, sizeof(where));
    pg_reset();
    skd_store *st = NULL;
    skd_err err = {0};
    /* audit_sync: every row on the caller's connection (the writer thread
     * of batched rows may take another one of the pool, which prepares the
     * insert once more: still once per connection). */
    skd_store_opts o = {.audit_sync = 1};
    CHECK(skd_store_open_opts(where, &o, &st, &err) == 0);
    if (!st)
        return;
    char *secret = NULL;
    skd_key_info info, k;
    CHECK(skd_store_key_create(st, "p", SKD_SCOPE_READ, &secret, &info, &err) == 0);
    CHECK_EQ_INT(skd_store_key_auth(st, secret, &k, &err), 0);
    skd_audit a = {.id = "warm", .key_id = info.id, .skill = "s", .status = "success"};
    CHECK_EQ_INT(skd_store_audit_add(st, &a, &err), 0);
    int64_t before = 0, after = 0;
    skd__store_counters(st, &before, NULL);
    for (int i = 0; i < 300; i++) {
        char id[32];
        snprintf(id, sizeof(id), "e%d", i);
        a.id = id;
        CHECK_EQ_INT(skd_store_key_auth(st, secret, &k, &err), 0);
        CHECK_EQ_INT(skd_store_audit_add(st, &a, &err), 0);
    }
    skd__store_counters(st, &after, NULL);
    CHECK_EQ_INT(after - before, 0);
    CHECK(before > 0);
    json_t *rows = skd_store_audit_list(st, info.id, 1000, &err);
    CHECK(rows && json_array_size(rows) == 301);
    json_decref(rows);
    free(secret);
    skd_store_close(st);
}

/* ---- many threads at once ---- */

#define HAMMER_THREADS 8

static skd_store *hammer_st;
static int hammer_iters;

static void *hammer(void *arg)
{
    int *wrong = arg;
    for (int i = 0; i < hammer_iters; i++) {
        char *secret = NULL;
        skd_key_info info, k;
        skd_err err = {0};
        if (skd_store_key_create(hammer_st, "h", SKD_SCOPE_READ, &secret, &info, &err) != 0) {
            printf("# create: %s\n", err.msg);
            (*wrong)++;
            continue;
        }
        if (skd_store_key_auth(hammer_st, secret, &k, &err) != 0 || strcmp(k.id, info.id) != 0)
            (*wrong)++;
        for (int j = 0; j < 3; j++) {
            char id[96];
            snprintf(id, sizeof(id), "%s-%d", info.id, j);
            skd_audit a = {.id = id, .key_id = info.id, .skill = "file_read", .status = "success"};
            if (skd_store_audit_add(hammer_st, &a, &err) != 0) {
                printf("# audit: %s\n", err.msg);
                (*wrong)++;
            }
        }
        json_t *rows = skd_store_audit_list(hammer_st, info.id, 10, &err);
        if (!rows || json_array_size(rows) != 3)
            (*wrong)++;
        json_decref(rows);
        if (skd_store_key_revoke(hammer_st, info.id, &err) != 0)
            (*wrong)++;
        if (skd_store_key_revoke(hammer_st, "no-such-key", NULL) != SKD_ENOENT)
            (*wrong)++;
        if (skd_store_key_auth(hammer_st, secret, &k, NULL) != SKD_EUNAUTH)
            (*wrong)++;
        free(secret);
    }
    return NULL;
}

TEST(threads_hammer_keys_and_audit)
{
    char where[256];
    fresh_where(where, sizeof(where));
    pg_reset();
    skd_store_opts o = {.pool_size = 3, .busy_timeout_ms = 20000};
    skd_err err = {0};
    CHECK(skd_store_open_opts(where, &o, &hammer_st, &err) == 0);
    if (!hammer_st)
        return;
    hammer_iters = getenv("SKILLD_UNDER_VALGRIND") ? 5 : 40;
    int wrong[HAMMER_THREADS] = {0};
    pthread_t t[HAMMER_THREADS];
    for (int i = 0; i < HAMMER_THREADS; i++)
        pthread_create(&t[i], NULL, hammer, &wrong[i]);
    int total_wrong = 0;
    for (int i = 0; i < HAMMER_THREADS; i++) {
        pthread_join(t[i], NULL);
        total_wrong += wrong[i];
    }
    CHECK_EQ_INT(total_wrong, 0);
    int64_t count = 0;
    CHECK_EQ_INT(skd_store_key_count(hammer_st, &count, &err), 0);
    CHECK_EQ_INT(count, HAMMER_THREADS * hammer_iters);
    int64_t connects = 0;
    skd__store_counters(hammer_st, NULL, &connects);
    CHECK(connects <= 3); /* the pool bounds the connections */
    skd_store_close(hammer_st);
    hammer_st = NULL;
}

/* ---- migrations run once when many open a fresh database at once ---- */

#define OPENERS 6
static char race_where[256];

static void *open_fresh(void *arg)
{
    int *rc = arg;
    skd_store *st = NULL;
    skd_err err = {0};
    skd_store_opts o = {.pool_size = 1, .busy_timeout_ms = 20000};
    *rc = skd_store_open_opts(race_where, &o, &st, &err);
    if (*rc)
        printf("# open: %s\n", err.msg);
    skd_store_close(st);
    return NULL;
}

TEST(concurrent_first_opens_migrate_once)
{
    fresh_where(race_where, sizeof(race_where));
    pg_reset();
    int rc[OPENERS];
    pthread_t t[OPENERS];
    for (int i = 0; i < OPENERS; i++)
        pthread_create(&t[i], NULL, open_fresh, &rc[i]);
    for (int i = 0; i < OPENERS; i++) {
        pthread_join(t[i], NULL);
        CHECK_EQ_INT(rc[i], 0);
    }
    /* The schema is whole: every table answers. */
    skd_store *st = NULL;
    skd_err err = {0};
    CHECK(skd_store_open(race_where, &st, &err) == 0);
    int64_t count = -1;
    CHECK_EQ_INT(skd_store_key_count(st, &count, &err), 0);
    CHECK_EQ_INT(count, 0);
    int64_t total = -1;
    json_t *tasks = skd_store_task_list(st, "k", NULL, NULL, 0, 5, &total, &err);
    CHECK(tasks != NULL);
    json_decref(tasks);
    skd_store_close(st);
}

/* ---- runs: caps over two "replicas", leases, cancel requests ---- */

struct runner_arg {
    skd_store *st;
    int idx;
    int rc;
    int64_t t_start, t_end;
};

static void *one_run(void *arg)
{
    struct runner_arg *a = arg;
    char id[32];
    snprintf(id, sizeof(id), "run-%d", a->idx);
    skd_cancel *c = skd_cancel_new();
    skd_run_req rq = {.id = id,
                      .key_id = "capped",
                      .skill = "execute_command",
                      .cancel = c,
                      .per_key = 2,
                      .wait_ms = 20000};
    a->rc = skd_store_run_begin(a->st, &rq, NULL);
    if (a->rc == 0) {
        a->t_start = now_ms();
        usleep(150 * 1000);
        a->t_end = now_ms();
        skd_store_run_end(a->st, id, "done");
    }
    skd_cancel_free(c);
    return NULL;
}

TEST(run_cap_holds_over_two_replicas)
{
    char where[256];
    fresh_where(where, sizeof(where));
    pg_reset();
    skd_store *a = NULL, *b = NULL;
    skd_err err = {0};
    CHECK(skd_store_open(where, &a, &err) == 0);
    CHECK(skd_store_open(where, &b, &err) == 0);
    if (!a || !b) {
        skd_store_close(a);
        skd_store_close(b);
        return;
    }
    CHECK_EQ_INT(skd_store_replica_start(a, "ra", 3000, &err), 0);
    CHECK_EQ_INT(skd_store_replica_start(b, "rb", 3000, &err), 0);
    struct runner_arg args[8];
    pthread_t t[8];
    for (int i = 0; i < 8; i++) {
        args[i] = (struct runner_arg){.st = i % 2 ? b : a, .idx = i};
        pthread_create(&t[i], NULL, one_run, &args[i]);
    }
    for (int i = 0; i < 8; i++) {
        pthread_join(t[i], NULL);
        CHECK_EQ_INT(args[i].rc, 0);
    }
    /* From the rows: never more than 2 running at once. */
    json_t *runs = skd_store_run_list(a, "capped", NULL, 100, &err);
    CHECK(runs && json_array_size(runs) == 8);
    int best = 0;
    size_t i;
    json_t *r;
    json_array_foreach (runs, i, r) {
        int64_t s0 = json_integer_value(json_object_get(r, "startedAt"));
        int over = 0;
        size_t j;
        json_t *o;
        json_array_foreach (runs, j, o) {
            int64_t s1 = json_integer_value(json_object_get(o, "startedAt"));
            int64_t e1 = json_integer_value(json_object_get(o, "endedAt"));
            if (s1 <= s0 && s0 < e1)
                over++;
        }
        if (over > best)
            best = over;
        CHECK_STR(json_string_value(json_object_get(r, "state")), "done");
    }
    json_decref(runs);
    CHECK(best >= 1 && best <= 2);
    /* A third run at the cap waits, and gives up with busy. */
    skd_cancel *c1 = skd_cancel_new(), *c2 = skd_cancel_new(), *c3 = skd_cancel_new();
    skd_run_req r1 = {.id = "x1", .key_id = "k", .cancel = c1, .per_key = 2};
    skd_run_req r2 = {.id = "x2", .key_id = "k", .cancel = c2, .per_key = 2};
    skd_run_req r3 = {.id = "x3", .key_id = "k", .cancel = c3, .per_key = 2, .wait_ms = 200};
    CHECK_EQ_INT(skd_store_run_begin(a, &r1, &err), 0);
    CHECK_EQ_INT(skd_store_run_begin(b, &r2, &err), 0);
    CHECK_EQ_INT(skd_store_run_begin(a, &r3, &err), SKD_EBUSY);
    /* A cancel request through b reaches a's run. */
    CHECK_EQ_INT(skd_store_run_cancel(b, "k", "x1", &err), 0);
    CHECK_EQ_INT(skd_store_run_cancel(b, "other-key", "x1", NULL), SKD_ENOENT);
    int64_t t0 = now_ms();
    while (!skd_cancel_is_set(c1) && now_ms() - t0 < 5000)
        usleep(10 * 1000);
    CHECK(skd_cancel_is_set(c1));
    printf("# cancel through the other replica seen after %lld ms\n", (long long)(now_ms() - t0));
    skd_store_run_end(a, "x1", "cancelled");
    skd_store_run_end(b, "x2", "done");
    skd_cancel_free(c1);
    skd_cancel_free(c2);
    skd_cancel_free(c3);
    skd_store_close(a);
    skd_store_close(b);
}

TEST(dead_replica_runs_are_marked_lost)
{
    char where[256];
    fresh_where(where, sizeof(where));
    pg_reset();
    skd_store *dead = NULL, *live = NULL;
    skd_err err = {0};
    CHECK(skd_store_open(where, &dead, &err) == 0);
    CHECK(skd_store_open(where, &live, &err) == 0);
    if (!dead || !live) {
        skd_store_close(dead);
        skd_store_close(live);
        return;
    }
    CHECK_EQ_INT(skd_store_replica_start(dead, "dying", 600, &err), 0);
    CHECK_EQ_INT(skd_store_replica_start(live, "living", 600, &err), 0);
    skd_run_req d = {.id = "d1", .key_id = "k", .skill = "s"};
    skd_run_req l = {.id = "l1", .key_id = "k", .skill = "s"};
    CHECK_EQ_INT(skd_store_run_begin(dead, &d, &err), 0);
    CHECK_EQ_INT(skd_store_run_begin(live, &l, &err), 0);
    /* "dying" stops renewing (its thread ends with the handle; the row is
     * left as a crash leaves it), "living" renews its own. */
    skd_store_close(dead);
    int64_t t0 = now_ms();
    const char *state = "";
    json_t *runs = NULL;
    while (now_ms() - t0 < 5000) {
        json_decref(runs);
        runs = skd_store_run_list(live, "k", NULL, 10, &err);
        state = "";
        size_t i;
        json_t *r;
        json_array_foreach (runs, i, r)
            if (strcmp(json_string_value(json_object_get(r, "id")), "d1") == 0)
                state = json_string_value(json_object_get(r, "state"));
        if (strcmp(state, "lost") == 0)
            break;
        usleep(50 * 1000);
    }
    CHECK_STR(state, "lost");
    size_t i;
    json_t *r;
    json_array_foreach (runs, i, r)
        if (strcmp(json_string_value(json_object_get(r, "id")), "l1") == 0)
            CHECK_STR(json_string_value(json_object_get(r, "state")), "running");
    json_decref(runs);
    skd_store_run_end(live, "l1", "done");
    skd_store_close(live);
}

/* ---- the revoked keys of the sandboxes a replica holds ---- */

/* Each replica finds, in one query, the revoked keys of the live
 * sandboxes it holds (running, or paused with a lease): each key once,
 * none of another replica's, none of a paused row let go; and any
 * sandbox's row state, or SKD_ENOENT for none. */
TEST(revoked_keys_of_held_sandboxes)
{
    char where[256];
    fresh_where(where, sizeof(where));
    pg_reset();
    skd_store *a = NULL, *b = NULL;
    skd_err err = {0};
    CHECK(skd_store_open(where, &a, &err) == 0);
    CHECK(skd_store_open(where, &b, &err) == 0);
    if (!a || !b) {
        skd_store_close(a);
        skd_store_close(b);
        return;
    }
    CHECK_EQ_INT(skd_store_replica_start(a, "ra", 10000, &err), 0);
    CHECK_EQ_INT(skd_store_replica_start(b, "rb", 10000, &err), 0);
    char *secret = NULL, k1[64], k2[64];
    skd_key_info info;
    CHECK_EQ_INT(skd_store_key_create(a, "gone", SKD_SCOPE_EXECUTE, &secret, &info, &err), 0);
    free(secret);
    snprintf(k1, sizeof(k1), "%s", info.id);
    CHECK_EQ_INT(skd_store_key_create(a, "kept", SKD_SCOPE_EXECUTE, &secret, &info, &err), 0);
    free(secret);
    snprintf(k2, sizeof(k2), "%s", info.id);
    const char *ids[] = {"s1", "s2", "s3", "s4"}, *keys[] = {k1, k2, k1, k1};
    for (int i = 0; i < 4; i++) {
        skd_run_req q = {.id = ids[i], .key_id = keys[i], .skill = "sandbox", .kind = "live"};
        CHECK_EQ_INT(skd_store_run_begin(i == 3 ? b : a, &q, &err), 0);
    }
    json_t *sb = json_pack("{s:s, s:s}", "id", "s3", "state", "paused");
    CHECK_EQ_INT(skd_store_live_set(a, "", sb, &err), 0);
    json_decref(sb);
    json_t *got = skd_store_live_revoked_here(a, &err);
    CHECK(got && json_array_size(got) == 0);
    json_decref(got);
    CHECK_EQ_INT(skd_store_key_revoke(a, k1, &err), 0);
    const char *want[] = {k1, k1}; /* a: s1 and s3 (paused, held), once; b: s4 */
    skd_store *who[] = {a, b};
    for (int i = 0; i < 2; i++) {
        got = skd_store_live_revoked_here(who[i], &err);
        CHECK(got && json_array_size(got) == 1);
        CHECK_STR(json_string_value(json_array_get(got, 0)), want[i]);
        json_decref(got);
    }
    skd_store_run_end(a, "s1", "done");
    got = skd_store_live_revoked_here(a, &err);
    CHECK(got && json_array_size(got) == 1); /* s3 still */
    json_decref(got);
    skd_store_live_release(a, "s3"); /* let go: no longer a's */
    got = skd_store_live_revoked_here(a, &err);
    CHECK(got && json_array_size(got) == 0);
    json_decref(got);
    char state[16] = "";
    CHECK_EQ_INT(skd_store_live_state(b, "s1", state, sizeof(state), &err), 0);
    CHECK_STR(state, "done");
    CHECK_EQ_INT(skd_store_live_state(b, "s3", state, sizeof(state), &err), 0);
    CHECK_STR(state, "paused");
    CHECK_EQ_INT(skd_store_live_state(b, "s2", state, sizeof(state), &err), 0);
    CHECK_STR(state, "running");
    CHECK_EQ_INT(skd_store_live_state(b, "no-such", state, sizeof(state), &err), SKD_ENOENT);
    skd_store_run_end(a, "s2", "done");
    skd_store_run_end(b, "s4", "done");
    skd_store_close(a);
    skd_store_close(b);
}

/* Any replica finds, in one query, the revoked keys of paused sandboxes
 * that no replica holds (their lease let go): none while the holder keeps
 * its lease, none of a key not revoked, none of a running row, each key
 * once, none once the row ended. */
TEST(revoked_keys_of_unheld_paused_sandboxes)
{
    char where[256];
    fresh_where(where, sizeof(where));
    pg_reset();
    skd_store *a = NULL, *b = NULL;
    skd_err err = {0};
    CHECK(skd_store_open(where, &a, &err) == 0);
    CHECK(skd_store_open(where, &b, &err) == 0);
    if (!a || !b) {
        skd_store_close(a);
        skd_store_close(b);
        return;
    }
    CHECK_EQ_INT(skd_store_replica_start(a, "ra", 10000, &err), 0);
    CHECK_EQ_INT(skd_store_replica_start(b, "rb", 10000, &err), 0);
    char *secret = NULL, k1[64], k2[64];
    skd_key_info info;
    CHECK_EQ_INT(skd_store_key_create(a, "gone", SKD_SCOPE_EXECUTE, &secret, &info, &err), 0);
    free(secret);
    snprintf(k1, sizeof(k1), "%s", info.id);
    CHECK_EQ_INT(skd_store_key_create(a, "kept", SKD_SCOPE_EXECUTE, &secret, &info, &err), 0);
    free(secret);
    snprintf(k2, sizeof(k2), "%s", info.id);
    const char *ids[] = {"p1", "p2", "p3", "r1"}, *keys[] = {k1, k1, k2, k1};
    for (int i = 0; i < 4; i++) {
        skd_run_req q = {.id = ids[i], .key_id = keys[i], .skill = "sandbox", .kind = "live"};
        CHECK_EQ_INT(skd_store_run_begin(i == 3 ? b : a, &q, &err), 0);
        json_t *sb = json_pack("{s:s, s:s}", "id", ids[i], "state", "paused");
        if (i < 3)
            CHECK_EQ_INT(skd_store_live_set(a, "", sb, &err), 0);
        json_decref(sb);
    }
    skd_store_live_release(a, "p3"); /* k2's, not revoked */
    CHECK_EQ_INT(skd_store_key_revoke(a, k1, &err), 0);
    json_t *got = skd_store_live_revoked_unheld(b, &err);
    CHECK(got && json_array_size(got) == 0); /* p1, p2 held by a; r1 running */
    json_decref(got);
    skd_store_live_release(a, "p1");
    skd_store_live_release(a, "p2");
    skd_store *who[] = {a, b};
    for (int i = 0; i < 2; i++) {
        got = skd_store_live_revoked_unheld(who[i], &err);
        CHECK(got && json_array_size(got) == 1); /* k1 once */
        CHECK_STR(json_string_value(json_array_get(got, 0)), k1);
        json_decref(got);
    }
    skd_store_run_end(a, "p1", "done");
    skd_store_run_end(a, "p2", "done");
    got = skd_store_live_revoked_unheld(b, &err);
    CHECK(got && json_array_size(got) == 0);
    json_decref(got);
    skd_store_run_end(a, "p3", "done");
    skd_store_run_end(b, "r1", "done");
    skd_store_close(a);
    skd_store_close(b);
}

/* ---- the rate bucket is shared by every replica ---- */

TEST(rate_bucket_is_shared_by_replicas)
{
    char where[256];
    fresh_where(where, sizeof(where));
    pg_reset();
    skd_store *a = NULL, *b = NULL;
    skd_err err = {0};
    CHECK(skd_store_open(where, &a, &err) == 0);
    CHECK(skd_store_open(where, &b, &err) == 0);
    if (!a || !b) {
        skd_store_close(a);
        skd_store_close(b);
        return;
    }
    unsigned retry = 0;
    /* 1 a second, burst 3: three requests through either, then refused. */
    CHECK_EQ_INT(skd_store_rate_take(a, "key", 1, 3, &retry, &err), 0);
    CHECK_EQ_INT(skd_store_rate_take(b, "key", 1, 3, &retry, &err), 0);
    CHECK_EQ_INT(skd_store_rate_take(a, "key", 1, 3, &retry, &err), 0);
    CHECK_EQ_INT(skd_store_rate_take(b, "key", 1, 3, &retry, &err), SKD_EBUSY);
    CHECK(retry >= 1);
    CHECK_EQ_INT(skd_store_rate_take(a, "key", 1, 3, &retry, NULL), SKD_EBUSY);
    /* another key has its own bucket */
    CHECK_EQ_INT(skd_store_rate_take(b, "other", 1, 3, &retry, &err), 0);
    /* a token comes back after a second */
    usleep(1100 * 1000);
    CHECK_EQ_INT(skd_store_rate_take(b, "key", 1, 3, &retry, &err), 0);
    CHECK_EQ_INT(skd_store_rate_take(a, "key", 1, 3, &retry, NULL), SKD_EBUSY);
    skd_store_close(a);
    skd_store_close(b);
}

int main(void)
{
    TAP_BEGIN("store_concurrency");
    pg_url = getenv("SKILLD_TEST_STORE");
    if (pg_url && !*pg_url)
        pg_url = NULL;
    snprintf(dir, sizeof(dir), "/tmp/skd-storec-XXXXXX");
    if (!mkdtemp(dir)) {
        printf("FAIL store_concurrency: mkdtemp\n");
        return 1;
    }
    if (!pg_url) {
        RUN(read_error_is_store_unavailable);
        RUN(busy_wait_does_not_block_readers);
        RUN(locked_database_is_store_unavailable);
    }
    RUN(statements_are_prepared_once);
    RUN(threads_hammer_keys_and_audit);
    RUN(concurrent_first_opens_migrate_once);
    RUN(run_cap_holds_over_two_replicas);
    RUN(dead_replica_runs_are_marked_lost);
    RUN(revoked_keys_of_held_sandboxes);
    RUN(revoked_keys_of_unheld_paused_sandboxes);
    RUN(rate_bucket_is_shared_by_replicas);
    /* remove the temporary files */
    for (int i = 0; i < seq; i++) {
        const char *sfx[] = {"", "-wal", "-shm"};
        for (int j = 0; j < 3; j++) {
            char f[160];
            snprintf(f, sizeof(f), "%s/db%d.sqlite%s", dir, i, sfx[j]);
            unlink(f);
        }
    }
    rmdir(dir);
    return TAP_END();
}
