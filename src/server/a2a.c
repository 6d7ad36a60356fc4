/*
 * The A2A JSON-RPC methods (see src/server/a2a.h): SendMessage,
 * SendStreamingMessage, GetTask, ListTasks, CancelTask, SubscribeToTask and
 * their 0.3 names (message/send, message/stream, tasks/get, tasks/list,
 * tasks/cancel, tasks/resubscribe). The method name chooses the dialect of
 * the reply: 1.0 names get 1.0 shapes, 0.3 names get 0.3 shapes. The
 * A2A-Version header, when present, must name 0.3 or 1.0.
 *
 * Everything in params comes from the client: each field is checked for
 * type and size, and a task id only ever finds a task of the calling key
 * (another key's task is "not found", never "forbidden").
 */
#include "server/a2a_int.h"
#include "skilld/store.h"
#include "skilld/tenancy.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define A2A_PAGE_DEFAULT 50
#define A2A_PAGE_MAX 100
#define A2A_CANCEL_WAIT_MS 10000

/* One request being served. */
typedef struct req {
    skd_a2a *a;
    const char *key_id;
    unsigned scopes;
    const json_t *id;
    const json_t *params;
    int legacy; /* 0.3 method name: 0.3 shapes */
    skd_a2a_emit_fn emit;
    void *emit_arg;
} req;

static json_t *rpc_result(const req *r, json_t *result)
{
    json_t *o = json_pack("{s:s, s:O?, s:o}", "jsonrpc", "2.0", "id", r->id, "result", result);
    if (o && !r->id)
        json_object_set_new(o, "id", json_null());
    return o;
}

static json_t *rpc_error_data(const req *r, int code, json_t *data, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static json_t *rpc_error_data(const req *r, int code, json_t *data, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    skd_vformat(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    json_t *err = json_pack("{s:i, s:s}", "code", code, "message", msg);
    if (err && data)
        json_object_set(err, "data", data);
    json_decref(data);
    json_t *o = json_pack("{s:s, s:O?, s:o}", "jsonrpc", "2.0", "id", r->id, "error", err);
    if (o && !r->id)
        json_object_set_new(o, "id", json_null());
    return o;
}

#define rpc_error(r, code, ...) rpc_error_data(r, code, NULL, __VA_ARGS__)

/* The reply shape of a 1.0 object for this request's dialect (new ref). */
static json_t *dialect(const req *r, const json_t *v1)
{
    return r->legacy ? skd__a2a_to_v03(v1) : json_deep_copy(v1);
}

/* Keep the last n history entries (n < 0: all). */
static void trim_history(json_t *task, long long n)
{
    json_t *h = json_object_get(task, "history");
    if (n < 0 || !json_is_array(h))
        return;
    while ((long long)json_array_size(h) > n)
        json_array_remove(h, 0);
}

static const char *param_str(const req *r, const char *key, size_t max, int *bad)
{
    json_t *v = json_object_get(r->params, key);
    if (!v || json_is_null(v))
        return NULL;
    if (!json_is_string(v) || json_string_length(v) == 0 || json_string_length(v) > max ||
        strlen(json_string_value(v)) != json_string_length(v))
        *bad = 1;
    return *bad ? NULL : json_string_value(v);
}

/* Comma-separated names of the skills the key may call (for errors). */
static json_t *skill_names(const req *r)
{
    size_t n = 0;
    skd_actor who = {.key_id = r->key_id, .scopes = r->scopes};
    skd_skill **list = skd_engine_visible_skills(r->a->e, &who, &n);
    json_t *arr = json_array();
    for (size_t i = 0; arr && i < n; i++)
        json_array_append_new(arr, json_string(skd_skill_name(list[i])));
    skd_skill_list_free(list, n);
    return arr;
}

static json_t *no_skill_error(const req *r, const char *why)
{
    char list[1024] = "";
    json_t *names = skill_names(r);
    size_t i, len = 0;
    json_t *v;
    json_array_foreach (names, i, v) {
        int w =
            snprintf(list + len, sizeof(list) - len, "%s%s", i ? ", " : "", json_string_value(v));
        if (w < 0 || (size_t)w >= sizeof(list) - len)
            break;
        len += (size_t)w;
    }
    return rpc_error_data(r, A2A_INVALID_PARAMS, json_pack("{s:o}", "skills", names),
                          "%s; name one in a data part {\"skill\": \"<name>\", \"input\": {...}}. "
                          "Skills: %s",
                          why, list);
}

/* Parse params.message: *msg gets the 1.0-shape message (new ref), *skill
 * and *input the called skill. Returns NULL or an error response. */
static json_t *parse_message(const req *r, json_t **msg, const char **skill, json_t **input)
{
    json_t *m = json_object_get(r->params, "message");
    json_t *parts = json_object_get(m, "parts");
    int texts = 0, bad = 0;
    *msg = NULL;
    *skill = NULL;
    *input = NULL;
    if (!json_is_object(m) || !json_is_array(parts) || json_array_size(parts) == 0 ||
        json_array_size(parts) > 64)
        return rpc_error(r, A2A_INVALID_PARAMS,
                         "params.message must be a message with 1 to 64 parts");
    const char *role = skd_json_str(m, "role", "ROLE_USER");
    if (strcmp(role, "ROLE_USER") != 0 && strcmp(role, "user") != 0)
        return rpc_error(r, A2A_INVALID_PARAMS, "params.message.role must be user");
    json_t *v1 = json_pack("{s:s, s:[]}", "role", "ROLE_USER", "parts");
    const char *mid = skd_json_str(m, "messageId", NULL);
    if (mid && strlen(mid) <= 128)
        json_object_set_new(v1, "messageId", json_string(mid));
    size_t i;
    json_t *p;
    json_array_foreach (parts, i, p) {
        json_t *q = skd__a2a_part_v1(p);
        if (!q)
            bad = 1;
        else
            json_array_append_new(json_object_get(v1, "parts"), q);
        json_t *data = json_object_get(p, "data");
        if (json_is_string(json_object_get(p, "text")))
            texts++;
        if (!*skill && json_is_object(data) && json_is_string(json_object_get(data, "skill"))) {
            *skill = json_string_value(json_object_get(data, "skill"));
            *input = json_object_get(data, "input");
        }
    }
    *msg = v1;
    if (bad)
        return rpc_error(r, A2A_INVALID_PARAMS,
                         "params.message.parts: each part must hold text, data or a file");
    if (!*skill && texts)
        return no_skill_error(r, "this agent runs skills, not free text");
    if (!*skill)
        return rpc_error(r, SKD_A2A_CONTENT_TYPE_NOT_SUPPORTED,
                         "no data part names a skill; file parts are not accepted");
    if (*input && !json_is_object(*input))
        return rpc_error(r, A2A_INVALID_PARAMS, "the data part's input must be an object");
    return NULL;
}

/* Validate the message and create its task (not started). */
static json_t *new_task(const req *r, a2a_task **out)
{
    json_t *msg = NULL, *input = NULL, *empty = NULL, *error;
    const char *skill = NULL;
    skd_err err = {0};
    *out = NULL;
    if ((error = parse_message(r, &msg, &skill, &input)) != NULL)
        goto done;
    json_t *m = json_object_get(r->params, "message");
    const char *ctx = skd_json_str(m, "contextId", NULL);
    if (ctx && (strlen(ctx) == 0 || strlen(ctx) > 128)) {
        error = rpc_error(r, A2A_INVALID_PARAMS, "contextId must be 1 to 128 bytes");
        goto done;
    }
    const char *tid = skd_json_str(m, "taskId", NULL);
    if (tid && *tid) {
        error = rpc_error(r, SKD_A2A_UNSUPPORTED_OPERATION,
                          "tasks here are single-turn: send a new message without taskId");
        goto done;
    }
    skd_actor who = {.key_id = r->key_id, .scopes = r->scopes};
    skd_skill *s = skd_engine_find_skill(r->a->e, &who, skill, &err);
    if (!s) {
        char why[256];
        snprintf(why, sizeof(why), "unknown skill \"%.64s\"", skill);
        error = no_skill_error(r, why);
        goto done;
    }
    skd_skill_unref(s);
    if (!input)
        input = empty = json_object();
    *out = skd__a2a_task_create(r->a, r->key_id, r->scopes, ctx, skill, input, msg, &err);
    if (!*out)
        error = rpc_error(r, A2A_INTERNAL_ERROR, "%s", skd_err_msg(&err));
done:
    json_decref(msg);
    json_decref(empty);
    return error;
}

static json_t *task_reply(const req *r, json_t *task, int wrap)
{
    json_t *v1 = wrap ? json_pack("{s:o}", "task", task) : task;
    json_t *out = r->legacy || wrap ? dialect(r, v1) : json_incref(v1);
    json_decref(v1);
    return rpc_result(r, out);
}

static json_t *m_send(const req *r)
{
    a2a_task *t = NULL;
    json_t *error = new_task(r, &t);
    if (error)
        return error;
    json_t *conf = json_object_get(r->params, "configuration");
    int async = r->legacy ? json_is_false(json_object_get(conf, "blocking"))
                          : json_is_true(json_object_get(conf, "returnImmediately"));
    skd_err err = {0};
    if (!async)
        skd__a2a_task_run(t);
    else if (skd__a2a_task_start(t, &err)) {
        skd__a2a_task_unref(t);
        return rpc_error(r, A2A_INTERNAL_ERROR, "%s", skd_err_msg(&err));
    }
    json_t *snap = skd__a2a_task_snapshot(t, NULL);
    skd__a2a_task_unref(t);
    trim_history(snap, skd_json_int(conf, "historyLength", -1));
    return task_reply(r, snap, 1);
}

/* Send snap (stolen), then every event of t from index i until it ends
 * or the client is gone. */
static void stream_task(const req *r, a2a_task *t, json_t *snap, size_t i)
{
    json_t *msg = task_reply(r, snap, 1);
    int gone = r->emit(r->emit_arg, msg);
    json_decref(msg);
    json_t *ev;
    while (!gone && (ev = skd__a2a_task_next_event(t, &i)) != NULL) {
        msg = rpc_result(r, dialect(r, ev));
        gone = r->emit(r->emit_arg, msg);
        json_decref(msg);
        json_decref(ev);
    }
}

static json_t *m_stream(const req *r)
{
    a2a_task *t = NULL;
    skd_err err = {0};
    json_t *error = new_task(r, &t);
    if (error)
        return error;
    /* Subscribe before it starts so the first event is the submitted task. */
    size_t first = 0;
    json_t *snap = skd__a2a_task_snapshot(t, &first);
    if (skd__a2a_task_start(t, &err)) {
        json_decref(snap);
        skd__a2a_task_unref(t);
        return rpc_error(r, A2A_INTERNAL_ERROR, "%s", skd_err_msg(&err));
    }
    stream_task(r, t, snap, first);
    skd__a2a_task_unref(t);
    return NULL;
}

static const char *task_id(const req *r, json_t **error)
{
    int bad = 0;
    const char *id = param_str(r, "id", 128, &bad);
    *error = NULL;
    if (!id)
        *error = rpc_error(r, A2A_INVALID_PARAMS, "params.id must name a task");
    return id;
}

static json_t *m_get(const req *r)
{
    json_t *error;
    const char *id = task_id(r, &error);
    if (!id)
        return error;
    a2a_task *t = skd__a2a_task_find(r->a, r->key_id, id);
    json_t *task = t ? skd__a2a_task_snapshot(t, NULL)
                     : skd_store_task_get(skd_engine_store(r->a->e), r->key_id, id, NULL);
    skd__a2a_task_unref(t);
    if (!task)
        return rpc_error(r, SKD_A2A_TASK_NOT_FOUND, "no task %s", id);
    trim_history(task, skd_json_int(r->params, "historyLength", -1));
    return task_reply(r, task, 0);
}

static json_t *m_list(const req *r)
{
    int bad = 0;
    skd_err err = {0};
    const char *ctx = param_str(r, "contextId", 128, &bad);
    const char *status = param_str(r, "status", 64, &bad);
    const char *token = param_str(r, "pageToken", 20, &bad);
    long long size = skd_json_int(r->params, "pageSize", A2A_PAGE_DEFAULT);
    int64_t offset = 0, total = 0;
    if (bad || size < 1 || size > A2A_PAGE_MAX ||
        (token && skd_parse_i64(token, 0, INT32_MAX, &offset)))
        return rpc_error(r, A2A_INVALID_PARAMS,
                         "bad ListTasks params (contextId, status, pageSize 1-100, pageToken)");
    const char *state = NULL;
    /* UNSPECIFIED (and UNRECOGNIZED, which @a2a-js/sdk 1.x sends for an
     * unset filter) mean "any state". */
    if (status && strcmp(status, "TASK_STATE_UNSPECIFIED") != 0 &&
        strcmp(status, "UNRECOGNIZED") != 0 && !(state = skd__a2a_state_v1(status)))
        return rpc_error(r, A2A_INVALID_PARAMS, "unknown task state %s", status);
    json_t *tasks = skd_store_task_list(skd_engine_store(r->a->e), r->key_id, ctx, state,
                                        (int)offset, (int)size, &total, &err);
    if (!tasks)
        return rpc_error(r, A2A_INTERNAL_ERROR, "%s", skd_err_msg(&err));
    int arts = skd_json_bool(r->params, "includeArtifacts", 0);
    long long hist = skd_json_int(r->params, "historyLength", -1);
    json_t *out = json_array();
    size_t i;
    json_t *t;
    json_array_foreach (tasks, i, t) {
        if (!arts)
            json_object_del(t, "artifacts");
        trim_history(t, hist);
        json_array_append_new(out, r->legacy ? skd__a2a_to_v03(t) : json_incref(t));
    }
    json_decref(tasks);
    char next[24] = "";
    if (offset + (int64_t)json_array_size(out) < total)
        snprintf(next, sizeof(next), "%lld", (long long)(offset + (int64_t)json_array_size(out)));
    return rpc_result(r, json_pack("{s:o, s:s, s:I, s:I}", "tasks", out, "nextPageToken", next,
                                   "pageSize", (json_int_t)size, "totalSize", (json_int_t)total));
}

/* The running task id of this key (a reference), or NULL with *error: the
 * ended_code error ("task <id> <ended>") when the store holds it as ended,
 * task not found otherwise. */
static a2a_task *running_task(const req *r, const char *id, int ended_code, const char *ended,
                              json_t **error)
{
    a2a_task *t = skd__a2a_task_find(r->a, r->key_id, id);
    if (t)
        return t;
    json_t *task = skd_store_task_get(skd_engine_store(r->a->e), r->key_id, id, NULL);
    *error = task ? rpc_error(r, ended_code, "task %s %s", id, ended)
                  : rpc_error(r, SKD_A2A_TASK_NOT_FOUND, "no task %s", id);
    json_decref(task);
    return NULL;
}

/* ---- tasks that another replica runs (docs/store.md) ---- */

/* The stored task id of this key when it has not ended, else NULL. */
static json_t *stored_live_task(const req *r, const char *id)
{
    json_t *task = skd_store_task_get(skd_engine_store(r->a->e), r->key_id, id, NULL);
    if (task &&
        skd__a2a_state_terminal(skd_json_str(json_object_get(task, "status"), "state", ""))) {
        json_decref(task);
        return NULL;
    }
    return task;
}

/* CancelTask of a task that runs on another replica: the cancel request goes
 * through the store's run table; wait for the stored task to end. NULL when
 * no other replica runs it (the caller answers as for a local task). */
static json_t *remote_cancel(const req *r, const char *id)
{
    json_t *task = stored_live_task(r, id);
    if (!task)
        return NULL;
    json_decref(task);
    if (skd_store_run_cancel(skd_engine_store(r->a->e), r->key_id, id, NULL) != 0)
        return NULL;
    int64_t until = skd_mono_ms() + A2A_CANCEL_WAIT_MS;
    while (skd_mono_ms() < until && (task = stored_live_task(r, id)) != NULL) {
        json_decref(task);
        usleep(50 * 1000);
    }
    task = skd_store_task_get(skd_engine_store(r->a->e), r->key_id, id, NULL);
    return task ? task_reply(r, task, 0) : rpc_error(r, SKD_A2A_TASK_NOT_FOUND, "no task %s", id);
}

/* SubscribeToTask of a task that runs on another replica: its stored
 * record, then again at each change of state (polled every 200 ms), until
 * it ends, its replica died (its run is no longer running: the stream ends
 * without a terminal state), or the subscriber goes. 0 when no other
 * replica runs it. */
static int remote_subscribe(const req *r, const char *id)
{
    json_t *task = stored_live_task(r, id);
    if (!task)
        return 0;
    char last[40] = "";
    int gone = 0;
    for (;;) {
        const char *state = skd_json_str(json_object_get(task, "status"), "state", "");
        int end = skd__a2a_state_terminal(state);
        if (strcmp(state, last) != 0) {
            skd_strlcpy(last, state, sizeof(last));
            json_t *msg = task_reply(r, json_incref(task), 1);
            gone = r->emit(r->emit_arg, msg);
            json_decref(msg);
        }
        json_decref(task);
        char run[24] = "";
        if (gone || end ||
            (skd_store_run_state(skd_engine_store(r->a->e), r->key_id, id, run, sizeof(run),
                                 NULL) == 0 &&
             strcmp(run, "running") != 0))
            break;
        usleep(200 * 1000);
        if (!(task = skd_store_task_get(skd_engine_store(r->a->e), r->key_id, id, NULL)))
            break;
    }
    return 1;
}

static json_t *m_cancel(const req *r)
{
    json_t *error;
    const char *id = task_id(r, &error);
    if (!id)
        return error;
    a2a_task *t = skd__a2a_task_find(r->a, r->key_id, id);
    if (!t) { /* perhaps another replica runs it */
        json_t *done = remote_cancel(r, id);
        if (done)
            return done;
    }
    if (!t && !(t = running_task(r, id, SKD_A2A_TASK_NOT_CANCELABLE, "has already ended", &error)))
        return error;
    json_t *snap = skd__a2a_task_snapshot(t, NULL);
    if (snap &&
        skd__a2a_state_terminal(skd_json_str(json_object_get(snap, "status"), "state", ""))) {
        json_decref(snap); /* ended while we looked */
        skd__a2a_task_unref(t);
        return rpc_error(r, SKD_A2A_TASK_NOT_CANCELABLE, "task %s has already ended", id);
    }
    json_decref(snap);
    skd__a2a_task_cancel(t, A2A_CANCEL_WAIT_MS);
    snap = skd__a2a_task_snapshot(t, NULL);
    skd__a2a_task_unref(t);
    return task_reply(r, snap, 0);
}

static json_t *m_subscribe(const req *r)
{
    json_t *error;
    const char *id = task_id(r, &error);
    if (!id)
        return error;
    a2a_task *t = skd__a2a_task_find(r->a, r->key_id, id);
    if (!t && remote_subscribe(r, id))
        return NULL;
    if (!t &&
        !(t = running_task(r, id, SKD_A2A_UNSUPPORTED_OPERATION, "has ended; use GetTask", &error)))
        return error;
    size_t first = 0;
    json_t *snap = skd__a2a_task_snapshot(t, &first);
    stream_task(r, t, snap, first);
    skd__a2a_task_unref(t);
    return NULL;
}

static const struct method {
    const char *v1, *v03;
    json_t *(*fn)(const req *r);
    int stream;
    int executes; /* runs a skill: needs skills:execute */
} methods[] = {
    {"SendMessage", "message/send", m_send, 0, 1},
    {"SendStreamingMessage", "message/stream", m_stream, 1, 1},
    {"GetTask", "tasks/get", m_get, 0, 0},
    {"ListTasks", "tasks/list", m_list, 0, 0},
    {"CancelTask", "tasks/cancel", m_cancel, 0, 0},
    {"SubscribeToTask", "tasks/resubscribe", m_subscribe, 1, 0},
};

static const struct method *find_method(const char *name, int *legacy)
{
    for (size_t i = 0; name && i < sizeof(methods) / sizeof(methods[0]); i++) {
        if (strcmp(name, methods[i].v1) == 0 || strcmp(name, methods[i].v03) == 0) {
            *legacy = strcmp(name, methods[i].v03) == 0;
            return &methods[i];
        }
    }
    return NULL;
}

int skd__a2a_is_stream(const json_t *rq)
{
    int legacy;
    const struct method *m = find_method(skd_json_str(rq, "method", NULL), &legacy);
    return m && m->stream;
}

int skd__a2a_executes(const json_t *rq)
{
    int legacy;
    const struct method *m = find_method(skd_json_str(rq, "method", NULL), &legacy);
    return m && m->executes;
}

/* "0.3", "0.3.0", "1.0", "1.0.2": major.minor must be 0.3 or 1.0. */
static int version_ok(const char *v)
{
    if (!v)
        return 1;
    return strcmp(v, "0.3") == 0 || strncmp(v, "0.3.", 4) == 0 || strcmp(v, "1.0") == 0 ||
           strncmp(v, "1.0.", 4) == 0 || strcmp(v, "1") == 0;
}

json_t *skd__a2a_handle(skd_a2a *a, const char *key_id, unsigned scopes, const char *version,
                        const json_t *rq, skd_a2a_emit_fn emit, void *arg)
{
    req r = {.a = a, .key_id = key_id, .scopes = scopes, .emit = emit, .emit_arg = arg};
    json_t *id = json_object_get(rq, "id");
    if (json_is_string(id) || json_is_integer(id))
        r.id = id;
    const char *name = skd_json_str(rq, "method", NULL);
    if (!json_is_object(rq) || strcmp(skd_json_str(rq, "jsonrpc", ""), "2.0") != 0 || !name)
        return rpc_error(&r, A2A_INVALID_REQUEST, "not a JSON-RPC 2.0 request");
    if (!version_ok(version))
        return rpc_error(&r, SKD_A2A_VERSION_NOT_SUPPORTED,
                         "A2A-Version %.32s is not supported (use 1.0 or 0.3)", version);
    json_t *params = json_object_get(rq, "params");
    if (params && !json_is_object(params))
        return rpc_error(&r, A2A_INVALID_PARAMS, "params must be an object");
    json_t *empty = params ? NULL : json_object();
    r.params = params ? params : empty;
    const struct method *m = find_method(name, &r.legacy);
    json_t *reply;
    if (!m && (strstr(name, "PushNotification") || strstr(name, "pushNotification")))
        reply = rpc_error(&r, SKD_A2A_PUSH_NOT_SUPPORTED, "push notifications are not supported");
    else if (!m)
        reply = rpc_error(&r, A2A_METHOD_NOT_FOUND, "unknown method %.64s", name);
    else if (m->stream && !emit)
        reply =
            rpc_error(&r, SKD_A2A_UNSUPPORTED_OPERATION, "%s needs a streaming transport", name);
    else
        reply = m->fn(&r);
    json_decref(empty);
    return reply;
}

skd_a2a *skd__a2a_new(skd_engine *e)
{
    skd_a2a *a = calloc(1, sizeof(*a));
    if (!a)
        return NULL;
    a->e = e;
    pthread_mutex_init(&a->mu, NULL);
    pthread_cond_init(&a->idle, NULL);
    return a;
}

void skd__a2a_cancel_all(skd_a2a *a)
{
    if (!a)
        return;
    pthread_mutex_lock(&a->mu);
    a->closing = 1;
    for (a2a_task *t = a->live; t; t = t->next)
        skd_cancel_fire(t->cancel);
    pthread_mutex_unlock(&a->mu);
}

void skd__a2a_free(skd_a2a *a)
{
    if (!a)
        return;
    skd__a2a_cancel_all(a);
    pthread_mutex_lock(&a->mu);
    while (a->nthreads > 0)
        pthread_cond_wait(&a->idle, &a->mu);
    pthread_mutex_unlock(&a->mu);
    pthread_mutex_destroy(&a->mu);
    pthread_cond_destroy(&a->idle);
    free(a);
}
