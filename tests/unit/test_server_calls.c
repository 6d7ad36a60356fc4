/*
 * The server's worker pool (src/server/calls.c): jobs run on reused
 * workers rather than a thread each, the job cap is enforced (SKD_EBUSY),
 * a stop refuses new jobs and waits for running ones, and freeing the
 * tracker ends its idle workers.
 */
#include "server/calls.h"
#include "tap.h"

#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#define MAXT 64

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_t seen[MAXT];
static size_t nseen;
static atomic_int ran;

static void note_thread(void *arg)
{
    (void)arg;
    pthread_t self = pthread_self();
    pthread_mutex_lock(&mu);
    size_t i;
    for (i = 0; i < nseen; i++)
        if (pthread_equal(seen[i], self))
            break;
    if (i == nseen && nseen < MAXT)
        seen[nseen++] = self;
    pthread_mutex_unlock(&mu);
    atomic_fetch_add(&ran, 1);
}

static atomic_int release;

static void block_until_released(void *arg)
{
    (void)arg;
    while (!atomic_load(&release))
        usleep(1000);
    atomic_fetch_add(&ran, 1);
}

TEST(calls_reuse_workers)
{
    skd_calls *c = skd__calls_new();
    nseen = 0;
    atomic_store(&ran, 0);
    /* One job at a time: each finds the previous job's worker idle. */
    for (int i = 0; i < 50; i++) {
        CHECK_EQ_INT(skd__calls_spawn(c, 8, note_thread, NULL), 0);
        CHECK_EQ_INT(skd__calls_drain(c, 5000), 0);
    }
    CHECK_EQ_INT(atomic_load(&ran), 50);
    CHECK(nseen <= 2); /* not a thread per job */
    skd__calls_free(c);
}

TEST(calls_cap_and_stop)
{
    skd_calls *c = skd__calls_new();
    atomic_store(&ran, 0);
    atomic_store(&release, 0);
    for (int i = 0; i < 4; i++)
        CHECK_EQ_INT(skd__calls_spawn(c, 4, block_until_released, NULL), 0);
    CHECK_EQ_INT(skd__calls_spawn(c, 4, block_until_released, NULL), SKD_EBUSY);
    CHECK_EQ_INT(skd__calls_drain(c, 100), SKD_ETIMEOUT); /* they still run */
    atomic_store(&release, 1);
    CHECK_EQ_INT(skd__calls_stop(c, 5000), 0);
    CHECK_EQ_INT(atomic_load(&ran), 4);
    CHECK_EQ_INT(skd__calls_spawn(c, 4, note_thread, NULL), SKD_EBUSY); /* stopping */
    skd__calls_free(c); /* ends the idle workers (valgrind/ASan would see them leak) */
}

TEST(calls_many_at_once)
{
    skd_calls *c = skd__calls_new();
    atomic_store(&ran, 0);
    for (int i = 0; i < 200; i++)
        CHECK_EQ_INT(skd__calls_spawn(c, 1024, note_thread, NULL), 0);
    CHECK_EQ_INT(skd__calls_drain(c, 10000), 0);
    CHECK_EQ_INT(atomic_load(&ran), 200);
    skd__calls_free(c);
}

int main(void)
{
    TAP_BEGIN("server_calls");
    RUN(calls_reuse_workers);
    RUN(calls_cap_and_stop);
    RUN(calls_many_at_once);
    return TAP_END();
}
