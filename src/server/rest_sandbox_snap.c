/*
 * REST pause, resume and fork of live sandboxes (DESIGN.md, "Live
 * sandboxes"), translations onto the skills of src/builtins/sandbox_snap.c
 * through the engine, as rest_sandboxes.c does for the others:
 *   POST /v1/sandboxes/{id}/pause   sandbox_pause  -> 200 {success, sandboxId, state,
 *                                   changed, message, sandbox}
 *   POST /v1/sandboxes/{id}/resume  sandbox_resume -> 200, the same shape
 *   POST /v1/sandboxes/{id}/fork    sandbox_fork   -> 201 the new sandbox {id, ..., forkedFrom}
 * A paused sandbox's exec is 409 sandbox_paused; another key's sandbox is
 * 404 not_found.
 */
#include "server/http.h"
#include "skilld/skilld.h"

static void call(skd_http_req *req, skd_http_reply *out, const char *skill, unsigned ok_status,
                 const char *pick)
{
    json_t *in = json_object();
    json_object_set_new(in, "sandboxId", json_string(req->param ? req->param : ""));
    skd_calls *calls = skd__server_calls(req->srv);
    if (skd__calls_begin(calls, req->cancel) != 0) {
        skd__http_error(out, MHD_HTTP_SERVICE_UNAVAILABLE, "busy", "the server is stopping");
        json_decref(in);
        return;
    }
    skd_call c = {
        .key_id = req->key.id,
        .scopes = req->key.scopes,
        .skill = skill,
        .input = in,
        .cancel = req->cancel,
    };
    char exec_id[37] = "";
    json_t *result = skd_engine_execute(skd__server_engine(req->srv), &c, exec_id);
    skd__calls_end(calls, req->cancel);
    json_decref(in);
    if (!result) {
        skd__http_error(out, MHD_HTTP_INTERNAL_SERVER_ERROR, "internal", "no result");
        return;
    }
    const char *code = skd_result_code(result);
    if (code && !skd_result_success(result)) {
        skd__http_json(out, skd__http_status_for(skd_errcode_parse(code)), result);
        return;
    }
    json_t *body = result;
    if (pick && json_object_get(result, pick)) {
        body = json_incref(json_object_get(result, pick));
        json_decref(result);
    }
    skd__http_json(out, ok_status, body);
}

void skd__rest_sandbox_pause(skd_http_req *req, skd_http_reply *out)
{
    call(req, out, "sandbox_pause", MHD_HTTP_OK, NULL);
}

void skd__rest_sandbox_resume(skd_http_req *req, skd_http_reply *out)
{
    call(req, out, "sandbox_resume", MHD_HTTP_OK, NULL);
}

void skd__rest_sandbox_fork(skd_http_req *req, skd_http_reply *out)
{
    call(req, out, "sandbox_fork", MHD_HTTP_CREATED, "sandbox");
}
