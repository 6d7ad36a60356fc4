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

/* Shared by frontmatter.c (blocks, the document) and frontmatter_scalar.c
 * (scalars, keys, flow sequences). */
struct line {
    char *raw;  /* NUL-terminated, no newline */
    char *text; /* raw after its leading spaces and tabs */
    int indent; /* leading spaces only: a tab ends the indentation */
    int no;     /* line number in SKILL.md */
};

struct parser {
    struct line *lines;
    size_t n, i;
    skd_err *err;
};

/* SKD_EINVAL with "SKILL.md line no: msg". */
int skd__fm_fail(struct parser *p, int no, const char *msg);
int skd__fm_is_ws(char c);
char *skd__fm_skip_ws(char *s);
void skd__fm_trim_end(char *s);
/* The core-schema value of a plain scalar s. New reference in *out. */
int skd__fm_resolve_plain(struct parser *p, int no, const char *s, json_t **out);
/* A quoted scalar at s (the quote); *end receives what follows it. */
int skd__fm_read_quoted(struct parser *p, int no, char *s, json_t **out, char **end);
/* A one-line flow sequence of scalars at s ('['). */
int skd__fm_read_flow_seq(struct parser *p, int no, char *s, json_t **out, char **end);
/* After a value only a comment may follow. */
int skd__fm_only_comment(struct parser *p, int no, const char *after);
/* Cut a " #" comment off s (in place) and trim; 1 when one was cut. */
int skd__fm_strip_comment(char *s);
/* A plain value may not hold ": ". */
int skd__fm_plain_ok(struct parser *p, int no, const char *s);
/* Match "key: rest" on text: 1 with a new string in *key and *rest into
 * text (which is changed), 0 when text is no key line, or SKD_E*. */
int skd__fm_match_key(struct parser *p, int no, char *text, json_t **key, char **rest);
/* Whether line l starts with a key, without consuming anything. */
int skd__fm_looks_like_key(struct parser *p, const struct line *l);

#define SKD__FM_MAX_DEPTH 8

#endif
