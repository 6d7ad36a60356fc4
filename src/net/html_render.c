/*
 * The Markdown / plain-text writer of the HTML converter and its block walker.
 *
 * The writer is lazy about whitespace: block ends request newlines, text
 * requests a space, and both are only written in front of the next visible
 * byte, so that output never holds more than one blank line between blocks,
 * no space at a line start and no trailing space (bar a hard line break).
 * Lines start with the current prefix ("> " in quotes, indentation in list
 * items); inline markers (**, *, [) are written only once visible text
 * follows them, so an empty <b></b> or an icon link writes nothing.
 *
 * The walker recurses once per element level and stops at
 * SKD_HTML_MAX_DEPTH, so a hostile page nested 100000 levels deep costs a
 * bounded stack; all output goes through skd__html_put(), which stops at the
 * output cap.
 */
#include "net/html_internal.h"
#include "skilld/util.h"

#include <stdlib.h>
#include <string.h>

#include "skilld/error.h"

/* ---- output primitives ---- */

void skd__html_put(skd_html_render *r, const char *s, size_t n)
{
    skd_buf *b = &r->out->buf;
    if (r->full || n == 0)
        return;
    if (n > b->max - b->len) {
        size_t k = skd_utf8_cut(s, b->max - b->len);
        if (k)
            (void)skd_buf_append(b, s, k);
        r->full = 1;
        r->truncated = 1;
        return;
    }
    int rc = skd_buf_append(b, s, n);
    if (rc) {
        r->full = 1;
        if (rc == SKD_ENOMEM)
            r->err = rc;
        else
            r->truncated = 1;
    }
}

static void put_s(skd_html_render *r, const char *s)
{
    skd__html_put(r, s, strlen(s));
}

/* Drop spaces at the end of the line being written. */
static void rtrim(skd_html_render *r)
{
    skd_buf *b = &r->out->buf;
    while (b->len && b->data[b->len - 1] == ' ')
        b->data[--b->len] = '\0';
}

/* The prefix without its trailing spaces, for blank lines. */
static size_t prefix_trim(const skd_html_render *r, size_t n)
{
    while (n && r->prefix[n - 1] == ' ')
        n--;
    return n;
}

void skd__html_flush(skd_html_render *r)
{
    skd_html_out *o = r->out;
    if (o->after_marker) {
        o->after_marker = 0;
        o->pending_space = 0;
    }
    if (o->pending_nl && o->started) {
        if (!o->at_line_start) {
            rtrim(r);
            put_s(r, "\n");
        }
        for (int i = 1; i < o->pending_nl; i++) {
            skd__html_put(r, r->prefix, prefix_trim(r, o->nl_prefix));
            put_s(r, "\n");
        }
        o->at_line_start = 1;
    } else if (o->pending_br && o->started && !o->at_line_start) {
        put_s(r, r->format == SKD_HTML_MARKDOWN ? "  \n" : "\n");
        o->at_line_start = 1;
    }
    o->pending_nl = 0;
    o->pending_br = 0;
    if (o->at_line_start) {
        skd__html_put(r, r->prefix, r->prefix_len);
        o->at_line_start = 0;
    } else if (o->pending_space && o->started) {
        put_s(r, " ");
    }
    o->pending_space = 0;
    o->started = 1;
    for (int i = 0; i < r->nopen && i < SKD__HTML_MAX_OPEN; i++) {
        if (!r->open[i].written) {
            put_s(r, r->open[i].open);
            r->open[i].written = 1;
        }
    }
}

void skd__html_break(skd_html_render *r, int lines)
{
    skd_html_out *o = r->out;
    if (r->inline_only) {
        o->pending_space = 1;
        return;
    }
    if (o->after_marker)
        return;
    if (!o->pending_nl || r->prefix_len < o->nl_prefix)
        o->nl_prefix = r->prefix_len;
    if (lines > o->pending_nl)
        o->pending_nl = lines;
    o->pending_space = 0;
    o->pending_br = 0;
}

void skd__html_line_end(skd_html_render *r)
{
    put_s(r, "\n");
    r->out->at_line_start = 1;
    r->out->pending_space = 0;
}

void skd__html_raw_line(skd_html_render *r, const char *s, size_t n)
{
    skd_html_out *o = r->out;
    if (n == 0 && o->at_line_start && !o->pending_nl && o->started) {
        skd__html_put(r, r->prefix, prefix_trim(r, r->prefix_len));
    } else {
        skd__html_flush(r);
        skd__html_put(r, s, n);
    }
    skd__html_line_end(r);
}

void skd__html_marker(skd_html_render *r, const char *marker)
{
    skd__html_flush(r);
    put_s(r, marker);
    r->out->after_marker = 1;
}

void skd__html_prefix_push(skd_html_render *r, const char *s, size_t n, size_t *saved)
{
    *saved = r->prefix_len;
    if (n < sizeof(r->prefix) - r->prefix_len) {
        memcpy(r->prefix + r->prefix_len, s, n);
        r->prefix_len += n;
    }
}

void skd__html_inline_open(skd_html_render *r, const char *marker)
{
    if (r->nopen < SKD__HTML_MAX_OPEN) {
        r->open[r->nopen].open = marker;
        r->open[r->nopen].written = 0;
    }
    r->nopen++;
}

int skd__html_inline_close(skd_html_render *r, const char *closer)
{
    int written = 0;
    r->nopen--;
    if (r->nopen < SKD__HTML_MAX_OPEN && r->open[r->nopen].written) {
        written = 1;
        if (closer)
            put_s(r, closer);
    }
    return written;
}

skd_html_mark skd__html_mark(const skd_html_render *r)
{
    skd_html_mark m;
    m.out = *r->out;
    return m;
}

void skd__html_rollback(skd_html_render *r, const skd_html_mark *m)
{
    skd_buf *b = &r->out->buf;
    size_t len = m->out.buf.len;
    if (len <= b->len) {
        b->len = len;
        if (b->data)
            b->data[len] = '\0';
    }
    skd_buf keep = *b;
    *r->out = m->out;
    r->out->buf = keep;
}

/* ---- text ---- */

static int is_alnum(unsigned char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80;
}

/* 1 when s[i] is '&' starting something a Markdown reader would take for a
 * character reference ("&amp;", "&#39;"). */
static int entity_like(const char *s, size_t n, size_t i)
{
    size_t j = i + 1;
    while (j < n && j - i < 34 && (is_alnum((unsigned char)s[j]) || s[j] == '#'))
        j++;
    return j > i + 1 && j < n && s[j] == ';';
}

/* Write one word (no whitespace inside) with Markdown escaping. line_start:
 * the word is the first on its line, where '#', '-', '+', '=', '>' and "1."
 * would start a block. */
static void word_md(skd_html_render *r, const char *s, size_t n, int line_start)
{
    char tmp[512];
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        int esc = 0;
        switch (c) {
        case '\\':
        case '*':
        case '`':
        case '[':
        case ']':
        case '<':
            esc = 1;
            break;
        case '_':
            esc = i == 0 || i + 1 == n || !is_alnum((unsigned char)s[i - 1]) ||
                  !is_alnum((unsigned char)s[i + 1]);
            break;
        case '|':
            esc = r->in_table > 0;
            break;
        case '&':
            esc = entity_like(s, n, i);
            break;
        case '#':
        case '-':
        case '+':
        case '=':
        case '>':
        case '~':
            esc = line_start && i == 0;
            break;
        case '.':
        case ')': {
            size_t d = 0;
            while (d < i && s[d] >= '0' && s[d] <= '9')
                d++;
            esc = line_start && d == i && i > 0 && i + 1 == n;
            break;
        }
        default:
            break;
        }
        if (o + 2 > sizeof(tmp)) {
            skd__html_put(r, tmp, o);
            o = 0;
        }
        if (esc)
            tmp[o++] = '\\';
        tmp[o++] = (char)c;
    }
    skd__html_put(r, tmp, o);
}

static size_t space_at(const unsigned char *s, size_t n)
{
    if (s[0] == ' ' || s[0] == '\t' || s[0] == '\n' || s[0] == '\r' || s[0] == '\f')
        return 1;
    if (n >= 2 && s[0] == 0xc2 && s[1] == 0xa0)
        return 2;
    return 0;
}

void skd__html_words(skd_html_render *r, const char *str, size_t n)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0;
    while (i < n && !r->full) {
        size_t w = space_at(s + i, n - i);
        if (w) {
            r->out->pending_space = 1;
            i += w;
            continue;
        }
        if (s[i] < 0x20 || s[i] == 0x7f) { /* control characters: never shown */
            i++;
            continue;
        }
        size_t j = i;
        while (j < n && !space_at(s + j, n - j) && s[j] >= 0x20 && s[j] != 0x7f)
            j++;
        int line_start = r->out->at_line_start || r->out->pending_nl || !r->out->started;
        skd__html_flush(r);
        if (r->format == SKD_HTML_MARKDOWN)
            word_md(r, str + i, j - i, line_start);
        else
            skd__html_put(r, str + i, j - i);
        i = j;
    }
}

/* ---- block walker ---- */

static void heading(skd_html_render *r, const xmlNode *n, int level, int depth)
{
    static const char hashes[] = "###### ";
    skd__html_break(r, 2);
    skd_html_mark m = skd__html_mark(r);
    if (r->format == SKD_HTML_MARKDOWN)
        skd__html_marker(r, hashes + 6 - level);
    else
        skd__html_marker(r, "");
    size_t after = r->out->buf.len;
    r->inline_only++;
    skd__html_children(r, n, depth);
    r->inline_only--;
    if (r->out->buf.len == after && !r->full)
        skd__html_rollback(r, &m);
    skd__html_break(r, 2);
}

/* A block that starts with marker ("- ", "3. ", ": ") and whose further
 * lines are indented by its width; taken back when nothing follows it. */
static void item(skd_html_render *r, const xmlNode *n, const char *marker, int depth)
{
    size_t saved;
    skd__html_break(r, 1);
    skd_html_mark m = skd__html_mark(r);
    skd__html_marker(r, marker);
    size_t after = r->out->buf.len;
    static const char spaces[] = "            ";
    skd__html_prefix_push(r, spaces, strlen(marker), &saved);
    skd__html_children(r, n, depth);
    r->prefix_len = saved;
    if (r->out->buf.len == after && !r->full)
        skd__html_rollback(r, &m);
    skd__html_break(r, 1);
}

static void list_item(skd_html_render *r, const xmlNode *n, long number, int depth)
{
    char marker[32];
    if (number > 0)
        snprintf(marker, sizeof(marker), "%ld. ", number);
    else
        snprintf(marker, sizeof(marker), "- ");
    item(r, n, marker, depth);
}

static void list(skd_html_render *r, const xmlNode *n, int depth)
{
    long number = 0;
    if (skd__html_is(n, "ol")) {
        const char *start = skd__html_attr(n, "start");
        char *end = NULL;
        number = start ? strtol(start, &end, 10) : 1;
        if (!start || end == start || number < 1 || number > 999999999)
            number = 1;
    }
    skd__html_break(r, r->list_depth ? 1 : 2);
    r->list_depth++;
    for (const xmlNode *c = n->children; c && !r->full; c = c->next) {
        if (skd__html_is(c, "li") && !skd__html_dropped(c, r->in_section))
            list_item(r, c, number ? number++ : 0, depth + 1);
        else if (c->type == XML_ELEMENT_NODE)
            skd__html_element(r, c, depth + 1);
        else if (c->type == XML_TEXT_NODE && c->content)
            skd__html_words(r, (const char *)c->content, strlen((const char *)c->content));
    }
    r->list_depth--;
    skd__html_break(r, r->list_depth ? 1 : 2);
}

static void blockquote(skd_html_render *r, const xmlNode *n, int depth)
{
    size_t saved;
    skd__html_break(r, 2);
    if (r->format == SKD_HTML_MARKDOWN)
        skd__html_prefix_push(r, "> ", 2, &saved);
    else
        skd__html_prefix_push(r, "  ", 2, &saved);
    skd__html_children(r, n, depth);
    skd__html_break(r, 2);
    r->prefix_len = saved;
}

static int heading_level(const xmlNode *n)
{
    const char *name = (const char *)n->name;
    if (name[0] == 'h' && name[1] >= '1' && name[1] <= '6' && name[2] == '\0')
        return name[1] - '0';
    return 0;
}

static int sectioning(const xmlNode *n)
{
    return skd__html_is(n, "article") || skd__html_is(n, "main") || skd__html_is(n, "section");
}

/* Block-level elements; 1 when n was handled. */
static int block(skd_html_render *r, const xmlNode *n, int depth)
{
    int level = heading_level(n);
    if (level) {
        heading(r, n, level, depth);
    } else if (skd__html_is(n, "ul") || skd__html_is(n, "ol") || skd__html_is(n, "menu")) {
        list(r, n, depth);
    } else if (skd__html_is(n, "li")) {
        list_item(r, n, 0, depth);
    } else if (skd__html_is(n, "blockquote")) {
        blockquote(r, n, depth);
    } else if (skd__html_is(n, "pre")) {
        skd__html_break(r, 2);
        skd__html_pre(r, n);
        skd__html_break(r, 2);
    } else if (skd__html_is(n, "table")) {
        skd__html_break(r, 2);
        skd__html_table(r, n, depth);
        skd__html_break(r, 2);
    } else if (skd__html_is(n, "hr")) {
        skd__html_break(r, 2);
        if (r->format == SKD_HTML_MARKDOWN) {
            skd__html_flush(r);
            put_s(r, "---");
        }
        skd__html_break(r, 2);
    } else if (skd__html_is(n, "dt")) {
        skd__html_break(r, 2);
        skd__html_children(r, n, depth);
        skd__html_break(r, 1);
    } else if (skd__html_is(n, "dd")) {
        item(r, n, ": ", depth); /* the "Term\n: definition" of Markdown Extra */
    } else if (skd__html_is(n, "tr")) {
        skd__html_break(r, 1);
        skd__html_children(r, n, depth);
        skd__html_break(r, 1);
    } else if (skd__html_is_block(n)) {
        int sect = sectioning(n);
        r->in_section += sect;
        skd__html_break(r, 2);
        skd__html_children(r, n, depth);
        skd__html_break(r, 2);
        r->in_section -= sect;
    } else {
        return 0;
    }
    return 1;
}

void skd__html_element(skd_html_render *r, const xmlNode *n, int depth)
{
    if (r->full)
        return;
    if (skd__html_dropped(n, r->in_section))
        return;
    if (depth > SKD_HTML_MAX_DEPTH) {
        /* Deeper than any real page: keep the words of this subtree as one
         * run of text, gathered without recursion. */
        skd_buf b;
        skd_buf_init(&b, SKD_HTML_MAX_OUTPUT);
        skd__html_text(n, &b, 0, 0);
        r->out->pending_space = 1;
        skd__html_words(r, b.data ? b.data : "", b.len);
        r->out->pending_space = 1;
        skd_buf_free(&b);
        return;
    }
    if (skd__html_inline_elem(r, n, depth))
        return;
    if (!r->inline_only && block(r, n, depth))
        return;
    /* Unknown or inline-level (span, abbr, ...) or a block in a one-line
     * context: its content flows on; a block still separates words. */
    if (r->inline_only && skd__html_is_block(n))
        r->out->pending_space = 1;
    skd__html_children(r, n, depth);
    if (r->inline_only && skd__html_is_block(n))
        r->out->pending_space = 1;
}

void skd__html_children(skd_html_render *r, const xmlNode *n, int depth)
{
    for (const xmlNode *c = n->children; c && !r->full; c = c->next) {
        if ((c->type == XML_TEXT_NODE || c->type == XML_CDATA_SECTION_NODE) && c->content)
            skd__html_words(r, (const char *)c->content, strlen((const char *)c->content));
        else if (c->type == XML_ELEMENT_NODE)
            skd__html_element(r, c, depth + 1);
    }
}

int skd__html_render(const xmlNode *root, int format, const char *base, int in_section,
                     char **content, size_t *content_len, int *truncated)
{
    skd_html_render *r = calloc(1, sizeof(*r));
    skd_html_out out;
    int rc = 0;
    *content = NULL;
    *content_len = 0;
    *truncated = 0;
    if (!r)
        return SKD_ENOMEM;
    memset(&out, 0, sizeof(out));
    skd_buf_init(&out.buf, SKD_HTML_MAX_OUTPUT);
    out.at_line_start = 1;
    r->format = format;
    r->base = base;
    r->out = &out;
    r->in_section = in_section;
    if (root)
        skd__html_children(r, root, 0);
    if (r->err) {
        rc = r->err;
        goto out;
    }
    while (out.buf.len &&
           (out.buf.data[out.buf.len - 1] == ' ' || out.buf.data[out.buf.len - 1] == '\n'))
        out.buf.data[--out.buf.len] = '\0';
    if (out.buf.len && !r->full)
        put_s(r, "\n");
    *truncated = r->truncated;
    *content = skd_buf_steal(&out.buf, content_len);
    if (!*content)
        rc = SKD_ENOMEM;
out:
    skd_buf_free(&out.buf);
    free(r);
    return rc;
}
