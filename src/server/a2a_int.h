/*
 * Internals shared by the A2A files: src/server/a2a.c (JSON-RPC methods),
 * a2a_task.c (running tasks and their event logs), a2a_card.c (the agent
 * card and the 0.3 shapes). Tasks are built in the 1.0 shape (proto-JSON:
 * "TASK_STATE_COMPLETED", "ROLE_AGENT", parts {"text"} / {"data"}) and
 * converted to 0.3 on the way out when the client speaks 0.3.
 */
#ifndef SKILLD_SERVER_A2A_INT_H
#define SKILLD_SERVER_A2A_INT_H

#include <pthread.h>
#include <stdatomic.h>

#include "server/a2a.h"
#include "skilld/util.h"

/* Events kept per running task; progress events past this are dropped. */
#define A2A_MAX_EVENTS 256
/* Running tasks at once (beyond: the request is refused). */
#define A2A_MAX_LIVE 256

/* JSON-RPC 2.0 codes used here. */
#define A2A_INVALID_REQUEST -32600
#define A2A_METHOD_NOT_FOUND -32601
#define A2A_INVALID_PARAMS -32602
#define A2A_INTERNAL_ERROR -32603

typedef struct a2a_task a2a_task;

struct skd_a2a {
    skd_engine *e;
    pthread_mutex_t mu;
    pthread_cond_t idle; /* signalled when a background thread ends */
    a2a_task *live;      /* running (not yet terminal) tasks */
    int nlive, nthreads, closing;
    int64_t last_prune_ms;
};

struct a2a_task {
    atomic_int refs;
    a2a_task *next; /* in skd_a2a.live, under a->mu */
    skd_a2a *a;
    char id[SKD_UUID_LEN + 1];
    char ctx[129];
    char key_id[128];
    char skill[160];
    unsigned scopes;
    json_t *input;
    skd_cancel *cancel;
    pthread_mutex_t mu; /* guards everything below */
    pthread_cond_t cv;  /* broadcast on each new event */
    json_t *task;       /* current task object (1.0 shape) */
    json_t *events;     /* StreamResponse objects (1.0 shape) in order */
    int done;
    int64_t last_progress_ms;
};

/* a2a_task.c */
/* Create a task in state SUBMITTED for key (history: the user message, a
 * borrowed 1.0-shape message), persist it and add it to the live list.
 * Returns a new reference or NULL with err set. */
a2a_task *skd__a2a_task_create(skd_a2a *a, const char *key_id, unsigned scopes, const char *ctx,
                               const char *skill, const json_t *input, const json_t *user_msg,
                               skd_err *err);
/* Run the task to its end on this thread. */
void skd__a2a_task_run(a2a_task *t);
/* Run it on a background thread (takes its own reference). */
int skd__a2a_task_start(a2a_task *t, skd_err *err);
/* The key's running task id (new reference) or NULL. */
a2a_task *skd__a2a_task_find(skd_a2a *a, const char *key_id, const char *id);
void skd__a2a_task_unref(a2a_task *t); /* NULL ok */
/* Copy of the task now, and the index of the next event (new ref). */
json_t *skd__a2a_task_snapshot(a2a_task *t, size_t *next_event);
/* Wait for event *i; returns it (new reference) and advances *i, or NULL
 * when the task ended and every event was returned. */
json_t *skd__a2a_task_next_event(a2a_task *t, size_t *i);
/* Fire the task's cancel token and wait (at most wait_ms) for its end. */
void skd__a2a_task_cancel(a2a_task *t, int64_t wait_ms);
/* 1 for the terminal 1.0 states. */
int skd__a2a_state_terminal(const char *state);
/* ISO 8601 UTC timestamp with milliseconds into buf (at least 32 bytes). */
void skd__a2a_timestamp(char *buf, size_t cap);

/* a2a_card.c */
/* The 0.3 shape of a 1.0 task, message or StreamResponse (new ref). For a
 * StreamResponse the unwrapped event is returned ({"kind":"status-update",
 * ...}). */
json_t *skd__a2a_to_v03(const json_t *v1);
/* A message part in either shape to the 1.0 shape (new ref), or NULL when
 * it is not a text/data/file part. */
json_t *skd__a2a_part_v1(const json_t *part);
/* Map a 0.3 state ("completed") or a 1.0 one to the 1.0 name; NULL if
 * unknown. Static storage. */
const char *skd__a2a_state_v1(const char *state);

#endif
