/*
 * The store's key/value cache with expiry (see include/skilld/store.h),
 * holding web_search results. Trusts its callers for keys and values (they
 * are bound as parameters, never spliced into SQL); an expired row is never
 * returned, whatever the clock did in between.
 */
#include "store/store_internal.h"

#include <stdlib.h>
#include <string.h>

static skd__sql q_get = SKD__SQL("SELECT value FROM cache WHERE key = ?1 AND expires_ms > ?2");
static skd__sql q_purge = SKD__SQL("DELETE FROM cache WHERE expires_ms <= ?1");
static skd__sql q_put =
    SKD__SQL2("INSERT OR REPLACE INTO cache(key, value, expires_ms) VALUES (?1, ?2, ?3)",
              "INSERT INTO cache(key, value, expires_ms) VALUES ($1, $2, $3) ON CONFLICT (key) "
              "DO UPDATE SET value = excluded.value, expires_ms = excluded.expires_ms");

int skd_store_cache_get(skd_store *st, const char *key, int64_t now_ms, char **value, skd_err *err)
{
    skd__conn *c = NULL;
    skd__q q = {0};
    int rc;
    *value = NULL;
    if ((rc = skd__conn_get(st, &c, err)) || (rc = skd__q_start(c, &q_get, &q, err)))
        goto out;
    skd__q_text(&q, 1, key);
    skd__q_int(&q, 2, now_ms);
    rc = skd__q_step(&q, err);
    if (rc == 1) {
        const char *v = skd__q_col(&q, 0);
        *value = strdup(v ? v : "");
        rc = *value ? 0 : skd_err_set(err, SKD_ENOMEM, "out of memory");
    } else if (rc == 0) {
        rc = skd_err_set(err, SKD_ENOENT, "not cached");
    }
out:
    skd__q_end(&q);
    skd__conn_put(st, c);
    return rc;
}

int skd_store_cache_put(skd_store *st, const char *key, const char *value, int64_t now_ms,
                        int64_t ttl_ms, skd_err *err)
{
    skd__conn *c = NULL;
    skd__q q = {0};
    int rc;
    if ((rc = skd__conn_get(st, &c, err)) || (rc = skd__q_start(c, &q_purge, &q, err)))
        goto out;
    skd__q_int(&q, 1, now_ms);
    rc = skd__q_run(&q, NULL, err);
    skd__q_end(&q);
    if (rc || (rc = skd__q_start(c, &q_put, &q, err)))
        goto out;
    skd__q_text(&q, 1, key);
    skd__q_text(&q, 2, value);
    skd__q_int(&q, 3, now_ms + ttl_ms);
    rc = skd__q_run(&q, NULL, err);
out:
    skd__q_end(&q);
    skd__conn_put(st, c);
    return rc;
}
