/*
 * The store (see include/skilld/store.h): one SQLite database in WAL mode,
 * opened in serialized mode so any thread may use it. Migrations are an
 * append-only list of SQL scripts; PRAGMA user_version records how many ran.
 * Other parts keep their tables here by appending a migration.
 */
#include "store/store_internal.h"

#include <stdlib.h>
#include <string.h>

/* Append only: never edit a migration that has shipped. */
static const char *const migrations[] = {
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
    /* 5: SKILL.md bundles served over MCP (src/store/bundles.c); owner '' is the
     * operator's; record holds the front matter and every file's size and digest */
    "CREATE TABLE skill_bundles ("
    "  name TEXT NOT NULL, owner TEXT NOT NULL DEFAULT '', dir TEXT NOT NULL,"
    "  public INTEGER NOT NULL DEFAULT 0, record TEXT NOT NULL,"
    "  created_ms INTEGER NOT NULL, updated_ms INTEGER NOT NULL, PRIMARY KEY (name, owner));",
};

int skd__store_fail(skd_store *st, skd_err *err, const char *what)
{
    return skd_err_set(err, SKD_EIO, "store: %s: %s", what, sqlite3_errmsg(st->db));
}

int skd__store_step_write(skd_store *st, sqlite3_stmt *q, const char *what, int64_t *changes,
                          skd_err *err)
{
    /* The connection is shared (FULLMUTEX) and sqlite3_changes() reports
     * the connection's last statement: without its mutex held across both
     * calls, another thread's write in between answers for this one. The
     * mutex is recursive, so sqlite3_step() may take it again. */
    sqlite3_mutex *mu = sqlite3_db_mutex(st->db);
    int rc = 0;
    sqlite3_mutex_enter(mu);
    if (sqlite3_step(q) != SQLITE_DONE)
        rc = skd__store_fail(st, err, what);
    else if (changes)
        *changes = sqlite3_changes(st->db);
    sqlite3_mutex_leave(mu);
    return rc;
}

static int exec_sql(skd_store *st, const char *sql, skd_err *err)
{
    char *msg = NULL;
    if (sqlite3_exec(st->db, sql, NULL, NULL, &msg) != SQLITE_OK) {
        int rc = skd_err_set(err, SKD_EIO, "store: %s", msg ? msg : "error");
        sqlite3_free(msg);
        return rc;
    }
    return 0;
}

static int migrate(skd_store *st, skd_err *err)
{
    sqlite3_stmt *q = NULL;
    int version = 0, rc;
    if (sqlite3_prepare_v2(st->db, "PRAGMA user_version", -1, &q, NULL) != SQLITE_OK)
        return skd__store_fail(st, err, "read schema version");
    if (sqlite3_step(q) == SQLITE_ROW)
        version = sqlite3_column_int(q, 0);
    sqlite3_finalize(q);
    int n = (int)(sizeof(migrations) / sizeof(migrations[0]));
    if (version > n)
        return skd_err_set(err, SKD_EIO, "store: database schema %d is newer than this skilld (%d)",
                           version, n);
    for (int i = version; i < n; i++) {
        char pragma[64];
        snprintf(pragma, sizeof(pragma), "PRAGMA user_version=%d;", i + 1);
        if ((rc = exec_sql(st, "BEGIN IMMEDIATE", err)) != 0)
            return rc;
        if ((rc = exec_sql(st, migrations[i], err)) != 0 || (rc = exec_sql(st, pragma, err)) != 0) {
            exec_sql(st, "ROLLBACK", NULL);
            return rc;
        }
        if ((rc = exec_sql(st, "COMMIT", err)) != 0)
            return rc;
    }
    return 0;
}

int skd_store_open(const char *path, skd_store **out, skd_err *err)
{
    *out = NULL;
    skd_store *st = calloc(1, sizeof(*st));
    if (!st)
        return skd_err_set(err, SKD_ENOMEM, "out of memory");
    int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX;
    int rc;
    if (sqlite3_open_v2(path, &st->db, flags, NULL) != SQLITE_OK) {
        rc = skd_err_set(err, SKD_EIO, "store: cannot open %s: %s", path,
                         st->db ? sqlite3_errmsg(st->db) : "out of memory");
        goto out;
    }
    sqlite3_busy_timeout(st->db, 5000);
    if ((rc = exec_sql(st,
                       "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
                       "PRAGMA foreign_keys=ON;",
                       err)) != 0)
        goto out;
    if ((rc = migrate(st, err)) != 0)
        goto out;
    *out = st;
    return 0;
out:
    skd_store_close(st);
    return rc;
}

void skd_store_close(skd_store *st)
{
    if (!st)
        return;
    sqlite3_close(st->db);
    free(st);
}

sqlite3 *skd__store_db(skd_store *st)
{
    return st->db;
}
