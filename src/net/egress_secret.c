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

#include <openssl/crypto.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

void skd_secrets_free(skd_secret *s, size_t n)
{
    if (!s)
        return;
    for (size_t i = 0; i < n; i++) {
        if (s[i].value) {
            OPENSSL_cleanse(s[i].value, strlen(s[i].value));
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
