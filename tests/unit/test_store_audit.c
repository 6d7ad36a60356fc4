/*
 * Batched audit rows and the key cache of the store (issue 13), on a real
 * SQLite file, and with SKILLD_TEST_STORE=postgresql://... on PostgreSQL
 * too. Two store handles on one database stand for two processes: b reads
 * only what a has written to the database, never a's queue.
 *   - batched rows are not in the database before their window (a window of
 *     a minute: nothing else writes them), an in-process reader flushes
 *     first and sees them, and they are written once the window has passed;
 *   - audit_sync writes a row before audit_add returns;
 *   - closing the store writes every queued row;
 *   - a full queue is written by the caller that finds it full;
 *   - a batch the database refuses (SQLite's write lock held elsewhere)
 *     stays queued and is written once the lock is gone;
 *   - a revoked key is refused on the very next call, also by another
 *     handle that had it cached, and the cache holds no wrong answers;
 *   - SQLite: a revocation committed without its signal (a revoker killed
 *     between the two) is caught by the replica thread's poll, and with
 *     the signal file unusable every call reads the row and still refuses
 *     a revoked key at once; a signal file that is another name of some
 *     other file is not used, and a new one gets the database's mode;
 *   - metering: usage is summed per key over a time range, in buckets,
 *     and as a key's CPU since a time; rows are filtered by key, skill,
 *     status and time; console sessions are found by their digest until
 *     they expire or are deleted.
 */
#include "skilld/registry.h"
#include "skilld/store.h"
#include "skilld/util.h"
#include "store/store_internal.h"
#include "tap.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[64];
static int seq;
static const char *pg_url; /* SKILLD_TEST_STORE, or NULL for SQLite */

static void fresh_where(char *out, size_t cap)
{
    if (pg_url) {
        snprintf(out, cap, "%s", pg_url);
        return;
    }
    snprintf(out, cap, "%s/db%d.sqlite", dir, seq++);
}

/* Open where with the given audit window (0: sync). */
static skd_store *open_with(const char *where, int flush_ms)
{
    skd_store_opts o = {.audit_flush_ms = flush_ms > 0 ? flush_ms : 0, .audit_sync = flush_ms == 0};
    skd_store *st = NULL;
    skd_err err = {0};
    if (skd_store_open_opts(where, &o, &st, &err) != 0)
        printf("# open %s: %s\n", where, err.msg);
    return st;
}

/* Rows of key in the database, as another process sees them. */
static int rows_seen_by(skd_store *reader, const char *key)
{
    skd_err err = {0};
    json_t *rows = skd_store_audit_list(reader, key, 1000, &err);
    int n = rows ? (int)json_array_size(rows) : -1;
    json_decref(rows);
    return n;
}

static void add_rows(skd_store *st, const char *key, const char *prefix, int n)
{
    for (int i = 0; i < n; i++) {
        char id[80];
        snprintf(id, sizeof(id), "%s-%s-%d", key, prefix, i);
        skd_audit a = {.id = id, .key_id = key, .skill = "file_read", .status = "success"};
        skd_err err = {0};
        if (skd_store_audit_add(st, &a, &err) != 0)
            printf("# audit_add %s: %s\n", id, err.msg);
    }
}

/* A key id of our own per test: the PostgreSQL database is shared. */
static void key_name(char *out, size_t cap, const char *what)
{
    snprintf(out, cap, "k%d-%s-%ld", seq++, what, (long)getpid());
}

TEST(batched_rows_wait_for_their_window)
{
    char where[256], key[64];
    fresh_where(where, sizeof(where));
    key_name(key, sizeof(key), "wait");
    skd_store *a = open_with(where, 60000), *b = open_with(where, 0);
    CHECK(a && b);
    if (!a || !b)
        goto out;
    add_rows(a, key, "w", 3);
    CHECK_EQ_INT(rows_seen_by(b, key), 0); /* a minute's window: still queued */
    CHECK_EQ_INT(rows_seen_by(a, key), 3); /* a reader in a's process flushes first */
    CHECK_EQ_INT(rows_seen_by(b, key), 3); /* and they are in the database now */
out:
    skd_store_close(a);
    skd_store_close(b);
}

TEST(batched_rows_are_written_after_the_window)
{
    char where[256], key[64];
    fresh_where(where, sizeof(where));
    key_name(key, sizeof(key), "after");
    skd_store *a = open_with(where, 50), *b = open_with(where, 0);
    CHECK(a && b);
    if (!a || !b)
        goto out;
    add_rows(a, key, "x", 5);
    int seen = 0;
    for (int i = 0; i < 200 && seen < 5; i++) { /* 50 ms window, up to 10 s of polling */
        usleep(50 * 1000);
        seen = rows_seen_by(b, key);
    }
    CHECK_EQ_INT(seen, 5);
out:
    skd_store_close(a);
    skd_store_close(b);
}

TEST(sync_writes_before_returning)
{
    char where[256], key[64];
    fresh_where(where, sizeof(where));
    key_name(key, sizeof(key), "sync");
    skd_store *a = open_with(where, 0), *b = open_with(where, 0);
    CHECK(a && b);
    if (!a || !b)
        goto out;
    add_rows(a, key, "s", 1);
    CHECK_EQ_INT(rows_seen_by(b, key), 1);
    add_rows(a, key, "t", 1);
    CHECK_EQ_INT(rows_seen_by(b, key), 2);
out:
    skd_store_close(a);
    skd_store_close(b);
}

TEST(close_writes_every_queued_row)
{
    char where[256], key[64];
    fresh_where(where, sizeof(where));
    key_name(key, sizeof(key), "close");
    skd_store *a = open_with(where, 60000), *b = open_with(where, 0);
    CHECK(a && b);
    if (!a || !b)
        goto out;
    add_rows(a, key, "c", 7);
    CHECK_EQ_INT(rows_seen_by(b, key), 0);
    skd_store_close(a);
    a = NULL;
    CHECK_EQ_INT(rows_seen_by(b, key), 7);
out:
    skd_store_close(a);
    skd_store_close(b);
}

TEST(a_full_queue_is_written_by_its_caller)
{
    char where[256], key[64];
    fresh_where(where, sizeof(where));
    key_name(key, sizeof(key), "full");
    skd_store *a = open_with(where, 60000), *b = open_with(where, 0);
    CHECK(a && b);
    if (!a || !b)
        goto out;
    add_rows(a, key, "f", 1030); /* the queue holds 1024 */
    skd_err err = {0};
    json_t *rows = skd_store_audit_list(b, key, 1000, &err);
    /* the 1025th call wrote the 1024 queued before it; the rest wait */
    CHECK(rows && json_array_size(rows) == 1000); /* the list's own cap */
    json_decref(rows);
    skd_store_close(a);
    a = NULL;
    skd__conn *c = NULL;
    int64_t n = -1;
    CHECK_EQ_INT(skd__conn_get(b, &c, &err), 0);
    if (c) {
        static skd__sql q_count = SKD__SQL("SELECT count(*) FROM executions WHERE key_id=?1");
        skd__q q;
        if (skd__q_start(c, &q_count, &q, &err) == 0) {
            skd__q_text(&q, 1, key);
            if (skd__q_step(&q, &err) == 1)
                n = skd__q_col_int(&q, 0);
            skd__q_end(&q);
        }
        skd__conn_put(b, c);
    }
    CHECK_EQ_INT(n, 1030);
out:
    skd_store_close(a);
    skd_store_close(b);
}

TEST(a_refused_batch_stays_queued)
{
    char where[256], key[64];
    fresh_where(where, sizeof(where));
    key_name(key, sizeof(key), "locked");
    skd_store_opts o = {.audit_flush_ms = 20, .busy_timeout_ms = 100};
    skd_store *a = NULL, *b = open_with(where, 0);
    skd_err err = {0};
    CHECK(skd_store_open_opts(where, &o, &a, &err) == 0);
    CHECK(b != NULL);
    if (!a || !b)
        goto out;
    sqlite3 *lock = NULL;
    CHECK(sqlite3_open(where, &lock) == SQLITE_OK);
    CHECK(sqlite3_exec(lock, "BEGIN IMMEDIATE; DELETE FROM cache;", NULL, NULL, NULL) == SQLITE_OK);
    add_rows(a, key, "l", 4);
    usleep(600 * 1000); /* several windows: every try met the lock */
    CHECK_EQ_INT(sqlite3_exec(lock, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(lock);
    int seen = 0;
    for (int i = 0; i < 200 && seen < 4; i++) {
        usleep(50 * 1000);
        seen = rows_seen_by(b, key);
    }
    CHECK_EQ_INT(seen, 4);
out:
    skd_store_close(a);
    skd_store_close(b);
}

TEST(revoked_key_is_refused_at_once_by_every_handle)
{
    char where[256];
    fresh_where(where, sizeof(where));
    skd_store *a = open_with(where, 20), *b = open_with(where, 20);
    CHECK(a && b);
    if (!a || !b)
        goto out;
    char *secret = NULL, *other = NULL;
    skd_key_info info, oinfo, k;
    skd_err err = {0};
    CHECK_EQ_INT(skd_store_key_create(a, "r", SKD_SCOPE_READ, &secret, &info, &err), 0);
    CHECK_EQ_INT(skd_store_key_create(a, "o", SKD_SCOPE_EXECUTE, &other, &oinfo, &err), 0);
    if (!secret || !other)
        goto out2;
    for (int i = 0; i < 3; i++) { /* both handles have it cached now */
        CHECK_EQ_INT(skd_store_key_auth(a, secret, &k, &err), 0);
        CHECK_EQ_INT(skd_store_key_auth(b, secret, &k, &err), 0);
        CHECK_STR(k.id, info.id);
        CHECK_EQ_INT(k.scopes, SKD_SCOPE_READ);
    }
    CHECK_EQ_INT(skd_store_key_auth(b, other, &k, &err), 0);
    CHECK_STR(k.id, oinfo.id);
    CHECK_EQ_INT(k.scopes, SKD_SCOPE_EXECUTE);
    /* a cached key with a wrong secret is still refused */
    char wrong[128];
    snprintf(wrong, sizeof(wrong), "%s", secret);
    wrong[strlen(wrong) - 1] = wrong[strlen(wrong) - 1] == '0' ? '1' : '0';
    CHECK_EQ_INT(skd_store_key_auth(b, wrong, &k, NULL), SKD_EUNAUTH);
    CHECK_EQ_INT(skd_store_key_revoke(a, info.id, &err), 0);
    skd_err_clear(&err);
    CHECK_EQ_INT(skd_store_key_auth(b, secret, &k, &err), SKD_EUNAUTH);
    CHECK(strstr(err.msg, "revoked") != NULL);
    CHECK_EQ_INT(skd_store_key_auth(a, secret, &k, NULL), SKD_EUNAUTH);
    /* the other key still works through both */
    CHECK_EQ_INT(skd_store_key_auth(b, other, &k, &err), 0);
    CHECK_EQ_INT(skd_store_key_auth(a, other, &k, &err), 0);
    /* revoked through b, refused by a at once */
    CHECK_EQ_INT(skd_store_key_revoke(b, oinfo.id, &err), 0);
    CHECK_EQ_INT(skd_store_key_auth(a, other, &k, NULL), SKD_EUNAUTH);
out2:
    free(secret);
    free(other);
out:
    skd_store_close(a);
    skd_store_close(b);
}

/* Revoke id the way a revoker killed after its commit leaves it: the row
 * and the generation changed, and no signal. */
static int revoke_unsignalled(const char *where, const char *id)
{
    sqlite3 *db = NULL;
    char sql[256];
    snprintf(sql, sizeof(sql),
             "BEGIN IMMEDIATE; UPDATE api_keys SET revoked=1 WHERE id='%s'; "
             "INSERT INTO changes(topic,seq) VALUES('keys',1) "
             "ON CONFLICT(topic) DO UPDATE SET seq=changes.seq+1; COMMIT;",
             id);
    int rc = sqlite3_open(where, &db) == SQLITE_OK ? sqlite3_busy_timeout(db, 5000) : -1;
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
    sqlite3_close(db);
    return rc;
}

TEST(an_unsignalled_revocation_is_caught_by_the_poll)
{
    char where[256];
    fresh_where(where, sizeof(where));
    skd_store *a = open_with(where, 20);
    char *secret = NULL;
    skd_key_info info, k;
    skd_err err = {0};
    CHECK(a != NULL);
    if (!a)
        return;
    CHECK_EQ_INT(skd_store_key_create(a, "u", SKD_SCOPE_READ, &secret, &info, &err), 0);
    CHECK_EQ_INT(skd_store_replica_start(a, "poll-test", 3000, &err), 0);
    if (!secret)
        goto out;
    CHECK_EQ_INT(skd_store_key_auth(a, secret, &k, &err), 0); /* cached */
    CHECK_EQ_INT(revoke_unsignalled(where, info.id), SQLITE_OK);
    /* Believed until the poll (every 200 ms) finds the row moved. */
    CHECK_EQ_INT(skd_store_key_auth(a, secret, &k, &err), 0);
    int refused_after_ms = -1;
    for (int ms = 0; ms < 3000 && refused_after_ms < 0; ms += 10) {
        skd_err_clear(&err);
        if (skd_store_key_auth(a, secret, &k, &err) == SKD_EUNAUTH)
            refused_after_ms = ms;
        else
            usleep(10000);
    }
    printf("# refused %d ms after the unsignalled revocation\n", refused_after_ms);
    CHECK(refused_after_ms >= 0);
    CHECK(strstr(err.msg, "revoked") != NULL);
out:
    free(secret);
    skd_store_close(a);
}

TEST(without_the_signal_file_every_call_reads_the_row)
{
    char where[256], sig[300];
    fresh_where(where, sizeof(where));
    snprintf(sig, sizeof(sig), "%s-keysig", where);
    CHECK_EQ_INT(mkdir(sig, 0700), 0); /* a directory cannot be mapped */
    skd_store *a = open_with(where, 20), *b = open_with(where, 20);
    char *secret = NULL;
    skd_key_info info, k;
    skd_err err = {0};
    CHECK(a && b);
    if (!a || !b)
        goto out;
    CHECK(a->kc != NULL);
    CHECK_EQ_INT(skd_store_key_create(a, "n", SKD_SCOPE_READ, &secret, &info, &err), 0);
    if (!secret)
        goto out;
    CHECK_EQ_INT(skd_store_key_auth(a, secret, &k, &err), 0);
    CHECK_EQ_INT(skd_store_key_auth(a, secret, &k, &err), 0);
    CHECK_EQ_INT(skd_store_key_revoke(b, info.id, &err), 0);
    CHECK_EQ_INT(skd_store_key_auth(a, secret, &k, NULL), SKD_EUNAUTH);
    /* and unsignalled, the same: the row is read every call */
    char *other = NULL;
    skd_key_info oinfo;
    CHECK_EQ_INT(skd_store_key_create(a, "o", SKD_SCOPE_READ, &other, &oinfo, &err), 0);
    if (other) {
        CHECK_EQ_INT(skd_store_key_auth(a, other, &k, &err), 0);
        CHECK_EQ_INT(revoke_unsignalled(where, oinfo.id), SQLITE_OK);
        CHECK_EQ_INT(skd_store_key_auth(a, other, &k, NULL), SKD_EUNAUTH);
    }
    free(other);
out:
    free(secret);
    skd_store_close(a);
    skd_store_close(b);
    rmdir(sig);
}

TEST(the_signal_file_is_checked_and_given_the_database_mode)
{
    char where[256], sig[300], other[300];
    struct stat sb;
    fresh_where(where, sizeof(where));
    snprintf(sig, sizeof(sig), "%s-keysig", where);
    snprintf(other, sizeof(other), "%s-other", where);
    /* another name of some other file: never used (nor extended) */
    int fd = open(other, O_RDWR | O_CREAT | O_EXCL, 0600);
    CHECK(fd >= 0);
    if (fd >= 0)
        close(fd);
    CHECK_EQ_INT(link(other, sig), 0);
    skd_store *a = open_with(where, 20);
    CHECK(a != NULL);
    skd_store_close(a);
    CHECK_EQ_INT(stat(other, &sb), 0);
    CHECK_EQ_INT((int)sb.st_size, 0);
    unlink(sig);
    unlink(other);
    /* a shared store's group writes the signal too, whatever the umask */
    CHECK_EQ_INT(chmod(where, 0660), 0);
    mode_t old = umask(022);
    a = open_with(where, 20);
    umask(old);
    CHECK(a != NULL);
    CHECK_EQ_INT(stat(sig, &sb), 0);
    CHECK_EQ_INT((int)(sb.st_mode & 0777), 0660);
    CHECK_EQ_INT((int)sb.st_size, 4096);
    CHECK_EQ_INT((int)sb.st_nlink, 1);
    skd_store_close(a);
    /* ... and the database's group, not the maker's (whose group would
     * write it without writing the database) */
    unlink(sig);
    CHECK_EQ_INT(chown(where, (uid_t)-1, 2000), 0);
    a = open_with(where, 20);
    CHECK(a != NULL);
    CHECK_EQ_INT(stat(sig, &sb), 0);
    CHECK_EQ_INT((int)sb.st_gid, 2000);
    CHECK_EQ_INT((int)(sb.st_mode & 0777), 0660);
    skd_store_close(a);
}

/* A key id no other test (or earlier run, on PostgreSQL) has used. */
static void unique_key(char *out, size_t cap, const char *name)
{
    snprintf(out, cap, "%s-%d-%lld", name, (int)getpid(), (long long)skd_wall_ms());
}

static void add_metered(skd_store *st, const char *id, const char *key, const char *skill,
                        const char *status, int64_t at, int64_t cpu_us, int64_t peak, int64_t ws)
{
    skd_audit a = {.id = id,
                   .key_id = key,
                   .skill = skill,
                   .status = status,
                   .created_ms = at,
                   .sandbox_runs = cpu_us ? 1 : 0,
                   .cpu_us = cpu_us,
                   .mem_peak_bytes = peak,
                   .egress_bytes = 7,
                   .workspace_bytes = ws};
    skd_err err = {0};
    if (skd_store_audit_add(st, &a, &err) != 0)
        printf("# audit_add %s: %s\n", id, err.msg);
}

static const json_t *row_of(const json_t *rows, const char *key)
{
    size_t i;
    const json_t *r;
    json_array_foreach (rows, i, r)
        if (strcmp(json_string_value(json_object_get(r, "keyId")), key) == 0)
            return r;
    return NULL;
}

#define JINT(o, k) ((long long)json_integer_value(json_object_get((o), (k))))

TEST(usage_is_summed_per_key_over_a_range)
{
    char where[256], k1[64], k2[64], id[96];
    fresh_where(where, sizeof(where));
    skd_store *st = open_with(where, 20);
    CHECK(st != NULL);
    unique_key(k1, sizeof(k1), "meter-a");
    unique_key(k2, sizeof(k2), "meter-b");
    int64_t t0 = 1000000000000LL + (skd_wall_ms() % 1000000) * 1000;
    snprintf(id, sizeof(id), "%s-1", k1);
    add_metered(st, id, k1, "execute_command", "success", t0, 1500000, 4 << 20, 200000);
    snprintf(id, sizeof(id), "%s-2", k1);
    add_metered(st, id, k1, "execute_command", "error", t0 + 10, 700, 9 << 20, 0);
    snprintf(id, sizeof(id), "%s-3", k1);
    add_metered(st, id, k1, "file_write", "success", t0 + 5000, 0, 0, 100);
    snprintf(id, sizeof(id), "%s-1", k2);
    add_metered(st, id, k2, "execute_command", "success", t0 + 20, 2000, 1 << 20, 0);
    skd_err err = {0};
    json_t *all = skd_store_usage(st, NULL, t0, t0 + 10000, &err);
    CHECK(all != NULL);
    const json_t *a = row_of(all, k1), *b = row_of(all, k2);
    CHECK(a && b);
    CHECK_EQ_INT(JINT(a, "executions"), 3);
    CHECK_EQ_INT(JINT(a, "sandboxRuns"), 2);
    CHECK_EQ_INT(JINT(a, "sandboxCpuUs"), 1500700);
    CHECK_EQ_INT(JINT(a, "sandboxCpuMs"), 1500);
    CHECK_EQ_INT(JINT(a, "sandboxMemoryPeakBytes"), 9 << 20); /* the largest, not a sum */
    CHECK_EQ_INT(JINT(a, "egressBytes"), 21);
    CHECK_EQ_INT(JINT(a, "workspaceBytes"), 200100);
    CHECK_EQ_INT(JINT(b, "executions"), 1);
    json_decref(all);
    /* one key; a range that leaves the last row out */
    json_t *one = skd_store_usage(st, k1, t0, t0 + 5000, &err);
    CHECK(one && json_array_size(one) == 1);
    CHECK_EQ_INT(JINT(json_array_get(one, 0), "executions"), 2);
    json_decref(one);
    /* buckets of a second: two for k1, one for k2 */
    json_t *ser = skd_store_usage_series(st, k1, t0, t0 + 10000, 1000, &err);
    CHECK(ser && json_array_size(ser) == 2);
    CHECK_EQ_INT(JINT(json_array_get(ser, 0), "t"), t0);
    CHECK_EQ_INT(JINT(json_array_get(ser, 0), "sandboxCpuMs"), 1500);
    CHECK_EQ_INT(JINT(json_array_get(ser, 0), "executions"), 2);
    CHECK_EQ_INT(JINT(json_array_get(ser, 1), "t"), t0 + 5000);
    json_decref(ser);
    int64_t cpu = -1;
    CHECK_EQ_INT(skd_store_usage_cpu(st, k1, t0 + 1, &cpu, &err), 0);
    CHECK(cpu == 700);
    CHECK_EQ_INT(skd_store_usage_cpu(st, "no-such-key", 0, &cpu, &err), 0);
    CHECK(cpu == 0);
    skd_store_close(st);
}

static int query_count(skd_store *st, const skd_audit_filter *f)
{
    skd_err err = {0};
    json_t *rows = skd_store_audit_query(st, f, &err);
    int n = rows ? (int)json_array_size(rows) : -1;
    json_decref(rows);
    return n;
}

TEST(executions_are_filtered_by_key_skill_status_and_time)
{
    char where[256], k1[64], k2[64], id[96];
    fresh_where(where, sizeof(where));
    skd_store *st = open_with(where, 20);
    CHECK(st != NULL);
    unique_key(k1, sizeof(k1), "filter-a");
    unique_key(k2, sizeof(k2), "filter-b");
    int64_t t0 = 1100000000000LL + (skd_wall_ms() % 1000000) * 1000;
    snprintf(id, sizeof(id), "%s-1", k1);
    add_metered(st, id, k1, "file_read", "success", t0, 0, 0, 0);
    snprintf(id, sizeof(id), "%s-2", k1);
    add_metered(st, id, k1, "file_read", "error", t0 + 1, 0, 0, 0);
    snprintf(id, sizeof(id), "%s-3", k1);
    add_metered(st, id, k1, "file_write", "success", t0 + 2, 0, 0, 0);
    snprintf(id, sizeof(id), "%s-1", k2);
    add_metered(st, id, k2, "file_read", "success", t0 + 3, 0, 0, 0);
    skd_audit_filter f = {.key_id = k1, .since_ms = t0, .until_ms = t0 + 100, .limit = 100};
    CHECK_EQ_INT(query_count(st, &f), 3);
    f.skill = "file_read";
    CHECK_EQ_INT(query_count(st, &f), 2);
    f.status = "error";
    CHECK_EQ_INT(query_count(st, &f), 1);
    f.status = NULL;
    f.since_ms = t0 + 1;
    CHECK_EQ_INT(query_count(st, &f), 1);
    skd_audit_filter every = {
        .skill = "file_read", .since_ms = t0, .until_ms = t0 + 4, .limit = 100};
    CHECK_EQ_INT(query_count(st, &every), 3); /* both keys */
    every.until_ms = t0 + 3;
    CHECK_EQ_INT(query_count(st, &every), 2); /* until is exclusive */
    skd_err err = {0};
    snprintf(id, sizeof(id), "%s-1", k2);
    json_t *row = skd_store_audit_get(st, NULL, id, &err); /* any key's: the admin's read */
    CHECK(row != NULL);
    json_decref(row);
    CHECK(skd_store_audit_get(st, k1, id, &err) == NULL); /* another key's: not found */
    CHECK_EQ_INT(err.code, SKD_ENOENT);
    skd_store_close(st);
}

TEST(console_sessions_live_until_they_expire_or_are_deleted)
{
    char where[256], digest[65], key[64], csrf[65], k[64];
    fresh_where(where, sizeof(where));
    skd_store *st = open_with(where, 20);
    CHECK(st != NULL);
    unique_key(k, sizeof(k), "session-key");
    skd_sha256_hex(k, strlen(k), digest);
    skd_err err = {0};
    int64_t now = skd_wall_ms();
    CHECK_EQ_INT(skd_store_ui_session_put(st, digest, k, "c5rf", now, now + 60000, &err), 0);
    CHECK_EQ_INT(skd_store_ui_session_get(st, digest, now, key, csrf, &err), 0);
    CHECK_STR(key, k);
    CHECK_STR(csrf, "c5rf");
    CHECK_EQ_INT(skd_store_ui_session_get(st, digest, now + 60000, key, csrf, &err), SKD_ENOENT);
    CHECK_EQ_INT(skd_store_ui_session_get(st, "0000", now, key, csrf, &err), SKD_ENOENT);
    CHECK_EQ_INT(skd_store_ui_session_del(st, digest, &err), 0);
    CHECK_EQ_INT(skd_store_ui_session_get(st, digest, now, key, csrf, &err), SKD_ENOENT);
    CHECK_EQ_INT(skd_store_ui_session_del(st, digest, &err), 0); /* absent: still 0 */
    skd_store_close(st);
}

int main(void)
{
    TAP_BEGIN("store_audit");
    pg_url = getenv("SKILLD_TEST_STORE");
    if (pg_url && !*pg_url)
        pg_url = NULL;
    snprintf(dir, sizeof(dir), "/tmp/skd-storea-XXXXXX");
    if (!mkdtemp(dir)) {
        printf("FAIL store_audit: mkdtemp\n");
        return 1;
    }
    RUN(batched_rows_wait_for_their_window);
    RUN(batched_rows_are_written_after_the_window);
    RUN(sync_writes_before_returning);
    RUN(close_writes_every_queued_row);
    RUN(a_full_queue_is_written_by_its_caller);
    if (!pg_url)
        RUN(a_refused_batch_stays_queued);
    RUN(revoked_key_is_refused_at_once_by_every_handle);
    RUN(usage_is_summed_per_key_over_a_range);
    RUN(executions_are_filtered_by_key_skill_status_and_time);
    RUN(console_sessions_live_until_they_expire_or_are_deleted);
    if (!pg_url) {
        RUN(an_unsignalled_revocation_is_caught_by_the_poll);
        RUN(without_the_signal_file_every_call_reads_the_row);
        RUN(the_signal_file_is_checked_and_given_the_database_mode);
    }
    for (int i = 0; i < seq; i++) {
        char p[128];
        snprintf(p, sizeof(p), "%s/db%d.sqlite", dir, i);
        unlink(p);
        snprintf(p, sizeof(p), "%s/db%d.sqlite-wal", dir, i);
        unlink(p);
        snprintf(p, sizeof(p), "%s/db%d.sqlite-shm", dir, i);
        unlink(p);
    }
    rmdir(dir);
    return TAP_END();
}
