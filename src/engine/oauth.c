/*
 * The OAuth resource server (include/skilld/oauth.h): the configured
 * issuers, their metadata and key sets, and the protected-resource
 * metadata clients read to find where to sign in.
 *
 * Trust: the issuers are the operator's configuration, so they are
 * reached even at a private address (the one exception to the outbound
 * guard's private-range refusal), and so is a jwks_uri on the issuer's own
 * origin; a jwks_uri elsewhere goes through the guard as any other URL.
 * The metadata must name the configured issuer exactly (RFC 8414, 3.3).
 * Redirects are never followed.
 *
 * Key sets are cached per issuer. A token whose kid the cached set lacks
 * makes the set be fetched again at once, and then not again for that
 * issuer until SKD_OAUTH_REFETCH_S have passed since that refetch: a
 * rotation at the provider is picked up on the first token signed with the
 * new key, and a flood of tokens with made-up kids costs one fetch per
 * interval. A fetch that fails is not tried again for FAIL_BACKOFF_MS.
 * Fetches hold the issuer's lock, so concurrent tokens of one issuer wait
 * for one fetch instead of making their own. A server reads every issuer's
 * keys at start on a thread of its own (skd_oauth_warm), so that its first
 * token does not wait for them on an HTTP event thread.
 */
#include "skilld/json.h"
#include "skilld/log.h"
#include "skilld/net.h"
#include "skilld/oauth.h"
#include "skilld/registry.h"
#include "skilld/store.h"
#include "skilld/util.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MAX_ISSUERS 8
#define FETCH_TIMEOUT_MS 5000
#define FETCH_MAX_BYTES (256 * 1024)
#define FAIL_BACKOFF_MS 5000
#define SEEN_SLOTS 256

struct issuer {
    char *url; /* exactly as configured: the iss tokens must carry */
    pthread_mutex_t mu;
    char *jwks_uri;           /* from the metadata; NULL until discovered */
    int jwks_own_origin;      /* jwks_uri is on the issuer's origin */
    json_t *jwks;             /* cached key set, or NULL */
    int64_t refetch_ms;       /* monotonic time of the last unknown-kid refetch, 0: none */
    int64_t failed_ms;        /* monotonic time of the last failed fetch, 0: none */
    atomic_uint_fast64_t gen; /* moved when a fetch changes the key set */
};

/* A token verified before, by the SHA-256 of its whole text. */
struct seen {
    char digest[SKD_SHA256_HEX_LEN + 1]; /* "" : empty slot */
    size_t issuer;                       /* index into skd_oauth.iss */
    uint64_t gen;                        /* the issuer's key-set generation it was verified at */
    int64_t exp_s;
    skd_oauth_identity id;
};

struct skd_oauth {
    const skd_config *cfg;
    char *resource;     /* ${SKILLD_PUBLIC_URL}/mcp */
    char *metadata_url; /* ${SKILLD_PUBLIC_URL}/.well-known/oauth-protected-resource/mcp */
    unsigned allowed;   /* SKILLD_OAUTH_SCOPES */
    struct issuer iss[MAX_ISSUERS];
    size_t n;
    atomic_uint_fast64_t fetches;
    pthread_mutex_t seen_mu;
    struct seen *seen; /* SEEN_SLOTS, direct-mapped by digest */
    skd_cancel *stop;  /* fired by skd_oauth_free: ends the fetches in flight */
    pthread_t warm;    /* skd_oauth_warm's thread */
    int warming;       /* warm was started (and is joined by skd_oauth_free) */
};

static char *dup_n(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

/* An absolute http(s) URL without query, fragment or credentials. */
static int url_ok(const char *u)
{
    if (strncasecmp(u, "https://", 8) != 0 && strncasecmp(u, "http://", 7) != 0)
        return 0;
    if (strpbrk(u, "?# \t\"\\") || skd_net_url_check(u, SKD_EINVAL, NULL) != 0)
        return 0;
    return 1;
}

/* The SKD_SCOPE_* bit of one scope name (n bytes), or 0 for another name. */
static unsigned scope_bit(const char *name, size_t n)
{
    char one[32];
    unsigned bit = 0;
    if (n == 0 || n >= sizeof(one))
        return 0;
    memcpy(one, name, n);
    one[n] = '\0';
    if (skd_scopes_parse(one, &bit, NULL) != 0)
        return 0;
    return bit;
}

/* Scope bits of a list separated by spaces or commas; *unknown counts the
 * names that are not skilld's. */
static unsigned scopes_of(const char *list, int *unknown)
{
    unsigned bits = 0;
    *unknown = 0;
    for (const char *p = list; *p;) {
        size_t n = strcspn(p, " ,");
        if (n) {
            unsigned b = scope_bit(p, n);
            if (!b)
                (*unknown)++;
            bits |= b;
        }
        p += n;
        p += strspn(p, " ,");
    }
    return bits;
}

static int add_issuer(skd_oauth *o, const char *s, size_t n, skd_err *err)
{
    if (o->n == MAX_ISSUERS)
        return skd_err_set(err, SKD_ECONFIG, "SKILLD_OAUTH_ISSUER: at most %d issuers",
                           MAX_ISSUERS);
    char *u = dup_n(s, n);
    if (!u)
        return skd_err_set(err, SKD_ENOMEM, "out of memory");
    if (!url_ok(u)) {
        int rc = skd_err_set(err, SKD_ECONFIG,
                             "SKILLD_OAUTH_ISSUER: \"%.200s\" is not an http(s) URL without "
                             "query or fragment",
                             u);
        free(u);
        return rc;
    }
    struct issuer *is = &o->iss[o->n++];
    is->url = u;
    pthread_mutex_init(&is->mu, NULL);
    return 0;
}

int skd_oauth_new(const skd_config *cfg, skd_oauth **out, skd_err *err)
{
    const char *issuers = skd_config_str(cfg, "SKILLD_OAUTH_ISSUER");
    const char *pub = skd_config_str(cfg, "SKILLD_PUBLIC_URL");
    const char *scopes = skd_config_str(cfg, "SKILLD_OAUTH_SCOPES");
    int rc = 0, unknown = 0;
    *out = NULL;
    if (!*issuers)
        return 0;
    size_t plen = strlen(pub);
    while (plen && pub[plen - 1] == '/')
        plen--;
    char *base = dup_n(pub, plen);
    if (!base)
        return skd_err_set(err, SKD_ENOMEM, "out of memory");
    if (!plen || !url_ok(base)) {
        free(base);
        return skd_err_set(err, SKD_ECONFIG,
                           "SKILLD_OAUTH_ISSUER is set: SKILLD_PUBLIC_URL must be the http(s) "
                           "base URL clients reach this server at (the MCP resource is "
                           "${SKILLD_PUBLIC_URL}/mcp)");
    }
    skd_oauth *o = calloc(1, sizeof(*o));
    if (!o) {
        free(base);
        return skd_err_set(err, SKD_ENOMEM, "out of memory");
    }
    o->cfg = cfg;
    pthread_mutex_init(&o->seen_mu, NULL);
    o->stop = skd_cancel_new();
    o->seen = calloc(SEEN_SLOTS, sizeof(*o->seen));
    if (!o->stop || !o->seen) {
        rc = skd_err_set(err, SKD_ENOMEM, "out of memory");
        goto out;
    }
    size_t rl = plen + sizeof("/mcp"),
           ml = plen + sizeof("/.well-known/oauth-protected-resource/mcp");
    o->resource = malloc(rl);
    o->metadata_url = malloc(ml);
    if (!o->resource || !o->metadata_url) {
        rc = skd_err_set(err, SKD_ENOMEM, "out of memory");
        goto out;
    }
    snprintf(o->resource, rl, "%s/mcp", base);
    snprintf(o->metadata_url, ml, "%s/.well-known/oauth-protected-resource/mcp", base);
    o->allowed = scopes_of(scopes, &unknown);
    if (unknown || !o->allowed) {
        rc = skd_err_set(err, SKD_ECONFIG,
                         "SKILLD_OAUTH_SCOPES: list skills:read, skills:execute and/or "
                         "skills:admin, separated by spaces or commas");
        goto out;
    }
    for (const char *p = issuers; *p && !rc;) {
        size_t n = strcspn(p, ", ");
        if (n)
            rc = add_issuer(o, p, n, err);
        p += n;
        p += strspn(p, ", ");
    }
    if (!rc && !o->n)
        rc = skd_err_set(err, SKD_ECONFIG, "SKILLD_OAUTH_ISSUER names no issuer");
out:
    free(base);
    if (rc)
        skd_oauth_free(o);
    else
        *out = o;
    return rc;
}

void skd_oauth_free(skd_oauth *o)
{
    if (!o)
        return;
    skd_cancel_fire(o->stop);
    if (o->warming)
        pthread_join(o->warm, NULL);
    skd_cancel_free(o->stop);
    pthread_mutex_destroy(&o->seen_mu);
    free(o->seen);
    for (size_t i = 0; i < o->n; i++) {
        free(o->iss[i].url);
        free(o->iss[i].jwks_uri);
        json_decref(o->iss[i].jwks);
        pthread_mutex_destroy(&o->iss[i].mu);
    }
    free(o->resource);
    free(o->metadata_url);
    free(o);
}

const char *skd_oauth_resource(const skd_oauth *o)
{
    return o->resource;
}

const char *skd_oauth_metadata_url(const skd_oauth *o)
{
    return o->metadata_url;
}

unsigned skd_oauth_allowed_scopes(const skd_oauth *o)
{
    return o->allowed;
}

uint64_t skd_oauth_jwks_fetches(const skd_oauth *o)
{
    return atomic_load(&((skd_oauth *)o)->fetches);
}

json_t *skd_oauth_metadata(const skd_oauth *o)
{
    json_t *servers = json_array();
    for (size_t i = 0; servers && i < o->n; i++)
        json_array_append_new(servers, json_string(o->iss[i].url));
    json_t *scopes = skd_scopes_to_json(o->allowed);
    return json_pack("{s:s, s:o, s:o, s:[s], s:s}", "resource", o->resource,
                     "authorization_servers", servers, "scopes_supported", scopes,
                     "bearer_methods_supported", "header", "resource_name", "skilld");
}

/* Length of "scheme://host[:port]" of an http(s) URL. */
static size_t origin_len(const char *u)
{
    const char *p = strstr(u, "://");
    if (!p)
        return 0;
    p += 3;
    return (size_t)(p - u) + strcspn(p, "/");
}

static int same_origin(const char *a, const char *b)
{
    size_t n = origin_len(a);
    return n && n == origin_len(b) && strncasecmp(a, b, n) == 0;
}

/* GET url as a JSON object (new reference) or NULL with err. */
static json_t *get_json(skd_oauth *o, const char *url, int operator_url, skd_err *err)
{
    skd_fetch_req req = {
        .url = url,
        .headers = (const char *const[]){"Accept: application/json"},
        .nheaders = 1,
        .timeout_ms = FETCH_TIMEOUT_MS,
        .max_bytes = FETCH_MAX_BYTES,
        .operator_url = operator_url,
        .cancel = o->stop,
    };
    skd_fetch_resp resp;
    json_t *v = NULL;
    int rc = skd_http_fetch(o->cfg, &req, &resp, err);
    if (rc == 0 && resp.status != 200)
        skd_err_set(err, SKD_EUPSTREAM, "%s answered HTTP %ld", url, resp.status);
    else if (rc == 0 &&
             (resp.truncated ||
              !(v = json_loadb(resp.body, resp.body_len, JSON_REJECT_DUPLICATES, NULL)) ||
              !json_is_object(v))) {
        json_decref(v);
        v = NULL;
        skd_err_set(err, SKD_EUPSTREAM, "%s did not answer with a JSON object", url);
    }
    skd_fetch_resp_free(&resp);
    return v;
}

/* The issuer's metadata: RFC 8414 (the well-known name inserted before the
 * issuer's path), then OpenID Connect Discovery (appended). */
static int discover(skd_oauth *o, struct issuer *is, skd_err *err)
{
    const char *wk[2] = {"/.well-known/oauth-authorization-server",
                         "/.well-known/openid-configuration"};
    size_t ol = origin_len(is->url);
    const char *path = is->url + ol;
    size_t pl = strlen(path);
    while (pl && path[pl - 1] == '/')
        pl--;
    for (int i = 0; i < 2; i++) {
        char url[2048];
        int n =
            i == 0
                ? snprintf(url, sizeof(url), "%.*s%s%.*s", (int)ol, is->url, wk[0], (int)pl, path)
                : snprintf(url, sizeof(url), "%.*s%.*s%s", (int)ol, is->url, (int)pl, path, wk[1]);
        if (n < 0 || (size_t)n >= sizeof(url))
            return skd_err_set(err, SKD_ECONFIG, "the issuer URL is too long");
        skd_err e = {0};
        json_t *m = get_json(o, url, 1, &e);
        if (!m) {
            if (i == 1)
                return skd_err_set(err, e.code, "%s", e.msg);
            continue;
        }
        const char *iss = json_string_value(json_object_get(m, "issuer"));
        const char *jwks = json_string_value(json_object_get(m, "jwks_uri"));
        int rc = 0;
        if (!iss || strcmp(iss, is->url) != 0)
            rc = skd_err_set(err, SKD_EUPSTREAM, "%s names issuer %.200s, not %s", url,
                             iss ? iss : "(none)", is->url);
        else if (!jwks || !url_ok(jwks))
            rc = skd_err_set(err, SKD_EUPSTREAM, "%s has no valid jwks_uri", url);
        else if (!(is->jwks_uri = strdup(jwks)))
            rc = skd_err_set(err, SKD_ENOMEM, "out of memory");
        else
            is->jwks_own_origin = same_origin(jwks, is->url);
        json_decref(m);
        return rc;
    }
    return skd_err_set(err, SKD_EUPSTREAM, "no metadata for issuer %s", is->url);
}

/* Fetch the issuer's key set (discovering it first if need be) into
 * is->jwks. Called with is->mu held. */
static int load_jwks(skd_oauth *o, struct issuer *is, skd_err *err)
{
    int64_t now = skd_mono_ms();
    if (is->failed_ms && now - is->failed_ms < FAIL_BACKOFF_MS)
        return skd_err_set(err, SKD_ENETWORK,
                           "the keys of issuer %s could not be fetched a moment ago; retry "
                           "later",
                           is->url);
    int rc = 0;
    json_t *set = NULL;
    if (!is->jwks_uri)
        rc = discover(o, is, err);
    if (!rc) {
        atomic_fetch_add(&o->fetches, 1);
        if (!(set = get_json(o, is->jwks_uri, is->jwks_own_origin, err)))
            rc = err->code ? err->code : SKD_EUPSTREAM;
        else if (!json_is_array(json_object_get(set, "keys")))
            rc = skd_err_set(err, SKD_EUPSTREAM, "%s is not a JWK set", is->jwks_uri);
    }
    if (rc) {
        json_decref(set);
        is->failed_ms = now ? now : 1;
        skd_warn("oauth: issuer %s: %s", is->url, skd_err_msg(err));
        return rc;
    }
    is->failed_ms = 0;
    if (is->jwks &&
        !json_equal(is->jwks, set)) /* tokens verified by the old set are checked again */
        atomic_fetch_add(&is->gen, 1);
    json_decref(is->jwks);
    is->jwks = set;
    return 0;
}

/* The key set to verify a token of is whose header names kid: a new
 * reference, or NULL with err. */
static json_t *keys_for(skd_oauth *o, struct issuer *is, const char *kid, skd_err *err)
{
    json_t *set = NULL;
    pthread_mutex_lock(&is->mu);
    int rc = 0;
    if (!is->jwks) {
        rc = load_jwks(o, is, err);
    } else if (*kid && !skd_jwks_has_kid(is->jwks, kid)) {
        int64_t now = skd_mono_ms();
        if (!is->refetch_ms || now - is->refetch_ms >= SKD_OAUTH_REFETCH_S * 1000) {
            is->refetch_ms = now ? now : 1;
            skd_err e = {0};
            if (load_jwks(o, is, &e) != 0) /* keep the cached set; the token is refused */
                skd_debug("oauth: refetch for kid %s: %s", kid, skd_err_msg(&e));
        }
    }
    if (!rc)
        set = json_incref(is->jwks);
    pthread_mutex_unlock(&is->mu);
    return set;
}

json_t *skd_oauth_probe(skd_oauth *o)
{
    json_t *out = json_array();
    for (size_t i = 0; out && i < o->n; i++) {
        struct issuer *is = &o->iss[i];
        skd_err err = {0};
        char detail[1024];
        pthread_mutex_lock(&is->mu);
        int rc = is->jwks ? 0 : load_jwks(o, is, &err);
        if (rc)
            snprintf(detail, sizeof(detail), "%s", skd_err_msg(&err));
        else
            snprintf(detail, sizeof(detail), "%zu signing key(s) at %s",
                     json_array_size(json_object_get(is->jwks, "keys")), is->jwks_uri);
        pthread_mutex_unlock(&is->mu);
        json_array_append_new(
            out, json_pack("{s:s, s:b, s:s}", "issuer", is->url, "ok", rc == 0, "detail", detail));
    }
    return out;
}

static void *warm_main(void *arg)
{
    skd_oauth *o = arg;
    json_t *issuers = skd_oauth_probe(o);
    size_t i;
    json_t *v;
    json_array_foreach (issuers, i, v)
        if (json_is_true(json_object_get(v, "ok")))
            skd_info("oauth: issuer %s: %s", skd_json_str(v, "issuer", "?"),
                     skd_json_str(v, "detail", ""));
    json_decref(issuers);
    return NULL;
}

void skd_oauth_warm(skd_oauth *o)
{
    if (!o || o->warming)
        return;
    if (pthread_create(&o->warm, NULL, warm_main, o) == 0)
        o->warming = 1;
    else
        skd_warn("oauth: cannot start the thread that reads the issuers' keys; the first "
                 "token of each issuer reads them");
}

static struct seen *seen_slot(skd_oauth *o, const char *digest)
{
    unsigned h = 0;
    for (int i = 0; i < 8; i++)
        h = h * 16 + (unsigned)(digest[i] <= '9' ? digest[i] - '0' : digest[i] - 'a' + 10);
    return &o->seen[h % SEEN_SLOTS];
}

/* 1 with *id when the token (by digest) was verified before, has not
 * expired since, and its issuer's key set has not changed since. */
static int seen_get(skd_oauth *o, const char *digest, int64_t now_s, skd_oauth_identity *id)
{
    int hit = 0;
    pthread_mutex_lock(&o->seen_mu);
    struct seen *e = seen_slot(o, digest);
    if (strcmp(e->digest, digest) == 0 && e->issuer < o->n &&
        e->gen == atomic_load(&o->iss[e->issuer].gen) && now_s < e->exp_s + SKD_JWT_LEEWAY_S) {
        *id = e->id;
        hit = 1;
    }
    pthread_mutex_unlock(&o->seen_mu);
    return hit;
}

static void seen_put(skd_oauth *o, const char *digest, size_t issuer, uint64_t gen, int64_t exp_s,
                     const skd_oauth_identity *id)
{
    pthread_mutex_lock(&o->seen_mu);
    struct seen *e = seen_slot(o, digest);
    memcpy(e->digest, digest, sizeof(e->digest));
    e->issuer = issuer;
    e->gen = gen;
    e->exp_s = exp_s;
    e->id = *id;
    pthread_mutex_unlock(&o->seen_mu);
}

/* Verified tokens are remembered by the SHA-256 of their text (a client
 * sends the same token on every call of a session) until they expire or
 * their issuer's key set changes; the signature and claims are checked
 * once. The tenant's row, and so an admin's revocation, is read on every
 * call all the same (src/engine/tenancy.c). */
int skd_oauth_verify(skd_oauth *o, const char *token, skd_oauth_identity *id, skd_err *err)
{
    skd_jwt_head head;
    skd_jwt_claims claims;
    char digest[SKD_SHA256_HEX_LEN + 1];
    size_t len = strlen(token);
    int64_t now_s = skd_wall_ms() / 1000;
    memset(id, 0, sizeof(*id));
    if (len > SKD_JWT_MAX)
        return skd_err_set(err, SKD_EUNAUTH, "invalid token: not a JWT of at most 16 KiB");
    skd_sha256_hex(token, len, digest);
    if (seen_get(o, digest, now_s, id))
        return 0;
    int rc = skd_jwt_peek(token, len, &head, err);
    if (rc)
        return rc;
    struct issuer *is = NULL;
    size_t idx = 0;
    for (size_t i = 0; i < o->n && !is; i++)
        if (strcmp(o->iss[i].url, head.iss) == 0) {
            is = &o->iss[i];
            idx = i;
        }
    if (!is)
        return skd_err_set(err, SKD_EUNAUTH, "invalid token: iss is not a configured issuer");
    /* The generation before the keys: a change made after this read makes
     * the entry stale, never a stale entry look current. */
    uint64_t gen = atomic_load(&is->gen);
    json_t *set = keys_for(o, is, head.kid, err);
    if (!set)
        return err->code ? err->code : SKD_ENETWORK;
    skd_jwt_policy pol = {.issuer = is->url, .audience = o->resource, .now_s = now_s};
    rc = skd_jwt_verify(token, len, set, &pol, &claims, err);
    json_decref(set);
    if (rc)
        return rc;
    int unknown;
    skd_strlcpy(id->issuer, is->url, sizeof(id->issuer));
    skd_strlcpy(id->sub, claims.sub, sizeof(id->sub));
    id->scopes = scopes_of(claims.scope, &unknown) & o->allowed;
    seen_put(o, digest, idx, gen, claims.exp, id);
    return 0;
}
