/*
 * Pieces shared by the four file skills (file_read, file_write, file_list,
 * file_delete): taking the client path out of the input, the configured
 * limits, base64 and schema literals. Library-internal.
 */
#ifndef SKILLD_BUILTINS_FILESKILL_H
#define SKILLD_BUILTINS_FILESKILL_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "skilld/skilld.h"

/* The "path" member of input, checked with skd_workspace_check_pathn (so a
 * NUL carried by a JSON \u0000 is refused). When absent and allow_root, "."
 * is used. *path is borrowed from input (or static). */
int skd__file_path(const json_t *input, int allow_root, const char **path, skd_err *err);

/* SKILLS_MAX_FILE_BYTES and SKILLS_WORKSPACE_QUOTA_BYTES of the call's engine. */
uint64_t skd__file_max_bytes(const skd_ctx *ctx);
uint64_t skd__file_quota_bytes(const skd_ctx *ctx);

/* A non-negative integer member (JSON 5 and 5.0 alike; the schema has
 * already checked type and minimum). Returns def when absent. */
uint64_t skd__file_uint(const json_t *input, const char *key, uint64_t def);

/* Standard base64 (RFC 4648, with padding) of n bytes. Returns a malloc'd
 * NUL-terminated string (caller frees) with *outlen set, or NULL when out
 * of memory. */
char *skd__base64_encode(const unsigned char *in, size_t n, size_t *outlen);

/* Decode strict base64 (no whitespace; padding required). The decoded size
 * may not exceed max (SKD_ETOOBIG). Returns 0 with *out malloc'd (caller
 * frees), or SKD_EINVAL / SKD_ETOOBIG / SKD_ENOMEM. */
int skd__base64_decode(const char *in, size_t n, size_t max, unsigned char **out, size_t *outlen,
                       skd_err *err);

/* Parse a schema literal compiled into the library. Returns a new
 * reference; a literal that does not parse is a programmer error (abort). */
json_t *skd__file_schema(const char *text);

#endif
