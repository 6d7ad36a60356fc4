/*
 * Search providers (see src/net/search.h).
 *
 * What it trusts: the configuration (base URLs and the Brave key, set by the
 * administrator). Everything an engine answers is untrusted: HTML is parsed
 * with libxml2's HTML parser with network access off, JSON with the bounded
 * parser, every string is capped and checked for UTF-8, and only http(s)
 * result URLs are kept. Requests go through skd_http_fetch, so the guard
 * applies to the engines as to any other outbound call.
 */
#include "net/search.h"
#include "skilld/buf.h"
#include "skilld/json.h"
#include "skilld/net.h"
#include "skilld/util.h"

#include <curl/curl.h>
#include <libxml/HTMLparser.h>
#include <libxml/tree.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define ANSWER_MAX (2 * 1024 * 1024)

int skd__search_provider_valid(const char *name)
{
    return name && (strcmp(name, "duckduckgo") == 0 || strcmp(name, "searxng") == 0 ||
                    strcmp(name, "brave") == 0);
}

/* ---- shared helpers ---------------------------------------------------- */

/* Collapse whitespace, drop tags (<...>) when strip_tags, decode the common
 * entities, cap at max bytes on a UTF-8 boundary. New string or NULL. */
static char *clean_text(const char *s, size_t max, int strip_tags)
{
    static const struct {
        const char *ent;
        char c;
    } ents[] = {{"&amp;", '&'},  {"&lt;", '<'},    {"&gt;", '>'},  {"&quot;", '"'},
                {"&#39;", '\''}, {"&#x27;", '\''}, {"&nbsp;", ' '}};
    size_t len = strlen(s);
    char *out = malloc(len + 1);
    if (!out)
        return NULL;
    size_t o = 0;
    int space = 0, in_tag = 0;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (strip_tags && c == '<') {
            in_tag = 1;
            continue;
        }
        if (in_tag) {
            in_tag = c != '>';
            continue;
        }
        if (strip_tags && c == '&') {
            for (size_t e = 0; e < sizeof(ents) / sizeof(ents[0]); e++) {
                size_t el = strlen(ents[e].ent);
                if (strncmp(s + i, ents[e].ent, el) == 0) {
                    c = ents[e].c;
                    i += el - 1;
                    break;
                }
            }
        }
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v') {
            space = o > 0;
            continue;
        }
        if (space) {
            out[o++] = ' ';
            space = 0;
        }
        out[o++] = c;
    }
    if (o > max)
        o = skd_utf8_cut(out, max);
    out[o] = '\0';
    if (!skd_utf8_valid(out, o)) {
        free(out);
        return strdup("");
    }
    return out;
}

/* Append {title, url, snippet} when url is http(s). Takes nothing. */
static void add_result(json_t *arr, const char *title, const char *url, const char *snippet)
{
    if (!url || (strncasecmp(url, "http://", 7) != 0 && strncasecmp(url, "https://", 8) != 0))
        return;
    if (strlen(url) > SKD_NET_URL_MAX || !skd_utf8_valid(url, strlen(url)))
        return;
    char *t = clean_text(title ? title : "", SKD_SEARCH_TITLE_MAX, 1);
    char *s = clean_text(snippet ? snippet : "", SKD_SEARCH_SNIPPET_MAX, 1);
    if (t && s)
        json_array_append_new(arr,
                              json_pack("{s:s, s:s, s:s}", "title", t, "url", url, "snippet", s));
    free(t);
    free(s);
}

/* ---- DuckDuckGo HTML --------------------------------------------------- */

static int has_class(xmlNode *n, const char *cls)
{
    xmlChar *c = xmlGetProp(n, (const xmlChar *)"class");
    int found = 0;
    size_t cl = strlen(cls);
    for (const char *p = (const char *)c; p && *p;) {
        while (*p == ' ' || *p == '\t' || *p == '\n')
            p++;
        const char *e = p;
        while (*e && *e != ' ' && *e != '\t' && *e != '\n')
            e++;
        if ((size_t)(e - p) == cl && strncmp(p, cls, cl) == 0) {
            found = 1;
            break;
        }
        p = e;
    }
    xmlFree(c);
    return found;
}

/* The target of a DuckDuckGo result link: //duckduckgo.com/l/?uddg=<enc>&...
 * is unwrapped; a scheme-relative link gets https. New string or NULL. */
static char *ddg_unwrap(const char *href)
{
    const char *q = strstr(href, "/l/?");
    if (q &&
        (strncmp(href, "//duckduckgo.com/l/", 19) == 0 ||
         strncmp(href, "https://duckduckgo.com/l/", 25) == 0 || strncmp(href, "/l/", 3) == 0)) {
        const char *u = strstr(q, "uddg=");
        if (!u)
            return NULL;
        u += 5;
        size_t len = strcspn(u, "&");
        int outlen = 0;
        char *dec = curl_easy_unescape(NULL, u, (int)len, &outlen);
        if (!dec)
            return NULL;
        char *r = memchr(dec, '\0', (size_t)outlen) ? NULL : strdup(dec);
        curl_free(dec);
        return r;
    }
    if (strncmp(href, "//", 2) == 0) {
        size_t n = strlen(href) + 7;
        char *r = malloc(n);
        if (r)
            snprintf(r, n, "https:%s", href);
        return r;
    }
    return strdup(href);
}

static int in_ad(xmlNode *n)
{
    for (xmlNode *p = n->parent; p && p->type == XML_ELEMENT_NODE; p = p->parent)
        if (has_class(p, "result--ad"))
            return 1;
    return 0;
}

struct ddg_walk {
    json_t *arr;
    size_t max;
    char *title, *url; /* the result being assembled */
};

static void ddg_flush(struct ddg_walk *w, const char *snippet)
{
    if (w->url && json_array_size(w->arr) < w->max)
        add_result(w->arr, w->title, w->url, snippet);
    free(w->title);
    free(w->url);
    w->title = w->url = NULL;
}

static void ddg_visit(struct ddg_walk *w, xmlNode *n, int depth)
{
    for (; n && depth < 256; n = n->next) {
        if (n->type != XML_ELEMENT_NODE)
            continue;
        if (has_class(n, "result__a") && !in_ad(n)) {
            ddg_flush(w, NULL);
            xmlChar *href = xmlGetProp(n, (const xmlChar *)"href");
            xmlChar *text = xmlNodeGetContent(n);
            w->url = href ? ddg_unwrap((const char *)href) : NULL;
            w->title = strdup(text ? (const char *)text : "");
            xmlFree(href);
            xmlFree(text);
            continue;
        }
        if (has_class(n, "result__snippet") && w->url) {
            xmlChar *text = xmlNodeGetContent(n);
            ddg_flush(w, text ? (const char *)text : "");
            xmlFree(text);
            continue;
        }
        ddg_visit(w, n->children, depth + 1);
    }
}

json_t *skd__search_parse_ddg(const char *html, size_t len, size_t max)
{
    json_t *arr = json_array();
    if (!arr || len > INT32_MAX)
        return arr;
    htmlDocPtr doc = htmlReadMemory(html, (int)len, NULL, "UTF-8",
                                    HTML_PARSE_RECOVER | HTML_PARSE_NOERROR | HTML_PARSE_NOWARNING |
                                        HTML_PARSE_NONET);
    if (!doc)
        return arr;
    struct ddg_walk w = {.arr = arr, .max = max};
    ddg_visit(&w, xmlDocGetRootElement(doc), 0);
    ddg_flush(&w, NULL);
    xmlFreeDoc(doc);
    return arr;
}

/* ---- request building ---------------------------------------------------- */

/* Append "&name=<escaped value>" (or "?name=" when first). */
static int add_param(skd_buf *b, const char *name, const char *value)
{
    char *esc = curl_easy_escape(NULL, value, 0);
    if (!esc)
        return SKD_ENOMEM;
    int rc =
        skd_buf_printf(b, "%c%s=%s", strchr(b->data ? b->data : "", '?') ? '&' : '?', name, esc);
    curl_free(esc);
    return rc;
}

static const char *pick(const char *key, const char *const *keys, const char *const *vals)
{
    for (size_t i = 0; key && keys[i]; i++)
        if (strcmp(key, keys[i]) == 0)
            return vals[i];
    return NULL;
}

static const char *const ranges[] = {"day", "week", "month", "year", NULL};
static const char *const safes[] = {"off", "moderate", "strict", NULL};

static int build_url(const skd_config *cfg, const char *provider, const skd_search_query *q,
                     skd_buf *url, skd_err *err)
{
    char num[32];
    int rc = 0;
    if (strcmp(provider, "duckduckgo") == 0) {
        static const char *const df[] = {"d", "w", "m", "y"};
        static const char *const kp[] = {"-2", "-1", "1"};
        rc |= skd_buf_puts(url, skd_config_str(cfg, "SKILLS_DUCKDUCKGO_URL"));
        rc |= add_param(url, "q", q->query);
        rc |= add_param(url, "kp", pick(q->safe, safes, kp) ? pick(q->safe, safes, kp) : "-1");
        if (pick(q->time_range, ranges, df))
            rc |= add_param(url, "df", pick(q->time_range, ranges, df));
        if (q->offset > 0) {
            snprintf(num, sizeof(num), "%d", q->offset);
            rc |= add_param(url, "s", num);
        }
    } else if (strcmp(provider, "searxng") == 0) {
        static const char *const ss[] = {"0", "1", "2"};
        const char *base = skd_config_str(cfg, "SKILLS_SEARXNG_URL");
        if (!*base)
            return skd_err_set(err, SKD_ECONFIG, "searxng: SKILLS_SEARXNG_URL is not set");
        size_t bl = strlen(base);
        while (bl && base[bl - 1] == '/')
            bl--;
        rc |= skd_buf_append(url, base, bl);
        rc |= skd_buf_puts(url, "/search");
        rc |= add_param(url, "q", q->query);
        rc |= add_param(url, "format", "json");
        snprintf(num, sizeof(num), "%d", 1 + q->offset / 10);
        rc |= add_param(url, "pageno", num);
        rc |=
            add_param(url, "safesearch", pick(q->safe, safes, ss) ? pick(q->safe, safes, ss) : "1");
        if (pick(q->time_range, ranges, ranges))
            rc |= add_param(url, "time_range", q->time_range);
    } else {
        static const char *const fr[] = {"pd", "pw", "pm", "py"};
        rc |= skd_buf_puts(url, skd_config_str(cfg, "SKILLS_BRAVE_URL"));
        rc |= add_param(url, "q", q->query);
        snprintf(num, sizeof(num), "%d", q->limit);
        rc |= add_param(url, "count", num);
        snprintf(num, sizeof(num), "%d", q->limit ? q->offset / q->limit : 0);
        rc |= add_param(url, "offset", num);
        rc |= add_param(url, "safesearch", q->safe ? q->safe : "moderate");
        if (pick(q->time_range, ranges, fr))
            rc |= add_param(url, "freshness", pick(q->time_range, ranges, fr));
    }
    return rc ? skd_err_set(err, SKD_EINVAL, "the search request is too large") : 0;
}

/* ---- answers ------------------------------------------------------------- */

/* A short detail from an engine's JSON error body, or "". Borrowed. */
static const char *error_detail(const json_t *body)
{
    const json_t *e = json_object_get(body, "error");
    const char *d = skd_json_str(e, "detail", NULL);
    if (!d)
        d = skd_json_str(e, "code", NULL);
    if (!d)
        d = json_is_string(e) ? json_string_value(e) : skd_json_str(body, "message", "");
    return d;
}

static int map_status(const char *provider, const skd_fetch_resp *r, skd_err *err)
{
    json_t *body = skd_json_parse(r->body, r->body_len, NULL);
    char detail[200];
    snprintf(detail, sizeof(detail), "%s", body ? error_detail(body) : "");
    json_decref(body);
    const char *sep = *detail ? ": " : "";
    int rc;
    if (r->status == 429)
        rc = skd_err_set(err, SKD_EUPSTREAM, "%s: quota exceeded or rate limited (HTTP 429)%s%s",
                         provider, sep, detail);
    else if (strcmp(provider, "brave") == 0 && (r->status == 401 || r->status == 403 ||
                                                (r->status == 422 && strstr(detail, "TOKEN"))))
        rc = skd_err_set(err, SKD_EUPSTREAM, "%s: the API key was rejected (HTTP %ld)%s%s",
                         provider, r->status, sep, detail);
    else if (r->status == 401 || r->status == 403)
        rc = skd_err_set(err, SKD_EUPSTREAM, "%s: the engine refused the request (HTTP %ld)%s%s",
                         provider, r->status, sep, detail);
    else
        rc = skd_err_set(err, SKD_EUPSTREAM, "%s: the engine answered HTTP %ld%s%s", provider,
                         r->status, sep, detail);
    return rc;
}

/* Results from a JSON list: each item's title, url and snippet_key. */
static int parse_json_list(const char *provider, const json_t *list, const char *snippet_key,
                           json_t *out, skd_err *err)
{
    if (!json_is_array(list))
        return skd_err_set(err, SKD_EUPSTREAM, "%s: unexpected answer (no result list)", provider);
    size_t i;
    const json_t *item;
    json_array_foreach (list, i, item) {
        if (json_array_size(out) >= SKD_SEARCH_MAX_RESULTS)
            break;
        add_result(out, skd_json_str(item, "title", ""), skd_json_str(item, "url", NULL),
                   skd_json_str(item, snippet_key, ""));
    }
    return 0;
}

static int parse_answer(const char *provider, const skd_fetch_resp *r, json_t *out, skd_err *err)
{
    if (strcmp(provider, "duckduckgo") == 0) {
        json_t *arr = skd__search_parse_ddg(r->body, r->body_len, SKD_SEARCH_MAX_RESULTS);
        if (!arr)
            return skd_err_set(err, SKD_ENOMEM, "out of memory");
        json_array_extend(out, arr);
        json_decref(arr);
        return 0;
    }
    skd_err perr = {0};
    json_t *body = skd_json_parse(r->body, r->body_len, &perr);
    if (!body)
        return skd_err_set(err, SKD_EUPSTREAM, "%s: unexpected answer (not JSON%s)", provider,
                           r->truncated ? ", too large" : "");
    int rc;
    if (strcmp(provider, "searxng") == 0)
        rc = parse_json_list(provider, json_object_get(body, "results"), "content", out, err);
    else
        rc = parse_json_list(provider, json_object_get(json_object_get(body, "web"), "results"),
                             "description", out, err);
    json_decref(body);
    return rc;
}

int skd__search_run(const skd_config *cfg, const char *provider, const skd_search_query *q,
                    skd_cancel *cancel, json_t **results, skd_err *err)
{
    skd_buf url;
    skd_fetch_resp resp = {0};
    char keyhdr[512];
    const char *hdrs[2];
    size_t nh = 0;
    json_t *all = NULL;
    int rc;
    *results = NULL;
    skd_buf_init(&url, SKD_NET_URL_MAX);
    if (!skd__search_provider_valid(provider))
        return skd_err_set(err, SKD_EINVAL, "unknown search provider %s", provider);
    if ((rc = build_url(cfg, provider, q, &url, err)) != 0)
        goto out;
    if (strcmp(provider, "brave") == 0) {
        const char *key = skd_config_str(cfg, "SKILLS_BRAVE_API_KEY");
        if (!*key || strpbrk(key, "\r\n")) {
            rc = skd_err_set(err, SKD_ECONFIG, "brave: SKILLS_BRAVE_API_KEY is not set");
            goto out;
        }
        snprintf(keyhdr, sizeof(keyhdr), "X-Subscription-Token: %s", key);
        hdrs[nh++] = keyhdr;
    }
    hdrs[nh++] =
        strcmp(provider, "duckduckgo") == 0 ? "Accept: text/html" : "Accept: application/json";
    skd_fetch_req req = {.url = url.data,
                         .method = "GET",
                         .headers = hdrs,
                         .nheaders = nh,
                         .timeout_ms = skd_config_int(cfg, "SKILLS_HTTP_TIMEOUT_MS"),
                         .max_bytes = ANSWER_MAX,
                         .follow_redirects = 1,
                         .cancel = cancel};
    if ((rc = skd_http_fetch(cfg, &req, &resp, err)) != 0)
        goto out;
    if (resp.status < 200 || resp.status > 299) {
        rc = map_status(provider, &resp, err);
        goto out;
    }
    /* DuckDuckGo answers a suspected bot with 202 and a challenge page. */
    if (strcmp(provider, "duckduckgo") == 0 && resp.status == 202) {
        rc = skd_err_set(err, SKD_EUPSTREAM,
                         "duckduckgo: the engine asked for a challenge (HTTP 202); "
                         "rate limited, try later or use another provider");
        goto out;
    }
    if (!(all = json_array())) {
        rc = skd_err_set(err, SKD_ENOMEM, "out of memory");
        goto out;
    }
    if ((rc = parse_answer(provider, &resp, all, err)) != 0)
        goto out;
    /* DuckDuckGo and SearXNG page by their own sizes: skip within the page. */
    size_t skip = strcmp(provider, "searxng") == 0 ? (size_t)(q->offset % 10) : 0;
    json_t *page = json_array();
    for (size_t i = skip;
         page && i < json_array_size(all) && json_array_size(page) < (size_t)q->limit; i++)
        json_array_append(page, json_array_get(all, i));
    if (!page) {
        rc = skd_err_set(err, SKD_ENOMEM, "out of memory");
        goto out;
    }
    *results = page;
out:
    json_decref(all);
    skd_fetch_resp_free(&resp);
    skd_buf_free(&url);
    return rc;
}
