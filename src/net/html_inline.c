/*
 * Inline elements, preformatted blocks and tables of the HTML converter:
 * emphasis, code spans, links, images and line breaks; <pre> as fenced code
 * blocks with the language taken from the usual class names; <table> as a
 * GFM pipe table (first row as header) or, when it is a layout table, as
 * plain blocks.
 *
 * Everything written goes through the writer in html_render.c (capped);
 * text of code and cells is gathered into capped buffers first. Links and
 * images are resolved with skd__html_resolve(), which refuses javascript:,
 * data: and every scheme but http, https and mailto.
 */
#include "net/html_internal.h"

#include <stdlib.h>
#include <string.h>

#include "skilld/error.h"

#define TABLE_MAX_COLS 64
#define TABLE_MAX_ROWS 5000
#define TABLE_SCAN_NODES 4096

static int md(const skd_html_render *r)
{
    return r->format == SKD_HTML_MARKDOWN;
}

/* Write s, putting a backslash before every byte found in chars. */
static void put_escaped(skd_html_render *r, const char *s, size_t n, const char *chars)
{
    size_t i = 0;
    while (i < n) {
        size_t j = i;
        while (j < n && !strchr(chars, s[j]))
            j++;
        skd__html_put(r, s + i, j - i);
        if (j < n) {
            skd__html_put(r, "\\", 1);
            skd__html_put(r, s + j, 1);
            j++;
        }
        i = j;
    }
}

/* Emphasis-like wrappers: only the outermost of a kind writes its marker. */
static void wrap(skd_html_render *r, const xmlNode *n, int depth, const char *marker, int *level)
{
    int write = md(r) && *level == 0;
    if (write)
        skd__html_inline_open(r, marker);
    (*level)++;
    r->inline_only++;
    skd__html_children(r, n, depth);
    r->inline_only--;
    (*level)--;
    if (write)
        skd__html_inline_close(r, marker);
}

/* The text of n, whitespace collapsed, into b (caller frees). */
static void text_of(const xmlNode *n, skd_buf *b, size_t max, size_t max_nodes)
{
    skd_buf_init(b, max);
    skd__html_text(n, b, 0, max_nodes);
}

static void code_span(skd_html_render *r, const xmlNode *n)
{
    skd_buf b;
    char fence[16];
    text_of(n, &b, SKD_HTML_MAX_OUTPUT, 0);
    if (b.len == 0)
        goto out;
    skd__html_flush(r);
    if (!md(r)) {
        skd__html_put(r, b.data, b.len);
        goto out;
    }
    /* The fence is one backtick longer than the longest run inside. */
    size_t longest = 0, run = 0;
    for (size_t i = 0; i < b.len; i++) {
        run = b.data[i] == '`' ? run + 1 : 0;
        if (run > longest)
            longest = run;
    }
    size_t k = longest + 1 < sizeof(fence) ? longest + 1 : sizeof(fence) - 1;
    memset(fence, '`', k);
    fence[k] = '\0';
    int pad = b.data[0] == '`' || b.data[b.len - 1] == '`';
    skd__html_put(r, fence, k);
    if (pad)
        skd__html_put(r, " ", 1);
    if (r->in_table)
        put_escaped(r, b.data, b.len, "|");
    else
        skd__html_put(r, b.data, b.len);
    if (pad)
        skd__html_put(r, " ", 1);
    skd__html_put(r, fence, k);
out:
    skd_buf_free(&b);
}

/* 1 when a same-page link is only a permalink symbol ("¶", "#", "§"). */
static int permalink_symbol(const xmlNode *n)
{
    static const char *const symbols[] = {"",     "#", "\xc2\xb6", "\xc2\xa7", "\xf0\x9f\x94\x97",
                                          "link", NULL};
    skd_buf b;
    int hit = 0;
    text_of(n, &b, 64, 64); /* called for every nested anchor: bounded */
    for (size_t i = 0; symbols[i]; i++)
        if (strcmp(b.len ? b.data : "", symbols[i]) == 0)
            hit = 1;
    skd_buf_free(&b);
    return hit;
}

static void link(skd_html_render *r, const xmlNode *n, int depth)
{
    int frag = 0;
    const char *href = skd__html_attr(n, "href");
    char *url = NULL;
    if (href && !r->in_link)
        url = skd__html_resolve(r->base, href, &frag);
    if (frag && permalink_symbol(n))
        goto out;
    if (!url || frag || !md(r)) {
        /* Not worth a link (script, same-page anchor, text format): keep
         * the words. */
        r->inline_only++;
        skd__html_children(r, n, depth);
        r->inline_only--;
        goto out;
    }
    skd__html_inline_open(r, "[");
    r->inline_only++;
    r->in_link++;
    skd__html_children(r, n, depth);
    r->in_link--;
    r->inline_only--;
    if (skd__html_inline_close(r, "](")) {
        skd__html_put(r, url, strlen(url));
        skd__html_put(r, ")", 1);
    }
out:
    free(url);
}

static void image(skd_html_render *r, const xmlNode *n)
{
    int frag = 0, nomem = 0;
    if (!md(r))
        return;
    const char *src = skd__html_attr(n, "src");
    char *url = src ? skd__html_resolve(r->base, src, &frag) : NULL;
    if (!url) { /* lazy loading: the real address waits in data-src */
        src = skd__html_attr(n, "data-src");
        url = src ? skd__html_resolve(r->base, src, &frag) : NULL;
    }
    if (!url || frag || strncmp(url, "mailto:", 7) == 0)
        goto out;
    char *alt = skd__html_clean(skd__html_attr(n, "alt"), 1024, &nomem);
    skd__html_flush(r);
    skd__html_put(r, "![", 2);
    if (alt)
        put_escaped(r, alt, strlen(alt), r->in_table ? "\\[]|" : "\\[]");
    skd__html_put(r, "](", 2);
    skd__html_put(r, url, strlen(url));
    skd__html_put(r, ")", 1);
    free(alt);
    if (nomem)
        r->err = SKD_ENOMEM;
out:
    free(url);
}

static void line_break(skd_html_render *r)
{
    if (r->inline_only)
        r->out->pending_space = 1;
    else if (r->out->started)
        r->out->pending_br = 1;
}

int skd__html_inline_elem(skd_html_render *r, const xmlNode *n, int depth)
{
    const char *name = (const char *)n->name;
    if (!strcmp(name, "strong") || !strcmp(name, "b"))
        wrap(r, n, depth, "**", &r->strong);
    else if (!strcmp(name, "em") || !strcmp(name, "i") || !strcmp(name, "cite"))
        wrap(r, n, depth, "*", &r->em);
    else if (!strcmp(name, "del") || !strcmp(name, "s") || !strcmp(name, "strike"))
        wrap(r, n, depth, "~~", &r->del);
    else if (!strcmp(name, "code") || !strcmp(name, "kbd") || !strcmp(name, "samp") ||
             !strcmp(name, "tt") || (!strcmp(name, "pre") && r->inline_only))
        code_span(r, n);
    else if (!strcmp(name, "a"))
        link(r, n, depth);
    else if (!strcmp(name, "img"))
        image(r, n);
    else if (!strcmp(name, "br"))
        line_break(r);
    else
        return 0;
    return 1;
}

/* ---- <pre> ---- */

/* The language named by class "language-x", "lang-x", "highlight-x" or
 * "highlight-source-x" on the code element, the pre or its two nearest
 * ancestors, or a data-lang attribute; copied into out (cap bytes) with
 * anything but [A-Za-z0-9_+#.-] left out. */
static void pre_lang(const xmlNode *pre, char *out, size_t cap)
{
    static const char *const prefixes[] = {"language-", "lang-", "highlight-source-", "highlight-",
                                           NULL};
    const xmlNode *cands[4] = {NULL, pre, pre->parent, pre->parent ? pre->parent->parent : NULL};
    out[0] = '\0';
    for (const xmlNode *c = pre->children; c; c = c->next)
        if (skd__html_is(c, "code")) {
            cands[0] = c;
            break;
        }
    for (size_t i = 0; i < 4; i++) {
        const xmlNode *n = cands[i];
        if (!n || n->type != XML_ELEMENT_NODE)
            continue;
        const char *v = skd__html_attr(n, "data-lang");
        const char *cls = skd__html_attr(n, "class");
        for (const char *p = cls; !v && p && *p;) {
            while (*p == ' ' || *p == '\t' || *p == '\n')
                p++;
            for (size_t k = 0; prefixes[k] && !v; k++)
                if (strncmp(p, prefixes[k], strlen(prefixes[k])) == 0)
                    v = p + strlen(prefixes[k]);
            while (*p && *p != ' ' && *p != '\t' && *p != '\n')
                p++;
        }
        if (!v)
            continue;
        size_t o = 0;
        for (; *v && *v != ' ' && *v != '\t' && *v != '\n' && o + 1 < cap && o < 32; v++) {
            char ch = *v;
            if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                strchr("_+#.-", ch))
                out[o++] = ch;
        }
        out[o] = '\0';
        if (o)
            return;
    }
}

void skd__html_pre(skd_html_render *r, const xmlNode *n)
{
    skd_buf b;
    char fence[20], lang[40];
    skd_buf_init(&b, SKD_HTML_MAX_OUTPUT);
    skd__html_text(n, &b, 1, 0);
    size_t start = 0, end = b.len;
    while (start < end && b.data[start] == '\n')
        start++;
    while (end > start &&
           (b.data[end - 1] == '\n' || b.data[end - 1] == ' ' || b.data[end - 1] == '\t'))
        end--;
    if (start == end)
        goto out;
    size_t longest = 0, run = 0;
    for (size_t i = start; i < end; i++) {
        run = b.data[i] == '`' ? run + 1 : 0;
        if (run > longest)
            longest = run;
    }
    size_t k = longest + 1 > 3 ? longest + 1 : 3;
    if (k >= sizeof(fence))
        k = sizeof(fence) - 1;
    memset(fence, '`', k);
    fence[k] = '\0';
    pre_lang(n, lang, sizeof(lang));
    if (md(r)) {
        char open[64];
        snprintf(open, sizeof(open), "%s%s", fence, lang);
        skd__html_raw_line(r, open, strlen(open));
    }
    for (size_t i = start; i <= end && !r->full;) {
        const char *nl = memchr(b.data + i, '\n', end - i);
        size_t j = nl ? (size_t)(nl - b.data) : end;
        skd__html_raw_line(r, b.data + i, j - i);
        i = j + 1;
    }
    if (md(r))
        skd__html_raw_line(r, fence, k);
out:
    skd_buf_free(&b);
}

/* ---- tables ---- */

typedef struct table {
    const xmlNode **rows;
    size_t nrows;
    size_t ncols;
    int layout; /* one column, or a table inside: not data, render as blocks */
} table;

static int is_cell(const xmlNode *c)
{
    return skd__html_is(c, "td") || skd__html_is(c, "th");
}

static size_t colspan(const xmlNode *c)
{
    const char *v = skd__html_attr(c, "colspan");
    long n = v ? strtol(v, NULL, 10) : 1;
    return n < 1 ? 1 : n > TABLE_MAX_COLS ? TABLE_MAX_COLS : (size_t)n;
}

/* 1 when a table element lies below n (iterative), or when n holds more
 * than TABLE_SCAN_NODES nodes: asked for every cell of every table, so it
 * must not walk a huge subtree again and again; such a cell is a layout. */
static int has_table_below(const xmlNode *root)
{
    const xmlNode *n = root->children;
    size_t seen = 0;
    while (n) {
        if (++seen > TABLE_SCAN_NODES)
            return 1;
        if (skd__html_is(n, "table"))
            return 1;
        n = skd__html_next(root, n, 0);
    }
    return 0;
}

static int add_row(table *t, const xmlNode *tr)
{
    size_t cols = 0;
    if (t->nrows >= TABLE_MAX_ROWS)
        return 0;
    for (const xmlNode *c = tr->children; c; c = c->next)
        if (is_cell(c)) {
            cols += colspan(c);
            if (has_table_below(c))
                t->layout = 1;
        }
    if (cols > t->ncols)
        t->ncols = cols > TABLE_MAX_COLS ? TABLE_MAX_COLS : cols;
    t->rows[t->nrows++] = tr;
    return 0;
}

static int collect_rows(table *t, const xmlNode *tbl)
{
    size_t count = 0;
    for (const xmlNode *c = tbl->children; c; c = c->next) {
        if (skd__html_is(c, "tr"))
            count++;
        else if (skd__html_is(c, "thead") || skd__html_is(c, "tbody") || skd__html_is(c, "tfoot"))
            for (const xmlNode *g = c->children; g; g = g->next)
                count += skd__html_is(g, "tr");
    }
    if (count == 0)
        return 0;
    t->rows = calloc(count < TABLE_MAX_ROWS ? count : TABLE_MAX_ROWS, sizeof(*t->rows));
    if (!t->rows)
        return SKD_ENOMEM;
    for (const xmlNode *c = tbl->children; c; c = c->next) {
        if (skd__html_is(c, "tr"))
            add_row(t, c);
        else if (skd__html_is(c, "thead") || skd__html_is(c, "tbody") || skd__html_is(c, "tfoot"))
            for (const xmlNode *g = c->children; g; g = g->next)
                if (skd__html_is(g, "tr"))
                    add_row(t, g);
    }
    return 0;
}

/* Render one cell's content on one line, appended to line. */
static void cell(skd_html_render *r, const xmlNode *td, int depth, skd_buf *line)
{
    skd_html_out tmp, *saved = r->out;
    memset(&tmp, 0, sizeof(tmp));
    skd_buf_init(&tmp.buf, SKD_HTML_MAX_OUTPUT);
    r->out = &tmp;
    r->inline_only++;
    r->in_table++;
    if (!skd__html_dropped(td, r->in_section))
        skd__html_children(r, td, depth);
    r->in_table--;
    r->inline_only--;
    r->out = saved;
    if (tmp.buf.len && skd_buf_append(line, tmp.buf.data, tmp.buf.len) != 0)
        r->full = r->truncated = 1;
    skd_buf_free(&tmp.buf);
}

/* Write row i of t as one line. */
static void row(skd_html_render *r, const table *t, size_t i, int depth, skd_buf *line)
{
    size_t col = 0;
    line->len = 0;
    if (md(r))
        skd_buf_append(line, "|", 1);
    for (const xmlNode *c = t->rows[i]->children; c && col < t->ncols && !r->full; c = c->next) {
        if (!is_cell(c))
            continue;
        size_t span = colspan(c);
        if (!md(r) && col)
            skd_buf_append(line, " | ", 3);
        else if (md(r))
            skd_buf_append(line, " ", 1);
        cell(r, c, depth + 2, line);
        for (col++; md(r) && span > 1 && col < t->ncols; span--, col++)
            skd_buf_append(line, " | ", 3);
        if (md(r))
            skd_buf_append(line, " |", 2);
    }
    for (; md(r) && col < t->ncols; col++)
        skd_buf_append(line, "  |", 3);
    skd__html_raw_line(r, line->data ? line->data : "", line->len);
    if (i == 0 && md(r)) {
        line->len = 0;
        skd_buf_append(line, "|", 1);
        for (col = 0; col < t->ncols; col++)
            skd_buf_append(line, " --- |", 6);
        skd__html_raw_line(r, line->data, line->len);
    }
}

void skd__html_table(skd_html_render *r, const xmlNode *n, int depth)
{
    table t = {NULL, 0, 0, 0};
    skd_buf line;
    skd_buf_init(&line, SKD_HTML_MAX_OUTPUT);
    for (const xmlNode *c = n->children; c; c = c->next)
        if (skd__html_is(c, "caption"))
            skd__html_element(r, c, depth + 1);
    if (collect_rows(&t, n) != 0) {
        r->err = SKD_ENOMEM;
        r->full = 1;
        goto out;
    }
    if (t.nrows == 0 || t.ncols <= 1 || t.layout) {
        for (const xmlNode *c = n->children; c && !r->full; c = c->next)
            if (!skd__html_is(c, "caption") && c->type == XML_ELEMENT_NODE)
                skd__html_element(r, c, depth + 1);
        goto out;
    }
    for (size_t i = 0; i < t.nrows && !r->full; i++)
        row(r, &t, i, depth, &line);
out:
    skd_buf_free(&line);
    free(t.rows);
}
