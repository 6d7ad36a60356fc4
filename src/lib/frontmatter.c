/*
 * The YAML front matter of SKILL.md, read into JSON.
 *
 * MCP hosts verify a skill by parsing SKILL.md themselves and comparing the
 * result with the `frontmatter` object the server listed, field by field.
 * So this reader must give exactly the value a YAML 1.2 core-schema parser
 * gives, or refuse the file: a value read differently would make every host
 * reject the skill. We read the subset skill files use and refuse the rest
 * with the line number:
 *
 *   - block mappings (nested ones too) and block sequences of scalars;
 *   - plain scalars, single- and double-quoted scalars on one line, block
 *     scalars `|` and `>` with chomping `-`/`+`, plain values continued on
 *     more-indented lines;
 *   - one-line flow sequences of scalars `[a, "b"]`;
 *   - `#` comments.
 *
 * Typing is the core schema's: null, booleans, integers (decimal, 0o, 0x),
 * floats; everything else is a string. Numbers JSON cannot carry exactly
 * (inf, nan, integers past 2^53) are refused: quote them. Refused outright:
 * anchors, aliases, tags, flow mappings, complex keys, nested collections
 * inside sequences, multi-line quoted scalars, tab indentation, a key
 * "__proto__", duplicate keys, nesting deeper than MAX_DEPTH.
 *
 * Input is bounded by the caller (SKD_SKILL_MD_MAX_BYTES); nothing here
 * recurses deeper than MAX_DEPTH.
 */
#include "lib/frontmatter.h"

#include "skilld/buf.h"
#include "skilld/util.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 8
#define MAX_LINES 4096
#define SAFE_INT 9007199254740992LL /* 2^53 */

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

static int fail(struct parser *p, int no, const char *msg)
{
    return skd_err_set(p->err, SKD_EINVAL, "SKILL.md line %d: %s", no, msg);
}

static int is_ws(char c)
{
    return c == ' ' || c == '\t';
}

static char *skip_ws(char *s)
{
    while (is_ws(*s))
        s++;
    return s;
}

static void trim_end(char *s)
{
    size_t n = strlen(s);
    while (n && is_ws(s[n - 1]))
        s[--n] = '\0';
}

static int skippable(const struct line *l)
{
    return l->text[0] == '\0' || l->text[0] == '#';
}

static int tab_indented(const struct line *l)
{
    return l->raw[l->indent] == '\t';
}

static int seq_item(const char *t)
{
    return t[0] == '-' && (t[1] == '\0' || is_ws(t[1]));
}

/* The next line with content, or NULL. */
static struct line *peek(struct parser *p, int *rc)
{
    while (p->i < p->n && skippable(&p->lines[p->i]))
        p->i++;
    if (p->i >= p->n)
        return NULL;
    struct line *l = &p->lines[p->i];
    if (tab_indented(l)) {
        *rc = fail(p, l->no, "tabs cannot be used for indentation");
        return NULL;
    }
    return l;
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
static int resolve_plain(struct parser *p, int no, const char *s, json_t **out)
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
            return fail(p, no,
                        "an integer this large cannot be represented exactly in JSON; quote it");
        *out = json_integer(v);
        return *out ? 0 : skd_err_set(p->err, SKD_ENOMEM, "out of memory");
    }
    if (is_float(s)) {
        double d = strtod(s, NULL);
        if (!isfinite(d))
            return fail(p, no, "a number this large cannot be represented in JSON; quote it");
        *out = json_real(d);
        return *out ? 0 : skd_err_set(p->err, SKD_ENOMEM, "out of memory");
    }
    static const char *const special[] = {".inf",  ".Inf",  ".INF",  "+.inf", "+.Inf", "+.INF",
                                          "-.inf", "-.Inf", "-.INF", ".nan",  ".NaN",  ".NAN"};
    for (size_t i = 0; i < sizeof(special) / sizeof(special[0]); i++)
        if (strcmp(s, special[i]) == 0)
            return fail(p, no, "infinity and NaN cannot be represented in JSON; quote them");
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
        return fail(p, no, "a quoted value must close on the same line");
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
        return fail(p, no, "unknown escape in a double-quoted value (\\0 is not supported)");
    (*s)++;
    for (int i = 0; i < width; i++, (*s)++) {
        char h = **s;
        int v = h >= '0' && h <= '9'   ? h - '0'
                : h >= 'a' && h <= 'f' ? h - 'a' + 10
                : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                       : -1;
        if (v < 0)
            return fail(p, no, "invalid hexadecimal escape");
        cp = cp * 16 + (unsigned long)v;
    }
    if (width && (cp == 0 || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)))
        return fail(p, no, "the escape names no character JSON can hold");
    return put_utf8(b, cp);
}

/* A quoted scalar at s (the quote); *end receives what follows it. */
static int read_quoted(struct parser *p, int no, char *s, json_t **out, char **end)
{
    char q = *s++;
    skd_buf b;
    int rc = 0;
    skd_buf_init(&b, SKD_SKILL_MD_MAX_BYTES);
    *out = NULL;
    for (;;) {
        if (!*s) {
            rc = fail(p, no,
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
static int only_comment(struct parser *p, int no, const char *after)
{
    const char *t = after;
    while (is_ws(*t))
        t++;
    if (!*t || (t != after && *t == '#'))
        return 0;
    return fail(p, no, "unexpected text after the value");
}

/* Cut a " #" comment off s (in place) and trim; returns 1 when one was cut. */
static int strip_comment(char *s)
{
    int cut = 0;
    for (char *c = s + 1; *s && *c; c++) {
        if (*c == '#' && is_ws(c[-1])) {
            *c = '\0';
            cut = 1;
            break;
        }
    }
    trim_end(s);
    return cut;
}

static int plain_ok(struct parser *p, int no, const char *s)
{
    for (const char *c = strchr(s, ':'); c; c = strchr(c + 1, ':'))
        if (c[1] == '\0' || is_ws(c[1]))
            return fail(p, no, "a plain value cannot contain \": \"; quote the value");
    return 0;
}

/* ---- keys ------------------------------------------------------------ */

/* Match "key: rest" on text. Returns 1 with a new string in *key and *rest
 * pointing into text, 0 when text is no key line, or a negative code. */
static int match_key(struct parser *p, int no, char *text, json_t **key, char **rest)
{
    *key = NULL;
    char c = text[0];
    if (c == '"' || c == '\'') {
        char *end = NULL;
        json_t *k = NULL;
        int rc = read_quoted(p, no, text, &k, &end);
        if (rc)
            return rc;
        if (end[0] != ':' || (end[1] && !is_ws(end[1]))) {
            json_decref(k);
            return 0;
        }
        *key = k;
        *rest = skip_ws(end + 1);
    } else {
        if (c == '?')
            return fail(p, no, "complex keys (\"?\") are not supported");
        if (!c || strchr("[]{}&*!|>%@`#,", c))
            return 0;
        char *colon = NULL;
        for (char *s = text; *s; s++) {
            if (*s == '#' && s > text && is_ws(s[-1]))
                return 0;
            if (*s == ':' && (s[1] == '\0' || is_ws(s[1]))) {
                colon = s;
                break;
            }
        }
        if (!colon)
            return 0;
        char *after = colon + 1;
        *colon = '\0';
        trim_end(text);
        if (!*text)
            return 0;
        json_t *typed = NULL;
        int rc = resolve_plain(p, no, text, &typed);
        if (rc)
            return rc;
        int is_str = json_is_string(typed);
        json_decref(typed);
        if (!is_str)
            return fail(p, no, "a key must be a string; quote it");
        *key = json_string(text);
        *rest = skip_ws(after);
    }
    if (!*key)
        return skd_err_set(p->err, SKD_ENOMEM, "out of memory");
    if (strcmp(json_string_value(*key), "__proto__") == 0) {
        json_decref(*key);
        *key = NULL;
        return fail(p, no, "the key \"__proto__\" is not supported");
    }
    return 1;
}

/* Whether text starts a key line, without consuming anything. */
static int looks_like_key(struct parser *p, const struct line *l)
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
    int r = match_key(p, l->no, tmp, &k, &rest);
    json_decref(k);
    *p->err = saved; /* the real parse reports errors */
    return r == 1;
}

/* ---- block structure ------------------------------------------------- */

static int parse_value(struct parser *p, char *rest, struct line *l, int parent, int depth,
                       int compact_seq, json_t **out);

static int parse_mapping(struct parser *p, int indent, int depth, json_t **out)
{
    int rc = 0;
    if (depth > MAX_DEPTH)
        return fail(p, p->i < p->n ? p->lines[p->i].no : 0, "nesting is too deep");
    json_t *map = json_object();
    if (!map)
        return skd_err_set(p->err, SKD_ENOMEM, "out of memory");
    struct line *l;
    while ((l = peek(p, &rc)) != NULL && l->indent >= indent) {
        if (l->indent > indent) {
            rc = fail(p, l->no, "unexpected indentation");
            break;
        }
        if (seq_item(l->text))
            break;
        json_t *key = NULL, *val = NULL;
        char *rest = NULL;
        int m = match_key(p, l->no, l->text, &key, &rest);
        if (m <= 0) {
            rc = m < 0 ? m : fail(p, l->no, "expected \"key: value\"");
            break;
        }
        if (json_object_get(map, json_string_value(key))) {
            rc = fail(p, l->no, "duplicate key");
            json_decref(key);
            break;
        }
        p->i++;
        rc = parse_value(p, rest, l, indent, depth + 1, 1, &val);
        if (rc == 0)
            rc = json_object_set_new(map, json_string_value(key), val) ? SKD_ENOMEM : 0;
        json_decref(key);
        if (rc)
            break;
    }
    if (rc) {
        json_decref(map);
        return rc;
    }
    *out = map;
    return 0;
}

static int parse_sequence(struct parser *p, int indent, int depth, json_t **out)
{
    int rc = 0;
    if (depth > MAX_DEPTH)
        return fail(p, p->i < p->n ? p->lines[p->i].no : 0, "nesting is too deep");
    json_t *arr = json_array();
    if (!arr)
        return skd_err_set(p->err, SKD_ENOMEM, "out of memory");
    struct line *l;
    while ((l = peek(p, &rc)) != NULL && l->indent >= indent) {
        if (l->indent > indent) {
            rc = fail(p, l->no, "unexpected indentation");
            break;
        }
        if (!seq_item(l->text))
            break;
        char *rest = skip_ws(l->text + 1);
        if (*rest && *rest != '#' &&
            (seq_item(rest) || looks_like_key(p, l + 0) ||
             (rest[0] != '"' && rest[0] != '\'' && strstr(rest, ": ")))) {
            rc = fail(p, l->no, "collections inside a sequence are not supported");
            break;
        }
        p->i++;
        json_t *val = NULL;
        if ((rc = parse_value(p, rest, l, indent, depth + 1, 0, &val)) != 0)
            break;
        if (json_array_append_new(arr, val)) {
            rc = skd_err_set(p->err, SKD_ENOMEM, "out of memory");
            break;
        }
    }
    if (rc) {
        json_decref(arr);
        return rc;
    }
    *out = arr;
    return 0;
}

/* Join block scalar lines as YAML does (folding for '>'). */
static int fold_block(char **contents, size_t n, int folded, char chomp, skd_buf *b)
{
    size_t empty = 0;
    int read = 0, more = 0, rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        const char *c = contents[i];
        if (!*c) {
            empty++;
            continue;
        }
        size_t nl = 0;
        if (folded) {
            if (is_ws(c[0])) {
                more = 1;
                nl = read ? 1 + empty : empty;
            } else if (more) {
                more = 0;
                nl = empty + 1;
            } else if (empty == 0) {
                if (read)
                    rc = skd_buf_append(b, " ", 1);
            } else {
                nl = empty;
            }
        } else {
            nl = read ? 1 + empty : empty;
        }
        for (size_t k = 0; k < nl && !rc; k++)
            rc = skd_buf_append(b, "\n", 1);
        if (!rc)
            rc = skd_buf_puts(b, c);
        read = 1;
        empty = 0;
    }
    size_t tail = chomp == '+' ? (read ? 1 + empty : empty) : (chomp == 0 && read ? 1 : 0);
    for (size_t k = 0; k < tail && !rc; k++)
        rc = skd_buf_append(b, "\n", 1);
    return rc;
}

static int parse_block_scalar(struct parser *p, const char *header, struct line *l, int parent,
                              json_t **out)
{
    char kind = header[0], chomp = 0;
    const char *h = header + 1;
    if (*h == '+' || *h == '-')
        chomp = *h++;
    if (*h >= '0' && *h <= '9')
        return fail(p, l->no, "block scalar indentation indicators are not supported");
    const char *t = h;
    while (is_ws(*t))
        t++;
    if (*t && !(*t == '#' && t != h))
        return fail(p, l->no, "invalid block scalar header");
    char **contents = calloc(p->n - p->i + 1, sizeof(*contents));
    size_t nc = 0;
    int content_indent = -1, leading = 0, rc = 0;
    if (!contents)
        return skd_err_set(p->err, SKD_ENOMEM, "out of memory");
    while (p->i < p->n) {
        struct line *nx = &p->lines[p->i];
        int spaces_only = (size_t)nx->indent == strlen(nx->raw);
        if (content_indent == -1 && !spaces_only && nx->indent > parent) {
            content_indent = nx->indent;
            if (leading > content_indent) {
                rc = fail(p, nx->no,
                          "a leading blank line is indented more than the block scalar content");
                break;
            }
        }
        if (content_indent != -1 && nx->indent >= content_indent) {
            contents[nc++] = nx->raw + content_indent;
        } else if (spaces_only) {
            if (content_indent == -1 && nx->indent > leading)
                leading = nx->indent;
            contents[nc++] = "";
        } else if (tab_indented(nx)) {
            rc = fail(p, nx->no, "tabs cannot be used for indentation");
            break;
        } else {
            break;
        }
        p->i++;
    }
    skd_buf b;
    skd_buf_init(&b, SKD_SKILL_MD_MAX_BYTES);
    if (!rc)
        rc = fold_block(contents, nc, kind == '>', chomp, &b);
    if (!rc && !(*out = json_stringn(b.data ? b.data : "", b.len)))
        rc = skd_err_set(p->err, SKD_ENOMEM, "out of memory");
    skd_buf_free(&b);
    free(contents);
    return rc;
}

static int parse_plain(struct parser *p, char *first, struct line *l, int parent, json_t **out)
{
    skd_buf b;
    int rc, commented = strip_comment(first), blanks = 0;
    skd_buf_init(&b, SKD_SKILL_MD_MAX_BYTES);
    if ((rc = plain_ok(p, l->no, first)) != 0 || (rc = skd_buf_puts(&b, first)) != 0)
        goto out;
    while (p->i < p->n) {
        struct line *nx = &p->lines[p->i];
        if (!nx->text[0]) {
            blanks++;
            p->i++;
            continue;
        }
        if (nx->indent <= parent || nx->text[0] == '#')
            break;
        if (tab_indented(nx)) {
            rc = fail(p, nx->no, "tabs cannot be used for indentation");
            goto out;
        }
        if (commented) {
            rc = fail(p, nx->no,
                      "a comment ends a plain value; quote a value that continues past it");
            goto out;
        }
        commented = strip_comment(nx->text);
        if ((rc = plain_ok(p, nx->no, nx->text)) != 0)
            goto out;
        if (blanks)
            for (int k = 0; k < blanks && !rc; k++)
                rc = skd_buf_append(&b, "\n", 1);
        else
            rc = skd_buf_append(&b, " ", 1);
        if (rc || (rc = skd_buf_puts(&b, nx->text)) != 0)
            goto out;
        blanks = 0;
        p->i++;
    }
    rc = resolve_plain(p, l->no, b.data ? b.data : "", out);
out:
    skd_buf_free(&b);
    if (rc == SKD_ETOOBIG)
        rc = fail(p, l->no, "value too long");
    return rc;
}

/* A one-line flow sequence of scalars at s ('['). */
static int read_flow_seq(struct parser *p, int no, char *s, json_t **out, char **end)
{
    json_t *arr = json_array();
    int rc = 0;
    if (!arr)
        return skd_err_set(p->err, SKD_ENOMEM, "out of memory");
    s = skip_ws(s + 1);
    if (*s == ']') {
        *end = s + 1;
        *out = arr;
        return 0;
    }
    for (;;) {
        json_t *item = NULL;
        s = skip_ws(s);
        if (!*s) {
            rc = fail(p, no, "a flow collection must close on the same line");
            break;
        }
        if (*s == '[' || *s == '{') {
            rc = fail(p, no, "nested flow collections are not supported");
            break;
        }
        if (*s == '"' || *s == '\'') {
            if ((rc = read_quoted(p, no, s, &item, &s)) != 0)
                break;
        } else {
            if (strchr("&*!", *s)) {
                rc = fail(p, no, "anchors, aliases and tags are not supported");
                break;
            }
            if (strchr("|>%@`#", *s) ||
                (strchr("-?:", *s) && (!s[1] || strchr(" \t,[]{}", s[1])))) {
                rc = fail(p, no,
                          "this character cannot start a plain value in a flow "
                          "collection; quote it");
                break;
            }
            char *e = s;
            while (*e && !strchr(",[]{}", *e) && !(*e == '#' && is_ws(e[-1])) &&
                   !(*e == ':' && (!e[1] || strchr(" \t,[]{}", e[1]))))
                e++;
            if (*e == ':') {
                rc = fail(p, no, "mappings inside flow collections are not supported");
                break;
            }
            char save = *e;
            *e = '\0';
            trim_end(s);
            if (!*s) {
                *e = save;
                rc = fail(p, no, "empty value in a flow collection");
                break;
            }
            rc = resolve_plain(p, no, s, &item);
            *e = save;
            s = e;
            if (rc)
                break;
        }
        if (json_array_append_new(arr, item)) {
            rc = skd_err_set(p->err, SKD_ENOMEM, "out of memory");
            break;
        }
        s = skip_ws(s);
        if (*s == ',') {
            s = skip_ws(s + 1);
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
        rc = fail(p, no,
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

static int parse_indented(struct parser *p, int parent, int depth, json_t **out)
{
    int rc = 0;
    struct line *l = peek(p, &rc);
    if (!l)
        return rc;
    if (seq_item(l->text))
        return parse_sequence(p, l->indent, depth, out);
    if (looks_like_key(p, l))
        return parse_mapping(p, l->indent, depth, out);
    p->i++;
    return parse_value(p, l->text, l, parent, depth, 0, out);
}

static int parse_value(struct parser *p, char *rest, struct line *l, int parent, int depth,
                       int compact_seq, json_t **out)
{
    int rc = 0;
    *out = NULL;
    if (depth > MAX_DEPTH)
        return fail(p, l->no, "nesting is too deep");
    if (!*rest || *rest == '#') {
        struct line *nx = peek(p, &rc);
        if (rc)
            return rc;
        if (nx && nx->indent > parent)
            return parse_indented(p, parent, depth, out);
        if (compact_seq && nx && nx->indent == parent && seq_item(nx->text))
            return parse_sequence(p, parent, depth, out);
        *out = json_null();
        return 0;
    }
    char c = rest[0];
    char *end = NULL;
    if (c == '|' || c == '>')
        return parse_block_scalar(p, rest, l, parent, out);
    if (c == '"' || c == '\'' || c == '[') {
        rc = c == '[' ? read_flow_seq(p, l->no, rest, out, &end)
                      : read_quoted(p, l->no, rest, out, &end);
        if (rc == 0 && (rc = only_comment(p, l->no, end)) != 0) {
            json_decref(*out);
            *out = NULL;
        }
        return rc;
    }
    if (c == '{')
        return fail(p, l->no, "flow mappings are not supported; use an indented block");
    if (strchr("&*!", c))
        return fail(p, l->no, "anchors, aliases and tags are not supported");
    if (strchr("%@`,]}", c))
        return fail(p, l->no, "this character cannot start a plain value; quote it");
    if (seq_item(rest) || (c == '?' && (!rest[1] || is_ws(rest[1]))))
        return fail(p, l->no, "a nested collection must start on its own line");
    return parse_plain(p, rest, l, parent, out);
}

/* ---- the document ---------------------------------------------------- */

/* Split the YAML into lines (in place); first_no numbers the first. */
static int split_lines(struct parser *p, char *yaml, int first_no)
{
    size_t cap = 0;
    for (const char *c = yaml; *c; c++)
        cap += *c == '\n';
    cap++;
    if (cap > MAX_LINES)
        return skd_err_set(p->err, SKD_ETOOBIG, "SKILL.md: the front matter has too many lines");
    p->lines = calloc(cap, sizeof(*p->lines));
    if (!p->lines)
        return skd_err_set(p->err, SKD_ENOMEM, "out of memory");
    char *s = yaml;
    while (*s) {
        char *nl = strchr(s, '\n');
        if (nl)
            *nl = '\0';
        struct line *l = &p->lines[p->n];
        l->raw = s;
        l->no = first_no + (int)p->n;
        while (s[l->indent] == ' ')
            l->indent++;
        l->text = skip_ws(s);
        if (strchr(s, '\r'))
            return fail(p, l->no, "a carriage return inside a line is not supported");
        p->n++;
        if (!nl)
            break;
        s = nl + 1;
    }
    return 0;
}

int skd__frontmatter_parse(const char *md, size_t len, json_t **out, skd_err *err)
{
    skd_err local = {0};
    struct parser p = {.err = err ? err : &local};
    err = p.err;
    char *text = NULL;
    int rc = 0;
    *out = NULL;
    if (len > SKD_SKILL_MD_MAX_BYTES)
        return skd_err_set(err, SKD_ETOOBIG, "SKILL.md is larger than %u bytes",
                           SKD_SKILL_MD_MAX_BYTES);
    if (memchr(md, '\0', len))
        return skd_err_set(err, SKD_EINVAL, "SKILL.md contains NUL bytes");
    if (!skd_utf8_valid(md, len))
        return skd_err_set(err, SKD_EINVAL, "SKILL.md is not valid UTF-8 (save it as UTF-8)");
    if (!(text = malloc(len + 1)))
        return skd_err_set(err, SKD_ENOMEM, "out of memory");
    /* CRLF becomes LF, as every host's reader does before it splits. */
    size_t n = 0;
    for (size_t i = 0; i < len; i++)
        if (!(md[i] == '\r' && i + 1 < len && md[i + 1] == '\n'))
            text[n++] = md[i];
    text[n] = '\0';
    char *start = text;
    if (strncmp(start, "\xef\xbb\xbf", 3) == 0)
        start += 3;
    if (strncmp(start, "---\n", 4) != 0) {
        rc = skd_err_set(err, SKD_EINVAL, "SKILL.md: must start with a --- front matter line");
        goto out;
    }
    char *yaml = start + 4, *close = NULL;
    for (char *l = yaml; l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        if (strncmp(l, "---", 3) == 0) {
            const char *t = l + 3;
            while (is_ws(*t))
                t++;
            if (*t == '\n' || *t == '\0') {
                close = l;
                break;
            }
        }
    }
    if (!close) {
        rc = skd_err_set(err, SKD_EINVAL, "SKILL.md: the front matter has no closing --- line");
        goto out;
    }
    *close = '\0';
    if ((rc = split_lines(&p, yaml, 2)) != 0)
        goto out;
    struct line *first = peek(&p, &rc);
    if (rc)
        goto out;
    if (!first) {
        *out = json_object();
        rc = *out ? 0 : skd_err_set(err, SKD_ENOMEM, "out of memory");
        goto out;
    }
    if (strncmp(first->text, "\xef\xbb\xbf", 3) == 0) {
        rc = fail(&p, first->no, "a byte order mark inside the front matter is not supported");
        goto out;
    }
    if (seq_item(first->text) || !looks_like_key(&p, first)) {
        rc = fail(&p, first->no, "the front matter must be a mapping of keys to values");
        goto out;
    }
    if ((rc = parse_mapping(&p, first->indent, 0, out)) != 0)
        goto out;
    struct line *extra = peek(&p, &rc);
    if (!rc && extra)
        rc = fail(&p, extra->no, "unexpected content");
out:
    if (rc) {
        json_decref(*out);
        *out = NULL;
    }
    free(p.lines);
    free(text);
    return rc;
}
