/*
 * bench/jwt_verify: what checking one bearer credential costs the server,
 * without HTTP. Rows, interleaved round by round in one process: an OAuth
 * access token through skd_jwt_verify (RS256 with a 2048-bit key, ES256 on
 * P-256; the key set already cached, as a server holds it) and an API key
 * through skd_store_key_auth (SQLite store in DATA_DIR, its cache warm, as
 * a server's every call after the first). Prints the median and minimum
 * microseconds per check of each row over the rounds (or JSON with
 * --json). The OAuth tenant's row read (one store read by primary key) is
 * not in the token rows.
 *
 * usage: build/bench/jwt_verify [-n CHECKS_PER_ROUND] [-r ROUNDS] [--json] DATA_DIR
 * Trusts its arguments (a developer tool); DATA_DIR is created if missing.
 */
#include "skilld/oauth.h"
#include "skilld/registry.h"
#include "skilld/store.h"

#include <cjose/cjose.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define ISS "https://id.example"
#define AUD "https://skilld.example/mcp"
#define MAX_ROUNDS 100

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* A token signed by key (kid set on it) and the public key into set. */
static char *token(cjose_jwk_t *key, const char *alg, const char *kid, json_t *set)
{
    cjose_err ce;
    cjose_jwk_set_kid(key, kid, strlen(kid), &ce);
    char *pub = cjose_jwk_to_json(key, false, &ce);
    json_array_append_new(json_object_get(set, "keys"), json_loads(pub, 0, NULL));
    free(pub);
    long long now = (long long)time(NULL);
    char payload[512];
    snprintf(payload, sizeof(payload),
             "{\"iss\":\"%s\",\"sub\":\"bench\",\"aud\":\"%s\",\"exp\":%lld,\"iat\":%lld,"
             "\"scope\":\"skills:read skills:execute\"}",
             ISS, AUD, now + 3600, now);
    json_t *h = json_pack("{s:s, s:s, s:s}", "alg", alg, "typ", "at+jwt", "kid", kid);
    cjose_jws_t *jws =
        cjose_jws_sign(key, (cjose_header_t *)h, (const uint8_t *)payload, strlen(payload), &ce);
    const char *ser = NULL;
    char *out = jws && cjose_jws_export(jws, &ser, &ce) ? strdup(ser) : NULL;
    cjose_jws_release(jws);
    json_decref(h);
    return out;
}

int main(int argc, char **argv)
{
    int n = 2000, rounds = 10, as_json = 0;
    const char *dir = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-n") == 0 && i + 1 < argc)
            n = (int)strtol(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "-r") == 0 && i + 1 < argc)
            rounds = (int)strtol(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--json") == 0)
            as_json = 1;
        else
            dir = argv[i];
    }
    if (!dir || n < 1 || rounds < 1 || rounds > MAX_ROUNDS) {
        fprintf(stderr, "usage: %s [-n N] [-r ROUNDS 1..%d] [--json] DATA_DIR\n", argv[0],
                MAX_ROUNDS);
        return 2;
    }
    mkdir(dir, 0700);
    char db[4096];
    snprintf(db, sizeof(db), "%s/skilld.db", dir);
    skd_store *st = NULL;
    skd_err err = {0};
    char *secret = NULL;
    if (skd_store_open(db, &st, &err) ||
        skd_store_key_create(st, "bench", SKD_SCOPE_ALL, &secret, NULL, &err)) {
        fprintf(stderr, "store: %s\n", skd_err_msg(&err));
        return 1;
    }
    cjose_err ce;
    static const uint8_t e[] = {1, 0, 1};
    cjose_jwk_t *rsa = cjose_jwk_create_RSA_random(2048, e, sizeof(e), &ce);
    cjose_jwk_t *ec = cjose_jwk_create_EC_random(CJOSE_JWK_EC_P_256, &ce);
    json_t *set = json_pack("{s:[]}", "keys");
    char *tok[2] = {token(rsa, "RS256", "r", set), token(ec, "ES256", "e", set)};
    const char *names[3] = {"jwt_rs256", "jwt_es256", "api_key"};
    double per[3][MAX_ROUNDS];
    skd_jwt_policy pol = {.issuer = ISS, .audience = AUD, .now_s = (int64_t)time(NULL)};
    skd_key_info info;
    skd_store_key_auth(st, secret, &info, &err); /* warm the key cache */
    for (int r = 0; r < rounds; r++) {
        for (int k = 0; k < 3; k++) {
            int row = (k + r) % 3; /* rotating order */
            double t0 = now_us();
            for (int i = 0; i < n; i++) {
                skd_jwt_claims c;
                int rc = row < 2 ? skd_jwt_verify(tok[row], strlen(tok[row]), set, &pol, &c, &err)
                                 : skd_store_key_auth(st, secret, &info, &err);
                if (rc) {
                    fprintf(stderr, "%s: %s\n", names[row], skd_err_msg(&err));
                    return 1;
                }
            }
            per[row][r] = (now_us() - t0) / n;
        }
    }
    if (as_json)
        printf("{");
    for (int row = 0; row < 3; row++) {
        qsort(per[row], (size_t)rounds, sizeof(double), cmp_double);
        double med = per[row][rounds / 2], min = per[row][0];
        if (as_json)
            printf("%s\"%s\":{\"median_us\":%.2f,\"min_us\":%.2f}", row ? "," : "", names[row], med,
                   min);
        else
            printf("%-10s median %8.2f us  min %8.2f us  per check\n", names[row], med, min);
    }
    if (as_json)
        printf("}\n");
    free(tok[0]);
    free(tok[1]);
    free(secret);
    json_decref(set);
    cjose_jwk_release(rsa);
    cjose_jwk_release(ec);
    skd_store_close(st);
    return 0;
}
