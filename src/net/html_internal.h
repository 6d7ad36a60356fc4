/*
 * Private to src/net/html*.c: the pieces the HTML converter is split into.
 *
 *   html.c        entry point: input preparation, parsing, choice of the
 *                 content root, title, metadata and links[]
 *   html_node.c   questions about one node (name, attributes, is it page
 *                 chrome or hidden), URL resolution, bounded text gathering,
 *                 UTF-8 repair
 *   html_render.c the Markdown / plain-text writer and the block walker
 *   html_inline.c inline elements, code, preformatted blocks and tables
 *
 * Everything here works on a tree that libxml2 built from untrusted bytes:
 * no recursion is unbounded (the walker stops at SKD_HTML_MAX_DEPTH; other
 * traversals are iterative) and every buffer is capped.
 */
#ifndef SKILLD_NET_HTML_INTERNAL_H
#define SKILLD_NET_HTML_INTERNAL_H

#include <libxml/tree.h>
#include <stddef.h>

#include "skilld/buf.h"
#include "net/html.h"

/* ---- html_node.c ---- */

/* The next node after n in document order below root (NULL after the
 * last); skip: do not enter n's children. The one step of every iterative
 * walk of the tree. */
const xmlNode *skd__html_next(const xmlNode *root, const xmlNode *n, int skip);

/* 1 when n is an element named name (lower-case ASCII, compared exactly:
 * libxml2's HTML parser lower-cases element names). */
int skd__html_is(const xmlNode *n, const char *name);

/* The value of attribute name on element n, or NULL. Borrowed from the tree;
 * valid while the document lives. */
const char *skd__html_attr(const xmlNode *n, const char *name);

/* 1 when the element and everything below it is left out of the content:
 * scripts, styles, embedded objects, forms, navigation and other chrome,
 * hidden elements. in_section is non-zero when n lies inside an article,
 * main or section (a header or footer there is content, not page chrome). */
int skd__html_dropped(const xmlNode *n, int in_section);

/* 1 when n is hidden from readers (hidden attribute, aria-hidden=true,
 * display:none or visibility:hidden in its style). Part of dropped(). */
int skd__html_hidden(const xmlNode *n);

/* 1 for elements that start a block of their own (p, div, li, h1, ...). */
int skd__html_is_block(const xmlNode *n);

/* Resolve href (borrowed, may be relative, surrounding whitespace allowed)
 * against base (may be NULL). Returns a new string (caller frees with free())
 * or NULL when the result is not worth linking: empty, a scheme other than
 * http, https or mailto (javascript:, data:, file:, ...), or longer than
 * 8 KiB. Spaces, parentheses and angle brackets are percent-encoded so the
 * URL can stand in Markdown link syntax. *frag_only is set to 1 when href
 * only names a fragment of the same page ("#top"). */
char *skd__html_resolve(const char *base, const char *href, int *frag_only);

/* Append the text below n to b (capped by b's max; stops quietly when b is
 * full), skipping dropped elements. keep_ws: 1 keeps whitespace as it is and
 * turns <br> into a newline (for <pre>); 0 collapses every run of whitespace
 * to one space and trims both ends. max_nodes (0: no limit) bounds the nodes
 * visited, for callers that ask about many nested elements (link texts),
 * which would otherwise cost quadratic time on a hostile page. Iterative:
 * safe on any depth. */
void skd__html_text(const xmlNode *n, skd_buf *b, int keep_ws, size_t max_nodes);

/* A copy of the NUL-terminated s with runs of whitespace collapsed to one
 * space, both ends trimmed, and cut at a UTF-8 boundary to at most max
 * bytes. Returns NULL for NULL, for an empty result, or when out of memory
 * (*nomem is then set to 1). Caller frees with free(). */
char *skd__html_clean(const char *s, size_t max, int *nomem);

/* ---- html_render.c / html_inline.c ---- */

/* One prefix-able output target with the state of the line being written. */
typedef struct skd_html_out {
    skd_buf buf;
    int started;       /* something visible was written */
    int at_line_start; /* the next visible byte starts a line (prefix first) */
    int pending_space; /* collapsed whitespace waits before the next word */
    int pending_nl;    /* newlines waiting before the next visible byte */
    size_t nl_prefix;  /* prefix bytes kept on the blank lines of pending_nl */
    int after_marker;  /* a list marker was just written: no break before it */
    int pending_br;    /* a <br> waits: a hard line break before the next byte */
} skd_html_out;

#define SKD__HTML_PREFIX_MAX 1024
#define SKD__HTML_MAX_OPEN 64 /* inline markers that may be open at once */

/* The writer: Markdown or text into a capped buffer. */
typedef struct skd_html_render {
    int format;       /* SKD_HTML_MARKDOWN or SKD_HTML_TEXT */
    const char *base; /* borrowed: base URL for links and images, may be NULL */
    skd_html_out *out;
    char prefix[SKD__HTML_PREFIX_MAX]; /* "> " and list indentation */
    size_t prefix_len;
    int inline_only; /* > 0: blocks are flattened into one line */
    int in_table;    /* > 0: '|' must be escaped */
    int in_section;  /* > 0: inside article, main or section */
    int list_depth;
    int em, strong, del; /* open emphasis levels (only the outermost is written) */
    int in_link;         /* > 0: inside a link (a nested one is plain text) */
    struct {
        const char *open; /* written before the first visible byte inside */
        int written;
    } open[SKD__HTML_MAX_OPEN];
    int nopen;
    int full;      /* the output cap was reached: stop walking */
    int truncated; /* some content was cut */
    int err;       /* SKD_ENOMEM once memory ran out */
} skd_html_render;

/* A saved writer state, to take back an empty heading or list item. */
typedef struct skd_html_mark {
    skd_html_out out;
} skd_html_mark;

/* Render the children of root into a new string (caller frees with free()),
 * at most SKD_HTML_MAX_OUTPUT bytes, ending in one newline unless empty.
 * in_section: root lies in an article, main or section. Returns 0 or
 * SKD_ENOMEM; *truncated is set when content was cut. */
int skd__html_render(const xmlNode *root, int format, const char *base, int in_section,
                     char **content, size_t *content_len, int *truncated);

/* The walker: one element (with its subtree) or the children of n. */
void skd__html_element(skd_html_render *r, const xmlNode *n, int depth);
void skd__html_children(skd_html_render *r, const xmlNode *n, int depth);

/* Output primitives (html_render.c). */
void skd__html_put(skd_html_render *r, const char *s, size_t n); /* raw bytes */
void skd__html_flush(skd_html_render *r);                        /* before visible bytes */
void skd__html_break(skd_html_render *r, int lines);             /* block separation */
void skd__html_line_end(skd_html_render *r);                     /* end a raw line now */
/* One whole line, unescaped: ends the current line first, writes the prefix
 * (trimmed when s is empty), s, and a newline. For code and table rows. */
void skd__html_raw_line(skd_html_render *r, const char *s, size_t n);
void skd__html_marker(skd_html_render *r, const char *marker);     /* "- ", "## " */
void skd__html_words(skd_html_render *r, const char *s, size_t n); /* text node */
void skd__html_prefix_push(skd_html_render *r, const char *s, size_t n, size_t *saved);
void skd__html_inline_open(skd_html_render *r, const char *marker);
/* Returns 1 when the opening marker had been written (closer then written). */
int skd__html_inline_close(skd_html_render *r, const char *closer);
skd_html_mark skd__html_mark(const skd_html_render *r);
void skd__html_rollback(skd_html_render *r, const skd_html_mark *m);

/* html_inline.c: inline elements (returns 1 when it handled n), <pre>
 * blocks and tables. */
int skd__html_inline_elem(skd_html_render *r, const xmlNode *n, int depth);
void skd__html_pre(skd_html_render *r, const xmlNode *n);
void skd__html_table(skd_html_render *r, const xmlNode *n, int depth);

#endif
