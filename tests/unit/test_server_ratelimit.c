/*
 * The per-key rate limiter (src/server/ratelimit.c): a burst is allowed at
 * once, then requests at the rate; each key has its own bucket; the
 * Retry-After it reports is when a request would be allowed again; the
 * table of buckets stays within its bound.
 */
#include "server/ratelimit.h"
#include "skilld/error.h"
#include "tap.h"

TEST(ratelimit_off_allows_everything)
{
    unsigned ra = 99;
    skd_ratelimit *rl = skd__ratelimit_new(0, 10, 16);
    CHECK(rl == NULL);
    for (int i = 0; i < 1000; i++)
        CHECK(skd__ratelimit_take(rl, "k", i, &ra) == 0);
    CHECK(ra == 0);
}

TEST(ratelimit_burst_then_rate)
{
    unsigned ra = 0;
    skd_ratelimit *rl = skd__ratelimit_new(2, 5, 16);
    CHECK(rl != NULL);
    for (int i = 0; i < 5; i++)
        CHECK(skd__ratelimit_take(rl, "alice", 1000, &ra) == 0);
    CHECK(skd__ratelimit_take(rl, "alice", 1000, &ra) == SKD_EBUSY);
    CHECK_EQ_INT(ra, 1);
    /* 2 a second: one more after 500 ms, not before. */
    CHECK(skd__ratelimit_take(rl, "alice", 1499, &ra) == SKD_EBUSY);
    CHECK(skd__ratelimit_take(rl, "alice", 1500, &ra) == 0);
    CHECK(skd__ratelimit_take(rl, "alice", 1500, &ra) == SKD_EBUSY);
    /* A long pause refills to the burst, never past it. */
    for (int i = 0; i < 5; i++)
        CHECK(skd__ratelimit_take(rl, "alice", 100000, &ra) == 0);
    CHECK(skd__ratelimit_take(rl, "alice", 100000, &ra) == SKD_EBUSY);
    skd__ratelimit_free(rl);
}

TEST(ratelimit_keys_are_separate)
{
    unsigned ra = 0;
    skd_ratelimit *rl = skd__ratelimit_new(1, 1, 16);
    CHECK(skd__ratelimit_take(rl, "alice", 0, &ra) == 0);
    CHECK(skd__ratelimit_take(rl, "alice", 0, &ra) == SKD_EBUSY);
    CHECK(skd__ratelimit_take(rl, "bob", 0, &ra) == 0);
    skd__ratelimit_free(rl);
}

TEST(ratelimit_retry_after_rounds_up)
{
    unsigned ra = 0;
    /* 1 request every 2 s is not expressible; 1 a second with burst 1:
     * right after a request the next is 1 s away. */
    skd_ratelimit *rl = skd__ratelimit_new(1, 1, 16);
    CHECK(skd__ratelimit_take(rl, "k", 0, &ra) == 0);
    CHECK(skd__ratelimit_take(rl, "k", 10, &ra) == SKD_EBUSY);
    CHECK_EQ_INT(ra, 1);
    CHECK(skd__ratelimit_take(rl, "k", 1000, &ra) == 0);
    skd__ratelimit_free(rl);
}

TEST(ratelimit_table_is_bounded)
{
    unsigned ra = 0;
    char key[32];
    skd_ratelimit *rl = skd__ratelimit_new(1, 1, 8);
    /* 100 keys each spend their token: the table never holds more than 8
     * buckets, so the oldest are forgotten (and start full again). */
    for (int i = 0; i < 100; i++) {
        snprintf(key, sizeof(key), "key%d", i);
        CHECK(skd__ratelimit_take(rl, key, 0, &ra) == 0);
    }
    /* The latest key is still remembered as empty. */
    CHECK(skd__ratelimit_take(rl, "key99", 0, &ra) == SKD_EBUSY);
    skd__ratelimit_free(rl);
}

int main(void)
{
    TAP_BEGIN("server_ratelimit");
    RUN(ratelimit_off_allows_everything);
    RUN(ratelimit_burst_then_rate);
    RUN(ratelimit_keys_are_separate);
    RUN(ratelimit_retry_after_rounds_up);
    RUN(ratelimit_table_is_bounded);
    return TAP_END();
}
