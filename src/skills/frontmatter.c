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
 * "__proto__", duplicate keys, nesting deeper than SKD__FM_MAX_DEPTH.
 *
 * This file reads the block structure and the document; scalars, keys and
 * flow sequences are in frontmatter_scalar.c.
 *
 * Input is bounded by the caller (SKD_SKILL_MD_MAX_BYTES); nothing here
 * recurses deeper than SKD__FM_MAX_DEPTH.
 */
#include "skills/frontmatter.h"

#include "skilld/buf.h"
#include "skilld/util.h"

#include <stdlib.h>
#include <string.h>

#define MAX_LINES 4096

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
    return t[0] == '-' && (t[1] == '\0' || skd__fm_is_ws(t[1]));
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
        *rc = skd__fm_fail(p, l->no, "tabs cannot be used for indentation");
        return NULL;
    }
    return l;
}

/* ---- block structure ------------------------------------------------- */

static int parse_value(struct parser *p, char *rest, struct line *l, int parent, int depth,
                       int compact_seq, json_t **out);

static int parse_mapping(struct parser *p, int indent, int depth, json_t **out)
{
    int rc = 0;
    if (depth > SKD__FM_MAX_DEPTH)
        return skd__fm_fail(p, p->i < p->n ? p->lines[p->i].no : 0, "nesting is too deep");
    json_t *map = json_object();
    if (!map)
        return skd_err_set(p->err, SKD_ENOMEM, "out of memory");
    struct line *l;
    while ((l = peek(p, &rc)) != NULL && l->indent >= indent) {
        if (l->indent > indent) {
            rc = skd__fm_fail(p, l->no, "unexpected indentation");
            break;
        }
        if (seq_item(l->text))
            break;
        json_t *key = NULL, *val = NULL;
        char *rest = NULL;
        int m = skd__fm_match_key(p, l->no, l->text, &key, &rest);
        if (m <= 0) {
            rc = m < 0 ? m : skd__fm_fail(p, l->no, "expected \"key: value\"");
            break;
        }
        if (json_object_get(map, json_string_value(key))) {
            rc = skd__fm_fail(p, l->no, "duplicate key");
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
    if (depth > SKD__FM_MAX_DEPTH)
        return skd__fm_fail(p, p->i < p->n ? p->lines[p->i].no : 0, "nesting is too deep");
    json_t *arr = json_array();
    if (!arr)
        return skd_err_set(p->err, SKD_ENOMEM, "out of memory");
    struct line *l;
    while ((l = peek(p, &rc)) != NULL && l->indent >= indent) {
        if (l->indent > indent) {
            rc = skd__fm_fail(p, l->no, "unexpected indentation");
            break;
        }
        if (!seq_item(l->text))
            break;
        char *rest = skd__fm_skip_ws(l->text + 1);
        if (*rest && *rest != '#' &&
            (seq_item(rest) || skd__fm_looks_like_key(p, l + 0) ||
             (rest[0] != '"' && rest[0] != '\'' && strstr(rest, ": ")))) {
            rc = skd__fm_fail(p, l->no, "collections inside a sequence are not supported");
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
            if (skd__fm_is_ws(c[0])) {
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
        return skd__fm_fail(p, l->no, "block scalar indentation indicators are not supported");
    const char *t = h;
    while (skd__fm_is_ws(*t))
        t++;
    if (*t && !(*t == '#' && t != h))
        return skd__fm_fail(p, l->no, "invalid block scalar header");
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
                rc = skd__fm_fail(
                    p, nx->no,
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
            rc = skd__fm_fail(p, nx->no, "tabs cannot be used for indentation");
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
    int rc, commented = skd__fm_strip_comment(first), blanks = 0;
    skd_buf_init(&b, SKD_SKILL_MD_MAX_BYTES);
    if ((rc = skd__fm_plain_ok(p, l->no, first)) != 0 || (rc = skd_buf_puts(&b, first)) != 0)
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
            rc = skd__fm_fail(p, nx->no, "tabs cannot be used for indentation");
            goto out;
        }
        if (commented) {
            rc = skd__fm_fail(p, nx->no,
                              "a comment ends a plain value; quote a value that continues past it");
            goto out;
        }
        commented = skd__fm_strip_comment(nx->text);
        if ((rc = skd__fm_plain_ok(p, nx->no, nx->text)) != 0)
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
    rc = skd__fm_resolve_plain(p, l->no, b.data ? b.data : "", out);
out:
    skd_buf_free(&b);
    if (rc == SKD_ETOOBIG)
        rc = skd__fm_fail(p, l->no, "value too long");
    return rc;
}

static int parse_indented(struct parser *p, int parent, int depth, json_t **out)
{
    int rc = 0;
    struct line *l = peek(p, &rc);
    if (!l)
        return rc;
    if (seq_item(l->text))
        return parse_sequence(p, l->indent, depth, out);
    if (skd__fm_looks_like_key(p, l))
        return parse_mapping(p, l->indent, depth, out);
    p->i++;
    return parse_value(p, l->text, l, parent, depth, 0, out);
}

static int parse_value(struct parser *p, char *rest, struct line *l, int parent, int depth,
                       int compact_seq, json_t **out)
{
    int rc = 0;
    *out = NULL;
    if (depth > SKD__FM_MAX_DEPTH)
        return skd__fm_fail(p, l->no, "nesting is too deep");
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
        rc = c == '[' ? skd__fm_read_flow_seq(p, l->no, rest, out, &end)
                      : skd__fm_read_quoted(p, l->no, rest, out, &end);
        if (rc == 0 && (rc = skd__fm_only_comment(p, l->no, end)) != 0) {
            json_decref(*out);
            *out = NULL;
        }
        return rc;
    }
    if (c == '{')
        return skd__fm_fail(p, l->no, "flow mappings are not supported; use an indented block");
    if (strchr("&*!", c))
        return skd__fm_fail(p, l->no, "anchors, aliases and tags are not supported");
    if (strchr("%@`,]}", c))
        return skd__fm_fail(p, l->no, "this character cannot start a plain value; quote it");
    if (seq_item(rest) || (c == '?' && (!rest[1] || skd__fm_is_ws(rest[1]))))
        return skd__fm_fail(p, l->no, "a nested collection must start on its own line");
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
        l->text = skd__fm_skip_ws(s);
        if (strchr(s, '\r'))
            return skd__fm_fail(p, l->no, "a carriage return inside a line is not supported");
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
            while (skd__fm_is_ws(*t))
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
        rc = skd__fm_fail(&p, first->no,
                          "a byte order mark inside the front matter is not supported");
        goto out;
    }
    if (seq_item(first->text) || !skd__fm_looks_like_key(&p, first)) {
        rc = skd__fm_fail(&p, first->no, "the front matter must be a mapping of keys to values");
        goto out;
    }
    if ((rc = parse_mapping(&p, first->indent, 0, out)) != 0)
        goto out;
    struct line *extra = peek(&p, &rc);
    if (!rc && extra)
        rc = skd__fm_fail(&p, extra->no, "unexpected content");
out:
    if (rc) {
        json_decref(*out);
        *out = NULL;
    }
    free(p.lines);
    free(text);
    return rc;
}
