/*
 * web_search: ask a search engine and return [{title, url, snippet}].
 *
 * Input {query, limit (1-20, default 10), offset?, provider?, safe_search?,
 * time_range?, include_domains[]?, exclude_domains[]?}; result {success,
 * provider, query, results, cached}. Providers live in src/net/search.c;
 * the default is SKILLS_SEARCH_PROVIDER. Answers are cached in the store for
 * SKILLS_SEARCH_CACHE_TTL_S seconds under a digest of the caller's key id
 * and every input that shapes the answer, so each key has its own cache; a
 * hit says cached:true. A cache that cannot be read or
 * written never fails the search.
 *
 * What it trusts: nothing from the caller (domains are checked as host
 * names; the query only ever travels URL-encoded) nor from the engines
 * (see search.c).
 */
#include "builtins/builtins.h"
#include "net/search.h"
#include "skilld/store.h"

#include <curl/curl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char schema_text[] =
    "{\"type\":\"object\",\"additionalProperties\":false,\"required\":[\"query\"],"
    "\"properties\":{"
    "\"query\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":500},"
    "\"limit\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":20,\"default\":10},"
    "\"offset\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":200,\"default\":0},"
    "\"provider\":{\"type\":\"string\",\"enum\":[\"duckduckgo\",\"searxng\",\"brave\"]},"
    "\"safe_search\":{\"type\":[\"string\",\"boolean\"],"
    "\"description\":\"off, moderate or strict (true: strict, false: off)\"},"
    "\"time_range\":{\"type\":\"string\",\"enum\":[\"day\",\"week\",\"month\",\"year\"]},"
    "\"include_domains\":{\"type\":\"array\",\"maxItems\":20,"
    "\"items\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":253}},"
    "\"exclude_domains\":{\"type\":\"array\",\"maxItems\":20,"
    "\"items\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":253}}}}";

/* 1 when d looks like a host name: labels of [a-z0-9-], dots between. */
static int domain_ok(const char *d)
{
    if (!*d || *d == '.' || *d == '-')
        return 0;
    for (const char *p = d; *p; p++) {
        char c = *p;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '.'))
            return 0;
        if (c == '.' && (p[1] == '.' || p[1] == '\0'))
            return 0;
    }
    return 1;
}

/* 1 when host equals d or is below it (case-insensitive). */
static int host_under(const char *host, const char *d)
{
    size_t hl = strlen(host), dl = strlen(d);
    if (hl == dl)
        return strcasecmp(host, d) == 0;
    return hl > dl && host[hl - dl - 1] == '.' && strcasecmp(host + hl - dl, d) == 0;
}

static int any_under(const char *host, const json_t *domains)
{
    size_t i;
    const json_t *d;
    json_array_foreach (domains, i, d)
        if (host_under(host, json_string_value(d)))
            return 1;
    return 0;
}

/* Keep the results whose host passes include/exclude. Steals results. */
static json_t *filter_domains(json_t *results, const json_t *inc, const json_t *exc)
{
    if (!json_array_size(inc) && !json_array_size(exc))
        return results;
    json_t *out = json_array();
    size_t i;
    json_t *r;
    json_array_foreach (results, i, r) {
        CURLU *u = curl_url();
        char *host = NULL;
        if (u && curl_url_set(u, CURLUPART_URL, skd_json_str(r, "url", ""), 0) == CURLUE_OK &&
            curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK &&
            (!json_array_size(inc) || any_under(host, inc)) && !any_under(host, exc))
            json_array_append(out, r);
        curl_free(host);
        curl_url_cleanup(u);
    }
    json_decref(results);
    return out;
}

/* The query sent to the engine: the caller's text plus site: operators. */
static char *engine_query(const char *query, const json_t *inc, const json_t *exc)
{
    skd_buf b;
    skd_buf_init(&b, 8192);
    int rc = skd_buf_puts(&b, query);
    if (json_array_size(inc) == 1)
        rc |= skd_buf_printf(&b, " site:%s", json_string_value(json_array_get(inc, 0)));
    size_t i;
    const json_t *d;
    json_array_foreach (exc, i, d)
        rc |= skd_buf_printf(&b, " -site:%s", json_string_value(d));
    if (rc) {
        skd_buf_free(&b);
        return NULL;
    }
    return skd_buf_steal(&b, NULL);
}

static const char *safe_level(const json_t *v)
{
    if (json_is_boolean(v))
        return json_is_true(v) ? "strict" : "off";
    const char *s = json_string_value(v);
    if (!s)
        return "moderate";
    if (strcmp(s, "off") == 0 || strcmp(s, "moderate") == 0 || strcmp(s, "strict") == 0)
        return s;
    return NULL;
}

/* The cache is per API key: a hit never tells one tenant what another
 * searched for (cached:true would). */
static void cache_key(const char *key_id, const char *provider, const char *query,
                      const skd_search_query *q, const json_t *inc, const json_t *exc,
                      char out[SKD_SHA256_HEX_LEN + 1])
{
    json_t *k = json_pack("{s:s, s:s, s:s, s:i, s:i, s:s, s:s?, s:O?, s:O?}", "k",
                          key_id ? key_id : "", "p", provider, "q", query, "l", q->limit, "o",
                          q->offset, "s", q->safe, "t", q->time_range, "i", inc, "e", exc);
    char *text = k ? json_dumps(k, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    skd_sha256_hex(text ? text : "", text ? strlen(text) : 0, out);
    free(text);
    json_decref(k);
}

static json_t *result(const char *provider, const char *query, json_t *results, int cached)
{
    json_t *res = skd_result_ok();
    json_object_set_new(res, "provider", json_string(provider));
    json_object_set_new(res, "query", json_string(query));
    json_object_set_new(res, "results", results);
    json_object_set_new(res, "cached", json_boolean(cached));
    return res;
}

static json_t *handle(const skd_ctx *ctx, const json_t *input, void *udata)
{
    (void)udata;
    const skd_config *cfg = ctx->cfg;
    skd_store *st = ctx->store;
    const char *query = skd_json_str(input, "query", "");
    const char *provider =
        skd_json_str(input, "provider", skd_config_str(cfg, "SKILLS_SEARCH_PROVIDER"));
    const json_t *inc = json_object_get(input, "include_domains");
    const json_t *exc = json_object_get(input, "exclude_domains");
    int64_t ttl = skd_config_int(cfg, "SKILLS_SEARCH_CACHE_TTL_S") * 1000;
    skd_search_query q = {
        .limit = (int)skd_json_int(input, "limit", 10),
        .offset = (int)skd_json_int(input, "offset", 0),
        .safe = safe_level(json_object_get(input, "safe_search")),
        .time_range = skd_json_str(input, "time_range", NULL),
    };
    char key[SKD_SHA256_HEX_LEN + 1], *cached = NULL, *text = NULL;
    skd_err err = {0};
    json_t *results = NULL;
    if (!skd__search_provider_valid(provider))
        return skd_result_error(SKD_ECONFIG, "unknown search provider %s", provider);
    if (!q.safe)
        return skd_result_error(SKD_EINVAL, "safe_search must be off, moderate or strict");
    for (int pass = 0; pass < 2; pass++) {
        size_t i;
        const json_t *d;
        json_array_foreach (pass ? exc : inc, i, d)
            if (!domain_ok(json_string_value(d)))
                return skd_result_error(SKD_EINVAL, "'%s' is not a domain name",
                                        json_string_value(d));
    }
    cache_key(ctx->key_id, provider, query, &q, inc, exc, key);
    int64_t now = skd_wall_ms();
    if (ttl > 0 && st && skd_store_cache_get(st, key, now, &cached, &err) == 0) {
        results = skd_json_parse(cached, strlen(cached), NULL);
        free(cached);
        if (json_is_array(results))
            return result(provider, query, results, 1);
        json_decref(results);
    }
    char *eq = engine_query(query, inc, exc);
    if (!eq)
        return skd_result_error(SKD_EINVAL, "the query is too long");
    q.query = eq;
    int rc = skd__search_run(cfg, provider, &q, ctx->cancel, &results, &err);
    free(eq);
    if (rc)
        return skd_result_from_err(&err);
    results = filter_domains(results, inc, exc);
    if (ttl > 0 && st && (text = skd_json_dump(results)) != NULL) {
        if (skd_store_cache_put(st, key, text, now, ttl, &err))
            skd_warn("web_search: cache write failed: %s", skd_err_msg(&err));
        free(text);
    }
    return result(provider, query, results, 0);
}

void skd__builtin_web_search_def(skd_skill_def *d)
{
    d->name = "web_search";
    d->version = "1.0.0";
    d->description = "Search the web (DuckDuckGo by default, or SearXNG or Brave) and return "
                     "titles, URLs and snippets. Results are cached for a while.";
    d->input_schema = json_loads(schema_text, 0, NULL);
    d->mode = SKD_MODE_DIRECT;
    d->handler = handle;
}
