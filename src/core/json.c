/*
 * JSON helpers (see include/skilld/json.h). Parsing trusts nothing: jansson
 * already rejects invalid UTF-8; we add a depth bound and refuse duplicate
 * keys and NUL bytes inside strings so one document has one meaning.
 */
#include "skilld/json.h"
#include "skilld/util.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
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

/* A growable output buffer; fail set once an allocation failed. */
struct out {
    char *p;
    size_t n, cap;
    int fail;
};

static void put(struct out *o, const char *s, size_t n)
{
    if (o->fail)
        return;
    if (o->n + n + 1 > o->cap) {
        size_t cap = o->cap ? o->cap : 256;
        while (cap < o->n + n + 1)
            cap *= 2;
        char *p = realloc(o->p, cap);
        if (!p) {
            o->fail = 1;
            return;
        }
        o->p = p;
        o->cap = cap;
    }
    memcpy(o->p + o->n, s, n);
    o->n += n;
}

/* A JSON string as jansson writes it without JSON_ENSURE_ASCII or
 * JSON_ESCAPE_SLASH: runs of plain bytes copied, the seven short escapes,
 * other control characters as \u00XX (upper-case hex). -1 on invalid UTF-8. */
static int put_string(struct out *o, const char *s, size_t n)
{
    static const char hex[] = "0123456789ABCDEF";
    put(o, "\"", 1);
    size_t i = 0, run = 0;
    while (i < n) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x80) {
            size_t l = skd_utf8_seq_len((const unsigned char *)s + i, n - i);
            if (l == 0)
                return -1;
            i += l;
            continue;
        }
        if (c >= 0x20 && c != '"' && c != '\\') {
            i++;
            continue;
        }
        put(o, s + run, i - run);
        char esc[6] = {'\\', 0, 0, 0, 0, 0};
        size_t el = 2;
        switch (c) {
        case '"':
            esc[1] = '"';
            break;
        case '\\':
            esc[1] = '\\';
            break;
        case '\b':
            esc[1] = 'b';
            break;
        case '\f':
            esc[1] = 'f';
            break;
        case '\n':
            esc[1] = 'n';
            break;
        case '\r':
            esc[1] = 'r';
            break;
        case '\t':
            esc[1] = 't';
            break;
        default:
            esc[1] = 'u';
            esc[2] = '0';
            esc[3] = '0';
            esc[4] = hex[c >> 4];
            esc[5] = hex[c & 15];
            el = 6;
        }
        put(o, esc, el);
        run = ++i;
    }
    put(o, s + run, n - run);
    put(o, "\"", 1);
    return 0;
}

/* -1: a value this writer leaves to jansson (a real, invalid UTF-8). */
static int put_value(struct out *o, const json_t *v, int depth)
{
    char num[32];
    if (depth > 2 * SKD_JSON_MAX_DEPTH)
        return -1;
    switch (json_typeof(v)) {
    case JSON_OBJECT: {
        put(o, "{", 1);
        int first = 1;
        /* insertion order, as json_dumps without JSON_SORT_KEYS */
        for (void *it = json_object_iter((json_t *)v); it;
             it = json_object_iter_next((json_t *)v, it)) {
            if (!first)
                put(o, ",", 1);
            first = 0;
            if (put_string(o, json_object_iter_key(it), json_object_iter_key_len(it)) ||
                (put(o, ":", 1), put_value(o, json_object_iter_value(it), depth + 1)))
                return -1;
        }
        put(o, "}", 1);
        return 0;
    }
    case JSON_ARRAY:
        put(o, "[", 1);
        for (size_t i = 0; i < json_array_size(v); i++) {
            if (i)
                put(o, ",", 1);
            if (put_value(o, json_array_get(v, i), depth + 1))
                return -1;
        }
        put(o, "]", 1);
        return 0;
    case JSON_STRING:
        return put_string(o, json_string_value(v), json_string_length(v));
    case JSON_INTEGER: {
        int k = snprintf(num, sizeof(num), "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        put(o, num, (size_t)k);
        return 0;
    }
    case JSON_TRUE:
        put(o, "true", 4);
        return 0;
    case JSON_FALSE:
        put(o, "false", 5);
        return 0;
    case JSON_NULL:
        put(o, "null", 4);
        return 0;
    default: /* JSON_REAL */
        return -1;
    }
}

char *skd_json_dump_fast(const json_t *v, size_t *len)
{
    struct out o = {0};
    *len = 0;
    if (!v)
        return NULL;
    if (put_value(&o, v, 0) != 0 || o.fail) {
        free(o.p);
        char *s = skd_json_dump(v);
        if (s)
            *len = strlen(s);
        return s;
    }
    o.p[o.n] = '\0';
    *len = o.n;
    return o.p;
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
