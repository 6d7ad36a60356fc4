/*
 * Cancellation tokens (see include/skilld/registry.h). A transport fires the
 * token from its own thread; the handler's hook (for example "kill this
 * sandbox run") runs once, under the token's mutex, so removing the hook
 * waits for a hook that is running and the hook never sees freed state.
 */
#include "skilld/registry.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

struct skd_cancel {
    pthread_mutex_t mu;
    atomic_int fired;
    void (*fn)(void *);
    void *arg;
};

skd_cancel *skd_cancel_new(void)
{
    skd_cancel *c = calloc(1, sizeof(*c));
    if (c)
        pthread_mutex_init(&c->mu, NULL);
    return c;
}

void skd_cancel_free(skd_cancel *c)
{
    if (!c)
        return;
    pthread_mutex_destroy(&c->mu);
    free(c);
}

void skd_cancel_fire(skd_cancel *c)
{
    if (!c)
        return;
    pthread_mutex_lock(&c->mu);
    if (!atomic_exchange(&c->fired, 1) && c->fn)
        c->fn(c->arg);
    pthread_mutex_unlock(&c->mu);
}

int skd_cancel_is_set(const skd_cancel *c)
{
    return c ? atomic_load(&((skd_cancel *)c)->fired) : 0;
}

int skd_cancel_set_hook(skd_cancel *c, void (*fn)(void *), void *arg)
{
    if (!c)
        return 0;
    int already = 0;
    pthread_mutex_lock(&c->mu);
    c->fn = fn;
    c->arg = arg;
    if (fn && atomic_load(&c->fired)) {
        fn(arg);
        already = 1;
    }
    pthread_mutex_unlock(&c->mu);
    return already;
}
