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
#include "skilld/skilld.h"

#include <stdint.h>
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
    const char *code = skd_result_code(result);
    if (!result) {
        skd__http_error(out, MHD_HTTP_INTERNAL_SERVER_ERROR, "internal", "no result");
        return;
    }
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

void skd__rest_sandbox_exec(skd_http_req *req, skd_http_reply *out)
{
    json_t *in = input_with_id(req, out, 1);
    if (in)
        call(req, out, "sandbox_exec", in, MHD_HTTP_OK, NULL);
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
