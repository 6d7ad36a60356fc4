/*
 * The store's key/value cache with expiry (see include/skilld/store.h),
 * holding web_search results. Trusts its callers for keys and values (they
 * are bound as parameters, never spliced into SQL); an expired row is never
 * returned, whatever the clock did in between.
 */
#include "store/store_internal.h"

#include <stdlib.h>
#include <string.h>

int skd_store_cache_get(skd_store *st, const char *key, int64_t now_ms, char **value,
                        skd_err *err)
{
    sqlite3_stmt *q = NULL;
    int rc;
    *value = NULL;
    if (sqlite3_prepare_v2(st->db, "SELECT value FROM cache WHERE key = ?1 AND expires_ms > ?2",
                           -1, &q, NULL) != SQLITE_OK)
        return skd__store_fail(st, err, "cache lookup");
    sqlite3_bind_text(q, 1, key, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(q, 2, now_ms);
    int step = sqlite3_step(q);
    if (step == SQLITE_ROW) {
        const char *v = (const char *)sqlite3_column_text(q, 0);
        *value = strdup(v ? v : "");
        rc = *value ? 0 : skd_err_set(err, SKD_ENOMEM, "out of memory");
    } else if (step == SQLITE_DONE) {
        rc = skd_err_set(err, SKD_ENOENT, "not cached");
    } else {
        rc = skd__store_fail(st, err, "cache lookup");
    }
    sqlite3_finalize(q);
    return rc;
}

int skd_store_cache_put(skd_store *st, const char *key, const char *value, int64_t now_ms,
                        int64_t ttl_ms, skd_err *err)
{
    sqlite3_stmt *q = NULL;
    int rc = 0;
    if (sqlite3_prepare_v2(st->db, "DELETE FROM cache WHERE expires_ms <= ?1", -1, &q, NULL) !=
        SQLITE_OK)
        return skd__store_fail(st, err, "cache purge");
    sqlite3_bind_int64(q, 1, now_ms);
    if (sqlite3_step(q) != SQLITE_DONE)
        rc = skd__store_fail(st, err, "cache purge");
    sqlite3_finalize(q);
    if (rc)
        return rc;
    if (sqlite3_prepare_v2(st->db,
                           "INSERT OR REPLACE INTO cache(key, value, expires_ms) VALUES (?1, ?2, ?3)",
                           -1, &q, NULL) != SQLITE_OK)
        return skd__store_fail(st, err, "cache insert");
    sqlite3_bind_text(q, 1, key, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(q, 2, value, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(q, 3, now_ms + ttl_ms);
    if (sqlite3_step(q) != SQLITE_DONE)
        rc = skd__store_fail(st, err, "cache insert");
    sqlite3_finalize(q);
    return rc;
}
