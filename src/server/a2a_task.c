/*
 * A2A tasks while they run: each one executes a single skill through
 * skd_engine_execute (so the result object is the same one MCP and REST
 * return), records its state changes and artifacts as StreamResponse
 * events in an append-only log that any number of subscribers read at
 * their own pace, and saves itself in the store at every state change.
 *
 * Threads: a task runs either on the requesting thread (blocking
 * SendMessage) or on a detached background thread counted in a->nthreads
 * (streaming, returnImmediately). skd__a2a_free cancels running tasks and
 * waits for those threads. Lock order: a->mu before t->mu, never the
 * reverse; nothing blocks while holding either except the condition waits.
 */
#include "server/a2a_int.h"
#include "skilld/store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void skd__a2a_timestamp(char *buf, size_t cap)
{
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    snprintf(buf, cap, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900, tm.tm_mon + 1,
             tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000);
}

int skd__a2a_state_terminal(const char *s)
{
    return strcmp(s, "TASK_STATE_COMPLETED") == 0 || strcmp(s, "TASK_STATE_FAILED") == 0 ||
           strcmp(s, "TASK_STATE_CANCELED") == 0 || strcmp(s, "TASK_STATE_REJECTED") == 0;
}

static void task_free(a2a_task *t)
{
    json_decref(t->input);
    json_decref(t->task);
    json_decref(t->events);
    skd_cancel_free(t->cancel);
    pthread_mutex_destroy(&t->mu);
    pthread_cond_destroy(&t->cv);
    free(t);
}

void skd__a2a_task_unref(a2a_task *t)
{
    if (t && atomic_fetch_sub(&t->refs, 1) == 1)
        task_free(t);
}

static void persist(a2a_task *t)
{
    skd_err err = {0};
    pthread_mutex_lock(&t->mu);
    json_t *copy = json_deep_copy(t->task);
    const char *state = skd_json_str(json_object_get(t->task, "status"), "state", "");
    char st[40];
    skd_strlcpy(st, state, sizeof(st));
    pthread_mutex_unlock(&t->mu);
    if (!copy ||
        skd_store_task_put(skd_engine_store(t->a->e), t->id, t->key_id, t->ctx, st, copy, &err))
        skd_warn("a2a task %s not saved: %s", t->id, skd_err_msg(&err));
    json_decref(copy);
}

static void prune(skd_a2a *a)
{
    int64_t now = skd_wall_ms(), removed = 0;
    int64_t keep = skd_config_int(skd_engine_config(a->e), "SKILLD_A2A_TASK_RETENTION_S");
    pthread_mutex_lock(&a->mu);
    int due = now - a->last_prune_ms > 60000;
    if (due)
        a->last_prune_ms = now;
    pthread_mutex_unlock(&a->mu);
    if (due &&
        skd_store_task_prune(skd_engine_store(a->e), now - keep * 1000, &removed, NULL) == 0 &&
        removed)
        skd_debug("a2a: pruned %lld old tasks", (long long)removed);
}

static json_t *status(const char *state, json_t *message)
{
    char ts[40];
    skd__a2a_timestamp(ts, sizeof(ts));
    json_t *s = json_pack("{s:s, s:s}", "state", state, "timestamp", ts);
    if (s && message)
        json_object_set(s, "message", message);
    return s;
}

a2a_task *skd__a2a_task_create(skd_a2a *a, const char *key_id, unsigned scopes, const char *ctx,
                               const char *skill, const json_t *input, const json_t *user_msg,
                               skd_err *err)
{
    prune(a);
    a2a_task *t = calloc(1, sizeof(*t));
    if (!t) {
        skd_err_set(err, SKD_ENOMEM, "out of memory");
        return NULL;
    }
    atomic_init(&t->refs, 1);
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->cv, NULL);
    t->a = a;
    t->scopes = scopes;
    skd_strlcpy(t->key_id, key_id, sizeof(t->key_id));
    skd_strlcpy(t->skill, skill, sizeof(t->skill));
    t->input = json_deep_copy(input);
    t->cancel = skd_cancel_new();
    t->events = json_array();
    if (skd_uuid(t->id) || (!ctx && skd_uuid(t->ctx)))
        goto fail;
    if (ctx)
        skd_strlcpy(t->ctx, ctx, sizeof(t->ctx));
    json_t *hist = json_deep_copy(user_msg);
    if (hist) {
        json_object_set_new(hist, "taskId", json_string(t->id));
        json_object_set_new(hist, "contextId", json_string(t->ctx));
    }
    t->task = json_pack("{s:s, s:s, s:o, s:[o], s:[], s:{s:s}}", "id", t->id, "contextId", t->ctx,
                        "status", status("TASK_STATE_SUBMITTED", NULL), "history",
                        hist ? hist : json_object(), "artifacts", "metadata", "skill", skill);
    if (!t->input || !t->cancel || !t->events || !t->task)
        goto fail;
    pthread_mutex_lock(&a->mu);
    if (a->closing || a->nlive >= A2A_MAX_LIVE) {
        pthread_mutex_unlock(&a->mu);
        skd_err_set(err, SKD_EBUSY, "too many A2A tasks are running");
        skd__a2a_task_unref(t);
        return NULL;
    }
    atomic_fetch_add(&t->refs, 1); /* the live list's reference */
    t->next = a->live;
    a->live = t;
    a->nlive++;
    pthread_mutex_unlock(&a->mu);
    persist(t);
    return t;
fail:
    skd_err_set(err, SKD_ENOMEM, "out of memory");
    skd__a2a_task_unref(t);
    return NULL;
}

/* Append an event (stolen) and wake subscribers; caller holds t->mu. */
static void push_locked(a2a_task *t, json_t *ev, int droppable)
{
    if (!ev)
        return;
    if (droppable && json_array_size(t->events) >= A2A_MAX_EVENTS) {
        json_decref(ev);
        return;
    }
    json_array_append_new(t->events, ev);
    pthread_cond_broadcast(&t->cv);
}

static json_t *agent_message(const a2a_task *t, const char *text)
{
    char id[SKD_UUID_LEN + 1];
    if (skd_uuid(id))
        return NULL;
    return json_pack("{s:s, s:s, s:s, s:s, s:[{s:s}]}", "messageId", id, "role", "ROLE_AGENT",
                     "taskId", t->id, "contextId", t->ctx, "parts", "text", text);
}

/* Move to state (with an optional agent message text) and log the event. */
static void set_state(a2a_task *t, const char *state, const char *text, int droppable)
{
    pthread_mutex_lock(&t->mu);
    json_t *msg = text ? agent_message(t, text) : NULL;
    json_t *st = status(state, msg);
    json_decref(msg);
    if (!droppable) /* progress notes are not worth a task state change */
        json_object_set(t->task, "status", st);
    push_locked(t,
                json_pack("{s:{s:s, s:s, s:O}}", "statusUpdate", "taskId", t->id, "contextId",
                          t->ctx, "status", st),
                droppable);
    json_decref(st);
    pthread_mutex_unlock(&t->mu);
}

static void on_progress(void *arg, double progress, double total, const char *message)
{
    a2a_task *t = arg;
    char text[256];
    int64_t now = skd_mono_ms();
    if (now - t->last_progress_ms < 500)
        return;
    t->last_progress_ms = now;
    if (total > 0)
        snprintf(text, sizeof(text), "%s (%.0f of %.0f)", message ? message : "working", progress,
                 total);
    else
        snprintf(text, sizeof(text), "%s (%.0f s)", message ? message : "working", progress);
    set_state(t, "TASK_STATE_WORKING", text, 1);
}

/* The artifact of a result: the object as a data part, plus its text
 * output (output or stdout) as a text part. */
static json_t *artifact(const json_t *result)
{
    char id[SKD_UUID_LEN + 1];
    if (skd_uuid(id))
        return NULL;
    json_t *parts = json_pack("[{s:O, s:s}]", "data", result, "mediaType", "application/json");
    const char *text = skd_json_str(result, "output", NULL);
    if (!text)
        text = skd_json_str(result, "stdout", NULL);
    if (parts && text && *text)
        json_array_append_new(parts,
                              json_pack("{s:s, s:s}", "text", text, "mediaType", "text/plain"));
    return json_pack("{s:s, s:s, s:o}", "artifactId", id, "name", "result", "parts", parts);
}

static void unlink_live(a2a_task *t)
{
    skd_a2a *a = t->a;
    pthread_mutex_lock(&a->mu);
    for (a2a_task **p = &a->live; *p; p = &(*p)->next)
        if (*p == t) {
            *p = t->next;
            a->nlive--;
            pthread_mutex_unlock(&a->mu);
            skd__a2a_task_unref(t);
            return;
        }
    pthread_mutex_unlock(&a->mu);
}

static void finish(a2a_task *t, const json_t *result)
{
    char text[600];
    const char *state = "TASK_STATE_COMPLETED";
    const char *code = skd_result_code(result);
    if (!skd_result_success(result)) {
        int cancelled = skd_cancel_is_set(t->cancel) || (code && !strcmp(code, "cancelled"));
        state = cancelled ? "TASK_STATE_CANCELED" : "TASK_STATE_FAILED";
        snprintf(text, sizeof(text), "%s: %s", code ? code : "error",
                 skd_json_str(json_object_get(result, "error"), "message", "the skill failed"));
    } else {
        snprintf(text, sizeof(text), "%s completed", t->skill);
    }
    json_t *art = result ? artifact(result) : NULL;
    if (art) {
        pthread_mutex_lock(&t->mu);
        json_array_append(json_object_get(t->task, "artifacts"), art);
        push_locked(t,
                    json_pack("{s:{s:s, s:s, s:O, s:b}}", "artifactUpdate", "taskId", t->id,
                              "contextId", t->ctx, "artifact", art, "lastChunk", 1),
                    0);
        pthread_mutex_unlock(&t->mu);
        json_decref(art);
    }
    set_state(t, state, text, 0);
    persist(t);
    /* Out of the live list before anyone can see it done: from here on,
     * GetTask and CancelTask find the final task in the store. */
    unlink_live(t);
    pthread_mutex_lock(&t->mu);
    t->done = 1;
    pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
}

void skd__a2a_task_run(a2a_task *t)
{
    json_t *result = NULL;
    if (skd_cancel_is_set(t->cancel)) {
        result = skd_result_error(SKD_ECANCELLED, "the task was canceled before it ran");
    } else {
        set_state(t, "TASK_STATE_WORKING", NULL, 0);
        persist(t);
        skd_call call = {
            .key_id = t->key_id,
            .scopes = t->scopes,
            .skill = t->skill,
            .input = t->input,
            .cancel = t->cancel,
            .progress = on_progress,
            .progress_arg = t,
            /* A row of the run table while it runs (the engine's): a
             * CancelTask through another replica reaches it. */
            .task_id = t->id,
        };
        result = skd_engine_execute(t->a->e, &call, NULL);
    }
    finish(t, result);
    json_decref(result);
}

static void *thread_main(void *arg)
{
    a2a_task *t = arg;
    skd_a2a *a = t->a;
    skd__a2a_task_run(t);
    skd__a2a_task_unref(t);
    pthread_mutex_lock(&a->mu);
    a->nthreads--;
    pthread_cond_broadcast(&a->idle);
    pthread_mutex_unlock(&a->mu);
    return NULL;
}

int skd__a2a_task_start(a2a_task *t, skd_err *err)
{
    skd_a2a *a = t->a;
    pthread_t th;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    atomic_fetch_add(&t->refs, 1);
    pthread_mutex_lock(&a->mu);
    a->nthreads++;
    pthread_mutex_unlock(&a->mu);
    int rc = pthread_create(&th, &attr, thread_main, t);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        pthread_mutex_lock(&a->mu);
        a->nthreads--;
        pthread_mutex_unlock(&a->mu);
        skd_cancel_fire(t->cancel);
        skd__a2a_task_run(t); /* ends at once as canceled, leaving no live task */
        skd__a2a_task_unref(t);
        return skd_err_set(err, SKD_EBUSY, "cannot start a task thread");
    }
    return 0;
}

a2a_task *skd__a2a_task_find(skd_a2a *a, const char *key_id, const char *id)
{
    a2a_task *found = NULL;
    pthread_mutex_lock(&a->mu);
    for (a2a_task *t = a->live; t; t = t->next)
        if (strcmp(t->id, id) == 0 && strcmp(t->key_id, key_id) == 0) {
            atomic_fetch_add(&t->refs, 1);
            found = t;
            break;
        }
    pthread_mutex_unlock(&a->mu);
    return found;
}

json_t *skd__a2a_task_snapshot(a2a_task *t, size_t *next_event)
{
    pthread_mutex_lock(&t->mu);
    json_t *copy = json_deep_copy(t->task);
    if (next_event)
        *next_event = json_array_size(t->events);
    pthread_mutex_unlock(&t->mu);
    return copy;
}

json_t *skd__a2a_task_next_event(a2a_task *t, size_t *i)
{
    json_t *ev = NULL;
    pthread_mutex_lock(&t->mu);
    while (*i >= json_array_size(t->events) && !t->done)
        pthread_cond_wait(&t->cv, &t->mu);
    if (*i < json_array_size(t->events))
        ev = json_incref(json_array_get(t->events, (*i)++));
    pthread_mutex_unlock(&t->mu);
    return ev;
}

void skd__a2a_task_cancel(a2a_task *t, int64_t wait_ms)
{
    struct timespec until;
    skd_cancel_fire(t->cancel);
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += wait_ms / 1000;
    until.tv_nsec += (wait_ms % 1000) * 1000000;
    if (until.tv_nsec >= 1000000000) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000;
    }
    pthread_mutex_lock(&t->mu);
    while (!t->done && pthread_cond_timedwait(&t->cv, &t->mu, &until) == 0)
        ;
    pthread_mutex_unlock(&t->mu);
}
