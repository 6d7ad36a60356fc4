/*
 * Questions about single nodes of a parsed HTML page, for the converter in
 * html.c / html_render.c: is this element page chrome or hidden, what is the
 * absolute form of this link, what text lies below this node, and repair of
 * invalid UTF-8.
 *
 * Trusts nothing in the tree: attribute values and text may be of any size
 * (the parser only bounds the whole input) and any content; every traversal
 * here is iterative and every result is capped.
 */
#include "net/html_internal.h"

#include <libxml/uri.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "skilld/error.h"
#include "skilld/util.h"

#define URL_MAX 8192

int skd__html_is(const xmlNode *n, const char *name)
{
    /* The first-byte test spares most strcmp calls: this runs for every
     * element many times over. */
    return n && n->type == XML_ELEMENT_NODE && n->name && n->name[0] == (xmlChar)name[0] &&
           strcmp((const char *)n->name, name) == 0;
}

const char *skd__html_attr(const xmlNode *n, const char *name)
{
    if (!n || n->type != XML_ELEMENT_NODE)
        return NULL;
    for (const xmlAttr *a = n->properties; a; a = a->next) {
        if (!a->name || strcasecmp((const char *)a->name, name) != 0)
            continue;
        /* HTML attribute values are a single text child (entities are
         * already decoded by the parser); an attribute without a value
         * ("hidden") has no child and reads as "". */
        if (a->children && a->children->type == XML_TEXT_NODE && a->children->content)
            return (const char *)a->children->content;
        return "";
    }
    return NULL;
}

static int in_list(const char *name, const char *const *list)
{
    for (size_t i = 0; list[i]; i++)
        if (name[0] == list[i][0] && strcmp(name, list[i]) == 0)
            return 1;
    return 0;
}

/* 1 when the CSS declarations in style set prop to val ("display", "none"),
 * ignoring case and whitespace around the colon. */
static int style_has(const char *style, const char *prop, const char *val)
{
    size_t pl = strlen(prop), vl = strlen(val);
    for (const char *p = style; (p = strcasestr(p, prop)) != NULL; p++) {
        if (p > style && (p[-1] == '-' || (p[-1] >= 'a' && p[-1] <= 'z')))
            continue; /* "-webkit-display" or "xdisplay" */
        const char *q = p + pl;
        while (*q == ' ' || *q == '\t')
            q++;
        if (*q != ':')
            continue;
        q++;
        while (*q == ' ' || *q == '\t')
            q++;
        if (strncasecmp(q, val, vl) == 0 &&
            (q[vl] == '\0' || q[vl] == ';' || q[vl] == ' ' || q[vl] == '!' || q[vl] == '\t'))
            return 1;
    }
    return 0;
}

int skd__html_hidden(const xmlNode *n)
{
    const char *v;
    if (skd__html_attr(n, "hidden"))
        return 1;
    if ((v = skd__html_attr(n, "aria-hidden")) != NULL && strcasecmp(v, "true") == 0)
        return 1;
    if ((v = skd__html_attr(n, "style")) != NULL &&
        (style_has(v, "display", "none") || style_has(v, "visibility", "hidden")))
        return 1;
    return 0;
}

int skd__html_dropped(const xmlNode *n, int in_section)
{
    static const char *const never[] = {
        "script", "style",  "noscript", "template", "svg",    "iframe", "frame",  "frameset",
        "form",   "nav",    "aside",    "head",     "title",  "meta",   "link",   "object",
        "embed",  "canvas", "audio",    "video",    "input",  "select", "button", "textarea",
        "dialog", "map",    "base",     "param",    "source", "track",  NULL};
    static const char *const roles[] = {
        "navigation",    "banner", "contentinfo", "dialog",  "alertdialog", "search",
        "complementary", "menu",   "menubar",     "toolbar", NULL};
    if (!n || n->type != XML_ELEMENT_NODE || !n->name)
        return 0;
    const char *name = (const char *)n->name;
    if (in_list(name, never))
        return 1;
    /* A header or footer is page chrome (the banner, the site footer) unless
     * it belongs to an article or section, where it holds the byline. */
    if (!in_section && (strcmp(name, "header") == 0 || strcmp(name, "footer") == 0))
        return 1;
    const char *role = skd__html_attr(n, "role");
    if (role) {
        for (size_t i = 0; roles[i]; i++)
            if (strcasecmp(role, roles[i]) == 0)
                return 1;
    }
    return skd__html_hidden(n);
}

int skd__html_is_block(const xmlNode *n)
{
    static const char *const blocks[] = {
        "p",          "div",     "section", "article", "main",     "header",     "footer", "aside",
        "nav",        "h1",      "h2",      "h3",      "h4",       "h5",         "h6",     "ul",
        "ol",         "li",      "dl",      "dt",      "dd",       "blockquote", "pre",    "table",
        "thead",      "tbody",   "tfoot",   "tr",      "td",       "th",         "hr",     "figure",
        "figcaption", "address", "details", "summary", "fieldset", "center",     "body",   "html",
        "hgroup",     "caption", "br",      "legend",  "menu",     NULL};
    return n && n->type == XML_ELEMENT_NODE && n->name && in_list((const char *)n->name, blocks);
}

/* ---- URLs ---- */

static int is_hex(int c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* Bytes kept as they are in a URL; everything else is percent-encoded so
 * that libxml2's strict URI parser accepts what browsers accept, and the
 * result can stand inside Markdown's (...) without breaking it. */
static int url_keep(int c)
{
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
        return 1;
    return c != 0 && strchr("-._~:/?#[]@!$&'*+,;=", c) != NULL;
}

/* Normalise href as a browser does (strip surrounding whitespace, drop tabs
 * and newlines inside) and percent-encode into dst (cap bytes). Returns the
 * length, or 0 when empty or too long. */
static size_t url_prepare(const char *href, char *dst, size_t cap)
{
    const unsigned char *s = (const unsigned char *)href;
    size_t n = strlen(href), o = 0;
    int hashes = 0;
    while (n && (*s <= ' '))
        s++, n--;
    while (n && s[n - 1] <= ' ')
        n--;
    for (size_t i = 0; i < n; i++) {
        unsigned c = s[i];
        if (c == '\t' || c == '\n' || c == '\r')
            continue;
        int keep =
            url_keep((int)c) || (c == '%' && i + 2 < n && is_hex(s[i + 1]) && is_hex(s[i + 2]));
        if (c == '#' && hashes++)
            keep = 0; /* only the first '#' starts the fragment */
        if (o + 4 >= cap)
            return 0;
        if (keep) {
            dst[o++] = (char)c;
        } else {
            static const char hex[] = "0123456789ABCDEF";
            dst[o++] = '%';
            dst[o++] = hex[c >> 4];
            dst[o++] = hex[c & 15];
        }
    }
    dst[o] = '\0';
    return o;
}

/* The scheme of url in lower case into out (cap bytes): "" when url has
 * none (a relative reference), "?" when it is too long to be one we allow. */
static void url_scheme(const char *url, char *out, size_t cap)
{
    size_t i = 0;
    out[0] = '\0';
    if (!((url[0] >= 'a' && url[0] <= 'z') || (url[0] >= 'A' && url[0] <= 'Z')))
        return;
    for (; url[i] && url[i] != ':'; i++) {
        char c = url[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '+' || c == '-' || c == '.'))
            return;
    }
    if (url[i] != ':')
        return;
    if (i + 1 > cap) {
        snprintf(out, cap, "?");
        return;
    }
    for (size_t j = 0; j < i; j++)
        out[j] = (char)(url[j] >= 'A' && url[j] <= 'Z' ? url[j] - 'A' + 'a' : url[j]);
    out[i] = '\0';
}

/* Lower-case the scheme and, for URLs with an authority, the host (the
 * parts that are case-insensitive), so that links[] sees one address once. */
static void url_normalise(char *url)
{
    char *p = url;
    for (; *p && *p != ':'; p++)
        if (*p >= 'A' && *p <= 'Z')
            *p = (char)(*p - 'A' + 'a');
    if (p[0] != ':' || p[1] != '/' || p[2] != '/')
        return;
    char *host = p + 3, *end = host;
    while (*end && *end != '/' && *end != '?' && *end != '#')
        end++;
    for (char *q = host; q < end; q++)
        if (*q == '@')
            host = q + 1; /* leave user information as it is */
    for (char *q = host; q < end; q++)
        if (*q >= 'A' && *q <= 'Z')
            *q = (char)(*q - 'A' + 'a');
}

char *skd__html_resolve(const char *base, const char *href, int *frag_only)
{
    char prep[URL_MAX];
    char scheme[16];
    *frag_only = 0;
    if (!href || strlen(href) >= URL_MAX)
        return NULL;
    if (url_prepare(href, prep, sizeof(prep)) == 0)
        return NULL;
    if (prep[0] == '#')
        *frag_only = 1;
    xmlChar *abs = xmlBuildURI((const xmlChar *)prep, (const xmlChar *)base);
    if (!abs)
        return NULL;
    char *res = NULL;
    url_scheme((const char *)abs, scheme, sizeof(scheme));
    int web = strcmp(scheme, "http") == 0 || strcmp(scheme, "https") == 0;
    const char *after = (const char *)abs + strlen(scheme) + 1;
    /* A web address needs a host: "https:/path" and "http://" are refused. */
    if (web && (strncmp(after, "//", 2) != 0 || strchr("/?#", after[2]) != NULL))
        web = -1;
    /* Against a base every reference becomes absolute; a relative result
     * is only kept when there is no base to resolve it with. */
    if (((scheme[0] == '\0' && !base) || web == 1 || strcmp(scheme, "mailto") == 0) &&
        strlen((const char *)abs) < URL_MAX && abs[0] != '\0') {
        /* xmlBuildURI may decode nothing but can re-emit characters we
         * encoded only if they were already legal; re-encode to be sure the
         * result holds no space, parenthesis or angle bracket. */
        char fin[URL_MAX];
        if (url_prepare((const char *)abs, fin, sizeof(fin)) > 0) {
            url_normalise(fin);
            res = strdup(fin);
        }
    }
    xmlFree(abs);
    return res;
}

/* ---- text ---- */

static int is_space(const unsigned char *s, size_t n, size_t *w)
{
    if (n >= 1 && (s[0] == ' ' || s[0] == '\t' || s[0] == '\n' || s[0] == '\r' || s[0] == '\f')) {
        *w = 1;
        return 1;
    }
    if (n >= 2 && s[0] == 0xc2 && s[1] == 0xa0) { /* U+00A0 no-break space */
        *w = 2;
        return 1;
    }
    return 0;
}

/* Append as much of s[0..n) as fits (cut at a UTF-8 boundary). Returns 1
 * when b is full. */
static int fit(skd_buf *b, const char *s, size_t n)
{
    size_t room = b->max - b->len;
    int full = 0;
    if (n > room) {
        n = skd_utf8_cut(s, room);
        full = 1;
    }
    if (n && skd_buf_append(b, s, n) != 0)
        return 1;
    return full;
}

/* Append text s[0..n) collapsing whitespace (keep_ws 0) or verbatim without
 * control characters (keep_ws 1). Returns 1 when b is full. */
static int gather(skd_buf *b, const char *str, size_t n, int keep_ws)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0;
    while (i < n) {
        size_t w = 0;
        if (!keep_ws && is_space(s + i, n - i, &w)) {
            if (b->len && b->data[b->len - 1] != ' ' && fit(b, " ", 1))
                return 1;
            i += w;
            continue;
        }
        size_t j = i;
        while (j < n && (keep_ws || !is_space(s + j, n - j, &w)) &&
               !(s[j] < 0x20 && s[j] != '\t' && s[j] != '\n') && s[j] != 0x7f)
            j++;
        if (j > i && fit(b, str + i, j - i))
            return 1;
        if (j < n && j == i) {
            if (s[j] == '\r' && keep_ws && fit(b, "\n", 1)) /* CR and CRLF: one newline */
                return 1;
            j++;
            if (keep_ws && s[j - 1] == '\r' && j < n && s[j] == '\n')
                j++;
        }
        i = j;
    }
    return 0;
}

const xmlNode *skd__html_next(const xmlNode *root, const xmlNode *n, int skip)
{
    if (!skip && n->type == XML_ELEMENT_NODE && n->children)
        return n->children;
    while (n != root && !n->next)
        n = n->parent;
    return n == root ? NULL : n->next;
}

void skd__html_text(const xmlNode *root, skd_buf *b, int keep_ws, size_t max_nodes)
{
    const xmlNode *n = root ? root->children : NULL;
    size_t seen = 0;
    while (n && (max_nodes == 0 || seen++ < max_nodes)) {
        int down = 0;
        if (n->type == XML_TEXT_NODE || n->type == XML_CDATA_SECTION_NODE) {
            if (n->content &&
                gather(b, (const char *)n->content, strlen((const char *)n->content), keep_ws))
                break;
        } else if (n->type == XML_ELEMENT_NODE && !skd__html_dropped(n, 1)) {
            if (skd__html_is(n, "br") || (!keep_ws && skd__html_is_block(n))) {
                if (gather(b, "\n", 1, keep_ws))
                    break;
            }
            down = n->children != NULL;
        }
        n = skd__html_next(root, n, !down);
    }
    if (!keep_ws)
        while (b->len && b->data[b->len - 1] == ' ')
            b->data[--b->len] = '\0';
}

char *skd__html_clean(const char *s, size_t max, int *nomem)
{
    skd_buf b;
    size_t len;
    if (!s)
        return NULL;
    skd_buf_init(&b, max);
    const char *p = s;
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r' || *p == '\f')
        p++;
    gather(&b, p, strlen(p), 0);
    while (b.len && b.data[b.len - 1] == ' ')
        b.data[--b.len] = '\0';
    if (b.len && !skd_utf8_valid(b.data, b.len)) {
        skd_buf fixed;
        skd_buf_init(&fixed, max);
        skd_utf8_repair(&fixed, b.data, b.len);
        skd_buf_free(&b);
        b = fixed;
    }
    if (b.len == 0) {
        skd_buf_free(&b);
        return NULL;
    }
    char *r = skd_buf_steal(&b, &len);
    if (!r)
        *nomem = 1;
    return r;
}
