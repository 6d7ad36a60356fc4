/*
 * JSON helpers over jansson: bounded parsing, typed getters with defaults,
 * and the skill result shapes ({"success": true, ...} and
 * {"success": false, "error": {"code", "message"}}).
 */
#ifndef SKILLD_JSON_H
#define SKILLD_JSON_H

#include <jansson.h>
#include <stddef.h>

#include "skilld/error.h"

/* Nesting deeper than this is refused by skd_json_parse. */
#define SKD_JSON_MAX_DEPTH 64

/* Parse len bytes of JSON (any value). Rejects invalid UTF-8, duplicate
 * keys, NUL bytes in strings and nesting deeper than SKD_JSON_MAX_DEPTH.
 * Returns a new reference (caller json_decref) or NULL with err set to
 * SKD_EINVAL and a message naming the line and column. */
json_t *skd_json_parse(const char *data, size_t len, skd_err *err);

/* Compact serialisation. Returns a malloc'd string (caller frees) or NULL. */
char *skd_json_dump(const json_t *v);
/* The same bytes as skd_json_dump, written without jansson's per code point
 * string encoder (a reply's 1 KiB of file content cost it ~10 us); *len
 * gets the length. Values jansson would format itself (reals) or refuse
 * (a string that is not UTF-8) go through skd_json_dump. */
char *skd_json_dump_fast(const json_t *v, size_t *len);

/* Depth of a JSON value (a scalar is 1). */
size_t skd_json_depth(const json_t *v);

/* Typed getters. Each returns def when obj is not an object, key is absent or
 * null, or the value has another type. The string is borrowed from obj. */
const char *skd_json_str(const json_t *obj, const char *key, const char *def);
long long skd_json_int(const json_t *obj, const char *key, long long def);
int skd_json_bool(const json_t *obj, const char *key, int def);

/* {"success": true}. New reference. */
json_t *skd_result_ok(void);

/* {"success": false, "error": {"code": skd_errcode(code), "message": ...}}.
 * New reference; never NULL unless out of memory. */
json_t *skd_result_error(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The same built from err (code 0 becomes internal_error). */
json_t *skd_result_from_err(const skd_err *err);

/* 1 when result is an object whose "success" is true. */
int skd_result_success(const json_t *result);

/* The error code string of a failed result, or NULL. Borrowed. */
const char *skd_result_code(const json_t *result);

#endif
