/*
 * REST /v1/sandboxes: live sandboxes (DESIGN.md, "Live sandboxes") as a
 * resource. Each route is a translation onto one of the live sandbox
 * skills (src/builtins/sandbox_live.c) through the engine, so scope,
 * schema, tenancy and audit are the engine's, as for every call:
 *   POST   /v1/sandboxes             sandbox_create  -> 201 {id, state, ...}
 *   GET    /v1/sandboxes             sandbox_list    -> 200 {sandboxes: [...]}
 *   GET    /v1/sandboxes/{id}        sandbox_list    -> 200 {id, state, ...}
 *   DELETE /v1/sandboxes/{id}        sandbox_delete  -> 200 {success, sandboxId}
 *   POST   /v1/sandboxes/{id}/exec   sandbox_exec    -> 200 execute_command's result, or
 *                                     {success, processId} with background: true
 *   GET    /v1/sandboxes/{id}/processes              sandbox_processes -> {processes: [...]}
 *   GET    /v1/sandboxes/{id}/processes/{pid}/output sandbox_processes -> the process and
 *                                     its output from ?offset=N (&stderrOffset=M)
 *   DELETE /v1/sandboxes/{id}/processes/{pid}        sandbox_processes (kill)
 * Another key's sandbox is 404 not_found on every route (the engine's
 * lookup matches the owner), never 403.
 */
#include "server/http.h"
#include "server/sse.h"
#include "skilld/skilld.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Call skill with input (stolen) as req's key; answer the result, or the
 * part of it named pick (the sandbox object), with ok_status on success. */
static void call(skd_http_req *req, skd_http_reply *out, const char *skill, json_t *input,
                 unsigned ok_status, const char *pick)
{
    skd_cancel *cancel = req->cancel;
    skd_calls *calls = skd__server_calls(req->srv);
    if (skd__calls_begin(calls, cancel) != 0) {
        skd__http_error(out, MHD_HTTP_SERVICE_UNAVAILABLE, "busy", "the server is stopping");
        json_decref(input);
        return;
    }
    skd_call c = {
        .key_id = req->key.id,
        .scopes = req->key.scopes,
        .skill = skill,
        .input = input,
        .cancel = cancel,
    };
    char exec_id[37] = "";
    json_t *result = skd_engine_execute(skd__server_engine(req->srv), &c, exec_id);
    skd__calls_end(calls, cancel);
    json_decref(input);
    if (!result) {
        skd__http_error(out, MHD_HTTP_INTERNAL_SERVER_ERROR, "internal", "no result");
        return;
    }
    const char *code = skd_result_code(result);
    if (code && !skd_result_success(result)) {
        skd__http_json(out, skd__http_status_for(skd_errcode_parse(code)), result);
        return;
    }
    /* A command that ran and failed is still an answer (exec). */
    json_t *body = result;
    if (pick && json_object_get(result, pick)) {
        body = json_incref(json_object_get(result, pick));
        json_decref(result);
    } else {
        json_object_set_new(result, "executionId", json_string(exec_id));
    }
    skd__http_json(out, ok_status, body);
}

/* {"sandboxId": param} plus the body's fields (when with_body). NULL when
 * an answer is out already. */
static json_t *input_with_id(skd_http_req *req, skd_http_reply *out, int with_body)
{
    json_t *in = with_body ? skd__http_body_object(req, out) : json_object();
    if (!in)
        return NULL;
    if (json_object_get(in, "sandboxId")) {
        skd__http_error(out, MHD_HTTP_BAD_REQUEST, "invalid_input",
                        "sandboxId: the sandbox is named by the path");
        json_decref(in);
        return NULL;
    }
    json_object_set_new(in, "sandboxId", json_string(req->param ? req->param : ""));
    return in;
}

void skd__rest_sandbox_create(skd_http_req *req, skd_http_reply *out)
{
    json_t *in = req->body_len ? skd__http_body_object(req, out) : json_object();
    if (in)
        call(req, out, "sandbox_create", in, MHD_HTTP_CREATED, "sandbox");
}

void skd__rest_sandbox_list(skd_http_req *req, skd_http_reply *out)
{
    call(req, out, "sandbox_list", json_object(), MHD_HTTP_OK, NULL);
}

void skd__rest_sandbox_get(skd_http_req *req, skd_http_reply *out)
{
    json_t *in = input_with_id(req, out, 0);
    if (in)
        call(req, out, "sandbox_list", in, MHD_HTTP_OK, "sandbox");
}

void skd__rest_sandbox_delete(skd_http_req *req, skd_http_reply *out)
{
    json_t *in = input_with_id(req, out, 0);
    if (in)
        call(req, out, "sandbox_delete", in, MHD_HTTP_OK, NULL);
}

/* Pause, resume, fork (the skills of src/builtins/sandbox_snap.c). */
void skd__rest_sandbox_pause(skd_http_req *req, skd_http_reply *out)
{
    json_t *in = input_with_id(req, out, 0);
    if (in)
        call(req, out, "sandbox_pause", in, MHD_HTTP_OK, NULL);
}

void skd__rest_sandbox_resume(skd_http_req *req, skd_http_reply *out)
{
    json_t *in = input_with_id(req, out, 0);
    if (in)
        call(req, out, "sandbox_resume", in, MHD_HTTP_OK, NULL);
}

void skd__rest_sandbox_fork(skd_http_req *req, skd_http_reply *out)
{
    json_t *in = input_with_id(req, out, 0);
    if (in)
        call(req, out, "sandbox_fork", in, MHD_HTTP_CREATED, "sandbox");
}

/* ---- a streamed exec (Accept: text/event-stream) ----
 * "event: stdout" / "event: stderr" frames ({"data": "..."}) as the
 * command writes, then "event: result" with the whole result. A client
 * that goes away cancels the command, as a one-shot run is cancelled. */

#define STREAM_BYTES (8u << 20) /* unsent SSE bytes before a slow client is dropped */

struct stream_job {
    skd_engine *engine;
    char key_id[128];
    unsigned scopes;
    char skill[160];
    json_t *input;
    skd_cancel *cancel;
    skd_sse *sse;
    int forwarded; /* another replica's call (replica_http.c): progress is relayed too */
};

static void stream_output(void *arg, const char *stream, const char *data, size_t len)
{
    struct stream_job *job = arg;
    json_t *o = json_object();
    json_t *v = json_stringn(data, len);
    if (!v) { /* not UTF-8: the result carries it, with U+FFFD */
        json_decref(o);
        return;
    }
    json_object_set_new(o, "data", v);
    skd__sse_send_event(job->sse, stream, o);
    json_decref(o);
    if (skd__sse_gone(job->sse))
        skd_cancel_fire(job->cancel);
}

/* Called about once a second while the command runs: a client that went
 * away cancels it even when the command writes nothing. */
static void stream_tick(void *arg, double progress, double total, const char *message)
{
    struct stream_job *job = arg;
    if (job->forwarded) { /* for the forwarding replica's own client (MCP progress) */
        json_t *o =
            json_pack("{s:f, s:f, s:s?}", "progress", progress, "total", total, "message", message);
        if (o)
            skd__sse_send_event(job->sse, "progress", o);
        json_decref(o);
    }
    if (skd__sse_gone(job->sse))
        skd_cancel_fire(job->cancel);
}

static void stream_run(void *arg, skd_sse *sse)
{
    struct stream_job *job = arg;
    job->sse = sse;
    skd_call c = {
        .key_id = job->key_id,
        .scopes = job->scopes,
        .skill = job->skill,
        .input = job->input,
        .forwarded = job->forwarded,
        .cancel = job->cancel,
        .progress = stream_tick,
        .progress_arg = job,
        .output = stream_output,
        .output_arg = job,
    };
    char exec_id[37] = "";
    json_t *result = skd_engine_execute(job->engine, &c, exec_id);
    if (result) {
        json_object_set_new(result, "executionId", json_string(exec_id));
        skd__sse_send_event(sse, "result", result);
    }
    json_decref(result);
    json_decref(job->input);
    skd_cancel_free(job->cancel);
    free(job);
}

static int wants_stream(skd_http_req *req)
{
    const char *a = MHD_lookup_connection_value(req->conn, MHD_HEADER_KIND, "Accept");
    return a && strstr(a, "text/event-stream") != NULL;
}

void skd__rest_stream_call(skd_http_req *req, skd_http_reply *out, const char *key_id,
                           unsigned scopes, const char *skill, json_t *in, int forwarded)
{
    struct stream_job *job = calloc(1, sizeof(*job));
    if (job)
        job->cancel = skd_cancel_new();
    if (!job || !job->cancel || skd_strlcpy(job->key_id, key_id, sizeof(job->key_id)) < 0 ||
        skd_strlcpy(job->skill, skill, sizeof(job->skill)) < 0) {
        if (job)
            skd_cancel_free(job->cancel);
        free(job);
        json_decref(in);
        skd__http_error(out, MHD_HTTP_INTERNAL_SERVER_ERROR, "internal",
                        "out of memory (or a key id or skill name too long)");
        return;
    }
    job->engine = skd__server_engine(req->srv);
    job->scopes = scopes;
    job->forwarded = forwarded;
    job->input = in;
    struct MHD_Response *resp = NULL;
    skd_sse *sse = NULL;
    int rc = skd__sse_spawn(skd__server_calls(req->srv), SKD__CALLS_MAX_JOBS, STREAM_BYTES,
                            stream_run, job, &resp, &sse);
    if (rc) {
        skd_cancel_free(job->cancel);
        free(job);
        json_decref(in);
        skd__http_error(
            out, rc == SKD_EBUSY ? MHD_HTTP_SERVICE_UNAVAILABLE : MHD_HTTP_INTERNAL_SERVER_ERROR,
            rc == SKD_EBUSY ? "busy" : "internal",
            rc == SKD_EBUSY ? "too many streams; retry later" : "out of memory");
        return;
    }
    out->status = MHD_HTTP_OK;
    out->resp = resp;
    out->sse = sse;
}

void skd__rest_sandbox_exec(skd_http_req *req, skd_http_reply *out)
{
    json_t *in = input_with_id(req, out, 1);
    if (!in)
        return;
    if (!wants_stream(req) || json_is_true(json_object_get(in, "background")))
        call(req, out, "sandbox_exec", in, MHD_HTTP_OK, NULL);
    else
        skd__rest_stream_call(req, out, req->key.id, req->key.scopes, "sandbox_exec", in, 0);
}

void skd__rest_sandbox_processes(skd_http_req *req, skd_http_reply *out)
{
    json_t *in = input_with_id(req, out, 0);
    if (in)
        call(req, out, "sandbox_processes", in, MHD_HTTP_OK, NULL);
}

void skd__rest_sandbox_process_output(skd_http_req *req, skd_http_reply *out)
{
    int64_t off = 0, eoff = 0;
    const char *q = skd__http_query(req, "offset"), *qe = skd__http_query(req, "stderrOffset");
    if ((q && skd_parse_i64(q, 0, INT64_MAX, &off) != 0) ||
        (qe && skd_parse_i64(qe, 0, INT64_MAX, &eoff) != 0)) {
        skd__http_error(out, MHD_HTTP_BAD_REQUEST, "invalid_input",
                        "offset and stderrOffset must be integers from 0");
        return;
    }
    json_t *in = input_with_id(req, out, 0);
    if (!in)
        return;
    json_object_set_new(in, "processId", json_string(req->param2 ? req->param2 : ""));
    json_object_set_new(in, "offset", json_integer(off));
    json_object_set_new(in, "stderrOffset", json_integer(eoff));
    call(req, out, "sandbox_processes", in, MHD_HTTP_OK, "process");
}

void skd__rest_sandbox_process_kill(skd_http_req *req, skd_http_reply *out)
{
    json_t *in = input_with_id(req, out, 0);
    if (!in)
        return;
    json_object_set_new(in, "processId", json_string(req->param2 ? req->param2 : ""));
    json_object_set_new(in, "kill", json_true());
    call(req, out, "sandbox_processes", in, MHD_HTTP_OK, NULL);
}
