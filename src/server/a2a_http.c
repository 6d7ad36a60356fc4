/*
 * A2A over HTTP: the agent cards at /.well-known/agent-card.json (1.0) and
 * /.well-known/agent.json (0.3), and JSON-RPC at POST /a2a. The methods
 * live in a2a.c; this file only moves bytes. A streaming method answers
 * with text/event-stream fed by a worker thread (the server's call
 * tracker counts it, so a stop waits for it); a plain method runs on the
 * worker that http.c gives every handler. A client that hangs up does not
 * cancel an A2A task: tasks outlive their connection (tasks/get,
 * tasks/resubscribe), and tasks/cancel ends them.
 *
 * The cards are public (clients discover the agent before they have a
 * key); when a valid bearer key comes along, the key's private skills are
 * listed too. The card URL comes from SKILLD_PUBLIC_URL, else from the Host
 * header, which http.c has already checked against SKILLD_ALLOWED_HOSTS.
 */
#include "server/a2a.h"
#include "server/custom_http.h"
#include "server/http.h"
#include "server/jsonrpc.h"
#include "server/sse.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define A2A_STREAM_BYTES (8u << 20) /* unsent SSE bytes before a slow client is dropped */

static void card(skd_http_req *req, skd_http_reply *out, int legacy)
{
    char base[300];
    const char *pub =
        skd_config_str(skd_engine_config(skd__server_engine(req->srv)), "SKILLD_PUBLIC_URL");
    const char *host = skd__http_header(req, "Host");
    if (pub && *pub)
        snprintf(base, sizeof(base), "%s", pub);
    else
        snprintf(base, sizeof(base), "http://%s", host ? host : "localhost");
    size_t n = strlen(base);
    while (n > 0 && base[n - 1] == '/')
        base[--n] = '\0';
    const char *key = NULL;
    if (skd__http_header(req, "Authorization")) {
        skd_http_reply scratch = {0, NULL, NULL};
        if (skd__auth_bearer(req, &scratch) == 0)
            key = req->key.id;
        if (scratch.resp)
            MHD_destroy_response(scratch.resp);
    }
    skd__http_json(out, MHD_HTTP_OK, skd__a2a_card(skd__server_a2a(req->srv), base, key, legacy));
}

void skd__a2a_http_card(skd_http_req *req, skd_http_reply *out)
{
    card(req, out, 0);
}

void skd__a2a_http_card_legacy(skd_http_req *req, skd_http_reply *out)
{
    card(req, out, 1);
}

struct stream_job {
    skd_a2a *a2a;
    json_t *msg;
    char key_id[64];
    unsigned scopes;
    char version[32];
    int has_version;
};

static int emit(void *arg, const json_t *msg)
{
    skd_sse *sse = arg;
    skd__sse_send(sse, msg);
    return skd__sse_gone(sse) ? -1 : 0;
}

static void stream_run(void *arg, skd_sse *sse)
{
    struct stream_job *job = arg;
    json_t *reply = skd__a2a_handle(job->a2a, job->key_id, job->scopes,
                                    job->has_version ? job->version : NULL, job->msg, emit, sse);
    if (reply) /* refused before the stream started: one error event */
        skd__sse_send(sse, reply);
    json_decref(reply);
    json_decref(job->msg);
    free(job);
}

static void stream(skd_http_req *req, json_t *msg, const char *version, skd_http_reply *out)
{
    struct MHD_Response *resp = NULL;
    skd_sse *sse = NULL;
    struct stream_job *job = calloc(1, sizeof(*job));
    if (!job) {
        json_decref(msg);
        skd__http_json(out, MHD_HTTP_INTERNAL_SERVER_ERROR,
                       skd__rpc_error(NULL, SKD_RPC_INTERNAL_ERROR, "out of memory"));
        return;
    }
    job->a2a = skd__server_a2a(req->srv);
    job->msg = msg;
    job->scopes = req->key.scopes;
    skd_strlcpy(job->key_id, req->key.id, sizeof(job->key_id));
    if (version) {
        job->has_version = 1;
        skd_strlcpy(job->version, version, sizeof(job->version));
    }
    int rc = skd__sse_spawn(skd__server_calls(req->srv), SKD__CALLS_MAX_JOBS, A2A_STREAM_BYTES,
                            stream_run, job, &resp, &sse);
    if (rc) {
        skd__http_json(
            out, rc == SKD_EBUSY ? MHD_HTTP_SERVICE_UNAVAILABLE : MHD_HTTP_INTERNAL_SERVER_ERROR,
            skd__rpc_error(json_object_get(msg, "id"), SKD_RPC_INTERNAL_ERROR,
                           rc == SKD_EBUSY ? "too many streams; retry later" : "out of memory"));
        json_decref(msg);
        free(job);
        return;
    }
    out->status = MHD_HTTP_OK;
    out->resp = resp;
    out->sse = sse;
}

void skd__a2a_http_post(skd_http_req *req, skd_http_reply *out)
{
    json_t *err_reply = NULL;
    json_t *msg = skd__rpc_parse(req->body, req->body_len, &err_reply);
    const char *version = skd__http_header(req, "A2A-Version");
    if (!msg) {
        skd__http_json(out, MHD_HTTP_OK, err_reply);
        return;
    }
    /* An OAuth token without skills:execute: the challenge its client can
     * step up from (auth.c), as on /mcp and /v1/execute. */
    if (skd_key_is_oauth(&req->key) && !(req->key.scopes & SKD_SCOPE_EXECUTE) &&
        skd__a2a_executes(msg)) {
        skd__http_json(out, MHD_HTTP_FORBIDDEN,
                       skd__rpc_error(json_object_get(msg, "id"), SKD_RPC_INVALID_REQUEST,
                                      "this access token lacks the skills:execute scope"));
        skd__auth_scope_challenge(req, out, "skills:execute");
        json_decref(msg);
        return;
    }
    if (skd__a2a_is_stream(msg)) {
        stream(req, msg, version, out); /* takes msg */
        return;
    }
    json_t *reply = skd__a2a_handle(skd__server_a2a(req->srv), req->key.id, req->key.scopes,
                                    version, msg, NULL, NULL);
    json_decref(msg);
    skd__http_json(out, MHD_HTTP_OK, reply);
}
