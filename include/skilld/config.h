/*
 * Configuration. Every setting has one name, the environment variable that
 * sets it (OmniRoute's names where it has one), a type, a default and a line
 * of help; the table lives in src/core/config.c.
 *
 * Precedence, highest first: command-line flags (skd_config_set), the
 * environment, an optional config file (NAME=value lines, '#' comments), the
 * embedded default. Values are validated when set, so a bad value is an error
 * at start-up, never a surprise later.
 */
#ifndef SKILLD_CONFIG_H
#define SKILLD_CONFIG_H

#include <stdint.h>
#include <stdio.h>

#include "skilld/error.h"

typedef struct skd_config skd_config;

/* New configuration holding the defaults. Caller frees with skd_config_free. */
skd_config *skd_config_new(void);
void skd_config_free(skd_config *cfg);

/* Read NAME=value lines from path. Unknown names and bad values are errors
 * (SKD_ECONFIG, message with the line number). */
int skd_config_load_file(skd_config *cfg, const char *path, skd_err *err);

/* Take every known name from the environment. */
int skd_config_load_env(skd_config *cfg, skd_err *err);

/* Set one value by name (as a flag would). Validates it. */
int skd_config_set(skd_config *cfg, const char *name, const char *value, skd_err *err);

/* Typed getters. The name must be in the table (a programmer error
 * otherwise: the process aborts). Strings are borrowed from cfg. */
const char *skd_config_str(const skd_config *cfg, const char *name);
int64_t skd_config_int(const skd_config *cfg, const char *name);
int skd_config_bool(const skd_config *cfg, const char *name);

/* Print every setting with its value and help (secrets masked). */
void skd_config_dump(const skd_config *cfg, FILE *out);

#endif
