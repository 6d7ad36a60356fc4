/*
 * The store's schema: an append-only list of migrations, written once for
 * each dialect (entry i of both lists makes the same tables). SQLite keeps
 * the number that ran in PRAGMA user_version; PostgreSQL in the one-row
 * table skilld_schema.
 *
 * All pending migrations run in one transaction that first takes the
 * database's write lock (SQLite: BEGIN IMMEDIATE; PostgreSQL: a
 * transaction-scoped advisory lock) and only then reads the version, so two
 * processes starting at once never both apply the same migration: the
 * second waits, rereads, and finds nothing left to do.
 *
 * PostgreSQL tables that are listed in insertion order carry a bigserial
 * column named rowid, so the same ORDER BY works in both dialects.
 */
#include "store/store_internal.h"

#include <stdio.h>

/* Append only: never edit a migration that has shipped. */
static const char *const sqlite_migrations[] = {
    /* 1: API keys and the execution audit */
    "CREATE TABLE api_keys ("
    "  id TEXT PRIMARY KEY, name TEXT NOT NULL, secret_sha256 TEXT NOT NULL UNIQUE,"
    "  scopes INTEGER NOT NULL, created_ms INTEGER NOT NULL, revoked INTEGER NOT NULL DEFAULT 0);"
    "CREATE TABLE executions ("
    "  id TEXT PRIMARY KEY, key_id TEXT NOT NULL, skill TEXT NOT NULL, version TEXT NOT NULL,"
    "  status TEXT NOT NULL, error_code TEXT, duration_ms INTEGER NOT NULL,"
    "  created_ms INTEGER NOT NULL, input_sha256 TEXT NOT NULL);"
    "CREATE INDEX executions_key_time ON executions(key_id, created_ms DESC);",
    /* 2: the web_search result cache (src/store/cache.c) */
    "CREATE TABLE cache ("
    "  key TEXT PRIMARY KEY, value TEXT NOT NULL, expires_ms INTEGER NOT NULL);"
    "CREATE INDEX cache_expiry ON cache(expires_ms);",
    /* 3: custom skills registered at runtime (src/store/skills.c); owner '' is global */
    "CREATE TABLE skills ("
    "  name TEXT NOT NULL, version TEXT NOT NULL, owner TEXT NOT NULL DEFAULT '',"
    "  manifest TEXT NOT NULL, skill_dir TEXT, enabled INTEGER NOT NULL DEFAULT 1,"
    "  created_ms INTEGER NOT NULL, PRIMARY KEY (name, version, owner));",
    /* 4: A2A tasks (src/store/tasks.c), owned by the key that created them */
    "CREATE TABLE a2a_tasks ("
    "  id TEXT PRIMARY KEY, key_id TEXT NOT NULL, context_id TEXT NOT NULL,"
    "  state TEXT NOT NULL, task TEXT NOT NULL, created_ms INTEGER NOT NULL,"
    "  updated_ms INTEGER NOT NULL);"
    "CREATE INDEX a2a_tasks_key_time ON a2a_tasks(key_id, updated_ms DESC);",
    /* 5: sandbox runs with their replica and lease (src/store/runs.c), and
     * change counters that replicas poll (and, on PostgreSQL, are told of) */
    "CREATE TABLE runs ("
    "  id TEXT PRIMARY KEY, key_id TEXT NOT NULL, skill TEXT NOT NULL, replica TEXT NOT NULL,"
    "  state TEXT NOT NULL, started_ms INTEGER NOT NULL, ended_ms INTEGER,"
    "  lease_until_ms INTEGER NOT NULL, cancel_requested INTEGER NOT NULL DEFAULT 0,"
    "  kind TEXT NOT NULL DEFAULT 'sandbox');"
    "CREATE INDEX runs_state_key ON runs(state, key_id);"
    "CREATE INDEX runs_replica ON runs(replica, state);"
    "CREATE TABLE changes (topic TEXT PRIMARY KEY, seq INTEGER NOT NULL);"
    "INSERT INTO changes VALUES ('skills', 0);",
    /* 6: MCP (2025) sessions, so any replica continues a session (sessions.c) */
    "CREATE TABLE mcp_sessions ("
    "  id TEXT PRIMARY KEY, key_id TEXT NOT NULL, scopes INTEGER NOT NULL,"
    "  version TEXT NOT NULL, initialized INTEGER NOT NULL, log_level INTEGER NOT NULL,"
    "  updated_ms INTEGER NOT NULL);"
    "CREATE INDEX mcp_sessions_time ON mcp_sessions(updated_ms);",
    /* 7: what a sandboxed run reached through the egress proxy (a JSON array,
     * src/net/egress.h), NULL for a call without network */
    "ALTER TABLE executions ADD COLUMN egress TEXT;",
    /* 8: SKILL.md bundles served over MCP (src/store/bundles.c); owner '' is the
     * operator's; record holds the front matter and every file's size and digest */
    "CREATE TABLE skill_bundles ("
    "  name TEXT NOT NULL, owner TEXT NOT NULL DEFAULT '', dir TEXT NOT NULL,"
    "  public INTEGER NOT NULL DEFAULT 0, record TEXT NOT NULL,"
    "  created_ms INTEGER NOT NULL, updated_ms INTEGER NOT NULL, PRIMARY KEY (name, owner));",
    /* 9: per-key request rate buckets shared by every replica (ratelimit.c) */
    ("CREATE TABLE rate_buckets (key_id TEXT PRIMARY KEY, tokens INTEGER NOT NULL,"
     "  updated_ms INTEGER NOT NULL, ok INTEGER NOT NULL);"),
    /* 10: secrets a key's sandboxes use through the egress proxy (secrets.c):
     * the value sealed with AES-256-GCM (nonce and sealed bytes in hex) */
    "CREATE TABLE secrets ("
    "  key_id TEXT NOT NULL, name TEXT NOT NULL, hosts TEXT NOT NULL, headers TEXT NOT NULL,"
    "  placeholder TEXT NOT NULL, fingerprint TEXT NOT NULL, nonce TEXT NOT NULL,"
    "  sealed TEXT NOT NULL, created_ms INTEGER NOT NULL, PRIMARY KEY (key_id, name));",
    /* 11: what each call used (metering, src/store/usage.c): its sandbox runs,
     * their CPU time (us) and largest memory peak, egress and workspace bytes;
     * and the time index that ranges over every key read */
    "ALTER TABLE executions ADD COLUMN sandbox_runs INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE executions ADD COLUMN cpu_us INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE executions ADD COLUMN mem_peak_bytes INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE executions ADD COLUMN egress_bytes INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE executions ADD COLUMN workspace_bytes INTEGER NOT NULL DEFAULT 0;"
    "CREATE INDEX executions_time ON executions(created_ms);",
    /* 12: operator console sessions (src/store/ui_sessions.c): the SHA-256 of the
     * cookie's token, never the token; the CSRF token its requests carry */
    "CREATE TABLE ui_sessions (id_sha256 TEXT PRIMARY KEY, key_id TEXT NOT NULL,"
    "  csrf TEXT NOT NULL, created_ms INTEGER NOT NULL, expires_ms INTEGER NOT NULL);"
    "CREATE INDEX ui_sessions_expiry ON ui_sessions(expires_ms);",
    /* 13: a failed call's error message (its first 300 bytes), for the console's
     * detail view; NULL on success */
    "ALTER TABLE executions ADD COLUMN error_message TEXT;",
    /* 14: live sandboxes are rows of the run table (kind 'live', runs.c):
     * detail holds the replica's internal URL and the sandbox object */
    "ALTER TABLE runs ADD COLUMN detail TEXT;",
};

static const char *const pg_migrations[] = {
    /* 1 */
    "CREATE TABLE api_keys ("
    "  id TEXT PRIMARY KEY, name TEXT NOT NULL, secret_sha256 TEXT NOT NULL UNIQUE,"
    "  scopes INTEGER NOT NULL, created_ms BIGINT NOT NULL, revoked INTEGER NOT NULL DEFAULT 0);"
    "CREATE TABLE executions ("
    "  rowid BIGSERIAL, id TEXT PRIMARY KEY, key_id TEXT NOT NULL, skill TEXT NOT NULL,"
    "  version TEXT NOT NULL, status TEXT NOT NULL, error_code TEXT,"
    "  duration_ms BIGINT NOT NULL, created_ms BIGINT NOT NULL, input_sha256 TEXT NOT NULL);"
    "CREATE INDEX executions_key_time ON executions(key_id, created_ms DESC);",
    /* 2 */
    "CREATE TABLE cache ("
    "  key TEXT PRIMARY KEY, value TEXT NOT NULL, expires_ms BIGINT NOT NULL);"
    "CREATE INDEX cache_expiry ON cache(expires_ms);",
    /* 3 */
    "CREATE TABLE skills ("
    "  rowid BIGSERIAL, name TEXT NOT NULL, version TEXT NOT NULL, owner TEXT NOT NULL DEFAULT '',"
    "  manifest TEXT NOT NULL, skill_dir TEXT, enabled INTEGER NOT NULL DEFAULT 1,"
    "  created_ms BIGINT NOT NULL, PRIMARY KEY (name, version, owner));",
    /* 4 */
    "CREATE TABLE a2a_tasks ("
    "  rowid BIGSERIAL, id TEXT PRIMARY KEY, key_id TEXT NOT NULL, context_id TEXT NOT NULL,"
    "  state TEXT NOT NULL, task TEXT NOT NULL, created_ms BIGINT NOT NULL,"
    "  updated_ms BIGINT NOT NULL);"
    "CREATE INDEX a2a_tasks_key_time ON a2a_tasks(key_id, updated_ms DESC);",
    /* 5 */
    "CREATE TABLE runs ("
    "  id TEXT PRIMARY KEY, key_id TEXT NOT NULL, skill TEXT NOT NULL, replica TEXT NOT NULL,"
    "  state TEXT NOT NULL, started_ms BIGINT NOT NULL, ended_ms BIGINT,"
    "  lease_until_ms BIGINT NOT NULL, cancel_requested INTEGER NOT NULL DEFAULT 0,"
    "  kind TEXT NOT NULL DEFAULT 'sandbox');"
    "CREATE INDEX runs_state_key ON runs(state, key_id);"
    "CREATE INDEX runs_replica ON runs(replica, state);"
    "CREATE TABLE changes (topic TEXT PRIMARY KEY, seq BIGINT NOT NULL);"
    "INSERT INTO changes VALUES ('skills', 0);",
    /* 6 */
    "CREATE TABLE mcp_sessions ("
    "  id TEXT PRIMARY KEY, key_id TEXT NOT NULL, scopes INTEGER NOT NULL,"
    "  version TEXT NOT NULL, initialized INTEGER NOT NULL, log_level INTEGER NOT NULL,"
    "  updated_ms BIGINT NOT NULL);"
    "CREATE INDEX mcp_sessions_time ON mcp_sessions(updated_ms);",
    /* 7 */
    "ALTER TABLE executions ADD COLUMN egress TEXT;",
    /* 8 */
    "CREATE TABLE skill_bundles ("
    "  name TEXT NOT NULL, owner TEXT NOT NULL DEFAULT '', dir TEXT NOT NULL,"
    "  public INTEGER NOT NULL DEFAULT 0, record TEXT NOT NULL,"
    "  created_ms BIGINT NOT NULL, updated_ms BIGINT NOT NULL, PRIMARY KEY (name, owner));",
    /* 9 */
    ("CREATE TABLE rate_buckets (key_id TEXT PRIMARY KEY, tokens BIGINT NOT NULL,"
     "  updated_ms BIGINT NOT NULL, ok INTEGER NOT NULL);"),
    /* 10 */
    "CREATE TABLE secrets ("
    "  key_id TEXT NOT NULL, name TEXT NOT NULL, hosts TEXT NOT NULL, headers TEXT NOT NULL,"
    "  placeholder TEXT NOT NULL, fingerprint TEXT NOT NULL, nonce TEXT NOT NULL,"
    "  sealed TEXT NOT NULL, created_ms BIGINT NOT NULL, PRIMARY KEY (key_id, name));",
    /* 11 */
    "ALTER TABLE executions ADD COLUMN sandbox_runs INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE executions ADD COLUMN cpu_us BIGINT NOT NULL DEFAULT 0;"
    "ALTER TABLE executions ADD COLUMN mem_peak_bytes BIGINT NOT NULL DEFAULT 0;"
    "ALTER TABLE executions ADD COLUMN egress_bytes BIGINT NOT NULL DEFAULT 0;"
    "ALTER TABLE executions ADD COLUMN workspace_bytes BIGINT NOT NULL DEFAULT 0;"
    "CREATE INDEX executions_time ON executions(created_ms);",
    /* 12 */
    "CREATE TABLE ui_sessions (id_sha256 TEXT PRIMARY KEY, key_id TEXT NOT NULL,"
    "  csrf TEXT NOT NULL, created_ms BIGINT NOT NULL, expires_ms BIGINT NOT NULL);"
    "CREATE INDEX ui_sessions_expiry ON ui_sessions(expires_ms);",
    /* 13 */
    "ALTER TABLE executions ADD COLUMN error_message TEXT;",
    /* 14 */
    "ALTER TABLE runs ADD COLUMN detail TEXT;",
};

#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))
_Static_assert(COUNT(sqlite_migrations) == COUNT(pg_migrations),
               "every migration is written in both dialects");

static skd__sql q_sqlite_version = SKD__SQL("PRAGMA user_version");
static skd__sql q_pg_version = SKD__SQL("SELECT version FROM skilld_schema");

/* The schema version, read inside the migration's transaction. */
static int read_version(skd__conn *c, int *version, skd_err *err)
{
    skd__q q;
    int pg = skd__conn_kind(c) == SKD__STORE_PG, rc;
    *version = 0;
    if (pg && ((rc = skd__conn_exec(c,
                                    "SELECT pg_advisory_xact_lock(7431003);"
                                    "CREATE TABLE IF NOT EXISTS skilld_schema (version INTEGER);"
                                    "INSERT INTO skilld_schema SELECT 0 WHERE NOT EXISTS "
                                    "(SELECT 1 FROM skilld_schema);",
                                    err))))
        return rc;
    if ((rc = skd__q_start(c, pg ? &q_pg_version : &q_sqlite_version, &q, err)))
        return rc;
    rc = skd__q_step(&q, err);
    if (rc == 1) {
        *version = (int)skd__q_col_int(&q, 0);
        rc = 0;
    } else if (rc == 0) {
        rc = skd_err_set(err, SKD_ESTORE, "store: the schema version cannot be read");
    }
    skd__q_end(&q);
    return rc;
}

int skd__store_migrate(skd__conn *c, skd_err *err)
{
    int pg = skd__conn_kind(c) == SKD__STORE_PG;
    const char *const *list = pg ? pg_migrations : sqlite_migrations;
    int n = COUNT(sqlite_migrations), version = 0, rc;
    if ((rc = skd__conn_begin(c, err)))
        return rc;
    if ((rc = read_version(c, &version, err)))
        goto fail;
    if (version > n) {
        rc = skd_err_set(err, SKD_ESTORE,
                         "store: database schema %d is newer than this skilld (%d)", version, n);
        goto fail;
    }
    for (int i = version; i < n; i++)
        if ((rc = skd__conn_exec(c, list[i], err)))
            goto fail;
    if (version < n) {
        char set[80];
        snprintf(set, sizeof(set),
                 pg ? "UPDATE skilld_schema SET version=%d" : "PRAGMA user_version=%d", n);
        if ((rc = skd__conn_exec(c, set, err)))
            goto fail;
    }
    if ((rc = skd__conn_commit(c, err)) == 0)
        return 0;
fail:
    skd__conn_rollback(c);
    return rc;
}
