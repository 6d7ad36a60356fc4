/*
 * Per-key request rate limits (SKILLD_RATE_LIMIT_PER_KEY requests per
 * second, SKILLD_RATE_LIMIT_BURST at once). The HTTP layer asks once per
 * authenticated request, after the bearer key is known and before any of
 * the body is read. The limiter sits behind a small table of operations so
 * that a replicated deployment can back it by the store (a shared bucket
 * per key) without the transports changing; skd__ratelimit_new builds the
 * in-memory one.
 */
#ifndef SKILLD_SERVER_RATELIMIT_H
#define SKILLD_SERVER_RATELIMIT_H

#include <stddef.h>
#include <stdint.h>

typedef struct skd_ratelimit skd_ratelimit;

struct skd_ratelimit_ops {
    /* Take one request for key_id (borrowed) at now_ms (monotonic). 0 when
     * allowed; SKD_EBUSY with *retry_after_s (>= 1) when over the limit. */
    int (*take)(skd_ratelimit *rl, const char *key_id, int64_t now_ms, unsigned *retry_after_s);
    void (*free)(skd_ratelimit *rl);
};

/* Every implementation starts with this header. */
struct skd_ratelimit {
    const struct skd_ratelimit_ops *ops;
};

/* The in-memory limiter: a token bucket per key refilled at per_second
 * tokens a second, holding at most burst (burst 0: per_second, at least 1).
 * per_second 0 turns limiting off (take always allows). At most max_keys
 * buckets are kept; past that, full buckets (which a new bucket equals) are
 * dropped, and when none is full the oldest goes. NULL when out of memory. */
skd_ratelimit *skd__ratelimit_new(int64_t per_second, int64_t burst, size_t max_keys);

/* The limiter backed by the store's shared buckets (ratelimit_store.c),
 * used when replicas share a PostgreSQL store. NULL when per_second is 0 or
 * out of memory. */
typedef struct skd_store skd_store;
skd_ratelimit *skd__ratelimit_store_new(skd_store *st, int64_t per_second, int64_t burst);

/* Dispatch to the implementation; rl NULL allows everything. */
int skd__ratelimit_take(skd_ratelimit *rl, const char *key_id, int64_t now_ms,
                        unsigned *retry_after_s);
void skd__ratelimit_free(skd_ratelimit *rl); /* NULL ok */

#endif
