/*
 * The operator console (docs/console.md). GET /ui and /ui/<file> serve the
 * files of ui/, embedded in the binary (scripts/embed-ui.sh), with a strict
 * Content-Security-Policy: nothing is loaded from elsewhere and no inline
 * script runs. POST /ui/session signs in with an admin key's secret and
 * sets the session cookie (HttpOnly, SameSite=Strict, Secure behind
 * https, expiring); the cookie then stands for that key on /v1/... and
 * /ui/session. A request that changes state through the cookie must come
 * from the console's own origin (Origin equal to the Host it was sent to)
 * and carry the session's CSRF token in X-CSRF-Token: SameSite alone
 * would let another port of the same host through.
 *
 * Trust: the cookie and headers are the client's: the token is checked in
 * form and then by its digest in the store (src/engine/console.c).
 */
#include "server/console.h"
#include "server/http.h"
#include "skilld/tenancy.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#define COOKIE "skd_session"
#define CSP                                                                                        \
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "                    \
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

static void security_headers(struct MHD_Response *r)
{
    MHD_add_response_header(r, "Content-Security-Policy", CSP);
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(r, "X-Frame-Options", "DENY");
    MHD_add_response_header(r, "Referrer-Policy", "no-referrer");
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
}

static void serve(skd_http_reply *out, const char *name)
{
    for (const skd__ui_asset *a = skd__ui_assets; a->name; a++) {
        if (strcmp(a->name, name) != 0)
            continue;
        out->status = MHD_HTTP_OK;
        out->resp =
            MHD_create_response_from_buffer(a->len, (void *)a->data, MHD_RESPMEM_PERSISTENT);
        if (out->resp) {
            MHD_add_response_header(out->resp, MHD_HTTP_HEADER_CONTENT_TYPE, a->type);
            security_headers(out->resp);
        }
        return;
    }
    skd__http_error(out, MHD_HTTP_NOT_FOUND, "not_found", "no such file in the console");
}

void skd__ui_index(skd_http_req *req, skd_http_reply *out)
{
    (void)req;
    serve(out, "index.html");
}

void skd__ui_file(skd_http_req *req, skd_http_reply *out)
{
    serve(out, req->param ? req->param : "");
}

/* 1 when the request's Origin is the origin it was sent to. */
static int same_origin(const skd_http_req *req)
{
    const char *origin = skd__http_header(req, "Origin");
    const char *host = skd__http_header(req, MHD_HTTP_HEADER_HOST);
    if (!origin || !host || !*host)
        return 0;
    const char *rest = strncasecmp(origin, "http://", 7) == 0    ? origin + 7
                       : strncasecmp(origin, "https://", 8) == 0 ? origin + 8
                                                                 : NULL;
    return rest && strcasecmp(rest, host) == 0;
}

static int changes_state(const skd_http_req *req)
{
    return strcmp(req->method, "GET") != 0 && strcmp(req->method, "HEAD") != 0;
}

int skd__ui_auth(skd_http_req *req, skd_http_reply *out)
{
    const char *token = MHD_lookup_connection_value(req->conn, MHD_COOKIE_KIND, COOKIE);
    /* The cookie stands for its key on the REST API and the session only:
     * MCP and A2A clients are programs with bearer keys. */
    if (!token || (strncmp(req->path, "/v1/", 4) != 0 && strcmp(req->path, "/ui/session") != 0))
        return SKD_ENOENT;
    char csrf[SKD_UI_TOKEN_LEN + 1];
    skd_err err = {0};
    int rc = skd_engine_ui_session(skd__server_engine(req->srv), token, &req->key, csrf, &err);
    if (rc == SKD_EUNAUTH) {
        skd__http_error(out, MHD_HTTP_UNAUTHORIZED, "unauthorized", "%s", skd_err_msg(&err));
        return rc;
    }
    if (rc) {
        skd__http_from_err(out, &err);
        return rc;
    }
    if (changes_state(req)) {
        const char *given = skd__http_header(req, "X-CSRF-Token");
        if (!same_origin(req) || !given || strlen(given) != SKD_UI_TOKEN_LEN ||
            !skd_ct_equal(given, csrf, SKD_UI_TOKEN_LEN)) {
            skd__http_error(out, MHD_HTTP_FORBIDDEN, "forbidden",
                            "a console request that changes something must come from the "
                            "console's own origin and carry its CSRF token (X-CSRF-Token)");
            return SKD_EFORBIDDEN;
        }
    }
    req->authed = 1;
    req->via_session = 1;
    return 0;
}

static void set_cookie(skd_http_req *req, skd_http_reply *out, const char *token, int64_t max_age)
{
    const skd_config *cfg = skd_engine_config(skd__server_engine(req->srv));
    int secure = strncasecmp(skd_config_str(cfg, "SKILLD_PUBLIC_URL"), "https://", 8) == 0;
    char c[256];
    snprintf(c, sizeof(c), COOKIE "=%s; Path=/; Max-Age=%lld; HttpOnly; SameSite=Strict%s", token,
             (long long)max_age, secure ? "; Secure" : "");
    if (out->resp)
        MHD_add_response_header(out->resp, MHD_HTTP_HEADER_SET_COOKIE, c);
}

/* POST /ui/session {"key": "<secret>"}: sign in. */
void skd__ui_signin(skd_http_req *req, skd_http_reply *out)
{
    const char *origin = skd__http_header(req, "Origin");
    if (origin && !same_origin(req)) {
        skd__http_error(out, MHD_HTTP_FORBIDDEN, "forbidden",
                        "sign in from the console's own origin");
        return;
    }
    json_t *body = skd__http_body_object(req, out);
    if (!body)
        return;
    const char *secret = skd_json_str(body, "key", NULL);
    char token[SKD_UI_TOKEN_LEN + 1], csrf[SKD_UI_TOKEN_LEN + 1];
    skd_key_info info;
    int64_t expires = 0;
    skd_err err = {0};
    if (!secret) {
        skd__http_error(out, MHD_HTTP_BAD_REQUEST, "invalid_input", "key (string) is required");
    } else if (skd_engine_ui_signin(skd__server_engine(req->srv), secret, token, csrf, &info,
                                    &expires, &err) != 0) {
        skd__http_from_err(out, &err);
    } else {
        skd__http_json(out, MHD_HTTP_OK,
                       json_pack("{s:s, s:s, s:s, s:I}", "keyId", info.id, "keyName", info.name,
                                 "csrf", csrf, "expiresAt", (json_int_t)expires));
        /* The store's expiry is sign-in time + this; the browser's too. */
        set_cookie(req, out, token,
                   skd_config_int(skd_engine_config(skd__server_engine(req->srv)),
                                  "SKILLD_UI_SESSION_SECONDS"));
    }
    json_decref(body);
}

/* GET /ui/session: who the console acts as, and its CSRF token. */
void skd__ui_whoami(skd_http_req *req, skd_http_reply *out)
{
    char csrf[SKD_UI_TOKEN_LEN + 1] = "";
    skd_key_info info;
    skd_err err = {0};
    const char *token = MHD_lookup_connection_value(req->conn, MHD_COOKIE_KIND, COOKIE);
    if (req->via_session &&
        skd_engine_ui_session(skd__server_engine(req->srv), token, &info, csrf, &err) != 0) {
        skd__http_from_err(out, &err);
        return;
    }
    json_t *o = json_pack("{s:s, s:s}", "keyId", req->key.id, "keyName", req->key.name);
    if (o && csrf[0])
        json_object_set_new(o, "csrf", json_string(csrf));
    skd__http_json(out, MHD_HTTP_OK, o);
}

/* DELETE /ui/session: sign out. */
void skd__ui_signout(skd_http_req *req, skd_http_reply *out)
{
    skd_err err = {0};
    const char *token = MHD_lookup_connection_value(req->conn, MHD_COOKIE_KIND, COOKIE);
    if (req->via_session && skd_engine_ui_signout(skd__server_engine(req->srv), token, &err) != 0) {
        skd__http_from_err(out, &err);
        return;
    }
    skd__http_empty(out, MHD_HTTP_NO_CONTENT);
    set_cookie(req, out, "", 0);
}
