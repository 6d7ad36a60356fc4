/*
 * REST endpoints under /v1, plus /healthz and /metrics (see routes.c for
 * paths and scopes). Handlers translate between HTTP and the library: the
 * caller's identity is req->key (checked by http.c), never a field of the
 * body. Executions go through skd_engine_execute like every transport;
 * listing, audit rows, metric labels and keys come from the engine
 * (include/skilld/tenancy.h), which applies the caller's scopes and
 * tenancy: handlers never read the registry or the store themselves.
 */
#include "server/http.h"
#include "server/metrics.h"
#include "skilld/tenancy.h"

#include <stdlib.h>
#include <string.h>

void skd__rest_healthz(skd_http_req *req, skd_http_reply *out)
{
    skd_err err = {0};
    const char *backend = "";
    int rc = skd_engine_health(skd__server_engine(req->srv), &backend, &err);
    if (rc) { /* a load balancer takes this replica out (deploy/README.md) */
        skd__http_error(out, MHD_HTTP_SERVICE_UNAVAILABLE,
                        rc == SKD_EBUSY ? "draining" : skd_errcode(rc), "%s", skd_err_msg(&err));
        return;
    }
    skd__http_json(
        out, MHD_HTTP_OK,
        json_pack("{s:s, s:s, s:s}", "status", "ok", "version", SKD_VERSION, "store", backend));
}

static skd_actor actor(const skd_http_req *req)
{
    return (skd_actor){.key_id = req->key.id, .scopes = req->key.scopes};
}

struct label_filter {
    skd_engine *e;
    skd_actor who;
};

static int label_visible(void *arg, const char *skill)
{
    struct label_filter *f = arg;
    return skd_engine_metric_label_visible(f->e, &f->who, skill);
}

static int key_visible(void *arg, const char *key)
{
    struct label_filter *f = arg;
    return skd_engine_key_label_visible(&f->who, key);
}

void skd__rest_metrics(skd_http_req *req, skd_http_reply *out)
{
    skd_buf b;
    skd_buf_init(&b, 4 * 1024 * 1024);
    size_t len = 0;
    /* Another key's private skill names never reach a caller without
     * skills:admin: the engine decides which labels it sees. */
    struct label_filter f = {skd__server_engine(req->srv), actor(req)};
    char *text = skd__metrics_render(&b, skd__server_engine(req->srv),
                                     skd__calls_count(skd__server_calls(req->srv)), label_visible,
                                     key_visible, &f) == 0
                     ? skd_buf_steal(&b, &len)
                     : NULL;
    skd_buf_free(&b);
    if (!text) {
        skd__http_error(out, MHD_HTTP_INTERNAL_SERVER_ERROR, "internal_error",
                        "metrics could not be rendered");
        return;
    }
    out->status = MHD_HTTP_OK;
    out->resp = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
    if (!out->resp) {
        free(text);
        return;
    }
    MHD_add_response_header(out->resp, MHD_HTTP_HEADER_CONTENT_TYPE,
                            "text/plain; version=0.0.4; charset=utf-8");
}

void skd__rest_skills(skd_http_req *req, skd_http_reply *out)
{
    skd_err err = {0};
    skd_actor who = actor(req);
    json_t *arr = skd_engine_list_skills(skd__server_engine(req->srv), &who, &err);
    if (!arr) {
        skd__http_from_err(out, &err);
        return;
    }
    skd__http_json(out, MHD_HTTP_OK, json_pack("{s:o}", "skills", arr));
}

void skd__rest_skill(skd_http_req *req, skd_http_reply *out)
{
    skd_err err = {0};
    skd_actor who = actor(req);
    json_t *s = skd_engine_get_skill(skd__server_engine(req->srv), &who, req->param, &err);
    if (!s) {
        skd__http_from_err(out, &err);
        return;
    }
    skd__http_json(out, MHD_HTTP_OK, s);
}

int skd__rest_execute_quick(skd_http_req *req)
{
    /* A file_read's body is a few dozen bytes; a large body is parsed on
     * the worker, as any other call's, not on the event thread. */
    if (req->body_len > 4096)
        return 0;
    if (!req->parsed) {
        skd_err err = {0};
        req->parsed = skd_json_parse(req->body, req->body_len, &err);
    }
    const json_t *skill = json_object_get(req->parsed, "skill"); /* NULL-safe */
    const json_t *version = json_object_get(req->parsed, "version");
    if (!json_is_string(skill) || version)
        return 0; /* errors and pinned versions take the usual way */
    return skd_engine_skill_is_quick(skd__server_engine(req->srv), json_string_value(skill),
                                     req->key.id);
}

void skd__rest_execute(skd_http_req *req, skd_http_reply *out)
{
    json_t *body = NULL;
    if (json_is_object(req->parsed)) { /* parsed by skd__rest_execute_quick */
        body = req->parsed;
        req->parsed = NULL;
    } else {
        body = skd__http_body_object(req, out);
    }
    if (!body)
        return;
    const json_t *skill = json_object_get(body, "skill");
    const json_t *version = json_object_get(body, "version");
    const json_t *input = json_object_get(body, "input");
    if (!json_is_string(skill) || (version && !json_is_string(version)) ||
        (input && !json_is_object(input))) {
        skd__http_error(out, MHD_HTTP_BAD_REQUEST, "invalid_input",
                        "expected {\"skill\": string, \"input\": object, \"version\"?: string}");
        json_decref(body);
        return;
    }
    /* req->cancel fires when the client hangs up (http.c) and on a stop
     * (the tracker): either way the call ends and its sandbox is killed. */
    skd_cancel *cancel = req->cancel;
    skd_calls *calls = skd__server_calls(req->srv);
    if (skd__calls_begin(calls, cancel) != 0) {
        skd__http_error(out, MHD_HTTP_SERVICE_UNAVAILABLE, "busy", "the server is stopping");
        json_decref(body);
        return;
    }
    skd_call call = {
        .key_id = req->key.id,
        .scopes = req->key.scopes,
        .skill = json_string_value(skill),
        .version = json_string_value(version),
        .input = input,
        .cancel = cancel,
    };
    char exec_id[37] = "";
    json_t *result = skd_engine_execute(skd__server_engine(req->srv), &call, exec_id);
    skd__calls_end(calls, cancel);
    int ok = skd_result_success(result);
    unsigned status = MHD_HTTP_OK;
    if (!ok) {
        const char *code = skd_result_code(result);
        status = skd__http_status_for(code ? skd_errcode_parse(code) : SKD_EINTERNAL);
    }
    if (result)
        json_object_set_new(result, "executionId", json_string(exec_id));
    skd__http_json(out, status, result);
    if (status == MHD_HTTP_FORBIDDEN && skd_key_is_oauth(&req->key) &&
        !(req->key.scopes & SKD_SCOPE_EXECUTE)) /* the client may ask for the scope */
        skd__auth_scope_challenge(req, out, "skills:execute");
    json_decref(body);
}

/* A time of the query (ms since the epoch), or def when absent. */
static int query_ms(skd_http_req *req, skd_http_reply *out, const char *name, int64_t def,
                    int64_t *v)
{
    const char *q = skd__http_query(req, name);
    *v = def;
    if (q && skd_parse_i64(q, 0, INT64_MAX / 2, v) != 0) {
        skd__http_error(out, MHD_HTTP_BAD_REQUEST, "invalid_input",
                        "%s must be a time in milliseconds since the epoch", name);
        return -1;
    }
    return 0;
}

/* GET /v1/executions?limit=&key=&skill=&status=&since=&until=: the
 * caller's executions, newest first; key=ID another key's, key=* every
 * key's (both skills:admin). */
void skd__rest_executions(skd_http_req *req, skd_http_reply *out)
{
    int64_t limit = 50;
    const char *q = skd__http_query(req, "limit");
    if (q && skd_parse_i64(q, 1, 500, &limit) != 0) {
        skd__http_error(out, MHD_HTTP_BAD_REQUEST, "invalid_input",
                        "limit must be an integer from 1 to 500");
        return;
    }
    skd_audit_filter f = {
        .key_id = skd__http_query(req, "key"),
        .skill = skd__http_query(req, "skill"),
        .status = skd__http_query(req, "status"),
        .limit = (int)limit,
    };
    if (query_ms(req, out, "since", 0, &f.since_ms) || query_ms(req, out, "until", 0, &f.until_ms))
        return;
    /* Empty filters are no filter (a form's blank field). */
    f.key_id = f.key_id && *f.key_id ? f.key_id : NULL;
    f.skill = f.skill && *f.skill ? f.skill : NULL;
    f.status = f.status && *f.status ? f.status : NULL;
    skd_err err = {0};
    skd_actor who = actor(req);
    json_t *rows = skd_engine_query_executions(skd__server_engine(req->srv), &who, &f, &err);
    if (!rows) {
        skd__http_from_err(out, &err);
        return;
    }
    skd__http_json(out, MHD_HTTP_OK, json_pack("{s:o}", "executions", rows));
}

void skd__rest_execution(skd_http_req *req, skd_http_reply *out)
{
    skd_err err = {0};
    skd_actor who = actor(req);
    json_t *row = skd_engine_get_execution(skd__server_engine(req->srv), &who, req->param, &err);
    if (!row) {
        skd__http_from_err(out, &err);
        return;
    }
    skd__http_json(out, MHD_HTTP_OK, row);
}

void skd__rest_keys_list(skd_http_req *req, skd_http_reply *out)
{
    skd_err err = {0};
    skd_actor who = actor(req);
    json_t *keys = skd_engine_list_keys(skd__server_engine(req->srv), &who, &err);
    if (!keys) {
        skd__http_from_err(out, &err);
        return;
    }
    skd__http_json(out, MHD_HTTP_OK, json_pack("{s:o}", "keys", keys));
}

/* Scopes from a JSON array of names or a comma-separated string. */
static int body_scopes(const json_t *v, unsigned *scopes, skd_err *err)
{
    if (!v)
        return skd_scopes_parse("skills:read,skills:execute", scopes, err);
    if (json_is_string(v))
        return skd_scopes_parse(json_string_value(v), scopes, err);
    if (!json_is_array(v) || json_array_size(v) == 0)
        return skd_err_set(err, SKD_EINVAL, "scopes must be a non-empty array of names");
    *scopes = 0;
    size_t i;
    const json_t *x;
    json_array_foreach (v, i, x) {
        unsigned one;
        if (!json_is_string(x))
            return skd_err_set(err, SKD_EINVAL, "scopes must be strings");
        int rc = skd_scopes_parse(json_string_value(x), &one, err);
        if (rc)
            return rc;
        *scopes |= one;
    }
    return 0;
}

void skd__rest_keys_create(skd_http_req *req, skd_http_reply *out)
{
    json_t *body = skd__http_body_object(req, out);
    if (!body)
        return;
    skd_err err = {0};
    unsigned scopes = 0;
    const char *name = skd_json_str(body, "name", NULL);
    char *secret = NULL;
    skd_key_info info;
    skd_actor who = actor(req);
    if (!name) {
        skd__http_error(out, MHD_HTTP_BAD_REQUEST, "invalid_input", "name (string) is required");
    } else if (body_scopes(json_object_get(body, "scopes"), &scopes, &err) != 0 ||
               skd_engine_create_key(skd__server_engine(req->srv), &who, name, scopes, &secret,
                                     &info, &err) != 0) {
        skd__http_from_err(out, &err);
    } else {
        skd__http_json(out, MHD_HTTP_CREATED,
                       json_pack("{s:s, s:s, s:s, s:o}", "id", info.id, "name", info.name, "secret",
                                 secret, "scopes", skd_scopes_to_json(info.scopes)));
    }
    free(secret);
    json_decref(body);
}

void skd__rest_keys_revoke(skd_http_req *req, skd_http_reply *out)
{
    skd_err err = {0};
    skd_actor who = actor(req);
    if (skd_engine_revoke_key(skd__server_engine(req->srv), &who, req->param, &err) != 0) {
        skd__http_from_err(out, &err);
        return;
    }
    skd__http_empty(out, MHD_HTTP_NO_CONTENT);
}

/* GET /v1/runs: the caller's sandbox runs and A2A tasks over every replica
 * (admin: every key's), newest first; ?state=running filters. */
void skd__rest_runs(skd_http_req *req, skd_http_reply *out)
{
    skd_err err = {0};
    skd_actor who = actor(req);
    json_t *runs = skd_engine_list_runs(skd__server_engine(req->srv), &who,
                                        skd__http_query(req, "state"), &err);
    if (!runs) {
        skd__http_from_err(out, &err);
        return;
    }
    skd__http_json(out, MHD_HTTP_OK, json_pack("{s:o}", "runs", runs));
}

/* DELETE /v1/runs/{id}: cancel the caller's running run, on whichever
 * replica runs it. 202: the request is recorded; the run ends cancelled. */
void skd__rest_run_cancel(skd_http_req *req, skd_http_reply *out)
{
    skd_err err = {0};
    skd_actor who = actor(req);
    if (skd_engine_cancel_run(skd__server_engine(req->srv), &who, req->param, &err) != 0) {
        skd__http_from_err(out, &err);
        return;
    }
    skd__http_json(out, MHD_HTTP_ACCEPTED,
                   json_pack("{s:s, s:s}", "id", req->param, "state", "cancel_requested"));
}

/* GET /v1/usage?since=&until=&key=&bucket=: what each key used (metering),
 * summed from the audit of every replica; a key sees only itself, an admin
 * every key or the one named. Times in ms since the epoch; the default is
 * the last 30 days. bucket (ms) adds a series per key for charts. */
void skd__rest_usage(skd_http_req *req, skd_http_reply *out)
{
    int64_t now = skd_wall_ms(), since, until, bucket;
    if (query_ms(req, out, "until", now + 1, &until) ||
        query_ms(req, out, "since", until - 30LL * 24 * 3600 * 1000, &since) ||
        query_ms(req, out, "bucket", 0, &bucket))
        return;
    if (bucket > 0 && (until - since) / bucket > 1000) {
        skd__http_error(out, MHD_HTTP_BAD_REQUEST, "invalid_input",
                        "bucket is too small: at most 1000 buckets per key");
        return;
    }
    skd_err err = {0};
    skd_actor who = actor(req);
    json_t *u = skd_engine_usage(skd__server_engine(req->srv), &who, skd__http_query(req, "key"),
                                 since, until, bucket, &err);
    if (!u) {
        skd__http_from_err(out, &err);
        return;
    }
    skd__http_json(out, MHD_HTTP_OK, u);
}
