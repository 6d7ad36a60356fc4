/*
 * A test-only hook (SKILLD_TEST_THREAD_CHURN=N with SKILLD_TEST_SKILLS):
 * one thread of the server creates and destroys N threads a second for as
 * long as the server runs. It reproduces the load under which a sandbox
 * child cloned from a multi-threaded process can hang in glibc's setxid
 * broadcast, and shows that the spawner (single-threaded, its own process)
 * is immune to what the server's threads do. Never on in production.
 */
#include "cli/cli.h"
#include "skilld/log.h"

#include <pthread.h>
#include <time.h>

static int churn_rate;

static void *short_life(void *arg)
{
    (void)arg;
    return NULL;
}

static void *churn_main(void *arg)
{
    (void)arg;
    struct timespec gap = {0, 1000000000L / churn_rate};
    for (;;) {
        pthread_t t;
        if (pthread_create(&t, NULL, short_life, NULL) == 0)
            pthread_join(t, NULL);
        nanosleep(&gap, NULL);
    }
    return NULL;
}

void skd__cli_test_churn(const skd_config *cfg)
{
    int64_t n = skd_config_int(cfg, "SKILLD_TEST_THREAD_CHURN");
    if (n <= 0 || !skd_config_bool(cfg, "SKILLD_TEST_SKILLS"))
        return;
    churn_rate = (int)n;
    pthread_t t;
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&t, &a, churn_main, NULL) == 0)
        skd_warn("test hook: %d threads a second are created and destroyed", churn_rate);
    pthread_attr_destroy(&a);
}
