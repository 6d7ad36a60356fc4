/*
 * The JWT access-token validator (src/net/jwt.c): tokens signed here with
 * libcjose by RSA and EC keys made for the run, then every way a token
 * must be refused: another audience or issuer, expired, not yet valid, a
 * kid the key set lacks, alg none, HS256 keyed with the public key, a key
 * of the wrong type for the algorithm, a missing typ, crit, duplicate
 * names, broken base64url.
 */
#include "skilld/oauth.h"
#include "skilld/util.h"
#include "tap.h"

#include <cjose/cjose.h>
#include <time.h>

#define ISS "https://id.example.com"
#define AUD "https://skilld.example.com/mcp"

static cjose_jwk_t *rsa, *ec, *rsa_other;
static json_t *jwks; /* public halves of rsa ("r1") and ec ("e1") */
static int64_t now;

static json_t *public_jwk(cjose_jwk_t *k, const char *kid)
{
    cjose_err ce;
    cjose_jwk_set_kid(k, kid, strlen(kid), &ce);
    char *s = cjose_jwk_to_json(k, false, &ce);
    json_t *j = json_loads(s, 0, NULL);
    free(s);
    return j;
}

static void setup(void)
{
    cjose_err ce;
    static const uint8_t e[] = {1, 0, 1};
    rsa = cjose_jwk_create_RSA_random(2048, e, sizeof(e), &ce);
    rsa_other = cjose_jwk_create_RSA_random(2048, e, sizeof(e), &ce);
    ec = cjose_jwk_create_EC_random(CJOSE_JWK_EC_P_256, &ce);
    jwks = json_pack("{s:[o,o]}", "keys", public_jwk(rsa, "r1"), public_jwk(ec, "e1"));
    cjose_jwk_set_kid(rsa_other, "r1", 2, &ce); /* same kid, another key */
    now = (int64_t)time(NULL);
}

/* The standard claims, valid now; the caller may change them. New ref. */
static json_t *claims(void)
{
    return json_pack("{s:s, s:s, s:s, s:I, s:I, s:I, s:s}", "iss", ISS, "sub", "alice", "aud", AUD,
                     "exp", (json_int_t)(now + 600), "iat", (json_int_t)now, "nbf", (json_int_t)now,
                     "scope", "openid skills:read skills:execute");
}

/* Sign payload (stolen) with key under alg and kid (NULL: none), typ (NULL:
 * none). New string (free). */
static char *sign(cjose_jwk_t *key, const char *alg, const char *kid, const char *typ,
                  json_t *payload)
{
    cjose_err ce;
    json_t *h = json_pack("{s:s}", "alg", alg);
    if (kid)
        json_object_set_new(h, "kid", json_string(kid));
    if (typ)
        json_object_set_new(h, "typ", json_string(typ));
    char *p = json_dumps(payload, JSON_COMPACT);
    cjose_jws_t *jws = cjose_jws_sign(key, (cjose_header_t *)h, (const uint8_t *)p, strlen(p), &ce);
    const char *ser = NULL;
    char *out = NULL;
    if (jws && cjose_jws_export(jws, &ser, &ce))
        out = strdup(ser);
    cjose_jws_release(jws);
    free(p);
    json_decref(h);
    json_decref(payload);
    return out;
}

static char *b64(const char *s)
{
    cjose_err ce;
    char *out = NULL;
    size_t n;
    cjose_base64url_encode((const uint8_t *)s, strlen(s), &out, &n, &ce);
    return out;
}

/* "b64(header).b64(payload).sig" from raw texts. */
static char *raw_token(const char *header, const char *payload, const char *sig)
{
    char *h = b64(header), *p = b64(payload);
    size_t n = strlen(h) + strlen(p) + strlen(sig) + 3;
    char *t = malloc(n);
    snprintf(t, n, "%s.%s.%s", h, p, sig);
    free(h);
    free(p);
    return t;
}

static int verify(const char *tok, skd_jwt_claims *c, skd_err *err)
{
    skd_jwt_policy pol = {.issuer = ISS, .audience = AUD, .now_s = now};
    return skd_jwt_verify(tok, tok ? strlen(tok) : 0, jwks, &pol, c, err);
}

/* The token is refused, with a message that contains why. */
static int refused(char *tok, const char *why)
{
    skd_jwt_claims c;
    skd_err err = {0};
    int rc = verify(tok, &c, &err);
    int ok = rc == SKD_EUNAUTH && strstr(skd_err_msg(&err), why) != NULL && c.sub[0] == '\0';
    if (!ok)
        printf("# rc %d: %s (wanted \"%s\")\n", rc, skd_err_msg(&err), why);
    free(tok);
    return ok;
}

TEST(rs256_valid)
{
    char *t = sign(rsa, "RS256", "r1", "at+jwt", claims());
    skd_jwt_claims c;
    skd_err err = {0};
    CHECK_EQ_INT(verify(t, &c, &err), 0);
    CHECK_STR(c.sub, "alice");
    CHECK_STR(c.scope, "openid skills:read skills:execute");
    CHECK_EQ_INT(c.exp, now + 600);
    skd_jwt_head h;
    CHECK_EQ_INT(skd_jwt_peek(t, strlen(t), &h, &err), 0);
    CHECK_STR(h.kid, "r1");
    CHECK_STR(h.iss, ISS);
    free(t);
}

TEST(es256_valid_aud_array_scp)
{
    json_t *p = claims();
    json_object_set_new(p, "aud", json_pack("[s,s]", "https://other", AUD));
    json_object_del(p, "scope");
    json_object_set_new(p, "scp", json_pack("[s,s]", "skills:read", "x"));
    char *t = sign(ec, "ES256", "e1", "JWT", p);
    skd_jwt_claims c;
    skd_err err = {0};
    CHECK_EQ_INT(verify(t, &c, &err), 0);
    CHECK_STR(c.scope, "skills:read x");
    free(t);
}

TEST(no_kid_single_fitting_key)
{
    char *t = sign(ec, "ES256", NULL, "at+jwt", claims());
    skd_jwt_claims c;
    skd_err err = {0};
    CHECK_EQ_INT(verify(t, &c, &err), 0);
    free(t);
}

TEST(wrong_audience)
{
    json_t *p = claims();
    json_object_set_new(p, "aud", json_string("https://skilld.example.com"));
    CHECK(refused(sign(rsa, "RS256", "r1", "at+jwt", p), "aud"));
    p = claims();
    json_object_del(p, "aud");
    CHECK(refused(sign(rsa, "RS256", "r1", "at+jwt", p), "aud"));
}

TEST(other_issuer)
{
    json_t *p = claims();
    json_object_set_new(p, "iss", json_string("https://evil.example.com"));
    CHECK(refused(sign(rsa, "RS256", "r1", "at+jwt", p), "iss"));
}

TEST(expired_and_leeway)
{
    json_t *p = claims();
    json_object_set_new(p, "exp", json_integer(now - SKD_JWT_LEEWAY_S - 1));
    CHECK(refused(sign(rsa, "RS256", "r1", "at+jwt", p), "expired"));
    p = claims();
    json_object_del(p, "exp");
    CHECK(refused(sign(rsa, "RS256", "r1", "at+jwt", p), "exp is missing"));
    /* Within the skew: still accepted. */
    p = claims();
    json_object_set_new(p, "exp", json_integer(now - SKD_JWT_LEEWAY_S + 5));
    char *t = sign(rsa, "RS256", "r1", "at+jwt", p);
    skd_jwt_claims c;
    skd_err err = {0};
    CHECK_EQ_INT(verify(t, &c, &err), 0);
    free(t);
}

TEST(not_yet_valid)
{
    json_t *p = claims();
    json_object_set_new(p, "nbf", json_integer(now + SKD_JWT_LEEWAY_S + 30));
    CHECK(refused(sign(rsa, "RS256", "r1", "at+jwt", p), "nbf"));
    p = claims();
    json_object_set_new(p, "iat", json_integer(now + SKD_JWT_LEEWAY_S + 30));
    CHECK(refused(sign(rsa, "RS256", "r1", "at+jwt", p), "iat"));
}

TEST(unknown_kid_and_wrong_key)
{
    CHECK(refused(sign(rsa, "RS256", "r9", "at+jwt", claims()), "no key"));
    CHECK(!skd_jwks_has_kid(jwks, "r9"));
    CHECK(skd_jwks_has_kid(jwks, "r1"));
    /* Signed by another key that claims kid r1. */
    CHECK(refused(sign(rsa_other, "RS256", "r1", "at+jwt", claims()), "signature"));
    /* ES256 header naming the RSA key. */
    CHECK(refused(sign(ec, "ES256", "r1", "at+jwt", claims()), "does not fit"));
}

TEST(alg_none_refused)
{
    json_t *c = claims();
    char *p = json_dumps(c, JSON_COMPACT);
    json_decref(c);
    CHECK(
        refused(raw_token("{\"alg\":\"none\",\"typ\":\"at+jwt\",\"kid\":\"r1\"}", p, "x"), "none"));
    CHECK(refused(raw_token("{\"alg\":\"NONE\",\"typ\":\"at+jwt\"}", p, "x"), "none"));
    /* No signature part at all. */
    char *t = raw_token("{\"alg\":\"none\",\"typ\":\"at+jwt\"}", p, "");
    CHECK(refused(t, "compact"));
    free(p);
}

/* The classic confusion: HS256 with the RSA public key (as the server
 * holds it) for the HMAC secret. */
TEST(hs256_with_public_key_refused)
{
    cjose_err ce;
    char *pub = json_dumps(json_array_get(json_object_get(jwks, "keys"), 0), JSON_COMPACT);
    cjose_jwk_t *hk = cjose_jwk_create_oct_spec((const uint8_t *)pub, strlen(pub), &ce);
    CHECK(hk != NULL);
    CHECK(refused(sign(hk, "HS256", "r1", "at+jwt", claims()), "HMAC"));
    cjose_jwk_release(hk);
    free(pub);
}

TEST(header_rules)
{
    CHECK(refused(sign(rsa, "RS256", "r1", NULL, claims()), "typ"));
    CHECK(refused(sign(rsa, "RS256", "r1", "id+jwt", claims()), "typ"));
    json_t *c = claims();
    char *p = json_dumps(c, JSON_COMPACT);
    json_decref(c);
    CHECK(
        refused(raw_token("{\"alg\":\"RS256\",\"typ\":\"at+jwt\",\"kid\":\"r1\",\"crit\":[\"x\"]}",
                          p, "AAAA"),
                "crit"));
    CHECK(refused(
        raw_token("{\"alg\":\"RS256\",\"typ\":\"at+jwt\",\"jku\":\"https://x\"}", p, "AAAA"),
        "jku"));
    CHECK(refused(raw_token("{\"alg\":\"RS256\",\"alg\":\"none\",\"typ\":\"at+jwt\"}", p, "AAAA"),
                  "header"));
    CHECK(refused(raw_token("[1]", p, "AAAA"), "header"));
    CHECK(refused(raw_token("{\"alg\":\"EdDSA\",\"typ\":\"at+jwt\"}", p, "AAAA"), "algorithm"));
    free(p);
}

TEST(shape_rules)
{
    CHECK(refused(strdup("a.b"), "compact"));
    CHECK(refused(strdup("a.b.c.d"), "compact"));
    CHECK(refused(strdup("a+b.c.d"), "compact"));
    CHECK(refused(strdup("..."), "compact"));
    CHECK(refused(strdup("a.b.c"), "header")); /* "a": one char, not base64url of anything */
    char *big = malloc(SKD_JWT_MAX + 2);
    memset(big, 'A', SKD_JWT_MAX + 1);
    big[SKD_JWT_MAX + 1] = '\0';
    CHECK(refused(big, "16 KiB"));
    /* A signature part changed by one character. */
    char *t = sign(rsa, "RS256", "r1", "at+jwt", claims());
    size_t n = strlen(t);
    t[n - 3] = t[n - 3] == 'A' ? 'B' : 'A';
    CHECK(refused(t, "signature"));
    /* The payload is not an object, or sub is missing. */
    json_t *p = claims();
    json_object_del(p, "sub");
    CHECK(refused(sign(rsa, "RS256", "r1", "at+jwt", p), "sub"));
}

int main(void)
{
    tap_prog = "test_net_jwt";
    setup();
    RUN(rs256_valid);
    RUN(es256_valid_aud_array_scp);
    RUN(no_kid_single_fitting_key);
    RUN(wrong_audience);
    RUN(other_issuer);
    RUN(expired_and_leeway);
    RUN(not_yet_valid);
    RUN(unknown_kid_and_wrong_key);
    RUN(alg_none_refused);
    RUN(hs256_with_public_key_refused);
    RUN(header_rules);
    RUN(shape_rules);
    cjose_jwk_release(rsa);
    cjose_jwk_release(rsa_other);
    cjose_jwk_release(ec);
    json_decref(jwks);
    return tap_failed_total ? 1 : 0;
}
