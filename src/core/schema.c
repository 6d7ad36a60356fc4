/*
 * JSON Schema validation for the subset agents use (see registry.h).
 *
 * No well-kept C library validates JSON Schema against jansson values, so
 * this one is ours. It is deliberately small: one recursive function over the
 * schema, bounded by the depth of the instance (itself bounded by the JSON
 * parser) and by SCHEMA_MAX_DEPTH for the schema. Error messages name the
 * JSON path of the offending value so an agent can correct its call.
 */
#include "skilld/registry.h"
#include "skilld/util.h"

#include <math.h>
#include <regex.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#define SCHEMA_MAX_DEPTH 32
#define PATH_CAP 256

static const char *type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "object";
    case JSON_ARRAY:
        return "array";
    case JSON_STRING:
        return "string";
    case JSON_INTEGER:
        return "integer";
    case JSON_REAL:
        return "number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "boolean";
    default:
        return "null";
    }
}

static int type_matches(const char *t, const json_t *v)
{
    if (strcmp(t, "number") == 0)
        return json_is_number(v);
    if (strcmp(t, "integer") == 0)
        return json_is_integer(v) ||
               (json_is_real(v) && floor(json_real_value(v)) == json_real_value(v));
    return strcmp(t, type_name(v)) == 0;
}

/* Equality as JSON Schema defines it: numbers by value (1 equals 1.0),
 * arrays and objects member by member, everything else as jansson does. */
static int schema_equal(const json_t *a, const json_t *b, int depth)
{
    if (depth > SCHEMA_MAX_DEPTH)
        return 0;
    if (json_is_number(a) && json_is_number(b)) {
        if (json_is_integer(a) && json_is_integer(b))
            return json_integer_value(a) == json_integer_value(b);
        return json_number_value(a) == json_number_value(b);
    }
    if (json_is_array(a) && json_is_array(b)) {
        if (json_array_size(a) != json_array_size(b))
            return 0;
        for (size_t i = 0; i < json_array_size(a); i++)
            if (!schema_equal(json_array_get(a, i), json_array_get(b, i), depth + 1))
                return 0;
        return 1;
    }
    if (json_is_object(a) && json_is_object(b)) {
        const char *key;
        json_t *va;
        if (json_object_size(a) != json_object_size(b))
            return 0;
        json_object_foreach ((json_t *)a, key, va) {
            json_t *vb = json_object_get(b, key);
            if (!vb || !schema_equal(va, vb, depth + 1))
                return 0;
        }
        return 1;
    }
    return json_equal(a, b);
}

#define PATTERN_MAX 256        /* bytes of one "pattern" */
#define PATTERN_MAX_QUANT 16   /* repetition operators in one "pattern" */
#define PATTERN_MAX_INTERVAL 2 /* {m,n} repetitions in one "pattern" */
#define PATTERN_MAX_BOUND 255  /* largest m or n in {m,n} */

/* Skip a bracket expression starting at p ('['); returns the pointer to its
 * closing ']', or NULL when it does not close. "[]a]", "[^]a]" and
 * "[[:alpha:]]" keep their ']' inside. */
static const char *skip_bracket(const char *p)
{
    p++;
    if (*p == '^')
        p++;
    if (*p == ']')
        p++;
    for (; *p; p++) {
        if (p[0] == '[' && (p[1] == ':' || p[1] == '.' || p[1] == '=')) {
            const char *end = strchr(p + 2, p[1]);
            while (end && end[1] != ']')
                end = strchr(end + 1, p[1]);
            if (!end)
                return NULL;
            p = end + 1;
        } else if (*p == ']') {
            return p;
        }
    }
    return NULL;
}

/* Parse "{m}", "{m,}" or "{m,n}" at p; returns the pointer to '}' or NULL
 * when malformed or a bound exceeds PATTERN_MAX_BOUND. */
static const char *skip_interval(const char *p)
{
    int bound = 0, digits = 0;
    for (p++; *p && *p != '}'; p++) {
        if (*p == ',') {
            bound = 0;
            continue;
        }
        if (*p < '0' || *p > '9')
            return NULL;
        bound = bound * 10 + (*p - '0');
        if (++digits > 3 || bound > PATTERN_MAX_BOUND)
            return NULL;
        if (p[1] == ',' || p[1] == '}')
            digits = 0;
    }
    return *p == '}' ? p : NULL;
}

/* 1 when an extended regex is outside what the validator accepts: a
 * back-reference (\1..\9, matched by backtracking), a repetition applied to
 * a repetition ("a+*", "a{2}+": undefined in POSIX; glibc compiles stacks of
 * them into automata that grow exponentially), more than PATTERN_MAX_QUANT
 * repetitions, more than PATTERN_MAX_INTERVAL counted ones or a count above
 * PATTERN_MAX_BOUND (glibc copies the repeated part that often), or more
 * than PATTERN_MAX bytes. Patterns come from skill manifests; this keeps a
 * hostile one from hanging every call. */
static int pattern_refused(const char *re)
{
    int quant = 0, intervals = 0, prev_quant = 0;
    if (strlen(re) > PATTERN_MAX)
        return 1;
    for (const char *p = re; *p; p++) {
        int q = 0;
        if (*p == '\\') {
            if (p[1] >= '1' && p[1] <= '9')
                return 1;
            if (p[1])
                p++;
        } else if (*p == '[') {
            if (!(p = skip_bracket(p)))
                return 1;
        } else if (*p == '*' || *p == '+' || *p == '?') {
            q = 1;
        } else if (*p == '{') {
            q = 1;
            if (++intervals > PATTERN_MAX_INTERVAL || !(p = skip_interval(p)))
                return 1;
        }
        if (q && (prev_quant || ++quant > PATTERN_MAX_QUANT))
            return 1;
        prev_quant = q;
    }
    return 0;
}

static size_t utf8_len(const char *s, size_t n)
{
    size_t cps = 0;
    for (size_t i = 0; i < n; i++)
        if (((unsigned char)s[i] & 0xc0) != 0x80)
            cps++;
    return cps;
}

static int fail(skd_err *err, const char *path, const char *fmt, const char *a, const char *b)
{
    char msg[SKD_ERR_MSG_MAX - PATH_CAP - 8];
    snprintf(msg, sizeof(msg), fmt, a ? a : "", b ? b : "");
    return skd_err_set(err, SKD_EINVAL, "%s: %s", path, msg);
}

static int num_fail(skd_err *err, const char *path, const char *what, double limit)
{
    char b[64];
    snprintf(b, sizeof(b), "%.17g", limit);
    return fail(err, path, "must be %s %s", what, b);
}

/* Compare instance v with bound k: <0, 0, >0. Integers compare exactly
 * (doubles lose precision past 2^53). */
static int num_cmp(const json_t *v, const json_t *k)
{
    if (json_is_integer(v) && json_is_integer(k)) {
        json_int_t a = json_integer_value(v), b = json_integer_value(k);
        return a < b ? -1 : a > b;
    }
    double a = json_number_value(v), b = json_number_value(k);
    return a < b ? -1 : a > b;
}

static int check_number(const json_t *s, const json_t *v, const char *path, skd_err *err)
{
    json_t *k;
    if ((k = json_object_get(s, "minimum")) && json_is_number(k) && num_cmp(v, k) < 0)
        return num_fail(err, path, ">=", json_number_value(k));
    if ((k = json_object_get(s, "maximum")) && json_is_number(k) && num_cmp(v, k) > 0)
        return num_fail(err, path, "<=", json_number_value(k));
    if ((k = json_object_get(s, "exclusiveMinimum")) && json_is_number(k) && num_cmp(v, k) <= 0)
        return num_fail(err, path, ">", json_number_value(k));
    if ((k = json_object_get(s, "exclusiveMaximum")) && json_is_number(k) && num_cmp(v, k) >= 0)
        return num_fail(err, path, "<", json_number_value(k));
    return 0;
}

static int check_string(const json_t *s, const json_t *v, const char *path, skd_err *err)
{
    size_t cps = utf8_len(json_string_value(v), json_string_length(v));
    json_t *k;
    char b[32];
    if ((k = json_object_get(s, "minLength")) && json_is_integer(k) &&
        (json_int_t)cps < json_integer_value(k)) {
        snprintf(b, sizeof(b), "%lld", (long long)json_integer_value(k));
        return fail(err, path, "must be at least %s characters long%s", b, "");
    }
    if ((k = json_object_get(s, "maxLength")) && json_is_integer(k) &&
        (json_int_t)cps > json_integer_value(k)) {
        snprintf(b, sizeof(b), "%lld", (long long)json_integer_value(k));
        return fail(err, path, "must be at most %s characters long%s", b, "");
    }
    if ((k = json_object_get(s, "pattern")) && json_is_string(k)) {
        regex_t re;
        if (pattern_refused(json_string_value(k)) ||
            regcomp(&re, json_string_value(k), REG_EXTENDED | REG_NOSUB) != 0)
            return fail(err, path, "schema pattern %s does not compile%s", json_string_value(k),
                        "");
        /* regexec stops at a NUL byte; a string holding one cannot match a
         * pattern meant for text, so refuse it. */
        int ok = strlen(json_string_value(v)) == json_string_length(v) &&
                 regexec(&re, json_string_value(v), 0, NULL, 0) == 0;
        regfree(&re);
        if (!ok)
            return fail(err, path, "does not match the pattern %s%s", json_string_value(k), "");
    }
    return 0;
}

static int validate(const json_t *s, const json_t *v, char *path, size_t plen, int depth,
                    skd_err *err);

static int child(const json_t *s, const json_t *v, char *path, size_t plen, int depth,
                 const char *fmt, const char *key, size_t idx, skd_err *err)
{
    size_t used = strlen(path);
    if (key)
        snprintf(path + used, plen - used, fmt, key);
    else
        snprintf(path + used, plen - used, fmt, idx);
    int rc = validate(s, v, path, plen, depth + 1, err);
    path[used] = '\0';
    return rc;
}

static int check_object(const json_t *s, const json_t *v, char *path, size_t plen, int depth,
                        skd_err *err)
{
    json_t *props = json_object_get(s, "properties");
    json_t *req = json_object_get(s, "required");
    json_t *addl = json_object_get(s, "additionalProperties");
    size_t i;
    json_t *r;
    json_array_foreach (req, i, r) {
        if (json_is_string(r) && !json_object_get(v, json_string_value(r)))
            return fail(err, path, "missing required property \"%s\"%s", json_string_value(r), "");
    }
    const char *key;
    json_t *val;
    json_object_foreach ((json_t *)v, key, val) {
        json_t *ps = json_is_object(props) ? json_object_get(props, key) : NULL;
        int rc = 0;
        if (ps)
            rc = child(ps, val, path, plen, depth, ".%s", key, 0, err);
        else if (json_is_false(addl))
            rc = fail(err, path, "unknown property \"%s\"%s", key, "");
        else if (json_is_object(addl))
            rc = child(addl, val, path, plen, depth, ".%s", key, 0, err);
        if (rc)
            return rc;
    }
    return 0;
}

static int check_array(const json_t *s, const json_t *v, char *path, size_t plen, int depth,
                       skd_err *err)
{
    json_t *k;
    char b[32];
    size_t n = json_array_size(v);
    if ((k = json_object_get(s, "minItems")) && json_is_integer(k) &&
        (json_int_t)n < json_integer_value(k)) {
        snprintf(b, sizeof(b), "%lld", (long long)json_integer_value(k));
        return fail(err, path, "must have at least %s items%s", b, "");
    }
    if ((k = json_object_get(s, "maxItems")) && json_is_integer(k) &&
        (json_int_t)n > json_integer_value(k)) {
        snprintf(b, sizeof(b), "%lld", (long long)json_integer_value(k));
        return fail(err, path, "must have at most %s items%s", b, "");
    }
    json_t *items = json_object_get(s, "items");
    if (json_is_object(items) || json_is_boolean(items)) {
        size_t i;
        json_t *e;
        json_array_foreach (v, i, e) {
            int rc = child(items, e, path, plen, depth, "[%zu]", NULL, i, err);
            if (rc)
                return rc;
        }
    }
    return 0;
}

static int check_type(const json_t *t, const json_t *v, const char *path, skd_err *err)
{
    if (json_is_string(t)) {
        if (!type_matches(json_string_value(t), v))
            return fail(err, path, "expected %s, got %s", json_string_value(t), type_name(v));
    } else if (json_is_array(t)) {
        size_t i;
        json_t *e;
        json_array_foreach (t, i, e) {
            if (json_is_string(e) && type_matches(json_string_value(e), v))
                return 0;
        }
        return fail(err, path, "has the wrong type %s%s", type_name(v), "");
    }
    return 0;
}

static int validate(const json_t *s, const json_t *v, char *path, size_t plen, int depth,
                    skd_err *err)
{
    if (depth > SCHEMA_MAX_DEPTH)
        return fail(err, path, "is nested too deeply%s%s", "", "");
    if (json_is_true(s))
        return 0;
    if (json_is_false(s))
        return fail(err, path, "is not allowed here%s%s", "", "");
    if (!json_is_object(s))
        return 0;
    int rc = check_type(json_object_get(s, "type"), v, path, err);
    if (rc)
        return rc;
    json_t *k;
    if ((k = json_object_get(s, "const")) && !schema_equal(k, v, 0))
        return fail(err, path, "must equal the constant value%s%s", "", "");
    if ((k = json_object_get(s, "enum")) && json_is_array(k)) {
        size_t i;
        json_t *e;
        int found = 0;
        json_array_foreach (k, i, e) {
            if (schema_equal(e, v, 0)) {
                found = 1;
                break;
            }
        }
        if (!found) {
            char *allowed = json_dumps(k, JSON_COMPACT);
            rc = fail(err, path, "must be one of %s%s", allowed ? allowed : "the enum", "");
            free(allowed);
            return rc;
        }
    }
    if (json_is_number(v))
        return check_number(s, v, path, err);
    if (json_is_string(v))
        return check_string(s, v, path, err);
    if (json_is_object(v))
        return check_object(s, v, path, plen, depth, err);
    if (json_is_array(v))
        return check_array(s, v, path, plen, depth, err);
    return 0;
}

int skd_schema_validate(const json_t *schema, const json_t *instance, skd_err *err)
{
    char path[PATH_CAP] = "input";
    if (!instance)
        return skd_err_set(err, SKD_EINVAL, "input is missing");
    return validate(schema, instance, path, sizeof(path), 0, err);
}

static const char *const known_types[] = {"object",  "array",   "string", "number",
                                          "integer", "boolean", "null"};

static int type_known(const json_t *t)
{
    for (size_t i = 0; json_is_string(t) && i < sizeof(known_types) / sizeof(*known_types); i++)
        if (strcmp(json_string_value(t), known_types[i]) == 0)
            return 1;
    return 0;
}

static int check_schema(const json_t *s, char *path, size_t plen, int depth, skd_err *err);

static int check_sub(const json_t *s, char *path, size_t plen, int depth, const char *suffix,
                     skd_err *err)
{
    size_t used = strlen(path);
    snprintf(path + used, plen - used, "%s", suffix);
    int rc = check_schema(s, path, plen, depth + 1, err);
    path[used] = '\0';
    return rc;
}

static int bad(skd_err *err, const char *path, const char *what)
{
    return skd_err_set(err, SKD_EINVAL, "schema %s: %s", path, what);
}

static int check_schema(const json_t *s, char *path, size_t plen, int depth, skd_err *err)
{
    if (depth > SCHEMA_MAX_DEPTH)
        return bad(err, path, "is nested too deeply");
    if (json_is_boolean(s))
        return 0;
    if (!json_is_object(s))
        return bad(err, path, "must be an object or a boolean");
    json_t *t = json_object_get(s, "type");
    if (t && !type_known(t)) {
        if (!json_is_array(t))
            return bad(err, path, "\"type\" must be a type name or an array of them");
        size_t i;
        json_t *e;
        json_array_foreach (t, i, e) {
            if (!type_known(e))
                return bad(err, path, "\"type\" holds an unknown type name");
        }
    }
    static const char *const ints[] = {"minLength", "maxLength", "minItems", "maxItems"};
    for (size_t i = 0; i < 4; i++) {
        json_t *k = json_object_get(s, ints[i]);
        if (k && (!json_is_integer(k) || json_integer_value(k) < 0))
            return bad(err, path, "minLength/maxLength/minItems/maxItems must be integers >= 0");
    }
    static const char *const nums[] = {"minimum", "maximum", "exclusiveMinimum",
                                       "exclusiveMaximum"};
    for (size_t i = 0; i < 4; i++) {
        json_t *k = json_object_get(s, nums[i]);
        if (k && !json_is_number(k))
            return bad(err, path, "minimum/maximum must be numbers");
    }
    json_t *k = json_object_get(s, "enum");
    if (k && !json_is_array(k))
        return bad(err, path, "\"enum\" must be an array");
    k = json_object_get(s, "required");
    if (k) {
        size_t i;
        json_t *e;
        if (!json_is_array(k))
            return bad(err, path, "\"required\" must be an array of strings");
        json_array_foreach (k, i, e) {
            if (!json_is_string(e))
                return bad(err, path, "\"required\" must be an array of strings");
        }
    }
    k = json_object_get(s, "pattern");
    if (k) {
        regex_t re;
        if (!json_is_string(k) || pattern_refused(json_string_value(k)) ||
            regcomp(&re, json_string_value(k), REG_EXTENDED | REG_NOSUB))
            return bad(err, path,
                       "\"pattern\" must be a valid extended regular expression of at "
                       "most 256 bytes, 16 repetitions and 2 counted ones up to 255, "
                       "without back-references or repeated repetitions");
        regfree(&re);
    }
    k = json_object_get(s, "properties");
    if (k) {
        const char *key;
        json_t *ps;
        if (!json_is_object(k))
            return bad(err, path, "\"properties\" must be an object");
        json_object_foreach (k, key, ps) {
            char suffix[96];
            snprintf(suffix, sizeof(suffix), ".properties.%.64s", key);
            int rc = check_sub(ps, path, plen, depth, suffix, err);
            if (rc)
                return rc;
        }
    }
    k = json_object_get(s, "additionalProperties");
    if (k && !json_is_boolean(k)) {
        int rc = check_sub(k, path, plen, depth, ".additionalProperties", err);
        if (rc)
            return rc;
    }
    k = json_object_get(s, "items");
    if (k) {
        int rc = check_sub(k, path, plen, depth, ".items", err);
        if (rc)
            return rc;
    }
    return 0;
}

int skd_schema_check(const json_t *schema, skd_err *err)
{
    char path[PATH_CAP] = "$";
    return check_schema(schema, path, sizeof(path), 0, err);
}
