/*
 * Library-internal: the YAML front matter of SKILL.md as JSON, read the way
 * a YAML 1.2 core-schema parser reads it (see frontmatter.c for the subset).
 */
#ifndef SKILLD_LIB_FRONTMATTER_H
#define SKILLD_LIB_FRONTMATTER_H

#include "skilld/custom.h"
#include "skilld/error.h"

#include <jansson.h>
#include <stddef.h>

/* Parse the front matter of SKILL.md (len bytes, at most
 * SKD_SKILL_MD_MAX_BYTES, need not be NUL-terminated; valid UTF-8 without
 * NUL; CRLF read as LF) into *out, a new JSON object. Anything outside the
 * subset is SKD_EINVAL with "SKILL.md line N: why". */
int skd__frontmatter_parse(const char *md, size_t len, json_t **out, skd_err *err);

#endif
