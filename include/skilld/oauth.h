/*
 * skilld as an OAuth 2.1 resource server (DESIGN.md, "Identity: API keys
 * and OAuth"; docs/server.md, "OAuth sign-in").
 *
 * Remote MCP clients sign in at the operator's identity provider and send
 * a bearer JWT access token whose audience is this server's MCP resource,
 * ${SKILLD_PUBLIC_URL}/mcp (RFC 8707, RFC 9068). This header has two parts:
 *
 *   - skd_jwt_verify: the validation of one token against one JSON Web Key
 *     Set, a pure function of its arguments (no I/O, no clock), so that it
 *     can be tested and fuzzed on its own. The signature is checked by
 *     libcjose; everything around it (which algorithms, which key, which
 *     claims) is decided here, and a token is refused unless every rule
 *     holds.
 *   - skd_oauth: the configured issuers (SKILLD_OAUTH_ISSUER), their
 *     metadata and JWKS fetched on first use and cached, refetched when a
 *     token names a key the cached set lacks (at most once per issuer per
 *     SKD_OAUTH_REFETCH_S), and the protected-resource metadata (RFC 9728)
 *     that tells clients where to sign in.
 *
 * Nothing in a token is believed before its signature is verified by a key
 * of the issuer the operator configured; the unverified header and issuer
 * are read only to pick that key.
 */
#ifndef SKILLD_OAUTH_H
#define SKILLD_OAUTH_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "skilld/config.h"
#include "skilld/error.h"

/* Longest bearer token accepted, in bytes. */
#define SKD_JWT_MAX 16384
/* Clock skew allowed on exp, nbf and iat, in seconds. */
#define SKD_JWT_LEEWAY_S 60
/* After a JWKS refetch caused by an unknown kid, the next such refetch of
 * that issuer waits this long. */
#define SKD_OAUTH_REFETCH_S 30

/* What a token must satisfy besides its signature. Borrowed. */
typedef struct skd_jwt_policy {
    const char *issuer;   /* the iss claim, exactly */
    const char *audience; /* one of the aud claim's values, exactly */
    int64_t now_s;        /* the time to check exp/nbf/iat against (Unix seconds) */
} skd_jwt_policy;

/* What a verified token says. */
typedef struct skd_jwt_claims {
    char sub[256];
    char scope[1024]; /* space-separated (scope claim, or the scp array joined) */
    int64_t exp;
} skd_jwt_claims;

/* The unverified header fields and issuer of a token, to choose the key. */
typedef struct skd_jwt_head {
    char alg[8];
    char kid[256]; /* "" when the header has none */
    char iss[512]; /* from the payload, NOT verified */
} skd_jwt_head;

/* Parse the compact serialisation's header and payload without checking
 * anything but their shape (three base64url parts, JSON objects without
 * duplicate names, an allowed alg, an accepted typ, no crit). SKD_EUNAUTH
 * with the reason in err when the token is refused. */
int skd_jwt_peek(const char *token, size_t len, skd_jwt_head *head, skd_err *err);

/* Verify token against the key set jwks (a JSON object {"keys": [...]},
 * borrowed) and policy p: 0 with *claims set, else SKD_EUNAUTH with the
 * reason in err. The key is the one whose kid the header names (or, with
 * no kid in the header, the only key that fits the algorithm); its kty and
 * curve must fit the algorithm (RS256/384/512, PS256/384/512 with RSA;
 * ES256/384/512 with P-256/384/521), and its alg and use, when present,
 * must agree. HMAC algorithms and "none" are always refused. iss must equal
 * p->issuer, aud contain p->audience, exp be in the future and nbf/iat not
 * (with SKD_JWT_LEEWAY_S), and sub be a non-empty string. */
int skd_jwt_verify(const char *token, size_t len, const json_t *jwks, const skd_jwt_policy *p,
                   skd_jwt_claims *claims, skd_err *err);

/* 1 when jwks holds a key with this kid (kid "" : any key). */
int skd_jwks_has_kid(const json_t *jwks, const char *kid);

/* The resource server state of one process. */
typedef struct skd_oauth skd_oauth;

/* The settings SKILLD_PUBLIC_URL, SKILLD_OAUTH_ISSUER, SKILLD_OAUTH_SCOPES
 * of cfg (borrowed; must outlive the object). *out is NULL when OAuth is
 * off (no issuer set). SKD_ECONFIG when an issuer is set but the public URL
 * is not, or a URL or scope is not valid. No network access here. */
int skd_oauth_new(const skd_config *cfg, skd_oauth **out, skd_err *err);
/* NULL ok. Fetches in flight are cancelled. */
void skd_oauth_free(skd_oauth *o);

/* The MCP resource (${SKILLD_PUBLIC_URL}/mcp) and the URL of its
 * protected-resource metadata; borrowed from o. */
const char *skd_oauth_resource(const skd_oauth *o);
const char *skd_oauth_metadata_url(const skd_oauth *o);
/* The protected-resource metadata document (RFC 9728). New reference. */
json_t *skd_oauth_metadata(const skd_oauth *o);
/* SKD_SCOPE_* bits an OAuth tenant may hold at most (SKILLD_OAUTH_SCOPES). */
unsigned skd_oauth_allowed_scopes(const skd_oauth *o);

/* Who a verified token names. */
typedef struct skd_oauth_identity {
    char issuer[512];
    char sub[256];
    unsigned scopes; /* SKD_SCOPE_* of the token, within skd_oauth_allowed_scopes */
} skd_oauth_identity;

/* Verify a bearer token: 0 with *id set; SKD_EUNAUTH (the token is not
 * valid: its reason in err); SKD_ENETWORK or SKD_EUPSTREAM when the
 * issuer's metadata or keys cannot be had (the token may be fine).
 * Thread-safe; may block on a fetch of the issuer's JWKS. */
int skd_oauth_verify(skd_oauth *o, const char *token, skd_oauth_identity *id, skd_err *err);

/* For `skilld doctor`: read each issuer's metadata and key set now, as its
 * first token would, and say how it went: a new array of {"issuer", "ok":
 * bool, "detail"}, NULL when out of memory. */
json_t *skd_oauth_probe(skd_oauth *o);

/* Read every issuer's metadata and key set now on a thread of its own (a
 * server's start), so that the first token of each does not wait for them.
 * skd_oauth_free ends its fetches and joins it. NULL ok. */
void skd_oauth_warm(skd_oauth *o);

/* JWKS fetches made so far, all issuers together (for tests and metrics). */
uint64_t skd_oauth_jwks_fetches(const skd_oauth *o);

#endif
