/*
 * The in-memory per-key rate limiter (see ratelimit.h): one token bucket
 * per API key id in a chained hash table under one mutex. Tokens are kept
 * in thousandths so that rates below one a second still refill smoothly.
 * Key ids come from the store after authentication, so the table holds at
 * most one bucket per real key; max_keys bounds it anyway.
 */
#include "server/ratelimit.h"

#include "skilld/error.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define NBUCKETS 1024
#define MILLI 1000

struct bucket {
    struct bucket *next;
    int64_t tokens;  /* thousandths of a request */
    int64_t last_ms; /* when tokens was computed */
    char key[];
};

struct mem_limiter {
    struct skd_ratelimit base;
    pthread_mutex_t mu;
    int64_t rate;  /* requests per second */
    int64_t burst; /* requests */
    size_t n, max_keys;
    struct bucket *tab[NBUCKETS];
};

static size_t hash(const char *s)
{
    size_t h = 5381;
    for (; *s; s++)
        h = h * 33 + (unsigned char)*s;
    return h % NBUCKETS;
}

/* Bring b's tokens up to now. */
static void refill(struct mem_limiter *m, struct bucket *b, int64_t now_ms)
{
    int64_t cap = m->burst * MILLI;
    if (now_ms > b->last_ms) {
        int64_t dt = now_ms - b->last_ms;
        /* dt * rate thousandths per ms; cap dt first so nothing overflows. */
        if (dt > 86400000)
            dt = 86400000;
        b->tokens += dt * m->rate;
        if (b->tokens > cap)
            b->tokens = cap;
        b->last_ms = now_ms;
    }
}

/* Make room for one more bucket: drop every full bucket, else the one
 * refilled longest ago (m->mu held). */
static void evict(struct mem_limiter *m, int64_t now_ms)
{
    struct bucket **oldest = NULL;
    for (size_t i = 0; i < NBUCKETS; i++) {
        for (struct bucket **pp = &m->tab[i]; *pp;) {
            struct bucket *b = *pp;
            refill(m, b, now_ms);
            if (b->tokens >= m->burst * MILLI) {
                *pp = b->next;
                free(b);
                m->n--;
                continue;
            }
            if (!oldest || b->last_ms < (*oldest)->last_ms)
                oldest = pp;
            pp = &b->next;
        }
    }
    if (m->n >= m->max_keys && oldest) {
        struct bucket *b = *oldest;
        *oldest = b->next;
        free(b);
        m->n--;
    }
}

static int mem_take(skd_ratelimit *rl, const char *key_id, int64_t now_ms, unsigned *retry_after_s)
{
    struct mem_limiter *m = (struct mem_limiter *)rl;
    int rc = 0;
    *retry_after_s = 0;
    pthread_mutex_lock(&m->mu);
    size_t h = hash(key_id);
    struct bucket *b = m->tab[h];
    while (b && strcmp(b->key, key_id) != 0)
        b = b->next;
    if (!b) {
        if (m->n >= m->max_keys) {
            evict(m, now_ms);
            h = hash(key_id);
        }
        size_t len = strlen(key_id);
        b = malloc(sizeof(*b) + len + 1);
        if (!b) {
            /* Fail closed: without a bucket the request cannot be counted. */
            pthread_mutex_unlock(&m->mu);
            *retry_after_s = 1;
            return SKD_EBUSY;
        }
        memcpy(b->key, key_id, len + 1);
        b->tokens = m->burst * MILLI;
        b->last_ms = now_ms;
        b->next = m->tab[h];
        m->tab[h] = b;
        m->n++;
    }
    refill(m, b, now_ms);
    if (b->tokens >= MILLI) {
        b->tokens -= MILLI;
    } else {
        /* Milliseconds until one whole token is back, rounded up to seconds. */
        int64_t need_ms = (MILLI - b->tokens + m->rate - 1) / m->rate;
        int64_t s = (need_ms + 999) / 1000;
        *retry_after_s = (unsigned)(s < 1 ? 1 : s);
        rc = SKD_EBUSY;
    }
    pthread_mutex_unlock(&m->mu);
    return rc;
}

static void mem_free(skd_ratelimit *rl)
{
    struct mem_limiter *m = (struct mem_limiter *)rl;
    for (size_t i = 0; i < NBUCKETS; i++) {
        struct bucket *b = m->tab[i];
        while (b) {
            struct bucket *next = b->next;
            free(b);
            b = next;
        }
    }
    pthread_mutex_destroy(&m->mu);
    free(m);
}

static const struct skd_ratelimit_ops mem_ops = {mem_take, mem_free};

skd_ratelimit *skd__ratelimit_new(int64_t per_second, int64_t burst, size_t max_keys)
{
    if (per_second <= 0)
        return NULL; /* off: skd__ratelimit_take(NULL, ...) allows */
    struct mem_limiter *m = calloc(1, sizeof(*m));
    if (!m)
        return NULL;
    m->base.ops = &mem_ops;
    m->rate = per_second;
    m->burst = burst > 0 ? burst : per_second;
    m->max_keys = max_keys ? max_keys : 1;
    pthread_mutex_init(&m->mu, NULL);
    return &m->base;
}

int skd__ratelimit_take(skd_ratelimit *rl, const char *key_id, int64_t now_ms,
                        unsigned *retry_after_s)
{
    *retry_after_s = 0;
    if (!rl)
        return 0;
    return rl->ops->take(rl, key_id, now_ms, retry_after_s);
}

void skd__ratelimit_free(skd_ratelimit *rl)
{
    if (rl)
        rl->ops->free(rl);
}
