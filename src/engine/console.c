/*
 * Operator console sessions (include/skilld/tenancy.h): an admin key's
 * secret, pasted once into the sign-in form, becomes a random session
 * token held in an HttpOnly cookie; the store keeps only the token's
 * SHA-256, the key it acts as, a CSRF token and the expiry. Every use
 * checks the key again, so revoking the key (or taking skills:admin from
 * it) ends its sessions at once.
 */
#include "engine/engine_int.h"
#include "skilld/tenancy.h"

#include <stdio.h>
#include <string.h>

static int random_hex(char out[SKD_UI_TOKEN_LEN + 1])
{
    unsigned char b[SKD_UI_TOKEN_LEN / 2];
    if (skd_random(b, sizeof(b)))
        return -1;
    for (size_t i = 0; i < sizeof(b); i++)
        snprintf(out + 2 * i, 3, "%02x", b[i]);
    return 0;
}

/* The token's digest, or -1 for a token that is not SKD_UI_TOKEN_LEN hex. */
static int token_digest(const char *token, char digest[SKD_SHA256_HEX_LEN + 1])
{
    if (!token || strlen(token) != SKD_UI_TOKEN_LEN ||
        strspn(token, "0123456789abcdef") != SKD_UI_TOKEN_LEN)
        return -1;
    skd_sha256_hex(token, SKD_UI_TOKEN_LEN, digest);
    return 0;
}

int skd_engine_ui_signin(skd_engine *e, const char *secret, char token[SKD_UI_TOKEN_LEN + 1],
                         char csrf[SKD_UI_TOKEN_LEN + 1], skd_key_info *info, int64_t *expires_ms,
                         skd_err *err)
{
    char digest[SKD_SHA256_HEX_LEN + 1];
    token[0] = csrf[0] = '\0';
    int rc = skd_engine_authenticate(e, secret, info, err);
    if (rc)
        return rc;
    if (!(info->scopes & SKD_SCOPE_ADMIN))
        return skd_err_set(err, SKD_EFORBIDDEN,
                           "the console is for keys with the skills:admin scope");
    if (random_hex(token) || random_hex(csrf) || token_digest(token, digest))
        return skd_err_set(err, SKD_EINTERNAL, "no randomness for a session");
    int64_t now = skd_wall_ms();
    *expires_ms = now + skd_config_int(e->cfg, "SKILLD_UI_SESSION_SECONDS") * 1000;
    return skd_store_ui_session_put(e->store, digest, info->id, csrf, now, *expires_ms, err);
}

int skd_engine_ui_session(skd_engine *e, const char *token, skd_key_info *info,
                          char csrf[SKD_UI_TOKEN_LEN + 1], skd_err *err)
{
    char digest[SKD_SHA256_HEX_LEN + 1], key_id[64];
    csrf[0] = '\0';
    if (!e->store || token_digest(token, digest))
        return skd_err_set(err, SKD_EUNAUTH, "no console session");
    int rc = skd_store_ui_session_get(e->store, digest, skd_wall_ms(), key_id, csrf, err);
    if (rc == SKD_ENOENT)
        return skd_err_set(err, SKD_EUNAUTH, "the console session has ended; sign in again");
    if (rc)
        return rc;
    rc = skd_engine_key_get(e, key_id, info, err);
    if (rc == SKD_ENOENT || (rc == 0 && (info->revoked || !(info->scopes & SKD_SCOPE_ADMIN)))) {
        csrf[0] = '\0';
        return skd_err_set(err, SKD_EUNAUTH,
                           "the key of this console session was revoked; sign in again");
    }
    return rc;
}

int skd_engine_ui_signout(skd_engine *e, const char *token, skd_err *err)
{
    char digest[SKD_SHA256_HEX_LEN + 1];
    if (!e->store || token_digest(token, digest))
        return 0;
    return skd_store_ui_session_del(e->store, digest, err);
}
