/*
 * JSON helpers (see include/skilld/json.h). Parsing trusts nothing: jansson
 * already rejects invalid UTF-8; we add a depth bound and refuse duplicate
 * keys and NUL bytes inside strings so one document has one meaning.
 */
#include "skilld/json.h"
#include "skilld/util.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

size_t skd_json_depth(const json_t *v)
{
    size_t max = 0;
    if (json_is_object(v)) {
        const char *k;
        json_t *child;
        json_object_foreach ((json_t *)v, k, child) {
            size_t d = skd_json_depth(child);
            if (d > max)
                max = d;
            if (max > SKD_JSON_MAX_DEPTH)
                break;
        }
    } else if (json_is_array(v)) {
        size_t i;
        json_t *child;
        json_array_foreach (v, i, child) {
            size_t d = skd_json_depth(child);
            if (d > max)
                max = d;
            if (max > SKD_JSON_MAX_DEPTH)
                break;
        }
    }
    return max + 1;
}

/* Cheap pre-scan so that a hostile document cannot make the parser recurse
 * deeply: count bracket nesting outside strings. */
static int too_deep(const char *p, size_t len)
{
    int depth = 0, in_str = 0;
    for (size_t i = 0; i < len; i++) {
        char c = p[i];
        if (in_str) {
            if (c == '\\')
                i++;
            else if (c == '"')
                in_str = 0;
        } else if (c == '"') {
            in_str = 1;
        } else if (c == '{' || c == '[') {
            if (++depth > SKD_JSON_MAX_DEPTH)
                return 1;
        } else if (c == '}' || c == ']') {
            depth--;
        }
    }
    return 0;
}

json_t *skd_json_parse(const char *data, size_t len, skd_err *err)
{
    json_error_t je;
    if (!data) {
        skd_err_set(err, SKD_EINVAL, "no JSON given");
        return NULL;
    }
    if (too_deep(data, len)) {
        skd_err_set(err, SKD_EINVAL, "JSON nesting is deeper than %d levels", SKD_JSON_MAX_DEPTH);
        return NULL;
    }
    json_t *v = json_loadb(data, len, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &je);
    if (!v) {
        skd_err_set(err, SKD_EINVAL, "invalid JSON at line %d column %d: %s", je.line, je.column,
                    je.text);
        return NULL;
    }
    return v;
}

char *skd_json_dump(const json_t *v)
{
    return json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
}

static json_t *get(const json_t *obj, const char *key)
{
    return json_is_object(obj) ? json_object_get(obj, key) : NULL;
}

const char *skd_json_str(const json_t *obj, const char *key, const char *def)
{
    json_t *v = get(obj, key);
    return json_is_string(v) ? json_string_value(v) : def;
}

long long skd_json_int(const json_t *obj, const char *key, long long def)
{
    json_t *v = get(obj, key);
    return json_is_integer(v) ? (long long)json_integer_value(v) : def;
}

int skd_json_bool(const json_t *obj, const char *key, int def)
{
    json_t *v = get(obj, key);
    return json_is_boolean(v) ? json_is_true(v) : def;
}

json_t *skd_result_ok(void)
{
    return json_pack("{s:b}", "success", 1);
}

static json_t *error_result(int code, const char *msg)
{
    char clean[SKD_ERR_MSG_MAX];
    if (code == 0)
        code = SKD_EINTERNAL;
    /* A message may quote client bytes or be cut inside a character. */
    skd_strlcpy(clean, msg && *msg ? msg : skd_strerror(code), sizeof(clean));
    skd_utf8_scrub(clean);
    return json_pack("{s:b, s:{s:s, s:s}}", "success", 0, "error", "code", skd_errcode(code),
                     "message", clean);
}

json_t *skd_result_error(int code, const char *fmt, ...)
{
    char msg[SKD_ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    skd_vformat(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return error_result(code, msg);
}

json_t *skd_result_from_err(const skd_err *err)
{
    return error_result(err ? err->code : SKD_EINTERNAL, err ? err->msg : NULL);
}

int skd_result_success(const json_t *result)
{
    return json_is_true(get(result, "success"));
}

const char *skd_result_code(const json_t *result)
{
    return skd_json_str(get(result, "error"), "code", NULL);
}
