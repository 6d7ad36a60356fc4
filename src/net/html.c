/*
 * HTML to Markdown, text or links for web_fetch (see net/html.h): prepares
 * the untrusted bytes (size cap, encoding choice, UTF-8 repair), parses them
 * with libxml2's HTML parser, picks the content root (<main>, else a single
 * <article>, else <body>), gathers title, metadata and links[], and hands
 * the root to the writer in html_render.c.
 *
 * The parser runs with NONET (no external entity or DTD fetches), NOERROR
 * and NOWARNING (a broken page is normal, not news), RECOVER, and HUGE: the
 * input is already capped at SKD_HTML_MAX_INPUT, and libxml2's own depth
 * limit of 256 would otherwise stop the parse at the first deep nest and
 * lose the rest of the page (libxml2 2.9's HTML parser and tree freeing are
 * iterative, so depth costs no stack there; our walker caps its own).
 */
#include "net/html.h"

#include <libxml/HTMLparser.h>
#include <libxml/parser.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "net/html_internal.h"
#include "skilld/buf.h"
#include "skilld/util.h"

#define LINK_TEXT_MAX 512
#define LINK_TEXT_NODES 256 /* nodes visited for one link's text */
#define LINK_SLOTS 2048     /* open-addressing set of link URLs; > 2 * SKD_HTML_MAX_LINKS */

static pthread_once_t init_once = PTHREAD_ONCE_INIT;

static void init_parser(void)
{
    xmlInitParser();
}

/* ---- input preparation ---- */

/* 1 when the first KiB declares a character set other than UTF-8, which
 * libxml2 then converts from. */
static int declares_legacy_charset(const char *s, size_t n)
{
    size_t lim = n < 1024 ? n : 1024;
    for (size_t i = 0; i + 8 < lim; i++) {
        if (strncasecmp(s + i, "charset", 7) != 0)
            continue;
        size_t j = i + 7;
        while (j < lim && (s[j] == ' ' || s[j] == '=' || s[j] == '"' || s[j] == '\''))
            j++;
        if (j + 5 <= lim &&
            (strncasecmp(s + j, "utf-8", 5) == 0 || strncasecmp(s + j, "utf8", 4) == 0))
            return 0;
        return j < lim;
    }
    return 0;
}

/* Decide how libxml2 reads the bytes. Valid UTF-8 is read as UTF-8 whatever
 * the page claims (ASCII pages often claim Latin-1). A UTF-16 byte order
 * mark or a declared legacy charset is left to libxml2's detection. Anything
 * else is repaired into UTF-8 (invalid sequences and NUL bytes become
 * U+FFFD) into *fixed. Returns the encoding name or NULL for detection. */
static const char *prepare(const char *s, size_t n, skd_buf *fixed, int *rc)
{
    *rc = 0;
    if (n >= 2 && (((unsigned char)s[0] == 0xff && (unsigned char)s[1] == 0xfe) ||
                   ((unsigned char)s[0] == 0xfe && (unsigned char)s[1] == 0xff)))
        return NULL;
    if (skd_utf8_valid(s, n) && !memchr(s, '\0', n))
        return "UTF-8";
    if (declares_legacy_charset(s, n) && !memchr(s, '\0', n))
        return NULL;
    *rc = skd_utf8_repair(fixed, s, n);
    return "UTF-8";
}

/* ---- finding things in the tree (iterative pre-order walks) ---- */

/* Elements whose inside is never searched for metadata, links or roots. */
static int opaque(const xmlNode *n)
{
    return skd__html_is(n, "script") || skd__html_is(n, "style") || skd__html_is(n, "template") ||
           skd__html_is(n, "svg") || skd__html_is(n, "noscript");
}

/* <main> (or role=main); else the only <article>; else <body>; else the
 * root element. *in_section: the root is itself a sectioning element. */
static const xmlNode *content_root(const xmlNode *top, int *in_section)
{
    const xmlNode *article = NULL, *body = NULL;
    int articles = 0;
    *in_section = 0;
    for (const xmlNode *n = top; n; n = skd__html_next(top, n, opaque(n) || skd__html_hidden(n))) {
        if (n->type != XML_ELEMENT_NODE || opaque(n) || skd__html_hidden(n))
            continue;
        const char *role = skd__html_attr(n, "role");
        if (skd__html_is(n, "main") || (role && strcasecmp(role, "main") == 0)) {
            *in_section = 1;
            return n;
        }
        if (skd__html_is(n, "article") && articles++ == 0)
            article = n;
        if (skd__html_is(n, "body") && !body)
            body = n;
    }
    if (articles == 1) {
        *in_section = 1;
        return article;
    }
    return body ? body : top;
}

/* ---- metadata ---- */

typedef struct meta_found {
    const char *title, *og_title, *desc, *og_desc, *author, *art_author, *published,
        *item_published, *time_dt, *canonical, *site_name, *base;
    const xmlNode *author_link; /* <a rel=author> */
} meta_found;

static void meta_tag(meta_found *f, const xmlNode *n)
{
    const char *key = skd__html_attr(n, "property");
    const char *content = skd__html_attr(n, "content");
    if (!key)
        key = skd__html_attr(n, "name");
    if (!key) {
        key = skd__html_attr(n, "itemprop");
        if (key && strcasecmp(key, "datePublished") == 0 && content && !f->item_published)
            f->item_published = content;
        return;
    }
    if (!content)
        return;
#define PICK(name, field)                                                                          \
    if (strcasecmp(key, name) == 0 && !f->field)                                                   \
        f->field = content;
    PICK("description", desc)
    PICK("og:description", og_desc)
    PICK("twitter:description", og_desc)
    PICK("author", author)
    PICK("article:author", art_author)
    PICK("article:published_time", published)
    PICK("og:site_name", site_name)
    PICK("og:title", og_title)
#undef PICK
}

static void find_meta(const xmlNode *top, meta_found *f)
{
    for (const xmlNode *n = top; n; n = skd__html_next(top, n, opaque(n))) {
        if (n->type != XML_ELEMENT_NODE)
            continue;
        if (skd__html_is(n, "title") && !f->title && n->children &&
            n->children->type == XML_TEXT_NODE)
            f->title = (const char *)n->children->content;
        else if (skd__html_is(n, "meta"))
            meta_tag(f, n);
        else if (skd__html_is(n, "link") && !f->canonical) {
            const char *rel = skd__html_attr(n, "rel");
            if (rel && strcasecmp(rel, "canonical") == 0)
                f->canonical = skd__html_attr(n, "href");
        } else if (skd__html_is(n, "base") && !f->base)
            f->base = skd__html_attr(n, "href");
        else if (skd__html_is(n, "time") && !f->time_dt)
            f->time_dt = skd__html_attr(n, "datetime");
        else if (skd__html_is(n, "a") && !f->author_link) {
            const char *rel = skd__html_attr(n, "rel");
            if (rel && strcasecmp(rel, "author") == 0)
                f->author_link = n;
        }
    }
}

/* Set *dst to a cleaned copy of the first non-empty candidate. */
static int field(char **dst, const char *a, const char *b, const char *c)
{
    const char *cands[3] = {a, b, c};
    int nomem = 0;
    for (size_t i = 0; i < 3 && !*dst && !nomem; i++)
        *dst = skd__html_clean(cands[i], SKD_HTML_MAX_FIELD, &nomem);
    return nomem ? SKD_ENOMEM : 0;
}

/* The first visible element named name below root that carries attribute
 * attr (any, when attr is NULL), or NULL. */
static const xmlNode *first_elem(const xmlNode *root, const char *name, const char *attr)
{
    for (const xmlNode *n = root; n; n = skd__html_next(root, n, opaque(n) || skd__html_hidden(n)))
        if (skd__html_is(n, name) && !skd__html_hidden(n) && (!attr || skd__html_attr(n, attr)))
            return n;
    return NULL;
}

/* *dst = the text of n (collapsed, capped), or left NULL when n is NULL or
 * holds no text. */
static int node_text(const xmlNode *n, char **dst)
{
    skd_buf b;
    int rc = 0;
    if (!n || *dst)
        return 0;
    skd_buf_init(&b, SKD_HTML_MAX_FIELD);
    skd__html_text(n, &b, 0, 0);
    if (b.len && !(*dst = skd_buf_steal(&b, NULL)))
        rc = SKD_ENOMEM;
    skd_buf_free(&b);
    return rc;
}

/* Title, metadata; root is the content root, searched first for the date
 * (a <time> in a sidebar must not date the article). */
static int fill_meta(const xmlNode *top, const xmlNode *root, const meta_found *f, const char *base,
                     skd_html_doc *d)
{
    int rc = 0, frag = 0, nomem = 0;
    const xmlNode *t = root ? first_elem(root, "time", "datetime") : NULL;
    rc = rc ? rc : field(&d->title, f->title, f->og_title, NULL);
    rc = rc ? rc : node_text(root ? first_elem(root, "h1", NULL) : NULL, &d->title);
    rc = rc ? rc : field(&d->meta.description, f->desc, f->og_desc, NULL);
    rc = rc ? rc
            : field(&d->meta.language, skd__html_attr(top, "lang"), skd__html_attr(top, "xml:lang"),
                    NULL);
    rc = rc ? rc
            : field(&d->meta.published, f->published, f->item_published,
                    t ? skd__html_attr(t, "datetime") : f->time_dt);
    rc = rc ? rc : field(&d->meta.author, f->author, f->art_author, NULL);
    rc = rc ? rc : node_text(f->author_link, &d->meta.author);
    rc = rc ? rc : field(&d->meta.site_name, f->site_name, NULL, NULL);
    if (!rc && f->canonical) {
        char *c = skd__html_clean(f->canonical, SKD_HTML_MAX_FIELD, &nomem);
        d->meta.canonical = c ? skd__html_resolve(base, c, &frag) : NULL;
        free(c);
        rc = nomem ? SKD_ENOMEM : 0;
    }
    return rc;
}

/* ---- links ---- */

typedef struct link_set {
    skd_html_doc *d;
    size_t slots[LINK_SLOTS]; /* index + 1 into d->links; 0 = empty */
} link_set;

static size_t hash(const char *s)
{
    size_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* The slot of url in the set: where it is, or the empty one it would take.
 * *found is set when it is there. */
static size_t link_slot(const link_set *ls, const char *url, int *found)
{
    size_t i = hash(url) % LINK_SLOTS;
    *found = 0;
    while (ls->slots[i]) {
        if (strcmp(ls->d->links[ls->slots[i] - 1].url, url) == 0) {
            *found = 1;
            break;
        }
        i = (i + 1) % LINK_SLOTS;
    }
    return i;
}

/* Take url (stolen) and text (stolen, may be NULL) into empty slot i. */
static int link_add(link_set *ls, size_t i, char *url, char *text)
{
    skd_html_doc *d = ls->d;
    if (d->nlinks >= SKD_HTML_MAX_LINKS)
        goto drop;
    if (!d->links && !(d->links = calloc(SKD_HTML_MAX_LINKS, sizeof(*d->links))))
        goto nomem;
    if (!text && !(text = strdup("")))
        goto nomem;
    d->links[d->nlinks].url = url;
    d->links[d->nlinks].text = text;
    ls->slots[i] = ++d->nlinks;
    return 0;
drop:
    free(url);
    free(text);
    return 0;
nomem:
    free(url);
    free(text);
    return SKD_ENOMEM;
}

/* The words of a link: its text, else aria-label, title or an image's alt. */
static char *link_text(const xmlNode *a, int *nomem)
{
    skd_buf b;
    char *t = NULL;
    skd_buf_init(&b, LINK_TEXT_MAX);
    skd__html_text(a, &b, 0, LINK_TEXT_NODES);
    if (b.len)
        t = skd__html_clean(b.data, LINK_TEXT_MAX, nomem);
    skd_buf_free(&b);
    if (!t)
        t = skd__html_clean(skd__html_attr(a, "aria-label"), LINK_TEXT_MAX, nomem);
    if (!t)
        t = skd__html_clean(skd__html_attr(a, "title"), LINK_TEXT_MAX, nomem);
    for (const xmlNode *c = a->children; !t && c; c = c->next)
        if (skd__html_is(c, "img"))
            t = skd__html_clean(skd__html_attr(c, "alt"), LINK_TEXT_MAX, nomem);
    return t;
}

static int find_links(const xmlNode *top, const char *base, skd_html_doc *d)
{
    link_set *ls = calloc(1, sizeof(*ls));
    int rc = 0;
    if (!ls)
        return SKD_ENOMEM;
    ls->d = d;
    for (const xmlNode *n = top; n && !rc && d->nlinks < SKD_HTML_MAX_LINKS;
         n = skd__html_next(top, n, opaque(n) || skd__html_hidden(n))) {
        const char *href;
        int frag = 0, nomem = 0;
        if (!skd__html_is(n, "a") || skd__html_hidden(n) || !(href = skd__html_attr(n, "href")))
            continue;
        char *url = skd__html_resolve(base, href, &frag);
        int found = 0;
        size_t slot = url ? link_slot(ls, url, &found) : 0;
        if (!url || frag || found) {
            free(url);
            continue;
        }
        char *text = link_text(n, &nomem);
        rc = nomem ? SKD_ENOMEM : link_add(ls, slot, url, text);
        if (nomem) {
            free(url);
            free(text);
        }
    }
    free(ls);
    return rc;
}

/* The LINKS format: one Markdown list line per link. */
static int links_content(skd_html_doc *d)
{
    skd_buf b;
    int rc = 0;
    skd_buf_init(&b, SKD_HTML_MAX_OUTPUT);
    for (size_t i = 0; i < d->nlinks && !rc; i++) {
        const char *t = d->links[i].text;
        size_t mark = b.len;
        rc = skd_buf_puts(&b, t[0] ? "- [" : "- <");
        for (const char *p = t; !rc && *p; p++) {
            if (strchr("\\[]*_`<", *p))
                rc = skd_buf_append(&b, "\\", 1);
            rc = rc ? rc : skd_buf_append(&b, p, 1);
        }
        rc = rc ? rc : skd_buf_puts(&b, t[0] ? "](" : "");
        rc = rc ? rc : skd_buf_puts(&b, d->links[i].url);
        rc = rc ? rc : skd_buf_puts(&b, t[0] ? ")\n" : ">\n");
        if (rc == SKD_ETOOBIG) {
            b.len = mark; /* whole lines only */
            b.data[mark] = '\0';
            d->truncated = 1;
            rc = 0;
            break;
        }
    }
    if (!rc && !(d->content = skd_buf_steal(&b, &d->content_len)))
        rc = SKD_ENOMEM;
    skd_buf_free(&b);
    return rc;
}

/* ---- entry ---- */

/* The base for relative URLs: <base href> resolved against the page URL
 * when it is http(s), else the page URL. Returns a new string or NULL. */
static char *effective_base(const char *page, const char *base_href)
{
    int frag = 0;
    if (base_href) {
        char *b = skd__html_resolve(page, base_href, &frag);
        if (b && (strncasecmp(b, "http://", 7) == 0 || strncasecmp(b, "https://", 8) == 0))
            return b;
        free(b);
    }
    return page ? strdup(page) : NULL;
}

static int convert_doc(htmlDocPtr doc, const char *base_url, int format, skd_html_doc *out)
{
    meta_found f;
    const xmlNode *top = xmlDocGetRootElement(doc);
    char *base = NULL;
    int rc = 0, in_section = 0;
    memset(&f, 0, sizeof(f));
    if (top)
        find_meta(top, &f);
    base = effective_base(base_url, f.base);
    if (base_url && !base)
        return SKD_ENOMEM;
    const xmlNode *root = top ? content_root(top, &in_section) : NULL;
    if (top)
        rc = fill_meta(top, root, &f, base, out);
    if (!rc && top)
        rc = find_links(top, base, out);
    if (!rc && format == SKD_HTML_LINKS)
        rc = links_content(out);
    else if (!rc)
        rc = skd__html_render(root, format, base, in_section, &out->content, &out->content_len,
                              &out->truncated);
    free(base);
    return rc;
}

int skd__html_convert(const char *html, size_t len, const char *base_url, int format,
                      skd_html_doc *out, skd_err *err)
{
    skd_buf fixed;
    htmlDocPtr doc = NULL;
    int rc = 0;
    skd_buf_init(&fixed, SKD_HTML_MAX_INPUT * 3 + 16); /* U+FFFD is 3 bytes per bad byte */
    if (!out)
        return skd_err_set(err, SKD_EINVAL, "no output document");
    memset(out, 0, sizeof(*out));
    if ((!html && len) ||
        (format != SKD_HTML_MARKDOWN && format != SKD_HTML_TEXT && format != SKD_HTML_LINKS))
        return skd_err_set(err, SKD_EINVAL, "invalid HTML conversion request");
    if (len > SKD_HTML_MAX_INPUT)
        return skd_err_set(err, SKD_ETOOBIG, "the page is larger than %u bytes",
                           (unsigned)SKD_HTML_MAX_INPUT);
    pthread_once(&init_once, init_parser);
    const char *enc = prepare(html ? html : "", len, &fixed, &rc);
    if (rc)
        goto out;
    const char *src = fixed.data ? fixed.data : html;
    size_t n = fixed.data ? fixed.len : len;
    if (n > 0)
        doc = htmlReadMemory(src, (int)n, base_url, enc,
                             HTML_PARSE_NOERROR | HTML_PARSE_NOWARNING | HTML_PARSE_NONET |
                                 HTML_PARSE_RECOVER | XML_PARSE_HUGE);
    rc = convert_doc(doc, base_url, format, out);
out:
    if (doc)
        xmlFreeDoc(doc);
    skd_buf_free(&fixed);
    if (rc) {
        skd__html_doc_free(out);
        return skd_err_set(err, rc, "cannot convert the page: %s", skd_strerror(rc));
    }
    return 0;
}

void skd__html_doc_free(skd_html_doc *doc)
{
    if (!doc)
        return;
    free(doc->content);
    free(doc->title);
    free(doc->meta.description);
    free(doc->meta.language);
    free(doc->meta.published);
    free(doc->meta.author);
    free(doc->meta.canonical);
    free(doc->meta.site_name);
    for (size_t i = 0; i < doc->nlinks; i++) {
        free(doc->links[i].url);
        free(doc->links[i].text);
    }
    free(doc->links);
    memset(doc, 0, sizeof(*doc));
}
