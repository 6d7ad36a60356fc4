/*
 * web_fetch: fetch a page and return it as Markdown, text, HTML or links.
 *
 * Input {url, format markdown|text|html|links, max_length (default 20000),
 * start_index, include_metadata?, timeoutMs?}; result {success, url, status,
 * contentType, title, content, links[], metadata?, truncated,
 * next_start_index, totalLength}. Indexes and lengths count Unicode code
 * points of the converted content, so paging never splits a character: ask
 * again with start_index = next_start_index for the next page.
 *
 * HTML (text/html, application/xhtml+xml) goes through the converter in
 * src/net/html.c; other text (any text type, JSON, XML, JavaScript) passes through;
 * anything else is refused with unsupported_content. Text that is not valid
 * UTF-8 (another charset) has its invalid bytes replaced by U+FFFD. What it trusts: nothing
 * from the page; the fetch goes through the outbound guard and the body is
 * capped at SKILLS_MAX_HTTP_RESPONSE_BYTES.
 */
#include "builtins/builtins.h"
#include "net/html.h"
#include "skilld/net.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char schema_text[] =
    "{\"type\":\"object\",\"additionalProperties\":false,\"required\":[\"url\"],"
    "\"properties\":{"
    "\"url\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":8192},"
    "\"format\":{\"type\":\"string\",\"enum\":[\"markdown\",\"text\",\"html\",\"links\"],"
    "\"default\":\"markdown\"},"
    "\"max_length\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":1000000,"
    "\"default\":20000,\"description\":\"characters of content returned\"},"
    "\"start_index\":{\"type\":\"integer\",\"minimum\":0,\"default\":0,"
    "\"description\":\"character to start from (next_start_index of the previous page)\"},"
    "\"include_metadata\":{\"type\":\"boolean\",\"default\":true},"
    "\"timeoutMs\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":600000}}}";

enum kind { K_HTML, K_TEXT, K_BINARY };

static int ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

/* What the body is, by media type, and by sniffing when there is none. */
static enum kind classify(const skd_fetch_resp *r)
{
    const char *ct = r->content_type;
    if (strcmp(ct, "text/html") == 0 || strcmp(ct, "application/xhtml+xml") == 0)
        return K_HTML;
    if (strncmp(ct, "text/", 5) == 0 || strcmp(ct, "application/json") == 0 ||
        strcmp(ct, "application/xml") == 0 || strcmp(ct, "application/javascript") == 0 ||
        strcmp(ct, "application/x-javascript") == 0 || strcmp(ct, "application/yaml") == 0 ||
        strcmp(ct, "application/x-yaml") == 0 || strcmp(ct, "application/toml") == 0 ||
        strcmp(ct, "application/x-sh") == 0 || ends_with(ct, "+json") || ends_with(ct, "+xml"))
        return memchr(r->body, '\0', r->body_len) ? K_BINARY : K_TEXT;
    if (*ct)
        return K_BINARY;
    if (memchr(r->body, '\0', r->body_len) || !skd_utf8_valid(r->body, r->body_len))
        return K_BINARY;
    const char *p = r->body;
    while (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')
        p++;
    return strncasecmp(p, "<!doctype html", 14) == 0 || strncasecmp(p, "<html", 5) == 0 ? K_HTML
                                                                                        : K_TEXT;
}

/* Byte offset of code point index idx in s (len bytes), or len. */
static size_t cp_offset(const char *s, size_t len, size_t idx)
{
    size_t off = 0;
    while (off < len && idx > 0) {
        off++;
        while (off < len && ((unsigned char)s[off] & 0xC0) == 0x80)
            off++;
        idx--;
    }
    return off;
}

static size_t cp_count(const char *s, size_t len)
{
    size_t n = 0;
    for (size_t i = 0; i < len; i++)
        n += ((unsigned char)s[i] & 0xC0) != 0x80;
    return n;
}

/* Text with invalid UTF-8 sequences (and NUL bytes) replaced by U+FFFD.
 * New string (caller frees), or NULL when out of memory. */
static char *utf8_repair(const char *s, size_t len, size_t *out_len)
{
    skd_buf b;
    skd_buf_init(&b, len * 3 + 1);
    if (skd_utf8_repair(&b, s, len) != 0) {
        skd_buf_free(&b);
        return NULL;
    }
    return skd_buf_steal(&b, out_len);
}

static json_t *meta_json(const skd_html_doc *doc)
{
    json_t *m = json_object();
    const struct {
        const char *name;
        const char *value;
    } f[] = {{"description", doc->meta.description}, {"language", doc->meta.language},
             {"published", doc->meta.published},     {"author", doc->meta.author},
             {"canonical", doc->meta.canonical},     {"site_name", doc->meta.site_name}};
    for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++)
        if (f[i].value)
            json_object_set_new(m, f[i].name, json_string(f[i].value));
    return m;
}

/* Page of content: start..start+max code points. */
static void set_page(json_t *res, const char *text, size_t len, size_t start, size_t max, int cut)
{
    size_t total = cp_count(text, len);
    size_t a = cp_offset(text, len, start);
    size_t b = a + cp_offset(text + a, len - a, max);
    json_object_set_new(res, "content", json_stringn(text + a, b - a));
    json_object_set_new(res, "totalLength", json_integer((json_int_t)total));
    int more = b < len;
    json_object_set_new(res, "next_start_index",
                        more ? json_integer((json_int_t)(start + max)) : json_null());
    json_object_set_new(res, "truncated", json_boolean(more || cut));
}

static json_t *convert(const skd_fetch_resp *r, const json_t *input, json_t *res)
{
    const char *format = skd_json_str(input, "format", "markdown");
    size_t start = (size_t)skd_json_int(input, "start_index", 0);
    size_t max = (size_t)skd_json_int(input, "max_length", 20000);
    int fmt = strcmp(format, "text") == 0    ? SKD_HTML_TEXT
              : strcmp(format, "links") == 0 ? SKD_HTML_LINKS
                                             : SKD_HTML_MARKDOWN;
    skd_html_doc doc = {0};
    skd_err err = {0};
    if (skd__html_convert(r->body, r->body_len, r->final_url, fmt, &doc, &err)) {
        skd__html_doc_free(&doc);
        json_decref(res);
        return skd_result_from_err(&err);
    }
    json_object_set_new(res, "title", doc.title ? json_string(doc.title) : json_null());
    json_t *links = json_array();
    for (size_t i = 0; i < doc.nlinks; i++)
        json_array_append_new(
            links, json_pack("{s:s, s:s}", "url", doc.links[i].url, "text", doc.links[i].text));
    json_object_set_new(res, "links", links);
    if (skd_json_bool(input, "include_metadata", 1))
        json_object_set_new(res, "metadata", meta_json(&doc));
    if (strcmp(format, "html") == 0) {
        size_t n = 0;
        char *raw = utf8_repair(r->body, r->body_len, &n);
        set_page(res, raw ? raw : "", raw ? n : 0, start, max, r->truncated);
        free(raw);
    } else {
        set_page(res, doc.content, doc.content_len, start, max, r->truncated || doc.truncated);
    }
    skd__html_doc_free(&doc);
    return res;
}

static json_t *handle(const skd_ctx *ctx, const json_t *input, void *udata)
{
    (void)udata;
    const skd_config *cfg = ctx->cfg;
    skd_fetch_resp r = {0};
    skd_err err = {0};
    json_t *res = NULL;
    /* The caller may shorten the administrator's deadline, never extend it. */
    int64_t tmax = skd_config_int(cfg, "SKILLS_HTTP_TIMEOUT_MS");
    int64_t timeout = skd_json_int(input, "timeoutMs", tmax);
    skd_fetch_req req = {
        .url = skd_json_str(input, "url", ""),
        .method = "GET",
        .timeout_ms = timeout < tmax ? timeout : tmax,
        .max_bytes = (size_t)skd_config_int(cfg, "SKILLS_MAX_HTTP_RESPONSE_BYTES"),
        .follow_redirects = 1,
        .cancel = ctx->cancel,
    };
    if (skd_http_fetch(cfg, &req, &r, &err)) {
        res = skd_result_from_err(&err);
        goto out;
    }
    if (r.status >= 400) {
        res = skd_result_error(SKD_EUPSTREAM, "the server answered HTTP %ld %s", r.status,
                               skd_utf8_valid(r.status_text, strlen(r.status_text)) ? r.status_text
                                                                                    : "");
        goto out;
    }
    enum kind k = classify(&r);
    if (k == K_BINARY) {
        res = skd_result_error(SKD_EUNSUPPORTED_MEDIA,
                               "the content (%s) is binary; web_fetch returns text only, "
                               "use http_request for bytes",
                               *r.content_type ? r.content_type : "unknown type");
        goto out;
    }
    res = skd_result_ok();
    json_object_set_new(res, "url", json_string(r.final_url));
    json_object_set_new(res, "status", json_integer(r.status));
    json_object_set_new(res, "contentType", json_string(r.content_type));
    if (k == K_HTML) {
        res = convert(&r, input, res);
    } else {
        size_t n = 0;
        char *text = utf8_repair(r.body, r.body_len, &n);
        json_object_set_new(res, "title", json_null());
        json_object_set_new(res, "links", json_array());
        if (skd_json_bool(input, "include_metadata", 1))
            json_object_set_new(res, "metadata", json_object());
        const char *format = skd_json_str(input, "format", "markdown");
        /* Text has no links to list: format links yields empty content. */
        int empty = strcmp(format, "links") == 0 || !text;
        set_page(res, empty ? "" : text, empty ? 0 : n,
                 (size_t)skd_json_int(input, "start_index", 0),
                 (size_t)skd_json_int(input, "max_length", 20000), r.truncated);
        free(text);
    }
out:
    skd_fetch_resp_free(&r);
    return res;
}

void skd__builtin_web_fetch_def(skd_skill_def *d)
{
    d->name = "web_fetch";
    d->version = "1.0.0";
    d->description = "Fetch a web page and return it as clean Markdown (or text, raw HTML or "
                     "its links), with title and metadata, a page at a time (start_index, "
                     "max_length, next_start_index).";
    d->input_schema = json_loads(schema_text, 0, NULL);
    d->mode = SKD_MODE_DIRECT;
    d->handler = handle;
}
