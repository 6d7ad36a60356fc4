/*
 * HTML to Markdown, plain text or a list of links, for web_fetch.
 *
 * The input is an untrusted page from the network. It is parsed with
 * libxml2's HTML parser in recovery mode with errors, warnings and network
 * access switched off; the input size, the tree depth walked, the output size
 * and the number of links are all capped, so a hostile page can neither blow
 * the stack nor make the result grow without bound. Nothing here opens a
 * connection or a file: the caller fetches the bytes (through the outbound
 * guard) and hands them over.
 *
 * What is kept: the main content (<main>, else <article>, else <body>) as
 * clean Markdown (headings, paragraphs, emphasis, code, lists, links, images,
 * blockquotes, GFM tables, rules, line breaks) or plain text. What is dropped:
 * script, style, noscript, template, svg, iframe, form, nav, header, footer,
 * aside, elements with role navigation/banner/contentinfo, and hidden elements
 * (the hidden attribute, aria-hidden="true").
 */
#ifndef SKILLD_NET_HTML_H
#define SKILLD_NET_HTML_H

#include <stddef.h>

#include "skilld/error.h"

/* Output formats of skd__html_convert. */
enum skd_html_format {
    SKD_HTML_MARKDOWN = 0, /* clean Markdown */
    SKD_HTML_TEXT = 1,     /* plain text, paragraphs separated by one blank line */
    SKD_HTML_LINKS = 2     /* content is one "- [text](url)" line per link */
};

/* Limits. Input past SKD_HTML_MAX_INPUT is refused (SKD_ETOOBIG); content past
 * SKD_HTML_MAX_OUTPUT is cut at a UTF-8 boundary and doc->truncated set; links
 * past SKD_HTML_MAX_LINKS are not recorded; below SKD_HTML_MAX_DEPTH levels
 * under the content root the structure is flattened to its words (gathered
 * without recursion), so absurd nesting costs no stack and loses no text. */
#define SKD_HTML_MAX_INPUT (8u * 1024 * 1024)
#define SKD_HTML_MAX_OUTPUT (2u * 1024 * 1024)
#define SKD_HTML_MAX_LINKS 1000
#define SKD_HTML_MAX_DEPTH 256
#define SKD_HTML_MAX_FIELD 4096 /* title and each metadata string, in bytes */

/* One hyperlink of the page. Both strings owned by the skd_html_doc. */
typedef struct skd_html_link {
    char *url;  /* absolute when a base URL is known, never NULL */
    char *text; /* the link's visible text, whitespace collapsed; may be "" */
} skd_html_link;

/* Page metadata. Every field is NULL when the page does not carry it, else a
 * NUL-terminated UTF-8 string owned by the skd_html_doc. */
typedef struct skd_html_meta {
    char *description; /* <meta name=description>, else og:description */
    char *language;    /* <html lang> */
    char *published;   /* article:published_time, itemprop=datePublished, else the
                          first <time datetime> of the content (else of the page) */
    char *author;      /* <meta name=author>, article:author, else <a rel=author> */
    char *canonical;   /* <link rel=canonical>, made absolute */
    char *site_name;   /* og:site_name */
} skd_html_meta;

/* The result of one conversion. Zero it before the call (or let the call do
 * it); after the call, whatever its result, release it with
 * skd__html_doc_free(). Every pointer inside is owned by the doc. */
typedef struct skd_html_doc {
    char *content;      /* the converted page, NUL-terminated, never NULL on success */
    size_t content_len; /* strlen(content) */
    int truncated;      /* 1 when content was cut at SKD_HTML_MAX_OUTPUT */
    char *title;        /* <title>, else og:title, else the first <h1>; NULL if none */
    skd_html_meta meta;
    skd_html_link *links; /* unique by url, in document order; NULL when nlinks == 0 */
    size_t nlinks;
} skd_html_doc;

/*
 * Convert len bytes of HTML (borrowed; need not be NUL-terminated, may hold
 * invalid UTF-8, which is replaced) into *out in the given format.
 *
 * base_url (borrowed, may be NULL) is the URL the page was fetched from; it
 * resolves relative links, images and the canonical URL (a <base href> in
 * the page is honoured on top of it). Only http, https and mailto links are
 * recorded in links[]; javascript:, data: and the like are dropped, and
 * fragment-only links (#top) are left out of links[].
 *
 * Title, metadata and links[] are filled for every format. links[] covers
 * the whole page (navigation included, hidden links left out), while the
 * content covers only the content root.
 *
 * Returns 0, SKD_EINVAL (bad format or NULL arguments), SKD_ETOOBIG (input
 * larger than SKD_HTML_MAX_INPUT) or SKD_ENOMEM, with detail in err (may be
 * NULL). An empty or unparsable page is not an error: it yields "" content.
 */
int skd__html_convert(const char *html, size_t len, const char *base_url, int format,
                      skd_html_doc *out, skd_err *err);

/* Release everything a skd_html_doc holds and zero it. Accepts NULL and a
 * zeroed doc; safe to call twice. */
void skd__html_doc_free(skd_html_doc *doc);

#endif
