/*
 * The MCP Skills extension (io.modelcontextprotocol/skills, SEP-2640) and
 * the resources it rides on: skills/list, skills/get, resources/list,
 * resources/read, resources/directory/read, resources/templates/list.
 *
 * Every bundle the session's key sees (skd_bundle_list decides, with the
 * key id from the transport's authentication) is a skill whose SKILL.md is
 * skill://<name>/SKILL.md and whose files are skill://<name>/<path>, each
 * path segment percent-encoded. Entries carry the front matter verbatim and
 * every file's exact size and "sha256:<hex>" digest as recorded at
 * registration; resources/read serves only bytes that still match them
 * (src/skills/bundle.c refuses the rest). A URI is decoded strictly: no
 * query, fragment, empty, "." or ".." segment, and the path must be a file
 * of the record, so nothing outside a bundle is ever opened.
 */
#include "server/mcp_int.h"

#include "builtins/fileskill.h"
#include "server/test_hooks.h"
#include "skilld/bundle.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SCHEME "skill://"

/* ---- URIs ------------------------------------------------------------ */

static int unreserved(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '.' || c == '_' || c == '~';
}

/* skill://<name>[/<path>] with every path segment percent-encoded. */
static json_t *uri_of(const char *name, const char *path)
{
    skd_buf b;
    skd_buf_init(&b, 8192);
    int rc = skd_buf_printf(&b, SCHEME "%s", name);
    if (path) {
        rc = rc ? rc : skd_buf_append(&b, "/", 1);
        for (const unsigned char *p = (const unsigned char *)path; !rc && *p; p++)
            rc = *p == '/' || unreserved(*p) ? skd_buf_append(&b, p, 1)
                                             : skd_buf_printf(&b, "%%%02X", *p);
    }
    json_t *s = rc ? NULL : json_stringn(b.data, b.len);
    skd_buf_free(&b);
    return s;
}

static int hexval(char c)
{
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

/* Split uri into the bundle name and the decoded path beneath it ("" for
 * the root; a trailing "/" is dropped). Returns 0, or -1 for a URI that
 * names nothing of ours: another scheme, a query or fragment, an empty,
 * "." or ".." segment, an escape that is not %XX or decodes to "/" or NUL. */
static int parse_uri(const char *uri, char *name, size_t ncap, char *path, size_t pcap)
{
    if (!uri || strncmp(uri, SCHEME, strlen(SCHEME)) != 0 || strpbrk(uri, "?#"))
        return -1;
    const char *h = uri + strlen(SCHEME), *slash = strchr(h, '/');
    size_t hl = slash ? (size_t)(slash - h) : strlen(h), n = 0;
    if (hl == 0 || hl >= ncap)
        return -1;
    memcpy(name, h, hl);
    name[hl] = '\0';
    path[0] = '\0';
    for (const char *seg = slash ? slash + 1 : NULL; seg && *seg;) {
        const char *end = strchr(seg, '/');
        size_t len = end ? (size_t)(end - seg) : strlen(seg), start;
        if (len == 0)
            return -1; /* "//" */
        if (n) {
            if (n + 1 >= pcap)
                return -1;
            path[n++] = '/';
        }
        start = n;
        for (size_t i = 0; i < len; i++) {
            char c = seg[i];
            if (c == '%') {
                if (i + 2 >= len)
                    return -1;
                int hi = hexval(seg[i + 1]), lo = hexval(seg[i + 2]);
                if (hi < 0 || lo < 0)
                    return -1;
                c = (char)(hi * 16 + lo);
                i += 2;
                if (c == '/' || c == '\0')
                    return -1;
            }
            if (n + 1 >= pcap)
                return -1;
            path[n++] = c;
        }
        path[n] = '\0';
        if (strcmp(path + start, ".") == 0 || strcmp(path + start, "..") == 0)
            return -1;
        seg = end ? end + 1 : NULL;
    }
    path[n] = '\0';
    return 0;
}

/* ---- entries --------------------------------------------------------- */

static int can_read(const skd_mcp_session *s)
{
    return (s->scopes & SKD_SCOPE_READ) != 0;
}

/* The bundles the session sees (name may be NULL). New reference; NULL
 * with a reply in *reply. */
static json_t *visible(skd_mcp_session *s, const json_t *id, const char *name, int fresh,
                       json_t **reply)
{
    skd_err err = {0};
    *reply = NULL;
    if (!can_read(s)) {
        *reply =
            skd__rpc_error(id, SKD_RPC_INVALID_REQUEST, "this API key lacks the skills:read scope");
        return NULL;
    }
    json_t *rows = skd_bundle_list(skd_engine_skills(s->m->e), s->key_id, name, fresh, &err);
    if (!rows)
        *reply = skd__rpc_error(id, SKD_RPC_INTERNAL_ERROR, "%s", skd_err_msg(&err));
    return rows;
}

static json_t *skill_entry(const json_t *row)
{
    const char *name = skd_json_str(row, "name", "");
    const json_t *rec = json_object_get(row, "record");
    json_t *res = json_array();
    size_t i;
    const json_t *f;
    json_array_foreach (json_object_get(rec, "files"), i, f) {
        char digest[80];
        snprintf(digest, sizeof(digest), "sha256:%s", skd_json_str(f, "sha256", ""));
        json_array_append_new(
            res, json_pack("{s:o, s:I, s:s}", "uri", uri_of(name, skd_json_str(f, "path", "")),
                           "size", (json_int_t)skd_json_int(f, "size", 0), "digest", digest));
    }
    return json_pack("{s:o, s:O, s:o}", "uri", uri_of(name, "SKILL.md"), "frontmatter",
                     json_object_get(rec, "frontmatter"), "resources", res);
}

/* A "cursor" param as an offset, or -1 when it is not one of ours. */
static int64_t cursor_of(const json_t *params)
{
    int64_t off = 0;
    const json_t *c = json_object_get(params, "cursor");
    if (c && !json_is_null(c) &&
        (!json_is_string(c) || skd_parse_i64(json_string_value(c), 0, 1000000, &off) != 0))
        return -1;
    return off;
}

/* Page [off, off + page_size) of all into r[key] (steals all). */
static json_t *page(skd_mcp_session *s, const json_t *id, json_t *all, int64_t off, const char *key)
{
    size_t total = json_array_size(all);
    if (off < 0 || (size_t)off > total) {
        json_decref(all);
        return skd__rpc_error(id, SKD_RPC_INVALID_PARAMS, "invalid cursor");
    }
    size_t end = (size_t)off + s->m->page_size;
    json_t *items = json_array();
    for (size_t i = (size_t)off; items && i < total && i < end; i++)
        json_array_append(items, json_array_get(all, i));
    json_decref(all);
    json_t *r = json_object();
    json_object_set_new(r, key, items);
    if (end < total) {
        char next[32];
        snprintf(next, sizeof(next), "%zu", end);
        json_object_set_new(r, "nextCursor", json_string(next));
    }
    return skd__rpc_result(id, r);
}

json_t *skd__mcp_skills_list(skd_mcp_session *s, const json_t *id, const json_t *params)
{
    json_t *reply = NULL, *rows = visible(s, id, NULL, 1, &reply);
    if (!rows)
        return reply;
    json_t *all = json_array();
    size_t i;
    const json_t *row;
    json_array_foreach (rows, i, row)
        json_array_append_new(all, skill_entry(row));
    json_decref(rows);
    return page(s, id, all, cursor_of(params), "skills");
}

/* -32602 for a URI that names nothing served, with data.uri (SEP-2164). */
static json_t *not_found(const json_t *id, const char *uri, const char *fmt, const char *arg)
{
    json_t *e = skd__rpc_error(id, SKD_RPC_INVALID_PARAMS, fmt, arg);
    if (e && uri)
        json_object_set_new(json_object_get(e, "error"), "data", json_pack("{s:s}", "uri", uri));
    return e;
}

/* The one bundle uri belongs to (new reference), with its name and the
 * decoded path; NULL with a reply. */
static json_t *bundle_of(skd_mcp_session *s, const json_t *id, const char *uri, int fresh,
                         char *path, size_t pcap, json_t **reply)
{
    char name[80];
    if (parse_uri(uri, name, sizeof(name), path, pcap) != 0) {
        *reply = not_found(id, uri, "unknown resource: %.200s", uri ? uri : "(none)");
        return NULL;
    }
    json_t *rows = visible(s, id, name, fresh, reply);
    if (!rows)
        return NULL;
    json_t *row = json_incref(json_array_get(rows, 0));
    json_decref(rows);
    if (!row)
        *reply = not_found(id, uri, "no skill %s visible to this key", name);
    return row;
}

json_t *skd__mcp_skills_get(skd_mcp_session *s, const json_t *id, const json_t *params)
{
    char path[1100];
    json_t *reply = NULL;
    const char *uri = skd_json_str(params, "uri", NULL);
    json_t *row = bundle_of(s, id, uri, 1, path, sizeof(path), &reply);
    if (!row)
        return reply;
    if (strcmp(path, "SKILL.md") != 0) {
        json_decref(row);
        return skd__rpc_error(id, SKD_RPC_INVALID_PARAMS,
                              "skills/get takes a skill's SKILL.md URI, not %.200s", uri);
    }
    json_t *r = json_pack("{s:o}", "skill", skill_entry(row));
    json_decref(row);
    return skd__rpc_result(id, r);
}

static const char *mime_of(const char *path)
{
    static const char *const map[][2] = {
        {".md", "text/markdown"},      {".py", "text/x-python"},     {".sh", "text/x-shellscript"},
        {".json", "application/json"}, {".txt", "text/plain"},       {".js", "text/javascript"},
        {".yaml", "application/yaml"}, {".yml", "application/yaml"}, {".html", "text/html"},
        {".csv", "text/csv"},          {".png", "image/png"},        {".pdf", "application/pdf"},
    };
    size_t n = strlen(path);
    for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++) {
        size_t k = strlen(map[i][0]);
        if (n > k && strcmp(path + n - k, map[i][0]) == 0)
            return map[i][1];
    }
    return "application/octet-stream";
}

json_t *skd__mcp_resources_read(skd_mcp_session *s, const json_t *id, const json_t *params)
{
    char path[1100];
    json_t *reply = NULL;
    const char *uri = skd_json_str(params, "uri", NULL);
    json_t *fixture = skd__test_resource_read(s->m->e, uri);
    if (fixture)
        return skd__rpc_result(id, fixture);
    /* As stored, not refreshed: the bytes must match the digests the host
     * was given, and a change is refused (and registered) by the read. */
    json_t *row = bundle_of(s, id, uri, 0, path, sizeof(path), &reply);
    if (!row)
        return reply;
    skd_err err = {0};
    char *data = NULL;
    size_t len = 0;
    int rc = skd_bundle_read(skd_engine_skills(s->m->e), row, path, &data, &len, &err);
    json_t *content = NULL;
    if (rc == 0) {
        /* Text when it is UTF-8 without NUL, so a host sees the exact bytes
         * after UTF-8 encoding; anything else as base64. */
        json_t *u = uri_of(skd_json_str(row, "name", ""), path);
        if (skd_utf8_valid(data, len) && !memchr(data, '\0', len)) {
            content = json_pack("{s:o, s:s, s:s%}", "uri", u, "mimeType", mime_of(path), "text",
                                data, len);
        } else {
            size_t elen = 0;
            char *b64 = skd__base64_encode((const unsigned char *)data, len, &elen);
            content = b64 ? json_pack("{s:o, s:s, s:s%}", "uri", u, "mimeType", mime_of(path),
                                      "blob", b64, elen)
                          : NULL;
            free(b64);
        }
    }
    free(data);
    json_decref(row);
    if (rc)
        return skd__rpc_error(id, SKD_RPC_INVALID_PARAMS, "%s", skd_err_msg(&err));
    if (!content)
        return skd__rpc_error(id, SKD_RPC_INTERNAL_ERROR, "out of memory");
    return skd__rpc_result(id, json_pack("{s:[o]}", "contents", content));
}

json_t *skd__mcp_resources_dir(skd_mcp_session *s, const json_t *id, const json_t *params)
{
    char path[1100];
    json_t *reply = NULL;
    const char *uri = skd_json_str(params, "uri", NULL);
    json_t *row = bundle_of(s, id, uri, 1, path, sizeof(path), &reply);
    if (!row)
        return reply;
    const char *name = skd_json_str(row, "name", "");
    size_t plen = strlen(path);
    json_t *out = json_array(), *seen = json_object();
    size_t i;
    const json_t *f;
    int found = plen == 0;
    json_array_foreach (json_object_get(json_object_get(row, "record"), "files"), i, f) {
        const char *fp = skd_json_str(f, "path", "");
        if (plen && (strncmp(fp, path, plen) != 0 || fp[plen] != '/'))
            continue;
        found = 1;
        const char *rest = fp + (plen ? plen + 1 : 0), *slash = strchr(rest, '/');
        char child[1100];
        snprintf(child, sizeof(child), "%.*s", slash ? (int)(slash - rest) : (int)strlen(rest),
                 rest);
        if (json_object_get(seen, child))
            continue;
        json_object_set_new(seen, child, json_true());
        char full[2300];
        if (snprintf(full, sizeof(full), "%s%s%s", path, plen ? "/" : "", child) >=
            (int)sizeof(full))
            continue; /* cannot happen: recorded paths are shorter than 1024 bytes */
        json_t *e = json_pack("{s:o, s:s, s:s}", "uri", uri_of(name, full), "name", child,
                              "mimeType", slash ? "inode/directory" : mime_of(child));
        if (e && !slash)
            json_object_set_new(e, "size", json_integer(skd_json_int(f, "size", 0)));
        json_array_append_new(out, e);
    }
    json_decref(seen);
    json_decref(row);
    if (!found) {
        json_decref(out);
        return skd__rpc_error(id, SKD_RPC_INVALID_PARAMS, "%.200s is not a directory of a skill",
                              uri);
    }
    return skd__rpc_result(id, json_pack("{s:o}", "resources", out));
}

json_t *skd__mcp_resources_list(skd_mcp_session *s, const json_t *id, const json_t *params)
{
    json_t *all = skd__test_resources_list(s->m->e);
    if (!all)
        return skd__rpc_error(id, SKD_RPC_INTERNAL_ERROR, "out of memory");
    if (can_read(s)) {
        json_t *reply = NULL, *rows = visible(s, id, NULL, 1, &reply);
        if (!rows) {
            json_decref(all);
            return reply;
        }
        size_t i;
        const json_t *row;
        json_array_foreach (rows, i, row) {
            const json_t *fm = json_object_get(json_object_get(row, "record"), "frontmatter");
            json_array_append_new(all, json_pack("{s:o, s:s, s:s, s:s}", "uri",
                                                 uri_of(skd_json_str(row, "name", ""), "SKILL.md"),
                                                 "name", skd_json_str(row, "name", ""),
                                                 "description", skd_json_str(fm, "description", ""),
                                                 "mimeType", "text/markdown"));
        }
        json_decref(rows);
    }
    return page(s, id, all, cursor_of(params), "resources");
}

json_t *skd__mcp_templates_list(skd_mcp_session *s, const json_t *id, const json_t *params)
{
    (void)s;
    (void)params;
    json_t *t = skd__test_resource_templates(s->m->e);
    return t ? skd__rpc_result(id, json_pack("{s:o}", "resourceTemplates", t))
             : skd__rpc_error(id, SKD_RPC_INTERNAL_ERROR, "out of memory");
}
