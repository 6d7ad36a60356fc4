/* libFuzzer driver for the JWT access-token validator (src/net/jwt.c):
 * every input is a bearer token. It is peeked at and verified against a
 * key set of an RSA and an EC key made for this process, whose private
 * halves the input cannot know, so no input may ever be accepted: an
 * acceptance would be a forged token (alg confusion, a key picked by the
 * token, a signature check skipped) and the driver aborts. Whatever is
 * refused must be refused with SKD_EUNAUTH and claims left empty. */
#include "skilld/oauth.h"

#include <cjose/cjose.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static json_t *jwks;

static json_t *public_jwk(cjose_jwk_t *k, const char *kid)
{
    cjose_err ce;
    cjose_jwk_set_kid(k, kid, strlen(kid), &ce);
    char *s = cjose_jwk_to_json(k, false, &ce);
    json_t *j = s ? json_loads(s, 0, NULL) : NULL;
    free(s);
    if (!j)
        abort();
    cjose_jwk_release(k);
    return j;
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    cjose_err ce;
    static const uint8_t e[] = {1, 0, 1};
    jwks = json_pack("{s:[o,o]}", "keys",
                     public_jwk(cjose_jwk_create_RSA_random(2048, e, sizeof(e), &ce), "k1"),
                     public_jwk(cjose_jwk_create_EC_random(CJOSE_JWK_EC_P_256, &ce), "k2"));
    return jwks ? 0 : 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    skd_jwt_head head;
    skd_jwt_claims c;
    skd_err err = {0};
    skd_jwt_policy pol = {
        .issuer = "https://id.example", .audience = "https://s.example/mcp", .now_s = 1800000000};
    const char *tok = (const char *)data;
    int rc = skd_jwt_peek(tok, size, &head, &err);
    if (rc != 0 && rc != SKD_EUNAUTH)
        abort();
    rc = skd_jwt_verify(tok, size, jwks, &pol, &c, &err);
    if (rc == 0 || (rc != SKD_EUNAUTH && rc != SKD_ENOMEM) || c.sub[0])
        abort(); /* a token no key of ours signed was accepted */
    return 0;
}
