/*
 * http_request: one outbound HTTP request through the guard.
 *
 * Input {url, method GET|HEAD|POST|PUT|PATCH|DELETE, headers{}, body?,
 * body_base64?, timeoutMs?, maxBytes?, followRedirects?}; result {success,
 * url (final), method, status, statusText, headers, body | body_base64,
 * truncated, durationMs, droppedHeaders?}. Any HTTP status is a success: the
 * request was made and answered.
 *
 * What it trusts: nothing from the caller. Header names must be tokens and
 * values may not hold CR, LF or NUL (no header injection); names listed in
 * SKILLS_HTTP_DROP_HEADERS are dropped and reported. maxBytes and timeoutMs
 * can only lower the administrator's limits. The response body is returned
 * as text when it is valid UTF-8 without NUL bytes, else base64.
 */
#include "builtins/builtins.h"
#include "builtins/fileskill.h"
#include "skilld/net.h"
#include "skilld/util.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char schema_text[] =
    "{\"type\":\"object\",\"additionalProperties\":false,\"required\":[\"url\"],"
    "\"properties\":{"
    "\"url\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":8192,"
    "\"description\":\"http or https URL\"},"
    "\"method\":{\"type\":\"string\",\"enum\":[\"GET\",\"HEAD\",\"POST\",\"PUT\",\"PATCH\","
    "\"DELETE\"],\"default\":\"GET\"},"
    "\"headers\":{\"type\":\"object\",\"additionalProperties\":{\"type\":\"string\","
    "\"maxLength\":8192},\"description\":\"request headers; some are dropped\"},"
    "\"body\":{\"type\":\"string\",\"description\":\"request body as UTF-8 text\"},"
    "\"body_base64\":{\"type\":\"string\",\"description\":\"request body as base64\"},"
    "\"timeoutMs\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":600000},"
    "\"maxBytes\":{\"type\":\"integer\",\"minimum\":1,"
    "\"description\":\"response bytes kept (at most SKILLS_MAX_HTTP_RESPONSE_BYTES)\"},"
    "\"followRedirects\":{\"type\":\"boolean\",\"default\":true}}}";

#define MAX_HEADERS 64

/* 1 when name is an HTTP token (RFC 9110). */
static int header_name_ok(const char *name)
{
    if (!*name || strlen(name) > 256)
        return 0;
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        if (*p <= 32 || *p >= 127 || strchr("\"(),/:;<=>?@[\\]{}", *p))
            return 0;
    return 1;
}

/* 1 when name is in the comma-separated list (case-insensitive). */
static int in_list(const char *list, const char *name)
{
    size_t nl = strlen(name);
    for (const char *p = list; *p;) {
        while (*p == ' ' || *p == ',')
            p++;
        const char *e = p;
        while (*e && *e != ',')
            e++;
        const char *t = e;
        while (t > p && t[-1] == ' ')
            t--;
        if ((size_t)(t - p) == nl && nl && strncasecmp(p, name, nl) == 0)
            return 1;
        p = e;
    }
    return 0;
}

/* Header lines (new strings in lines[], count *n) from the caller's object;
 * dropped names go to dropped (an array). Returns NULL or an error result. */
static json_t *build_headers(const skd_config *cfg, const json_t *obj, char **lines, size_t *n,
                             json_t *dropped)
{
    const char *drop = skd_config_str(cfg, "SKILLS_HTTP_DROP_HEADERS");
    const char *name;
    json_t *v;
    *n = 0;
    if (json_object_size(obj) > MAX_HEADERS)
        return skd_result_error(SKD_EINVAL, "at most %d headers", MAX_HEADERS);
    json_object_foreach ((json_t *)obj, name, v) {
        const char *val = json_string_value(v);
        if (!header_name_ok(name))
            return skd_result_error(SKD_EINVAL, "header name '%s' is not valid", name);
        if (!val || strpbrk(val, "\r\n") || strlen(val) != json_string_length(v))
            return skd_result_error(SKD_EINVAL, "header %s: value holds CR, LF or NUL", name);
        if (in_list(drop, name)) {
            json_array_append_new(dropped, json_string(name));
            continue;
        }
        size_t len = strlen(name) + strlen(val) + 3;
        char *line = malloc(len);
        if (!line)
            return skd_result_error(SKD_ENOMEM, "out of memory");
        /* curl sends "Name:" with an empty value only when written "Name;". */
        snprintf(line, len, *val ? "%s: %s" : "%s;%s", name, val);
        lines[(*n)++] = line;
    }
    return NULL;
}

/* The bytes as a base64 JSON string (new reference), or NULL. */
static json_t *b64_string(const char *data, size_t len)
{
    size_t n = 0;
    char *enc = skd__base64_encode((const unsigned char *)data, len, &n);
    json_t *s = enc ? json_stringn_nocheck(enc, n) : NULL;
    free(enc);
    return s;
}

static json_t *make_result(const skd_fetch_resp *r, const char *method, json_t *dropped)
{
    json_t *res = skd_result_ok();
    json_object_set_new(res, "url", json_string(r->final_url));
    json_object_set_new(res, "method", json_string(method));
    json_object_set_new(res, "status", json_integer(r->status));
    json_object_set_new(res, "statusText",
                        skd_utf8_valid(r->status_text, strlen(r->status_text))
                            ? json_string(r->status_text)
                            : json_string(""));
    json_object_set(res, "headers", r->headers);
    size_t n = r->truncated ? skd_utf8_cut(r->body, r->body_len) : r->body_len;
    int text = memchr(r->body, '\0', n) == NULL && skd_utf8_valid(r->body, n);
    json_t *body = text ? json_stringn_nocheck(r->body, n) : b64_string(r->body, r->body_len);
    if (!body) {
        json_decref(res);
        return skd_result_error(SKD_ENOMEM, "out of memory");
    }
    json_object_set_new(res, text ? "body" : "body_base64", body);
    json_object_set_new(res, "truncated", json_boolean(r->truncated));
    json_object_set_new(res, "durationMs", json_integer(r->duration_ms));
    if (json_array_size(dropped))
        json_object_set(res, "droppedHeaders", dropped);
    return res;
}

static json_t *handle(const skd_ctx *ctx, const json_t *input, void *udata)
{
    (void)udata;
    const skd_config *cfg = ctx->cfg;
    const char *method = skd_json_str(input, "method", "GET");
    const char *body = skd_json_str(input, "body", NULL);
    const char *body64 = skd_json_str(input, "body_base64", NULL);
    int64_t cap = skd_config_int(cfg, "SKILLS_MAX_HTTP_RESPONSE_BYTES");
    int64_t max = skd_json_int(input, "maxBytes", cap);
    int64_t tmax = skd_config_int(cfg, "SKILLS_HTTP_TIMEOUT_MS");
    int64_t timeout = skd_json_int(input, "timeoutMs", tmax);
    char *lines[MAX_HEADERS];
    size_t nlines = 0;
    unsigned char *raw = NULL;
    size_t raw_len = 0;
    skd_fetch_resp resp = {0};
    skd_err err = {0};
    json_t *res = NULL, *dropped = json_array();
    if (!dropped)
        return skd_result_error(SKD_ENOMEM, "out of memory");
    if (body && body64) {
        res = skd_result_error(SKD_EINVAL, "give body or body_base64, not both");
        goto out;
    }
    if ((body || body64) && (strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0)) {
        res = skd_result_error(SKD_EINVAL, "a %s request carries no body", method);
        goto out;
    }
    if (body64 &&
        skd__base64_decode(body64, strlen(body64), (size_t)1 << 30, &raw, &raw_len, &err)) {
        res = skd_result_error(err.code, "body_base64: %s", skd_err_msg(&err));
        goto out;
    }
    if ((res = build_headers(cfg, json_object_get(input, "headers"), lines, &nlines, dropped)))
        goto out;
    skd_fetch_req req = {
        .url = skd_json_str(input, "url", ""),
        .method = method,
        .headers = (const char *const *)lines,
        .nheaders = nlines,
        .body = raw ? (const void *)raw : (const void *)body,
        .body_len = raw    ? raw_len
                    : body ? strlen(body)
                           : 0,
        .timeout_ms = timeout < tmax ? timeout : tmax,
        .max_bytes = (size_t)(max < cap ? max : cap),
        .follow_redirects = skd_json_bool(input, "followRedirects", 1),
        .cancel = ctx->cancel,
    };
    if (skd_http_fetch(cfg, &req, &resp, &err))
        res = skd_result_from_err(&err);
    else
        res = make_result(&resp, method, dropped);
out:
    for (size_t i = 0; i < nlines; i++)
        free(lines[i]);
    free(raw);
    json_decref(dropped);
    skd_fetch_resp_free(&resp);
    return res;
}

void skd__builtin_http_request_def(skd_skill_def *d)
{
    d->name = "http_request";
    d->version = "1.0.0";
    d->description = "Make an HTTP(S) request to a public address and return the status, "
                     "headers and body (text, or base64 for binary). Private, loopback and "
                     "cloud-metadata addresses are refused, also after redirects.";
    d->input_schema = json_loads(schema_text, 0, NULL);
    d->mode = SKD_MODE_DIRECT;
    d->handler = handle;
}
