/*
 * In-flight call tracker and worker pool (see calls.h). A mutex guards a
 * small array of borrowed cancel tokens, the job queue and the counters; a
 * condition variable tells the stopper when calls and jobs reach zero.
 * Workers are kept for IDLE_MS after their last job, so a busy server does
 * not create a thread per request. Tokens are fired under the mutex, which
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
    pthread_cond_t work_cv;  /* a job was queued, or quit */
    struct job *head, *tail; /* jobs no worker has taken yet */
    size_t queued;           /* jobs in the queue */
    size_t busy;             /* jobs queued or running */
    size_t threads;          /* worker threads alive */
    size_t waiting;          /* workers waiting for a job */
    int stopping;
    int quit; /* being freed: idle workers end */
};

#define IDLE_MS 10000

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
    pthread_cond_init(&c->work_cv, &ca);
    pthread_condattr_destroy(&ca);
    return c;
}

void skd__calls_free(skd_calls *c)
{
    if (!c)
        return;
    /* Idle workers end at once; busy ones were waited for by the caller. */
    pthread_mutex_lock(&c->mu);
    c->quit = 1;
    pthread_cond_broadcast(&c->work_cv);
    while (c->threads > 0)
        pthread_cond_wait(&c->cv, &c->mu);
    pthread_mutex_unlock(&c->mu);
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
    pthread_cond_destroy(&c->work_cv);
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

/* ---- the worker pool ------------------------------------------------ */

struct job {
    struct job *next;
    void (*fn)(void *);
    void *arg;
};

/* A worker takes jobs until none comes for IDLE_MS, then ends. */
static void *worker_main(void *p)
{
    skd_calls *c = p;
    pthread_mutex_lock(&c->mu);
    for (;;) {
        while (!c->head && !c->quit) {
            struct timespec dl;
            clock_gettime(CLOCK_MONOTONIC, &dl);
            dl.tv_sec += IDLE_MS / 1000;
            c->waiting++;
            int rc = pthread_cond_timedwait(&c->work_cv, &c->mu, &dl);
            c->waiting--;
            if (rc == ETIMEDOUT && !c->head)
                break;
        }
        struct job *j = c->head;
        if (!j)
            break; /* idle too long, or the tracker is being freed */
        if (!(c->head = j->next))
            c->tail = NULL;
        c->queued--;
        pthread_mutex_unlock(&c->mu);
        j->fn(j->arg);
        free(j);
        pthread_mutex_lock(&c->mu);
        c->busy--;
        pthread_cond_broadcast(&c->cv);
    }
    c->threads--;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

int skd__calls_spawn(skd_calls *c, size_t max, void (*fn)(void *), void *arg)
{
    struct job *j = malloc(sizeof(*j));
    if (!j)
        return SKD_ENOMEM;
    *j = (struct job){NULL, fn, arg};
    pthread_mutex_lock(&c->mu);
    if (c->stopping || c->quit || c->busy >= max) {
        pthread_mutex_unlock(&c->mu);
        free(j);
        return SKD_EBUSY;
    }
    struct job *prev_tail = c->tail;
    if (prev_tail)
        prev_tail->next = j;
    else
        c->head = j;
    c->tail = j;
    c->queued++;
    c->busy++;
    int rc = 0;
    if (c->waiting >= c->queued) {
        pthread_cond_signal(&c->work_cv); /* an idle worker takes it */
    } else {
        pthread_attr_t at;
        pthread_t t;
        pthread_attr_init(&at);
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&t, &at, worker_main, c) == 0) {
            c->threads++;
        } else if (c->threads > c->busy - 1) {
            pthread_cond_signal(&c->work_cv); /* a worker will get to it */
        } else {
            /* No thread can take the job: take it back (still the tail). */
            c->tail = prev_tail;
            if (prev_tail)
                prev_tail->next = NULL;
            else
                c->head = NULL;
            c->queued--;
            c->busy--;
            free(j);
            rc = SKD_EINTERNAL;
        }
        pthread_attr_destroy(&at);
    }
    pthread_mutex_unlock(&c->mu);
    return rc;
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
    while (c->busy > 0 || (with_calls && c->n > 0)) {
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
