/*
 * Shared pieces of the file skills (see fileskill.h). Trusts the engine to
 * have validated the input against the skill's schema; still checks every
 * path byte itself because the schema cannot express the path rules.
 */
#include "builtins/fileskill.h"
#include "skilld/workspace.h"

#include <nettle/base64.h>
#include <stdlib.h>
#include <string.h>

int skd__file_path(const json_t *input, int allow_root, const char **path, skd_err *err)
{
    json_t *p = json_object_get(input, "path");
    if (!p || json_is_null(p)) {
        if (!allow_root)
            return skd_err_set(err, SKD_EPATH, "no path given");
        *path = ".";
        return 0;
    }
    if (!json_is_string(p))
        return skd_err_set(err, SKD_EPATH, "the path must be a string");
    int rc = skd_workspace_check_client_pathn(json_string_value(p), json_string_length(p),
                                              allow_root, err);
    if (rc)
        return rc;
    *path = json_string_value(p);
    if (!**path)
        *path = ".";
    return 0;
}

uint64_t skd__file_max_bytes(const skd_ctx *ctx)
{
    return (uint64_t)skd_config_int(ctx->cfg, "SKILLS_MAX_FILE_BYTES");
}

uint64_t skd__file_quota_bytes(const skd_ctx *ctx)
{
    return (uint64_t)skd_config_int(ctx->cfg, "SKILLS_WORKSPACE_QUOTA_BYTES");
}

uint64_t skd__file_uint(const json_t *input, const char *key, uint64_t def)
{
    json_t *v = json_object_get(input, key);
    if (json_is_integer(v))
        return json_integer_value(v) < 0 ? 0 : (uint64_t)json_integer_value(v);
    if (json_is_real(v)) {
        double d = json_real_value(v);
        if (!(d >= 0))
            return 0;
        return d >= 18446744073709551615.0 ? UINT64_MAX : (uint64_t)d;
    }
    return def;
}

/* base64 from nettle (see src/core/util.c for why nettle). */
char *skd__base64_encode(const unsigned char *in, size_t n, size_t *outlen)
{
    size_t o = BASE64_ENCODE_RAW_LENGTH(n);
    char *out = malloc(o + 1);
    if (!out)
        return NULL;
    base64_encode_raw(out, n, in);
    out[o] = '\0';
    *outlen = o;
    return out;
}

static int b64_char(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' ||
           c == '/';
}

int skd__base64_decode(const char *in, size_t n, size_t max, unsigned char **out, size_t *outlen,
                       skd_err *err)
{
    *out = NULL;
    *outlen = 0;
    if (n % 4)
        return skd_err_set(err, SKD_EINVAL, "content is not base64: length not a multiple of 4");
    size_t pad = 0;
    if (n >= 1 && in[n - 1] == '=')
        pad++;
    if (n >= 2 && in[n - 2] == '=')
        pad++;
    for (size_t i = 0; i < n - pad; i++)
        if (!b64_char((unsigned char)in[i]))
            return skd_err_set(err, SKD_EINVAL,
                               "content is not base64: bad character at offset %zu", i);
    size_t len = n / 4 * 3 - pad;
    if (len > max)
        return skd_err_set(err, SKD_ETOOBIG, "content decodes to %zu bytes; the limit is %zu", len,
                           max);
    unsigned char *buf = malloc(n / 4 * 3 + 1);
    if (!buf)
        return skd_err_set(err, SKD_ENOMEM, "out of memory");
    /* Every character was checked above, so nettle refuses only what is
     * not canonical: bits left over in the last group ("YR==" for "YQ=="). */
    struct base64_decode_ctx dc;
    size_t o = 0;
    base64_decode_init(&dc);
    if (!base64_decode_update(&dc, &o, buf, n, in) || !base64_decode_final(&dc) || o != len) {
        free(buf);
        return skd_err_set(
            err, SKD_EINVAL,
            "content is not canonical base64: its last group has bits past the data");
    }
    *out = buf;
    *outlen = len;
    return 0;
}

json_t *skd__file_schema(const char *text)
{
    json_error_t je;
    json_t *s = json_loads(text, JSON_REJECT_DUPLICATES, &je);
    if (!s)
        abort(); /* a schema literal in the source is broken */
    return s;
}
