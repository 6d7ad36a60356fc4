/*
 * /v1/secrets (src/engine/secrets.c does the work): a key's secrets, which
 * its sandboxes use through the egress proxy. A value comes in once, in the
 * body of a POST, and never goes out: the answers carry names, hosts and
 * fingerprints. ?key= (skills:admin) names another key.
 */
#include "server/http.h"
#include "skilld/skilld.h"
#include "skilld/tenancy.h"

#include <string.h>

static skd_actor actor_of(const skd_http_req *req)
{
    return (skd_actor){.key_id = req->key.id, .scopes = req->key.scopes};
}

/* POST /v1/secrets {name, value, hosts, headers?, key?} -> 201. */
void skd__rest_secret_set(skd_http_req *req, skd_http_reply *out)
{
    json_t *body = skd__http_body_object(req, out);
    if (!body)
        return;
    skd_err err = {0};
    skd_actor who = actor_of(req);
    json_t *r = skd_engine_secret_set(skd__server_engine(req->srv), &who, body, &err);
    /* The value leaves this process's memory with the body. */
    json_t *v = json_object_get(body, "value");
    if (json_is_string(v))
        explicit_bzero((char *)json_string_value(v), json_string_length(v));
    json_decref(body);
    if (!r) {
        skd__http_from_err(out, &err);
        return;
    }
    skd__http_json(out, MHD_HTTP_CREATED, r);
}

/* GET /v1/secrets -> {secrets: [...]}, never a value. */
void skd__rest_secret_list(skd_http_req *req, skd_http_reply *out)
{
    skd_err err = {0};
    skd_actor who = actor_of(req);
    json_t *a = skd_engine_secret_list(skd__server_engine(req->srv), &who,
                                       skd__http_query(req, "key"), &err);
    if (!a) {
        skd__http_from_err(out, &err);
        return;
    }
    skd__http_json(out, MHD_HTTP_OK, json_pack("{s:o}", "secrets", a));
}

/* DELETE /v1/secrets/{name} -> 204. */
void skd__rest_secret_delete(skd_http_req *req, skd_http_reply *out)
{
    skd_err err = {0};
    skd_actor who = actor_of(req);
    if (skd_engine_secret_delete(skd__server_engine(req->srv), &who, req->param,
                                 skd__http_query(req, "key"), &err) != 0) {
        skd__http_from_err(out, &err);
        return;
    }
    skd__http_empty(out, MHD_HTTP_NO_CONTENT);
}
