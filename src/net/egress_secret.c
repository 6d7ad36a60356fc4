/*
 * Secrets at the egress proxy (DESIGN.md, "Secrets at egress"): the
 * placeholder a sandbox holds is replaced by the value in a request's
 * header lines, for the secrets bound to the host the proxy itself
 * resolved and connected (the host of the CONNECT or of the absolute URI,
 * never a Host header), and in a response the value is replaced back by
 * the placeholder before the sandbox reads it.
 *
 * What it trusts: the secrets (from the engine) and the host (from the
 * parser, normalised). The head comes from the sandbox: it is only
 * scanned, within its length, and the output is bounded.
 */
#include "net/egress.h"
#include "skilld/util.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

void skd_secrets_free(skd_secret *s, size_t n)
{
    if (!s)
        return;
    for (size_t i = 0; i < n; i++) {
        if (s[i].value) {
            explicit_bzero(s[i].value, strlen(s[i].value));
            free(s[i].value);
        }
        free(s[i].name);
        free(s[i].placeholder);
        free(s[i].hosts);
        free(s[i].headers);
    }
    free(s);
}

int skd_secrets_copy(const skd_secret *s, size_t n, skd_secret **out)
{
    *out = NULL;
    if (!n)
        return 0;
    skd_secret *v = calloc(n, sizeof(*v));
    if (!v)
        return SKD_ENOMEM;
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        bad |= !(v[i].name = strdup(s[i].name));
        bad |= !(v[i].placeholder = strdup(s[i].placeholder));
        bad |= !(v[i].value = strdup(s[i].value));
        bad |= !(v[i].hosts = strdup(s[i].hosts));
        bad |= !(v[i].headers = strdup(s[i].headers ? s[i].headers : ""));
    }
    if (bad) {
        skd_secrets_free(v, n);
        return SKD_ENOMEM;
    }
    *out = v;
    return 0;
}

/* Is header name[0..n) one of the comma-separated names (lower case)?
 * An empty list allows every header. */
static int header_allowed(const char *list, const char *name, size_t n)
{
    if (!list || !*list)
        return 1;
    const char *s = list;
    while (*s) {
        const char *e = strchr(s, ',');
        size_t l = e ? (size_t)(e - s) : strlen(s);
        if (l == n && strncasecmp(s, name, n) == 0)
            return 1;
        if (!e)
            break;
        s = e + 1;
    }
    return 0;
}

uint64_t skd__egress_secrets_bound(const skd_secret *s, size_t n, const char *host)
{
    uint64_t m = 0;
    for (size_t i = 0; i < n && i < SKD_EGRESS_MAX_SECRETS; i++)
        if (skd__egress_host_match(s[i].hosts, host))
            m |= (uint64_t)1 << i;
    return m;
}

static const char *find(const char *h, size_t hl, const char *needle, size_t nl)
{
    return nl && hl >= nl ? memmem(h, hl, needle, nl) : NULL;
}

int skd__egress_subst_head(const skd_secret *s, size_t n, const char *host, const char *in,
                           size_t inlen, char *out, size_t cap, size_t *outlen, uint64_t *used,
                           uint64_t *elsewhere)
{
    size_t o = 0, i = 0;
    *outlen = 0;
    if (n > SKD_EGRESS_MAX_SECRETS)
        n = SKD_EGRESS_MAX_SECRETS;
    uint64_t bound = skd__egress_secrets_bound(s, n, host);
    for (int lineno = 0; i < inlen; lineno++) {
        const char *nl = memchr(in + i, '\n', inlen - i);
        size_t end = nl ? (size_t)(nl - in) + 1 : inlen;
        const char *line = in + i;
        size_t len = end - i;
        const char *colon = lineno ? memchr(line, ':', len) : NULL;
        if (!colon) { /* the request line, the blank line: as they are */
            if (len > cap - o)
                return SKD_ETOOBIG;
            memcpy(out + o, line, len);
            o += len;
            i = end;
            continue;
        }
        size_t namelen = (size_t)(colon - line);
        size_t p = namelen + 1; /* the name and colon are copied as they are */
        if (p > cap - o)
            return SKD_ETOOBIG;
        memcpy(out + o, line, p);
        o += p;
        while (p < len) {
            /* the first placeholder (of any secret) at or after p */
            const char *best = NULL;
            size_t bi = 0;
            for (size_t k = 0; k < n; k++) {
                const char *f = find(line + p, len - p, s[k].placeholder, strlen(s[k].placeholder));
                if (f && (!best || f < best)) {
                    best = f;
                    bi = k;
                }
            }
            size_t upto = best ? (size_t)(best - line) : len;
            if (upto - p > cap - o)
                return SKD_ETOOBIG;
            memcpy(out + o, line + p, upto - p);
            o += upto - p;
            if (!best)
                break;
            size_t pl = strlen(s[bi].placeholder);
            const char *put = s[bi].placeholder;
            if ((bound >> bi & 1) && header_allowed(s[bi].headers, line, namelen)) {
                put = s[bi].value;
                *used |= (uint64_t)1 << bi;
            } else {
                *elsewhere |= (uint64_t)1 << bi;
            }
            size_t ql = strlen(put);
            if (ql > cap - o)
                return SKD_ETOOBIG;
            memcpy(out + o, put, ql);
            o += ql;
            p = upto + pl;
        }
        i = end;
    }
    *outlen = o;
    return 0;
}

/* ---- responses ------------------------------------------------------------ */

/* The end of the head at buf (just past the blank line), or 0. */
static size_t resp_head_end(const char *buf, size_t len)
{
    const char *p = memmem(buf, len, "\r\n\r\n", 4);
    return p ? (size_t)(p - buf) + 4 : 0;
}

/* The value of header name in head[0..hl), or NULL; *vl its length. */
static const char *resp_header(const char *head, size_t hl, const char *name, size_t *vl)
{
    size_t nl = strlen(name);
    const char *p = memchr(head, '\n', hl);
    while (p && (size_t)(p + 1 - head) < hl) {
        const char *line = p + 1;
        const char *e = memchr(line, '\n', hl - (size_t)(line - head));
        if (!e)
            break;
        size_t len = (size_t)(e - line);
        if (len > nl && line[nl] == ':' && strncasecmp(line, name, nl) == 0) {
            const char *v = line + nl + 1;
            while (v < e && (*v == ' ' || *v == '\t'))
                v++;
            const char *ve = e;
            while (ve > v && (ve[-1] == '\r' || ve[-1] == ' ' || ve[-1] == '\t'))
                ve--;
            *vl = (size_t)(ve - v);
            return v;
        }
        p = e;
    }
    return NULL;
}

int skd__egress_resp_status(const char *buf, size_t len)
{
    if (len < 12 || memcmp(buf, "HTTP/1.", 7) != 0 || buf[8] != ' ')
        return -1;
    int s = 0;
    for (int i = 9; i < 12; i++) {
        if (buf[i] < '0' || buf[i] > '9')
            return -1;
        s = s * 10 + (buf[i] - '0');
    }
    return s;
}

/* Walk the chunked body at b[0..len): its encoded length once complete
 * (trailers included), 0 when more is needed, -1 when it is not chunked
 * encoding. When out is not NULL the data is appended there (cap bytes). */
static long dechunk(const char *b, size_t len, char *out, size_t cap, size_t *outlen)
{
    size_t i = 0, o = 0;
    for (;;) {
        const char *nl = memchr(b + i, '\n', len - i);
        if (!nl)
            return 0;
        size_t sz = 0, k = i;
        int digits = 0;
        for (; k < (size_t)(nl - b); k++) {
            char ch = b[k];
            int d = ch >= '0' && ch <= '9'   ? ch - '0'
                    : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
                    : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10
                                             : -1;
            if (d < 0)
                break;
            if (sz > (SIZE_MAX >> 4) || ++digits > 15)
                return -1;
            sz = sz * 16 + (size_t)d;
        }
        if (!digits)
            return -1;
        i = (size_t)(nl - b) + 1;
        if (sz == 0) { /* trailers, then a blank line */
            for (;;) {
                const char *t = memchr(b + i, '\n', len - i);
                if (!t)
                    return 0;
                size_t tl = (size_t)(t - (b + i));
                i = (size_t)(t - b) + 1;
                if (tl == 0 || (tl == 1 && b[i - 2] == '\r')) {
                    if (outlen)
                        *outlen = o;
                    return (long)i;
                }
            }
        }
        if (len - i < sz + 2)
            return 0;
        if (out) {
            if (sz > cap - o)
                return -1;
            memcpy(out + o, b + i, sz);
            o += sz;
        }
        i += sz;
        if (b[i] == '\r')
            i++;
        if (i >= len)
            return 0;
        if (b[i] != '\n')
            return -1;
        i++;
    }
}

long skd__egress_resp_complete(const char *buf, size_t len, int no_body)
{
    size_t hl = resp_head_end(buf, len);
    if (!hl)
        return 0;
    int status = skd__egress_resp_status(buf, len);
    if (no_body || (status >= 100 && status < 200) || status == 204 || status == 304)
        return (long)hl;
    size_t vl = 0;
    const char *te = resp_header(buf, hl, "transfer-encoding", &vl);
    if (te && vl >= 7 && strncasecmp(te + vl - 7, "chunked", 7) == 0) {
        long n = dechunk(buf + hl, len - hl, NULL, 0, NULL);
        return n > 0 ? (long)hl + n : n;
    }
    const char *cl = resp_header(buf, hl, "content-length", &vl);
    if (cl) {
        size_t n = 0;
        for (size_t i = 0; i < vl; i++) {
            if (cl[i] < '0' || cl[i] > '9' || n > ((size_t)1 << 40))
                return -1;
            n = n * 10 + (size_t)(cl[i] - '0');
        }
        return len - hl >= n ? (long)(hl + n) : 0;
    }
    return -1; /* to the end of the connection */
}

/* Replace every value of s in in[0..len) by its placeholder, appending to
 * out; with out NULL only count. Returns the bytes (to be) written. */
static size_t replace_values(const skd_secret *s, size_t n, const char *in, size_t len, char *out)
{
    size_t o = 0, p = 0;
    for (;;) {
        const char *best = NULL;
        size_t bi = 0;
        for (size_t k = 0; k < n; k++) {
            const char *f = find(in + p, len - p, s[k].value, strlen(s[k].value));
            if (f && (!best || f < best)) {
                best = f;
                bi = k;
            }
        }
        size_t upto = best ? (size_t)(best - in) : len;
        if (out)
            memcpy(out + o, in + p, upto - p);
        o += upto - p;
        if (!best)
            return o;
        size_t pl = strlen(s[bi].placeholder);
        if (out)
            memcpy(out + o, s[bi].placeholder, pl);
        o += pl;
        p = upto + strlen(s[bi].value);
    }
}

static int holds_value(const skd_secret *s, size_t n, const char *in, size_t len)
{
    for (size_t k = 0; k < n; k++)
        if (find(in, len, s[k].value, strlen(s[k].value)))
            return 1;
    return 0;
}

/* Write the head in[0..hl) to out (NULL: count): values replaced, and
 * with drop_framing its Content-Length and Transfer-Encoding lines and its
 * blank line left out. */
static size_t scrub_head(const skd_secret *s, size_t n, const char *in, size_t hl, int drop_framing,
                         char *out)
{
    size_t o = 0, i = 0;
    while (i < hl) {
        const char *nl = memchr(in + i, '\n', hl - i);
        size_t e = nl ? (size_t)(nl - in) + 1 : hl;
        const char *line = in + i;
        size_t ll = e - i;
        int blank = line[0] == '\n' || (line[0] == '\r' && ll <= 2);
        int framing = i > 0 && ((ll > 15 && strncasecmp(line, "content-length:", 15) == 0) ||
                                (ll > 18 && strncasecmp(line, "transfer-encoding:", 18) == 0));
        if (!(drop_framing && (blank || framing)))
            o += replace_values(s, n, line, ll, out ? out + o : NULL);
        i = e;
    }
    return o;
}

int skd__egress_scrub(const skd_secret *s, size_t n, const char *in, size_t len, int no_body,
                      char **out, size_t *outlen)
{
    *out = NULL;
    *outlen = 0;
    size_t hl = resp_head_end(in, len), vl = 0;
    const char *te = hl ? resp_header(in, hl, "transfer-encoding", &vl) : NULL;
    int chunked = !no_body && te && vl >= 7 && strncasecmp(te + vl - 7, "chunked", 7) == 0;
    if (!chunked && !holds_value(s, n, in, len))
        return 0; /* as it is */
    /* The body's data: chunked, the value may straddle two chunks. */
    const char *body = in + hl;
    size_t bl = len - hl;
    char *plain = NULL;
    if (chunked) {
        if (!(plain = malloc(bl + 1)))
            return SKD_ENOMEM;
        size_t pl = 0;
        if (dechunk(in + hl, len - hl, plain, bl, &pl) > 0) {
            body = plain;
            bl = pl;
        } else {
            chunked = 0; /* not well formed: the bytes as they are */
        }
    }
    if (!holds_value(s, n, body, bl) && !holds_value(s, n, in, len)) {
        free(plain);
        return 0;
    }
    /* hl == 0: no head (cut short): the bytes alone. A response with a
     * body gets its new length in place of its framing. */
    int reframe = hl && !no_body;
    size_t nbl = replace_values(s, n, body, bl, NULL);
    size_t nhl = hl ? scrub_head(s, n, in, hl, reframe, NULL) : 0;
    size_t cap = nhl + nbl + 64;
    char *o = malloc(cap);
    if (!o) {
        free(plain);
        return SKD_ENOMEM;
    }
    size_t ol = hl ? scrub_head(s, n, in, hl, reframe, o) : 0;
    if (reframe)
        ol += (size_t)snprintf(o + ol, cap - ol, "Content-Length: %zu\r\n\r\n", nbl);
    ol += replace_values(s, n, body, bl, o + ol);
    free(plain);
    *out = o;
    *outlen = ol;
    return 1;
}

int skd__egress_close_head(const char *in, size_t inlen, char *out, size_t cap, size_t *outlen)
{
    static const char *const drop[] = {
        "connection", "keep-alive",      "proxy-connection", "upgrade",
        "te",         "accept-encoding", "trailer",          "proxy-authorization"};
    static const char add[] = "Accept-Encoding: identity\r\nConnection: close\r\n\r\n";
    size_t o = 0, i = 0;
    *outlen = 0;
    for (int lineno = 0; i < inlen; lineno++) {
        const char *nl = memchr(in + i, '\n', inlen - i);
        size_t e = nl ? (size_t)(nl - in) + 1 : inlen;
        const char *line = in + i;
        size_t ll = e - i;
        i = e;
        if (line[0] == '\n' || (line[0] == '\r' && ll <= 2)) {
            if (lineno == 0)
                return SKD_EINVAL;
            if (sizeof(add) - 1 > cap - o)
                return SKD_ETOOBIG;
            memcpy(out + o, add, sizeof(add) - 1);
            *outlen = o + sizeof(add) - 1;
            return 0;
        }
        const char *colon = lineno ? memchr(line, ':', ll) : NULL;
        int skip = 0;
        for (size_t k = 0; colon && k < sizeof(drop) / sizeof(drop[0]) && !skip; k++)
            skip = strlen(drop[k]) == (size_t)(colon - line) &&
                   strncasecmp(line, drop[k], strlen(drop[k])) == 0;
        if (skip)
            continue;
        if (ll > cap - o)
            return SKD_ETOOBIG;
        memcpy(out + o, line, ll);
        o += ll;
    }
    return SKD_EINVAL; /* no blank line */
}
