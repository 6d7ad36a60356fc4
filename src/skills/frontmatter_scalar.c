/*
 * The scalars of SKILL.md front matter (see frontmatter.c): plain scalars
 * typed by the YAML 1.2 core schema, single- and double-quoted scalars on
 * one line, "key:" detection, one-line flow sequences of scalars. Bounded
 * by the caller's input; nothing here recurses.
 */
#include "skills/frontmatter.h"

#include "skilld/buf.h"
#include "skilld/util.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define SAFE_INT 9007199254740992LL /* 2^53 */

int skd__fm_fail(struct parser *p, int no, const char *msg)
{
    return skd_err_set(p->err, SKD_EINVAL, "SKILL.md line %d: %s", no, msg);
}

int skd__fm_is_ws(char c)
{
    return c == ' ' || c == '\t';
}

char *skd__fm_skip_ws(char *s)
{
    while (skd__fm_is_ws(*s))
        s++;
    return s;
}

void skd__fm_trim_end(char *s)
{
    size_t n = strlen(s);
    while (n && skd__fm_is_ws(s[n - 1]))
        s[--n] = '\0';
}

/* ---- scalars -------------------------------------------------------- */

static int all_digits(const char *s, const char *set)
{
    if (!*s)
        return 0;
    for (; *s; s++)
        if (!strchr(set, *s))
            return 0;
    return 1;
}

/* [+-]?(\.\d+|\d+(\.\d*)?)([eE][+-]?\d+)? */
static int is_float(const char *s)
{
    if (*s == '+' || *s == '-')
        s++;
    int digits = 0;
    while (*s >= '0' && *s <= '9')
        s++, digits++;
    if (*s == '.') {
        s++;
        int frac = 0;
        while (*s >= '0' && *s <= '9')
            s++, frac++;
        if (!digits && !frac)
            return 0;
    } else if (!digits) {
        return 0;
    }
    if (*s == 'e' || *s == 'E') {
        s++;
        if (*s == '+' || *s == '-')
            s++;
        if (!(*s >= '0' && *s <= '9'))
            return 0;
        while (*s >= '0' && *s <= '9')
            s++;
    }
    return *s == '\0';
}

static int one_of(const char *s, const char *a, const char *b, const char *c)
{
    return strcmp(s, a) == 0 || strcmp(s, b) == 0 || strcmp(s, c) == 0;
}

/* The core-schema value of a plain scalar. New reference in *out. */
int skd__fm_resolve_plain(struct parser *p, int no, const char *s, json_t **out)
{
    *out = NULL;
    if (!*s || strcmp(s, "~") == 0 || one_of(s, "null", "Null", "NULL")) {
        *out = json_null();
        return 0;
    }
    if (one_of(s, "true", "True", "TRUE") || one_of(s, "false", "False", "FALSE")) {
        *out = json_boolean(s[0] == 't' || s[0] == 'T');
        return 0;
    }
    const char *u = (*s == '+' || *s == '-') ? s + 1 : s;
    int base = 0;
    const char *digits = NULL;
    if (all_digits(u, "0123456789")) {
        base = 10;
        digits = s;
    } else if (strncmp(s, "0o", 2) == 0 && all_digits(s + 2, "01234567")) {
        base = 8;
        digits = s + 2;
    } else if (strncmp(s, "0x", 2) == 0 && all_digits(s + 2, "0123456789abcdefABCDEF")) {
        base = 16;
        digits = s + 2;
    }
    if (base) {
        errno = 0;
        long long v = strtoll(digits, NULL, base);
        if (errno || v > SAFE_INT || v < -SAFE_INT)
            return skd__fm_fail(
                p, no, "an integer this large cannot be represented exactly in JSON; quote it");
        *out = json_integer(v);
        return *out ? 0 : skd_err_set(p->err, SKD_ENOMEM, "out of memory");
    }
    if (is_float(s)) {
        double d = strtod(s, NULL);
        if (!isfinite(d))
            return skd__fm_fail(p, no,
                                "a number this large cannot be represented in JSON; quote it");
        *out = json_real(d);
        return *out ? 0 : skd_err_set(p->err, SKD_ENOMEM, "out of memory");
    }
    static const char *const special[] = {".inf",  ".Inf",  ".INF",  "+.inf", "+.Inf", "+.INF",
                                          "-.inf", "-.Inf", "-.INF", ".nan",  ".NaN",  ".NAN"};
    for (size_t i = 0; i < sizeof(special) / sizeof(special[0]); i++)
        if (strcmp(s, special[i]) == 0)
            return skd__fm_fail(p, no,
                                "infinity and NaN cannot be represented in JSON; quote them");
    *out = json_string(s);
    return *out ? 0 : skd_err_set(p->err, SKD_ENOMEM, "out of memory");
}

static int put_utf8(skd_buf *b, unsigned long cp)
{
    char u[4];
    size_t n;
    if (cp < 0x80) {
        u[0] = (char)cp;
        n = 1;
    } else if (cp < 0x800) {
        u[0] = (char)(0xc0 | (cp >> 6));
        u[1] = (char)(0x80 | (cp & 0x3f));
        n = 2;
    } else if (cp < 0x10000) {
        u[0] = (char)(0xe0 | (cp >> 12));
        u[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        u[2] = (char)(0x80 | (cp & 0x3f));
        n = 3;
    } else {
        u[0] = (char)(0xf0 | (cp >> 18));
        u[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
        u[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
        u[3] = (char)(0x80 | (cp & 0x3f));
        n = 4;
    }
    return skd_buf_append(b, u, n);
}

/* One escape after a backslash in a double-quoted scalar; *s points past
 * the backslash and is advanced. */
static int escape(struct parser *p, int no, const char **s, skd_buf *b)
{
    /* Pairs: the character after the backslash, then what it stands for. */
    static const char simple[] = "a\a"
                                 "b\b"
                                 "t\t"
                                 "\t\t"
                                 "n\n"
                                 "v\v"
                                 "f\f"
                                 "r\r"
                                 "e\033"
                                 "  "
                                 "\"\""
                                 "//"
                                 "\\\\";
    char c = **s;
    if (!c)
        return skd__fm_fail(p, no, "a quoted value must close on the same line");
    for (size_t i = 0; simple[i]; i += 2) {
        if (simple[i] == c) {
            (*s)++;
            return skd_buf_append(b, &simple[i + 1], 1);
        }
    }
    unsigned long cp = 0;
    int width = c == 'x' ? 2 : c == 'u' ? 4 : c == 'U' ? 8 : 0;
    if (c == 'N')
        cp = 0x85;
    else if (c == '_')
        cp = 0xa0;
    else if (c == 'L')
        cp = 0x2028;
    else if (c == 'P')
        cp = 0x2029;
    else if (!width)
        return skd__fm_fail(p, no,
                            "unknown escape in a double-quoted value (\\0 is not supported)");
    (*s)++;
    for (int i = 0; i < width; i++, (*s)++) {
        char h = **s;
        int v = h >= '0' && h <= '9'   ? h - '0'
                : h >= 'a' && h <= 'f' ? h - 'a' + 10
                : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                       : -1;
        if (v < 0)
            return skd__fm_fail(p, no, "invalid hexadecimal escape");
        cp = cp * 16 + (unsigned long)v;
    }
    if (width && (cp == 0 || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)))
        return skd__fm_fail(p, no, "the escape names no character JSON can hold");
    return put_utf8(b, cp);
}

/* A quoted scalar at s (the quote); *end receives what follows it. */
int skd__fm_read_quoted(struct parser *p, int no, char *s, json_t **out, char **end)
{
    char q = *s++;
    skd_buf b;
    int rc = 0;
    skd_buf_init(&b, SKD_SKILL_MD_MAX_BYTES);
    *out = NULL;
    for (;;) {
        if (!*s) {
            rc =
                skd__fm_fail(p, no,
                             "a quoted value must close on the same line (multi-line quoted values "
                             "are not supported)");
            break;
        }
        if (*s == q && q == '\'' && s[1] == '\'') {
            rc = skd_buf_append(&b, "'", 1);
            s += 2;
        } else if (*s == q) {
            *end = s + 1;
            *out = json_stringn(b.data ? b.data : "", b.len);
            rc = *out ? 0 : skd_err_set(p->err, SKD_ENOMEM, "out of memory");
            break;
        } else if (*s == '\\' && q == '"') {
            const char *c = s + 1;
            rc = escape(p, no, &c, &b);
            s = (char *)c;
        } else {
            rc = skd_buf_append(&b, s++, 1);
        }
        if (rc)
            break;
    }
    skd_buf_free(&b);
    return rc;
}

/* After a value only a comment may follow. */
int skd__fm_only_comment(struct parser *p, int no, const char *after)
{
    const char *t = after;
    while (skd__fm_is_ws(*t))
        t++;
    if (!*t || (t != after && *t == '#'))
        return 0;
    return skd__fm_fail(p, no, "unexpected text after the value");
}

/* Cut a " #" comment off s (in place) and trim; returns 1 when one was cut. */
int skd__fm_strip_comment(char *s)
{
    int cut = 0;
    for (char *c = s + 1; *s && *c; c++) {
        if (*c == '#' && skd__fm_is_ws(c[-1])) {
            *c = '\0';
            cut = 1;
            break;
        }
    }
    skd__fm_trim_end(s);
    return cut;
}

int skd__fm_plain_ok(struct parser *p, int no, const char *s)
{
    for (const char *c = strchr(s, ':'); c; c = strchr(c + 1, ':'))
        if (c[1] == '\0' || skd__fm_is_ws(c[1]))
            return skd__fm_fail(p, no, "a plain value cannot contain \": \"; quote the value");
    return 0;
}

/* ---- keys ------------------------------------------------------------ */

/* Match "key: rest" on text. Returns 1 with a new string in *key and *rest
 * pointing into text, 0 when text is no key line, or a negative code. */
int skd__fm_match_key(struct parser *p, int no, char *text, json_t **key, char **rest)
{
    *key = NULL;
    char c = text[0];
    if (c == '"' || c == '\'') {
        char *end = NULL;
        json_t *k = NULL;
        int rc = skd__fm_read_quoted(p, no, text, &k, &end);
        if (rc)
            return rc;
        if (end[0] != ':' || (end[1] && !skd__fm_is_ws(end[1]))) {
            json_decref(k);
            return 0;
        }
        *key = k;
        *rest = skd__fm_skip_ws(end + 1);
    } else {
        if (c == '?')
            return skd__fm_fail(p, no, "complex keys (\"?\") are not supported");
        if (!c || strchr("[]{}&*!|>%@`#,", c))
            return 0;
        char *colon = NULL;
        for (char *s = text; *s; s++) {
            if (*s == '#' && s > text && skd__fm_is_ws(s[-1]))
                return 0;
            if (*s == ':' && (s[1] == '\0' || skd__fm_is_ws(s[1]))) {
                colon = s;
                break;
            }
        }
        if (!colon)
            return 0;
        char *after = colon + 1;
        *colon = '\0';
        skd__fm_trim_end(text);
        if (!*text)
            return 0;
        json_t *typed = NULL;
        int rc = skd__fm_resolve_plain(p, no, text, &typed);
        if (rc)
            return rc;
        int is_str = json_is_string(typed);
        json_decref(typed);
        if (!is_str)
            return skd__fm_fail(p, no, "a key must be a string; quote it");
        *key = json_string(text);
        *rest = skd__fm_skip_ws(after);
    }
    if (!*key)
        return skd_err_set(p->err, SKD_ENOMEM, "out of memory");
    if (strcmp(json_string_value(*key), "__proto__") == 0) {
        json_decref(*key);
        *key = NULL;
        return skd__fm_fail(p, no, "the key \"__proto__\" is not supported");
    }
    return 1;
}

/* Whether text starts a key line, without consuming anything. */
int skd__fm_looks_like_key(struct parser *p, const struct line *l)
{
    char tmp[256];
    if (skd_strlcpy(tmp, l->text, sizeof(tmp)) != 0) {
        /* long line: a key must still be near the start */
        memcpy(tmp, l->text, sizeof(tmp) - 1);
        tmp[sizeof(tmp) - 1] = '\0';
    }
    json_t *k = NULL;
    char *rest = NULL;
    skd_err saved = *p->err;
    int r = skd__fm_match_key(p, l->no, tmp, &k, &rest);
    json_decref(k);
    *p->err = saved; /* the real parse reports errors */
    return r == 1;
}

/* A one-line flow sequence of scalars at s ('['). */
int skd__fm_read_flow_seq(struct parser *p, int no, char *s, json_t **out, char **end)
{
    json_t *arr = json_array();
    int rc = 0;
    if (!arr)
        return skd_err_set(p->err, SKD_ENOMEM, "out of memory");
    s = skd__fm_skip_ws(s + 1);
    if (*s == ']') {
        *end = s + 1;
        *out = arr;
        return 0;
    }
    for (;;) {
        json_t *item = NULL;
        s = skd__fm_skip_ws(s);
        if (!*s) {
            rc = skd__fm_fail(p, no, "a flow collection must close on the same line");
            break;
        }
        if (*s == '[' || *s == '{') {
            rc = skd__fm_fail(p, no, "nested flow collections are not supported");
            break;
        }
        if (*s == '"' || *s == '\'') {
            if ((rc = skd__fm_read_quoted(p, no, s, &item, &s)) != 0)
                break;
        } else {
            if (strchr("&*!", *s)) {
                rc = skd__fm_fail(p, no, "anchors, aliases and tags are not supported");
                break;
            }
            if (strchr("|>%@`#", *s) ||
                (strchr("-?:", *s) && (!s[1] || strchr(" \t,[]{}", s[1])))) {
                rc = skd__fm_fail(p, no,
                                  "this character cannot start a plain value in a flow "
                                  "collection; quote it");
                break;
            }
            char *e = s;
            while (*e && !strchr(",[]{}", *e) && !(*e == '#' && skd__fm_is_ws(e[-1])) &&
                   !(*e == ':' && (!e[1] || strchr(" \t,[]{}", e[1]))))
                e++;
            if (*e == ':') {
                rc = skd__fm_fail(p, no, "mappings inside flow collections are not supported");
                break;
            }
            char save = *e;
            *e = '\0';
            skd__fm_trim_end(s);
            if (!*s) {
                *e = save;
                rc = skd__fm_fail(p, no, "empty value in a flow collection");
                break;
            }
            rc = skd__fm_resolve_plain(p, no, s, &item);
            *e = save;
            s = e;
            if (rc)
                break;
        }
        if (json_array_append_new(arr, item)) {
            rc = skd_err_set(p->err, SKD_ENOMEM, "out of memory");
            break;
        }
        s = skd__fm_skip_ws(s);
        if (*s == ',') {
            s = skd__fm_skip_ws(s + 1);
            if (*s == ']') {
                *end = s + 1;
                break;
            }
            continue;
        }
        if (*s == ']') {
            *end = s + 1;
            break;
        }
        rc = skd__fm_fail(p, no,
                          *s ? "unexpected character in a flow collection"
                             : "a flow collection must close on the same line");
        break;
    }
    if (rc) {
        json_decref(arr);
        return rc;
    }
    *out = arr;
    return 0;
}
