/*
 * Per-key request rate buckets in the store, so that SKILLD_RATE_LIMIT_PER_KEY
 * holds over every replica (src/server/ratelimit_store.c plugs it into the
 * HTTP layer's limiter). One upsert per request, on the database's clock:
 * the bucket (in thousandths of a request) refills at rate per second up to
 * burst, and one request takes a whole token when there is one. The row
 * lock of the upsert serialises concurrent requests of one key across
 * replicas.
 */
#include "store/store_internal.h"

#define NOW_SQLITE "CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)"
#define NOW_PG "CAST(extract(epoch from clock_timestamp()) * 1000 AS BIGINT)"
#define FILL(least, now) least "(?3 * 1000, b.tokens + (" now " - b.updated_ms) * ?2)"

static skd__sql q_take = SKD__SQL2(
    "INSERT INTO rate_buckets AS b (key_id, tokens, updated_ms, ok) "
    "VALUES (?1, ?3 * 1000 - 1000, " NOW_SQLITE ", 1) ON CONFLICT (key_id) DO UPDATE SET "
    "ok = CASE WHEN " FILL(
        "min", NOW_SQLITE) " >= 1000 THEN 1 ELSE 0 END, "
                           "tokens = " FILL("min", NOW_SQLITE) " - CASE WHEN " FILL(
                               "min",
                               NOW_SQLITE) " >= 1000 THEN 1000 ELSE 0 END, updated_ms = " NOW_SQLITE
                                           " RETURNING ok, tokens",
    "INSERT INTO rate_buckets AS b (key_id, tokens, updated_ms, ok) "
    "VALUES ($1, $3 * 1000 - 1000, " NOW_PG ", 1) ON CONFLICT (key_id) DO UPDATE SET "
    "ok = CASE WHEN " FILL(
        "LEAST", NOW_PG) " >= 1000 THEN 1 ELSE 0 END, "
                         "tokens = " FILL("LEAST", NOW_PG) " - CASE WHEN " FILL(
                             "LEAST", NOW_PG) " >= 1000 THEN 1000 ELSE 0 END, updated_ms = " NOW_PG
                                              " RETURNING ok, tokens");

int skd_store_rate_take(skd_store *st, const char *key_id, int64_t per_second, int64_t burst,
                        unsigned *retry_after_s, skd_err *err)
{
    skd__conn *c = NULL;
    skd__q q = {0};
    int rc;
    *retry_after_s = 0;
    if (per_second <= 0)
        return 0;
    if (burst <= 0)
        burst = per_second;
    if ((rc = skd__conn_get(st, &c, err)) || (rc = skd__q_start(c, &q_take, &q, err)))
        goto out;
    skd__q_text(&q, 1, key_id);
    skd__q_int(&q, 2, per_second);
    skd__q_int(&q, 3, burst);
    rc = skd__q_step(&q, err);
    if (rc == 1) {
        int ok = skd__q_col_int(&q, 0) == 1;
        int64_t tokens = skd__q_col_int(&q, 1);
        rc = 0;
        if (!ok) {
            int64_t need_ms = (1000 - tokens + per_second - 1) / per_second;
            int64_t s = (need_ms + 999) / 1000;
            *retry_after_s = (unsigned)(s < 1 ? 1 : s);
            rc = skd_err_set(err, SKD_EBUSY, "over the rate limit");
        }
        while (skd__q_step(&q, NULL) == 1) /* finish the statement */
            ;
    } else if (rc == 0) {
        rc = skd_err_set(err, SKD_ESTORE, "store: rate bucket: no answer");
    }
out:
    skd__q_end(&q);
    skd__conn_put(st, c);
    return rc;
}
