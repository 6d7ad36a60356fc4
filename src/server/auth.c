/*
 * Authentication and DNS-rebinding protection for HTTP requests.
 *
 * The bearer credential is checked by the engine: an API key (the store
 * compares a SHA-256 of the secret in constant time) or, with OAuth on, a
 * JWT access token (src/engine/oauth.c); the key or tenant it names becomes
 * the request's identity. Refusals carry RFC 6750 challenges, with the
 * protected-resource metadata URL of RFC 9728 when OAuth is on, so that an
 * MCP client can find where to sign in. Host and Origin headers are compared against allow lists so
 * a web page in a browser cannot reach a local skilld through a rebound DNS name. Nothing from the
 * request is trusted before these checks pass.
 */
#include "server/http.h"
#include "skilld/oauth.h"
#include "skilld/tenancy.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#define WWW_AUTH "Bearer realm=\"skilld\""

/* The WWW-Authenticate value of a challenge (RFC 6750, 3), with the
 * resource_metadata of RFC 9728 when OAuth is on. error, scope and desc
 * may be NULL; desc has its quotes and backslashes replaced. */
static void challenge(skd_http_req *req, char *buf, size_t cap, const char *error,
                      const char *scope, const char *desc)
{
    struct skd_oauth *o = skd_engine_oauth(skd__server_engine(req->srv));
    size_t n = (size_t)snprintf(buf, cap, "%s", WWW_AUTH);
    if (n < cap && error)
        n += (size_t)snprintf(buf + n, cap - n, ", error=\"%s\"", error);
    if (n < cap && scope)
        n += (size_t)snprintf(buf + n, cap - n, ", scope=\"%s\"", scope);
    if (n < cap && desc) {
        size_t start = n + sizeof(", error_description=\"") - 1;
        n += (size_t)snprintf(buf + n, cap - n, ", error_description=\"%.200s\"", desc);
        for (size_t i = start; i < n && i < cap && buf[i]; i++)
            if ((buf[i] == '"' && i + 1 != n) || buf[i] == '\\' || (unsigned char)buf[i] < 0x20)
                buf[i] = '\'';
    }
    if (n < cap && o)
        snprintf(buf + n, cap - n, ", resource_metadata=\"%s\"", skd_oauth_metadata_url(o));
}

static void unauthorized(skd_http_req *req, skd_http_reply *out, const char *error,
                         const char *desc, const char *msg)
{
    char www[1024];
    challenge(req, www, sizeof(www), error, NULL, desc);
    skd__http_error(out, MHD_HTTP_UNAUTHORIZED, "unauthorized", "%s", msg);
    if (out->resp)
        MHD_add_response_header(out->resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE, www);
}

void skd__auth_scope_challenge(skd_http_req *req, skd_http_reply *out, const char *scope)
{
    char www[1024];
    challenge(req, www, sizeof(www), "insufficient_scope", scope, NULL);
    if (out->resp)
        MHD_add_response_header(out->resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE, www);
}

void skd__auth_resource_metadata(skd_http_req *req, skd_http_reply *out)
{
    struct skd_oauth *o = skd_engine_oauth(skd__server_engine(req->srv));
    if (!o) {
        skd__http_error(out, MHD_HTTP_NOT_FOUND, "not_found",
                        "OAuth is not configured on this server (SKILLD_OAUTH_ISSUER)");
        return;
    }
    skd__http_json(out, MHD_HTTP_OK, skd_oauth_metadata(o));
    if (out->resp)
        MHD_add_response_header(out->resp, MHD_HTTP_HEADER_CACHE_CONTROL, "max-age=300");
}

/* Requests without credentials act as SKILLD_ANONYMOUS_KEY when the
 * operator set one (a local single-user set-up, protocol test suites that
 * cannot send headers). The key must exist and not be revoked, checked on
 * every request, so revoking it ends anonymous access at once. */
static int anonymous(skd_http_req *req)
{
    skd_engine *e = skd__server_engine(req->srv);
    const char *id = skd_config_str(skd_engine_config(e), "SKILLD_ANONYMOUS_KEY");
    if (!*id || skd_engine_key_get(e, id, &req->key, NULL) != 0 || req->key.revoked)
        return -1;
    req->authed = 1;
    return 0;
}

int skd__auth_bearer(skd_http_req *req, skd_http_reply *out)
{
    const char *h = skd__http_header(req, MHD_HTTP_HEADER_AUTHORIZATION);
    int rc = h ? SKD_ENOENT : skd__ui_auth(req, out); /* the console's cookie */
    if (rc != SKD_ENOENT)
        return rc;
    if (!h && anonymous(req) == 0)
        return 0;
    if (!h) {
        unauthorized(req, out, NULL, NULL,
                     "a credential is required: Authorization: Bearer <API key or access token>");
        return SKD_EUNAUTH;
    }
    if (strncasecmp(h, "Bearer ", 7) != 0) {
        unauthorized(req, out, "invalid_request", NULL,
                     "the Authorization header must be Bearer <key>");
        return SKD_EUNAUTH;
    }
    const char *secret = h + 7;
    while (*secret == ' ')
        secret++;
    skd_err err = {0};
    rc = skd_engine_authenticate(skd__server_engine(req->srv), secret, &req->key, &err);
    if (rc != 0 &&
        rc != SKD_EUNAUTH) { /* the store or the issuer failed: the credential may be fine */
        skd__http_from_err(out, &err);
        return rc;
    }
    if (rc != 0) {
        int jwt = strncmp(secret, "skd_", 4) != 0 && skd_engine_oauth(skd__server_engine(req->srv));
        unauthorized(req, out, "invalid_token", jwt ? skd_err_msg(&err) : NULL,
                     jwt ? skd_err_msg(&err) : "the API key is not valid or has been revoked");
        return SKD_EUNAUTH;
    }
    req->authed = 1;
    return 0;
}

/* Length of the host part of "host[:port]" or "[v6]:port". */
static size_t host_len(const char *v)
{
    if (v[0] == '[') {
        const char *end = strchr(v, ']');
        return end ? (size_t)(end - v) + 1 : strlen(v);
    }
    const char *colon = strchr(v, ':');
    return colon ? (size_t)(colon - v) : strlen(v);
}

/* 1 when host (n bytes) is one of the comma-separated names in csv ("*"
 * matches anything). */
static int in_list(const char *csv, const char *host, size_t n)
{
    const char *p = csv;
    while (p && *p) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        while (len && *p == ' ') {
            p++;
            len--;
        }
        while (len && p[len - 1] == ' ')
            len--;
        if ((len == 1 && *p == '*') || (len == n && n && strncasecmp(p, host, n) == 0))
            return 1;
        p = comma ? comma + 1 : NULL;
    }
    return 0;
}

int skd__auth_host_allowed(const char *csv, const char *value)
{
    if (!value || !*value)
        return 0;
    return in_list(csv, value, host_len(value));
}

int skd__auth_origin_allowed(const char *csv, const char *origin)
{
    if (!origin)
        return 1; /* not a browser request */
    if (in_list(csv, origin, strlen(origin)))
        return 1;
    const char *rest = NULL;
    if (strncasecmp(origin, "http://", 7) == 0)
        rest = origin + 7;
    else if (strncasecmp(origin, "https://", 8) == 0)
        rest = origin + 8;
    if (!rest || strchr(rest, '/'))
        return 0;
    return in_list("localhost,127.0.0.1,[::1]", rest, host_len(rest));
}

int skd__auth_host_origin(skd_http_req *req, skd_http_reply *out)
{
    const skd_config *cfg = skd_engine_config(skd__server_engine(req->srv));
    const char *host = skd__http_header(req, MHD_HTTP_HEADER_HOST);
    if (!skd__auth_host_allowed(skd_config_str(cfg, "SKILLD_ALLOWED_HOSTS"), host)) {
        skd__http_error(out, MHD_HTTP_FORBIDDEN, "forbidden",
                        "Host header not allowed (SKILLD_ALLOWED_HOSTS)");
        return SKD_EFORBIDDEN;
    }
    const char *origin = skd__http_header(req, "Origin");
    if (!skd__auth_origin_allowed(skd_config_str(cfg, "SKILLD_ALLOWED_ORIGINS"), origin)) {
        skd__http_error(out, MHD_HTTP_FORBIDDEN, "forbidden",
                        "Origin not allowed (SKILLD_ALLOWED_ORIGINS)");
        return SKD_EFORBIDDEN;
    }
    return 0;
}
