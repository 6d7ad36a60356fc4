/*
 * REST management of custom skills: register (POST /v1/skills), remove
 * (DELETE /v1/skills/{name[@version]}) and enable/disable (PATCH). The key
 * comes from the bearer secret (http.c); who may do what is decided by
 * src/skills/custom.c, never here. The body is a manifest, or {"manifest":
 * {...}, "replace": true} to replace the key's own name@version. A body
 * of type application/x-tar is a SKILL.md bundle (src/skills/bundle_import.c);
 * PATCH {"public": bool, "owner"?} publishes a bundle (admins only).
 */
#include "server/custom_http.h"
#include "skilld/bundle.h"
#include "skilld/custom.h"
#include "skilld/tenancy.h"

#include <string.h>
#include <strings.h>

static skd_actor actor(const skd_http_req *req)
{
    return (skd_actor){.key_id = req->key.id, .scopes = req->key.scopes};
}

/* POST /v1/skills with Content-Type application/x-tar (or
 * application/gzip): a SKILL.md bundle as a tarball; ?replace=true replaces
 * the key's earlier import of the same name. 201 with {bundle, skill}. */
static void register_tar(skd_http_req *req, skd_http_reply *out)
{
    skd_err err = {0};
    skd_skill *s = NULL;
    json_t *name = NULL;
    const char *rep = MHD_lookup_connection_value(req->conn, MHD_GET_ARGUMENT_KIND, "replace");
    skd_actor who = actor(req);
    if (skd_bundle_import_tar(skd_engine_skills(skd__server_engine(req->srv)), &who, req->body,
                              req->body_len, rep && strcmp(rep, "true") == 0, &s, &name, &err)) {
        skd__http_from_err(out, &err);
        return;
    }
    skd__http_json(
        out, MHD_HTTP_CREATED,
        json_pack("{s:o, s:o}", "bundle", name, "skill", s ? skd_skill_to_json(s) : json_null()));
    skd_skill_unref(s);
}

void skd__rest_skill_register(skd_http_req *req, skd_http_reply *out)
{
    skd_err err = {0};
    skd_skill *s = NULL;
    const char *ct = skd__http_header(req, MHD_HTTP_HEADER_CONTENT_TYPE);
    if (ct && (strncasecmp(ct, "application/x-tar", 17) == 0 ||
               strncasecmp(ct, "application/gzip", 16) == 0)) {
        register_tar(req, out);
        return;
    }
    json_t *body = skd__http_body_object(req, out);
    if (!body)
        return;
    json_t *m = json_object_get(body, "manifest");
    json_t *replace = json_object_get(body, "replace");
    if (!m) {
        m = body; /* the body is the manifest itself */
        replace = NULL;
    } else if (json_object_size(body) > (replace ? 2u : 1u) ||
               (replace && !json_is_boolean(replace))) {
        json_decref(body);
        skd__http_error(out, MHD_HTTP_BAD_REQUEST, "invalid_input",
                        "expected a manifest, or {\"manifest\": {...}, \"replace\": bool}");
        return;
    }
    skd_actor who = actor(req);
    if (skd_custom_register(skd_engine_skills(skd__server_engine(req->srv)), &who, m,
                            json_is_true(replace), &s, &err))
        skd__http_from_err(out, &err);
    else
        skd__http_json(out, MHD_HTTP_CREATED, skd_skill_to_json(s));
    skd_skill_unref(s);
    json_decref(body);
}

void skd__rest_skill_delete(skd_http_req *req, skd_http_reply *out)
{
    skd_err err = {0};
    skd_actor who = actor(req);
    if (skd_custom_remove(skd_engine_skills(skd__server_engine(req->srv)), &who, req->param, &err))
        skd__http_from_err(out, &err);
    else
        skd__http_empty(out, MHD_HTTP_NO_CONTENT);
}

/* PATCH /v1/skills/{name} {"public": bool, "owner"?: key id}: an admin
 * makes a key's SKILL.md bundle visible to every key, or private again. */
static void patch_public(skd_http_req *req, json_t *body, skd_http_reply *out)
{
    skd_err err = {0};
    json_t *pub = json_object_get(body, "public"), *owner = json_object_get(body, "owner");
    if (!json_is_boolean(pub) || (owner && !json_is_string(owner)) ||
        json_object_size(body) != (owner ? 2u : 1u)) {
        skd__http_error(out, MHD_HTTP_BAD_REQUEST, "invalid_input",
                        "expected {\"public\": true|false, \"owner\": \"KEY_ID\"}");
        return;
    }
    skd_actor who = actor(req);
    if (skd_bundle_set_public(skd_engine_skills(skd__server_engine(req->srv)), &who, req->param,
                              json_string_value(owner), json_is_true(pub), &err))
        skd__http_from_err(out, &err);
    else
        skd__http_json(out, MHD_HTTP_OK,
                       json_pack("{s:s, s:O, s:O}", "bundle", req->param, "owner",
                                 owner ? owner : json_null(), "public", pub));
}

void skd__rest_skill_patch(skd_http_req *req, skd_http_reply *out)
{
    skd_err err = {0};
    json_t *body = skd__http_body_object(req, out);
    if (!body)
        return;
    if (json_object_get(body, "public")) {
        patch_public(req, body, out);
        json_decref(body);
        return;
    }
    json_t *en = json_object_get(body, "enabled");
    if (!json_is_boolean(en) || json_object_size(body) != 1) {
        json_decref(body);
        skd__http_error(out, MHD_HTTP_BAD_REQUEST, "invalid_input",
                        "expected {\"enabled\": true|false}");
        return;
    }
    skd_actor who = actor(req);
    skd_engine *e = skd__server_engine(req->srv);
    if (skd_custom_set_enabled(skd_engine_skills(e), &who, req->param, json_is_true(en), &err)) {
        skd__http_from_err(out, &err);
    } else {
        skd_skill *s = skd_engine_find_skill(e, &who, req->param, NULL);
        skd__http_json(out, MHD_HTTP_OK, s ? skd_skill_to_json(s) : json_object());
        skd_skill_unref(s);
    }
    json_decref(body);
}
