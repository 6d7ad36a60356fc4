/*
 * In-flight call tracker (see calls.h). A mutex guards a small array of
 * borrowed cancel tokens and a thread counter; a condition variable tells
 * the stopper when both reach zero. Tokens are fired under the mutex, which
 * is safe because cancel hooks only signal (kill a process group, set a
 * flag) and never call back into the tracker.
 */
#include "server/calls.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

struct skd_calls {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    skd_cancel **tokens;
    size_t n, cap;
    size_t threads;
    int stopping;
};

skd_calls *skd__calls_new(void)
{
    skd_calls *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    pthread_mutex_init(&c->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&c->cv, &ca);
    pthread_condattr_destroy(&ca);
    return c;
}

void skd__calls_free(skd_calls *c)
{
    if (!c)
        return;
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
    free(c->tokens);
    free(c);
}

int skd__calls_begin(skd_calls *c, skd_cancel *cancel)
{
    int rc = 0;
    pthread_mutex_lock(&c->mu);
    if (c->stopping) {
        skd_cancel_fire(cancel);
        rc = SKD_EBUSY;
    } else if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 16;
        skd_cancel **p = realloc(c->tokens, cap * sizeof(*p));
        if (!p) {
            rc = SKD_ENOMEM;
        } else {
            c->tokens = p;
            c->cap = cap;
        }
    }
    if (!rc)
        c->tokens[c->n++] = cancel;
    pthread_mutex_unlock(&c->mu);
    return rc;
}

void skd__calls_end(skd_calls *c, skd_cancel *cancel)
{
    pthread_mutex_lock(&c->mu);
    for (size_t i = 0; i < c->n; i++) {
        if (c->tokens[i] == cancel) {
            c->tokens[i] = c->tokens[--c->n];
            break;
        }
    }
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

struct spawn {
    skd_calls *c;
    void (*fn)(void *);
    void *arg;
};

static void *spawn_main(void *p)
{
    struct spawn sp = *(struct spawn *)p;
    free(p);
    sp.fn(sp.arg);
    pthread_mutex_lock(&sp.c->mu);
    sp.c->threads--;
    pthread_cond_broadcast(&sp.c->cv);
    pthread_mutex_unlock(&sp.c->mu);
    return NULL;
}

int skd__calls_spawn(skd_calls *c, size_t max, void (*fn)(void *), void *arg)
{
    struct spawn *sp = malloc(sizeof(*sp));
    if (!sp)
        return SKD_ENOMEM;
    *sp = (struct spawn){c, fn, arg};
    pthread_mutex_lock(&c->mu);
    if (c->stopping || c->threads >= max) {
        pthread_mutex_unlock(&c->mu);
        free(sp);
        return SKD_EBUSY;
    }
    c->threads++;
    pthread_mutex_unlock(&c->mu);
    pthread_attr_t at;
    pthread_t t;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&t, &at, spawn_main, sp);
    pthread_attr_destroy(&at);
    if (rc != 0) {
        free(sp);
        pthread_mutex_lock(&c->mu);
        c->threads--;
        pthread_cond_broadcast(&c->cv);
        pthread_mutex_unlock(&c->mu);
        return SKD_EINTERNAL;
    }
    return 0;
}

size_t skd__calls_count(skd_calls *c)
{
    pthread_mutex_lock(&c->mu);
    size_t n = c->n;
    pthread_mutex_unlock(&c->mu);
    return n;
}

int skd__calls_stopping(skd_calls *c)
{
    pthread_mutex_lock(&c->mu);
    int s = c->stopping;
    pthread_mutex_unlock(&c->mu);
    return s;
}

/* Wait under c->mu until nothing runs (calls too when with_calls). */
static int wait_empty(skd_calls *c, int with_calls, int ms)
{
    struct timespec dl;
    clock_gettime(CLOCK_MONOTONIC, &dl);
    dl.tv_sec += ms / 1000;
    dl.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (dl.tv_nsec >= 1000000000L) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000L;
    }
    while (c->threads > 0 || (with_calls && c->n > 0)) {
        if (pthread_cond_timedwait(&c->cv, &c->mu, &dl) == ETIMEDOUT)
            return SKD_ETIMEOUT;
    }
    return 0;
}

int skd__calls_stop(skd_calls *c, int grace_ms)
{
    pthread_mutex_lock(&c->mu);
    c->stopping = 1;
    for (size_t i = 0; i < c->n; i++)
        skd_cancel_fire(c->tokens[i]);
    int rc = wait_empty(c, 1, grace_ms);
    pthread_mutex_unlock(&c->mu);
    return rc;
}

int skd__calls_drain(skd_calls *c, int wait_ms)
{
    pthread_mutex_lock(&c->mu);
    int rc = wait_empty(c, 0, wait_ms);
    pthread_mutex_unlock(&c->mu);
    return rc;
}
