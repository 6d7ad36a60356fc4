/*
 * POST /v1/replica/call: a call another replica forwarded here because
 * this replica holds the live sandbox it names (src/engine/replica.c;
 * DESIGN.md, "Live sandboxes"). The caller is a replica, not a client:
 * it proves it with the secret the replicas share (Skilld-Replica-Secret:
 * SKILLD_REPLICA_SECRET), compared in constant time, and names the key it
 * authenticated, with that key's scopes. Without a secret configured the
 * route does not exist (404), so a lone server has no such door.
 *
 * Body: {keyId, scopes, skill, version?, input, from}. Only the skills
 * that act in a live sandbox (skd_skill_def.live_bound) are taken: a
 * forwarded call can do nothing but what the key could do here with its
 * own sandbox. The answer is the stream skd__rest_stream_call makes; the
 * engine runs the call as the key's (scope, schema, tenancy, audit) and
 * never forwards it again.
 */
#include "server/http.h"
#include "skilld/log.h"
#include "skilld/registry.h"
#include "skilld/skilld.h"

#include <openssl/crypto.h>
#include <string.h>

#define SECRET_MIN 32

static int secret_ok(const char *want, const char *got)
{
    size_t n = strlen(want);
    return got && strlen(got) == n && CRYPTO_memcmp(want, got, n) == 0;
}

void skd__replica_call(skd_http_req *req, skd_http_reply *out)
{
    skd_engine *e = skd__server_engine(req->srv);
    const skd_config *cfg = skd_engine_config(e);
    const char *want = skd_config_str(cfg, "SKILLD_REPLICA_SECRET");
    if (!*want) {
        skd__http_error(out, MHD_HTTP_NOT_FOUND, "not_found", "no such route");
        return;
    }
    if (strlen(want) < SECRET_MIN) {
        skd__http_error(out, MHD_HTTP_SERVICE_UNAVAILABLE, "invalid_config",
                        "SKILLD_REPLICA_SECRET is shorter than %d characters: this replica "
                        "takes no forwarded call",
                        SECRET_MIN);
        return;
    }
    const char *got =
        MHD_lookup_connection_value(req->conn, MHD_HEADER_KIND, "Skilld-Replica-Secret");
    if (!secret_ok(want, got)) {
        skd__http_error(out, MHD_HTTP_UNAUTHORIZED, "unauthorized",
                        "a forwarded call needs the replicas' shared secret "
                        "(SKILLD_REPLICA_SECRET)");
        return;
    }
    json_t *body = skd__http_body_object(req, out);
    if (!body)
        return;
    const char *key = json_string_value(json_object_get(body, "keyId"));
    const char *skill = json_string_value(json_object_get(body, "skill"));
    json_t *scopes = json_object_get(body, "scopes");
    json_t *input = json_object_get(body, "input");
    skd_skill *s =
        skill && key ? skd_registry_lookup(skd_engine_registry(e), skill, key, NULL) : NULL;
    if (!key || !*key || !skill || !json_is_integer(scopes) || !json_is_object(input) || !s ||
        !skd_skill_live_bound(s)) {
        skd_skill_unref(s);
        json_decref(body);
        skd__http_error(out, MHD_HTTP_BAD_REQUEST, "invalid_input",
                        "a forwarded call is {keyId, scopes, skill, input} for a skill that acts "
                        "in a live sandbox");
        return;
    }
    skd_skill_unref(s);
    skd_debug("call of %s forwarded by replica %s", skill,
              json_string_value(json_object_get(body, "from")));
    skd__rest_stream_call(req, out, key, (unsigned)json_integer_value(scopes), skill,
                          json_incref(input), 1);
    json_decref(body);
}
