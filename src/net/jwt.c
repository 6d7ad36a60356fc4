/*
 * Validation of JWT access tokens (include/skilld/oauth.h).
 *
 * Trusts nothing: the token comes from a client, the key set from the
 * network. The compact serialisation is split and its header and payload
 * are decoded here (strict base64url, JSON without duplicate names) so that
 * every rule is checked on exactly the bytes that were signed; the
 * signature itself is checked by libcjose (no hand-written RSA or ECDSA).
 * libcjose would verify an HMAC "signature" with whatever key it is handed,
 * an RSA public key included, so the algorithm is checked against an
 * allow-list and the key's type before libcjose sees either.
 */
#include "skilld/oauth.h"
#include "skilld/util.h"

#include <cjose/cjose.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* The algorithms accepted, with the key each needs. */
static const struct {
    const char *alg;
    const char *kty;
    const char *crv; /* EC only */
} algs[] = {
    {"RS256", "RSA", NULL},   {"RS384", "RSA", NULL},   {"RS512", "RSA", NULL},
    {"PS256", "RSA", NULL},   {"PS384", "RSA", NULL},   {"PS512", "RSA", NULL},
    {"ES256", "EC", "P-256"}, {"ES384", "EC", "P-384"}, {"ES512", "EC", "P-521"},
};

static int refuse(skd_err *err, const char *why)
{
    return skd_err_set(err, SKD_EUNAUTH, "invalid token: %s", why);
}

static int b64url_val(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '-')
        return 62;
    if (c == '_')
        return 63;
    return -1;
}

/* Decode n bytes of unpadded base64url into a new NUL-terminated buffer
 * (caller frees); NULL when the text is not base64url (a stray character,
 * a length of 1 mod 4, or non-zero bits left over). */
static char *b64url_decode(const char *s, size_t n, size_t *outlen)
{
    if (n % 4 == 1)
        return NULL;
    char *out = malloc(n / 4 * 3 + 3);
    if (!out)
        return NULL;
    size_t o = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n; i++) {
        int v = b64url_val((unsigned char)s[i]);
        if (v < 0) {
            free(out);
            return NULL;
        }
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (char)((acc >> bits) & 0xff);
        }
    }
    if (acc & ((1u << bits) - 1)) { /* leftover bits must be zero */
        free(out);
        return NULL;
    }
    out[o] = '\0';
    *outlen = o;
    return out;
}

/* A part of the token decoded and parsed as a JSON object; new reference
 * or NULL. */
static json_t *part_object(const char *s, size_t n)
{
    size_t len = 0;
    char *raw = b64url_decode(s, n, &len);
    if (!raw)
        return NULL;
    json_t *v = json_loadb(raw, len, JSON_REJECT_DUPLICATES, NULL);
    free(raw);
    if (v && !json_is_object(v)) {
        json_decref(v);
        v = NULL;
    }
    return v;
}

/* Split "h.p.s" into its parts (offsets into token); -1 unless exactly
 * three non-empty parts. */
static int split(const char *token, size_t len, size_t dot[2])
{
    int n = 0;
    for (size_t i = 0; i < len; i++) {
        if (token[i] == '.') {
            if (n == 2)
                return -1;
            dot[n++] = i;
        } else if (b64url_val((unsigned char)token[i]) < 0) {
            return -1;
        }
    }
    if (n != 2 || dot[0] == 0 || dot[1] == dot[0] + 1 || dot[1] + 1 == len)
        return -1;
    return 0;
}

static int alg_index(const char *alg)
{
    for (size_t i = 0; i < sizeof(algs) / sizeof(algs[0]); i++)
        if (strcmp(algs[i].alg, alg) == 0)
            return (int)i;
    return -1;
}

/* The header's checks; alg and kid copied out. */
static int check_header(const json_t *h, skd_jwt_head *head, skd_err *err)
{
    const char *alg = json_string_value(json_object_get(h, "alg"));
    const json_t *kid = json_object_get(h, "kid");
    const json_t *typ = json_object_get(h, "typ");
    if (!alg)
        return refuse(err, "the header has no alg");
    if (strcasecmp(alg, "none") == 0)
        return refuse(err, "alg none is not accepted");
    if (strncmp(alg, "HS", 2) == 0)
        return refuse(err, "HMAC algorithms are not accepted");
    if (alg_index(alg) < 0)
        return refuse(err, "the algorithm is not one of RS256/384/512, PS256/384/512, "
                           "ES256/384/512");
    if (json_object_get(h, "crit"))
        return refuse(err, "the header has crit extensions");
    if (json_object_get(h, "jku") || json_object_get(h, "jwk") || json_object_get(h, "x5u"))
        return refuse(err, "keys named by the token itself (jku, jwk, x5u) are not accepted");
    const char *t = json_string_value(typ);
    if (!t || (strcasecmp(t, "at+jwt") != 0 && strcasecmp(t, "application/at+jwt") != 0 &&
               strcasecmp(t, "JWT") != 0))
        return refuse(err, "typ must be at+jwt or JWT");
    if (kid && (!json_is_string(kid) || json_string_length(kid) == 0 ||
                json_string_length(kid) >= sizeof(head->kid)))
        return refuse(err, "kid must be a non-empty string");
    skd_strlcpy(head->alg, alg, sizeof(head->alg));
    skd_strlcpy(head->kid, kid ? json_string_value(kid) : "", sizeof(head->kid));
    return 0;
}

/* Decode and check header and payload; *payload a new reference. */
static int decode(const char *token, size_t len, skd_jwt_head *head, json_t **payload, skd_err *err)
{
    size_t dot[2];
    json_t *h = NULL, *p = NULL;
    int rc;
    memset(head, 0, sizeof(*head));
    *payload = NULL;
    if (!token || len == 0 || len > SKD_JWT_MAX)
        return refuse(err, "not a JWT of at most 16 KiB");
    if (split(token, len, dot) != 0)
        return refuse(err, "not a compact JWS (three base64url parts)");
    if (!(h = part_object(token, dot[0])))
        return refuse(err, "the header is not a JSON object");
    if ((rc = check_header(h, head, err)))
        goto out;
    if (!(p = part_object(token + dot[0] + 1, dot[1] - dot[0] - 1))) {
        rc = refuse(err, "the payload is not a JSON object");
        goto out;
    }
    const char *iss = json_string_value(json_object_get(p, "iss"));
    if (!iss || strlen(iss) >= sizeof(head->iss)) {
        rc = refuse(err, "iss is missing");
        goto out;
    }
    skd_strlcpy(head->iss, iss, sizeof(head->iss));
    *payload = p;
    p = NULL;
out:
    json_decref(h);
    json_decref(p);
    return rc;
}

int skd_jwt_peek(const char *token, size_t len, skd_jwt_head *head, skd_err *err)
{
    json_t *p = NULL;
    int rc = decode(token, len, head, &p, err);
    json_decref(p);
    return rc;
}

int skd_jwks_has_kid(const json_t *jwks, const char *kid)
{
    const json_t *keys = json_object_get(jwks, "keys");
    size_t i;
    const json_t *k;
    json_array_foreach (keys, i, k) {
        const char *id = json_string_value(json_object_get(k, "kid"));
        if (!*kid || (id && strcmp(id, kid) == 0))
            return 1;
    }
    return 0;
}

/* 1 when key k may verify alg: its kty (and crv) fit, and its alg and use,
 * when given, agree. */
static int key_fits(const json_t *k, int ai)
{
    const char *kty = json_string_value(json_object_get(k, "kty"));
    const char *kalg = json_string_value(json_object_get(k, "alg"));
    const char *use = json_string_value(json_object_get(k, "use"));
    if (!kty || strcmp(kty, algs[ai].kty) != 0)
        return 0;
    if (algs[ai].crv) {
        const char *crv = json_string_value(json_object_get(k, "crv"));
        if (!crv || strcmp(crv, algs[ai].crv) != 0)
            return 0;
    }
    if (kalg && strcmp(kalg, algs[ai].alg) != 0)
        return 0;
    if (use && strcmp(use, "sig") != 0)
        return 0;
    if (json_object_get(k, "d")) /* a private key published by mistake: not ours to use */
        return 0;
    return 1;
}

/* The key of jwks to verify with: by kid, or the only fitting key when the
 * header has no kid. Borrowed, or NULL with err set. */
static const json_t *pick_key(const json_t *jwks, const skd_jwt_head *head, skd_err *err)
{
    const json_t *keys = json_object_get(jwks, "keys");
    const json_t *k, *found = NULL;
    size_t i, fitting = 0;
    int ai = alg_index(head->alg);
    if (!json_is_array(keys)) {
        refuse(err, "the issuer's key set has no keys");
        return NULL;
    }
    json_array_foreach (keys, i, k) {
        const char *id = json_string_value(json_object_get(k, "kid"));
        if (*head->kid) {
            if (id && strcmp(id, head->kid) == 0) {
                if (!key_fits(k, ai)) {
                    refuse(err, "the key named by kid does not fit the algorithm");
                    return NULL;
                }
                return k;
            }
        } else if (key_fits(k, ai)) {
            found = k;
            fitting++;
        }
    }
    if (*head->kid)
        refuse(err, "no key of the issuer has this kid");
    else if (fitting != 1)
        refuse(err, "the token names no kid and the issuer has no single key for its alg");
    return fitting == 1 && !*head->kid ? found : NULL;
}

static int check_signature(const char *token, size_t len, const json_t *key, skd_err *err)
{
    cjose_err ce;
    int rc = 0;
    char *text = json_dumps(key, JSON_COMPACT);
    cjose_jwk_t *jwk = text ? cjose_jwk_import(text, strlen(text), &ce) : NULL;
    cjose_jws_t *jws = jwk ? cjose_jws_import(token, len, &ce) : NULL;
    if (!text)
        rc = skd_err_set(err, SKD_ENOMEM, "out of memory");
    else if (!jwk)
        rc = refuse(err, "the issuer's key cannot be read");
    else if (!jws || !cjose_jws_verify(jws, jwk, &ce))
        rc = refuse(err, "the signature does not verify");
    cjose_jws_release(jws);
    cjose_jwk_release(jwk);
    free(text);
    return rc;
}

/* A NumericDate claim: absent (0, *present 0), or an integer or number. */
static int num_claim(const json_t *p, const char *name, int64_t *v, int *present)
{
    const json_t *j = json_object_get(p, name);
    *present = j != NULL;
    *v = 0;
    if (!j)
        return 0;
    if (json_is_integer(j))
        *v = (int64_t)json_integer_value(j);
    else if (json_is_real(j) && json_real_value(j) > -1e15 && json_real_value(j) < 1e15)
        *v = (int64_t)json_real_value(j);
    else
        return -1;
    return 0;
}

static int aud_has(const json_t *aud, const char *want)
{
    if (json_is_string(aud))
        return strcmp(json_string_value(aud), want) == 0;
    size_t i;
    const json_t *a;
    json_array_foreach (aud, i, a)
        if (json_is_string(a) && strcmp(json_string_value(a), want) == 0)
            return 1;
    return 0;
}

/* scope (a string) or scp (an array of strings, as some providers send). */
static int scope_claim(const json_t *p, char *out, size_t cap)
{
    const json_t *s = json_object_get(p, "scope"), *scp = json_object_get(p, "scp");
    out[0] = '\0';
    if (s) {
        if (!json_is_string(s) || skd_strlcpy(out, json_string_value(s), cap))
            return -1;
        return 0;
    }
    if (!scp)
        return 0;
    if (!json_is_array(scp))
        return -1;
    size_t i, n = 0;
    const json_t *v;
    json_array_foreach (scp, i, v) {
        const char *t = json_string_value(v);
        size_t tl = t ? strlen(t) : 0;
        if (!t || n + tl + 2 > cap)
            return -1;
        if (n)
            out[n++] = ' ';
        memcpy(out + n, t, tl);
        n += tl;
        out[n] = '\0';
    }
    return 0;
}

static int check_claims(const json_t *p, const skd_jwt_policy *pol, skd_jwt_claims *c, skd_err *err)
{
    int64_t exp, nbf, iat;
    int has_exp, has_nbf, has_iat;
    const char *iss = json_string_value(json_object_get(p, "iss"));
    const char *sub = json_string_value(json_object_get(p, "sub"));
    if (!iss || strcmp(iss, pol->issuer) != 0)
        return refuse(err, "iss is not the configured issuer");
    if (!aud_has(json_object_get(p, "aud"), pol->audience))
        return refuse(err, "aud does not name this server's resource");
    if (num_claim(p, "exp", &exp, &has_exp) || num_claim(p, "nbf", &nbf, &has_nbf) ||
        num_claim(p, "iat", &iat, &has_iat))
        return refuse(err, "exp, nbf or iat is not a number");
    if (!has_exp)
        return refuse(err, "exp is missing");
    if (exp + SKD_JWT_LEEWAY_S <= pol->now_s)
        return refuse(err, "the token has expired");
    if (has_nbf && nbf - SKD_JWT_LEEWAY_S > pol->now_s)
        return refuse(err, "the token is not valid yet (nbf)");
    if (has_iat && iat - SKD_JWT_LEEWAY_S > pol->now_s)
        return refuse(err, "the token was issued in the future (iat)");
    if (!sub || !*sub || strlen(sub) >= sizeof(c->sub))
        return refuse(err, "sub is missing or longer than 255 bytes");
    if (scope_claim(p, c->scope, sizeof(c->scope)))
        return refuse(err, "scope is not a string of at most 1023 bytes");
    skd_strlcpy(c->sub, sub, sizeof(c->sub));
    c->exp = exp;
    return 0;
}

int skd_jwt_verify(const char *token, size_t len, const json_t *jwks, const skd_jwt_policy *p,
                   skd_jwt_claims *claims, skd_err *err)
{
    skd_jwt_head head;
    json_t *payload = NULL;
    memset(claims, 0, sizeof(*claims));
    int rc = decode(token, len, &head, &payload, err);
    if (rc)
        return rc;
    const json_t *key = pick_key(jwks, &head, err);
    if (!key)
        rc = SKD_EUNAUTH;
    else if ((rc = check_signature(token, len, key, err)) == 0)
        rc = check_claims(payload, p, claims, err);
    json_decref(payload);
    if (rc)
        memset(claims, 0, sizeof(*claims));
    return rc;
}
