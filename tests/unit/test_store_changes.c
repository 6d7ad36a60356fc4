/*
 * The store is one SQLite connection shared by every server thread. A write
 * that reports "no such row" must judge by its own statement, never by
 * whatever another thread ran in between (sqlite3_changes() is per
 * connection): two threads revoke at once, one a real key, one a missing
 * one, and each must get its own answer every time.
 */
#include "skilld/registry.h"
#include "skilld/store.h"
#include "tap.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static skd_store *st;
static char real_id[64];
static int iters;

static void *revoke_real(void *arg)
{
    int *wrong = arg;
    for (int i = 0; i < iters; i++) {
        skd_err err = {0};
        if (skd_store_key_revoke(st, real_id, &err) != 0)
            (*wrong)++;
    }
    return NULL;
}

static void *revoke_missing(void *arg)
{
    int *wrong = arg;
    for (int i = 0; i < iters; i++) {
        skd_err err = {0};
        if (skd_store_key_revoke(st, "no-such-key", &err) != SKD_ENOENT)
            (*wrong)++;
    }
    return NULL;
}

TEST(concurrent_revokes_get_their_own_answer)
{
    char dir[] = "/tmp/skd-store-XXXXXX", path[128];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof(path), "%s/skilld.db", dir);
    skd_err err = {0};
    CHECK(skd_store_open(path, &st, &err) == 0);
    char *secret = NULL;
    skd_key_info info;
    CHECK(skd_store_key_create(st, "racer", SKD_SCOPE_READ, &secret, &info, &err) == 0);
    free(secret);
    snprintf(real_id, sizeof(real_id), "%s", info.id);
    iters = getenv("SKILLD_UNDER_VALGRIND") ? 2000 : 20000;
    int wrong_real = 0, wrong_missing = 0;
    pthread_t a, b;
    pthread_create(&a, NULL, revoke_real, &wrong_real);
    pthread_create(&b, NULL, revoke_missing, &wrong_missing);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    CHECK_EQ_INT(wrong_real, 0);
    CHECK_EQ_INT(wrong_missing, 0);
    skd_store_close(st);
    char f[160];
    const char *sfx[] = {"", "-wal", "-shm"};
    for (int i = 0; i < 3; i++) {
        snprintf(f, sizeof(f), "%s%s", path, sfx[i]);
        unlink(f);
    }
    rmdir(dir);
}

int main(void)
{
    TAP_BEGIN("store_changes");
    RUN(concurrent_revokes_get_their_own_answer);
    return TAP_END();
}
