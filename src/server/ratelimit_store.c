/*
 * The per-key rate limiter backed by the store (src/store/ratelimit.c), for
 * replicas that share a PostgreSQL store: one bucket per key for all of
 * them, so a key gets SKILLD_RATE_LIMIT_PER_KEY over the whole deployment,
 * not per replica. Fails closed: a bucket that cannot be read refuses the
 * request (retry after 1 s).
 */
#include "server/ratelimit.h"
#include "skilld/error.h"
#include "skilld/store.h"

#include <stdlib.h>

struct store_limiter {
    skd_ratelimit base;
    skd_store *st;
    int64_t rate, burst;
};

static int store_take(skd_ratelimit *rl, const char *key_id, int64_t now_ms,
                      unsigned *retry_after_s)
{
    struct store_limiter *s = (struct store_limiter *)rl;
    (void)now_ms; /* the database's clock decides, the same for every replica */
    int rc = skd_store_rate_take(s->st, key_id, s->rate, s->burst, retry_after_s, NULL);
    if (rc && *retry_after_s == 0)
        *retry_after_s = 1;
    return rc ? SKD_EBUSY : 0;
}

static void store_free(skd_ratelimit *rl)
{
    free(rl);
}

static const struct skd_ratelimit_ops store_ops = {store_take, store_free};

skd_ratelimit *skd__ratelimit_store_new(skd_store *st, int64_t per_second, int64_t burst)
{
    if (per_second <= 0)
        return NULL;
    struct store_limiter *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    s->base.ops = &store_ops;
    s->st = st;
    s->rate = per_second;
    s->burst = burst > 0 ? burst : per_second;
    return &s->base;
}
