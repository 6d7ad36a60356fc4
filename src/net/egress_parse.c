/*
 * The egress proxy's request-head parser and host patterns (see
 * src/net/egress.h).
 *
 * Every byte here comes from sandboxed code, so the parser is strict and
 * bounded: the head is at most SKD_EGRESS_HEAD_MAX bytes, a line at most
 * SKD_EGRESS_LINE_MAX, at most SKD_EGRESS_HEADERS_MAX header lines; a
 * request line is exactly METHOD SP target SP HTTP/1.x; header names are
 * tokens, values carry no control bytes, obsolete line folding and
 * conflicting framing headers are refused. It never allocates and never
 * reads past len. Anything it does not fully understand is refused with a
 * status and a reason a person can act on.
 */
#include "net/egress.h"
#include "skilld/util.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

static int refuse(skd_egress_req *req, int status, const char *why)
{
    req->status = status;
    skd_strlcpy(req->reason, why, sizeof(req->reason));
    return SKD_EINVAL;
}

static int is_tchar(unsigned char c)
{
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
        return 1;
    return c && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

static char lower(char c)
{
    return (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
}

/* Find the end of the head: the offset just past the blank line, or 0. */
static size_t head_end(const char *buf, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        if (buf[i] != '\n')
            continue;
        if (i + 1 < len && buf[i + 1] == '\n')
            return i + 2;
        if (i + 2 < len && buf[i + 1] == '\r' && buf[i + 2] == '\n')
            return i + 3;
    }
    return 0;
}

/* Bounded output: append n bytes or fail. */
struct out {
    char *p;
    size_t len, cap;
    int over;
};

static void put(struct out *o, const char *s, size_t n)
{
    if (o->over || n > o->cap - o->len) {
        o->over = 1;
        return;
    }
    memcpy(o->p + o->len, s, n);
    o->len += n;
}

static void puts_(struct out *o, const char *s)
{
    put(o, s, strlen(s));
}

/* Parse a port (1..65535, digits only, at most 5). -1 when bad. */
static int parse_port(const char *s, size_t n)
{
    if (n == 0 || n > 5)
        return -1;
    int v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v >= 1 && v <= 65535 ? v : -1;
}

/*
 * Parse an authority host[:port] (no userinfo) into req->host/port. def_port
 * 0 means the port is required. IPv6 literals come in brackets, with no zone.
 */
static int parse_authority(const char *s, size_t n, int def_port, skd_egress_req *req)
{
    const char *host = s, *port = NULL;
    size_t hlen, plen = 0;
    if (n == 0)
        return refuse(req, 400, "the request names no host");
    if (memchr(s, '@', n))
        return refuse(req, 403, "credentials in URLs are not allowed");
    if (s[0] == '[') {
        const char *rb = memchr(s, ']', n);
        if (!rb)
            return refuse(req, 400, "an IPv6 address must end with ']'");
        host = s + 1;
        hlen = (size_t)(rb - host);
        size_t rest = n - (size_t)(rb + 1 - s);
        if (rest) {
            if (rb[1] != ':')
                return refuse(req, 400, "unexpected bytes after the IPv6 address");
            port = rb + 2;
            plen = rest - 1;
        }
        char tmp[INET6_ADDRSTRLEN + 1];
        unsigned char bin[16];
        if (hlen == 0 || hlen >= sizeof(tmp))
            return refuse(req, 400, "not a valid IPv6 address");
        memcpy(tmp, host, hlen);
        tmp[hlen] = '\0';
        if (inet_pton(AF_INET6, tmp, bin) != 1)
            return refuse(req, 400, "not a valid IPv6 address (zones are not allowed)");
    } else {
        const char *colon = memchr(s, ':', n);
        hlen = colon ? (size_t)(colon - s) : n;
        if (colon) {
            port = colon + 1;
            plen = n - hlen - 1;
        }
        if (hlen > 1 && host[hlen - 1] == '.')
            hlen--;
        for (size_t i = 0; i < hlen; i++) {
            char c = lower(host[i]);
            if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
                  c == '_'))
                return refuse(req, 400,
                              "the host name may hold only letters, digits, '-', '_' and '.'");
        }
    }
    if (hlen == 0 || hlen > SKD_EGRESS_HOST_MAX)
        return refuse(req, 400, "the host name is empty or longer than 253 bytes");
    for (size_t i = 0; i < hlen; i++)
        req->host[i] = lower(host[i]);
    req->host[hlen] = '\0';
    if (port && plen == 0 && def_port)
        port = NULL; /* "host:" means the default port (RFC 3986) */
    if (port) {
        req->port = parse_port(port, plen);
        if (req->port < 0)
            return refuse(req, 400, "the port must be a number from 1 to 65535");
    } else if (def_port) {
        req->port = def_port;
    } else {
        return refuse(req, 400, "CONNECT needs host:port");
    }
    return 0;
}

/* Header names never sent upstream: hop-by-hop ones, every Proxy-* (they
 * are for this proxy), and Host (replaced by the URI's authority). */
static int dropped_header(const char *name, size_t n)
{
    if (n >= 6 && strncasecmp(name, "proxy-", 6) == 0)
        return 1;
    static const char *const drop[] = {
        "host",    "connection", "proxy-connection",    "keep-alive",        "te",
        "trailer", "upgrade",    "proxy-authorization", "proxy-authenticate"};
    for (size_t i = 0; i < sizeof(drop) / sizeof(drop[0]); i++)
        if (strlen(drop[i]) == n && strncasecmp(name, drop[i], n) == 0)
            return 1;
    return 0;
}

/* The request line: METHOD SP target SP HTTP/1.x. Fills req and, for plain
 * HTTP, writes the origin-form request line and Host to o. */
static int request_line(const char *l, size_t n, skd_egress_req *req, struct out *o)
{
    const char *sp1 = memchr(l, ' ', n);
    if (!sp1 || sp1 == l)
        return refuse(req, 400, "the request line is not METHOD TARGET HTTP/1.1");
    size_t mlen = (size_t)(sp1 - l);
    if (mlen >= sizeof(req->method))
        return refuse(req, 501, "the method is longer than 23 bytes");
    for (size_t i = 0; i < mlen; i++)
        if (!is_tchar((unsigned char)l[i]))
            return refuse(req, 400, "the method is not a token");
    memcpy(req->method, l, mlen);
    req->method[mlen] = '\0';
    const char *t = sp1 + 1, *end = l + n;
    const char *sp2 = memchr(t, ' ', (size_t)(end - t));
    if (!sp2 || sp2 == t)
        return refuse(req, 400, "the request line is not METHOD TARGET HTTP/1.1");
    size_t tlen = (size_t)(sp2 - t);
    const char *ver = sp2 + 1;
    size_t vlen = (size_t)(end - ver);
    if (vlen != 8 || (memcmp(ver, "HTTP/1.1", 8) != 0 && memcmp(ver, "HTTP/1.0", 8) != 0))
        return refuse(req, 400, "only HTTP/1.0 and HTTP/1.1 are spoken here");
    for (size_t i = 0; i < tlen; i++)
        if ((unsigned char)t[i] <= 0x20 || (unsigned char)t[i] >= 0x7f)
            return refuse(req, 400, "the request target holds a control or non-ASCII byte");
    if (strcmp(req->method, "CONNECT") == 0) {
        req->connect = 1;
        return parse_authority(t, tlen, 0, req);
    }
    if (tlen >= 8 && strncasecmp(t, "https://", 8) == 0)
        return refuse(req, 400, "an https:// URL goes through CONNECT (set HTTPS_PROXY)");
    if (tlen < 7 || strncasecmp(t, "http://", 7) != 0) {
        if (t[0] == '/')
            return refuse(req, 400,
                          "this is a proxy: send an absolute http:// URI or CONNECT host:port");
        return refuse(req, 400, "only http:// URIs and CONNECT are served");
    }
    const char *a = t + 7, *te = t + tlen, *ae = a;
    while (ae < te && *ae != '/' && *ae != '?' && *ae != '#')
        ae++;
    int rc = parse_authority(a, (size_t)(ae - a), 80, req);
    if (rc)
        return rc;
    const char *pe = memchr(ae, '#', (size_t)(te - ae));
    if (!pe)
        pe = te;
    put(o, req->method, mlen);
    put(o, " ", 1);
    if (ae == pe || *ae != '/')
        put(o, "/", 1);
    put(o, ae, (size_t)(pe - ae));
    put(o, " ", 1);
    put(o, ver, 8);
    puts_(o, "\r\nHost: ");
    int v6 = strchr(req->host, ':') != NULL;
    if (v6)
        put(o, "[", 1);
    puts_(o, req->host);
    if (v6)
        put(o, "]", 1);
    if (req->port != 80) {
        char p[8];
        snprintf(p, sizeof(p), ":%d", req->port);
        puts_(o, p);
    }
    puts_(o, "\r\n");
    return 0;
}

/* One header line: checked, and copied to o unless dropped. */
static int header_line(const char *l, size_t n, skd_egress_req *req, struct out *o, int *has_cl,
                       int *has_te)
{
    if (l[0] == ' ' || l[0] == '\t')
        return refuse(req, 400, "folded header lines are not accepted");
    const char *colon = memchr(l, ':', n);
    if (!colon || colon == l)
        return refuse(req, 400, "a header line has no name");
    size_t nlen = (size_t)(colon - l);
    for (size_t i = 0; i < nlen; i++)
        if (!is_tchar((unsigned char)l[i]))
            return refuse(req, 400, "a header name is not a token");
    for (const char *v = colon + 1; v < l + n; v++)
        if (((unsigned char)*v < 0x20 && *v != '\t') || (unsigned char)*v == 0x7f)
            return refuse(req, 400, "a header value holds a control byte");
    if (nlen == 14 && strncasecmp(l, "content-length", 14) == 0)
        (*has_cl)++;
    if (nlen == 17 && strncasecmp(l, "transfer-encoding", 17) == 0)
        (*has_te)++;
    if (!req->connect && !dropped_header(l, nlen)) {
        put(o, l, n);
        puts_(o, "\r\n");
    }
    return 0;
}

/* The longest line in buf[0..len), terminated or not. */
static size_t longest_line(const char *buf, size_t len, int *first)
{
    size_t best = 0, start = 0;
    *first = 1;
    for (size_t i = 0; i <= len; i++) {
        if (i == len || buf[i] == '\n') {
            if (i - start > best) {
                best = i - start;
                *first = start == 0;
            }
            start = i + 1;
        }
    }
    return best;
}

int skd__egress_parse_head(const char *buf, size_t len, skd_egress_req *req, char *out,
                           size_t outcap, size_t *outlen)
{
    memset(req, 0, sizeof(*req));
    *outlen = 0;
    size_t scan = len < SKD_EGRESS_HEAD_MAX ? len : SKD_EGRESS_HEAD_MAX;
    size_t end = head_end(buf, scan);
    int first;
    size_t longest = longest_line(buf, end ? end : scan, &first);
    if (longest > SKD_EGRESS_LINE_MAX)
        return first ? refuse(req, 414, "the request line is longer than 8192 bytes")
                     : refuse(req, 431, "a header line is longer than 8192 bytes");
    if (!end) {
        if (len >= SKD_EGRESS_HEAD_MAX)
            return refuse(req, 431, "the request head is longer than 16384 bytes");
        return 1;
    }
    req->head_len = end;
    struct out o = {out, 0, outcap, 0};
    int nheaders = 0, has_cl = 0, has_te = 0, rc;
    size_t s = 0;
    for (int lineno = 0;; lineno++) {
        const char *nl = memchr(buf + s, '\n', end - s);
        size_t e = (size_t)(nl - buf); /* a '\n' is always found before end */
        size_t n = e - s;
        if (n && buf[s + n - 1] == '\r')
            n--;
        if (memchr(buf + s, '\r', n) || memchr(buf + s, '\0', n))
            return refuse(req, 400, "a stray CR or NUL byte in the request head");
        if (n == 0) {
            if (lineno == 0)
                return refuse(req, 400, "the request starts with an empty line");
            break;
        }
        if (lineno == 0)
            rc = request_line(buf + s, n, req, &o);
        else if (++nheaders > SKD_EGRESS_HEADERS_MAX)
            return refuse(req, 431, "more than 100 header lines");
        else
            rc = header_line(buf + s, n, req, &o, &has_cl, &has_te);
        if (rc)
            return rc;
        s = e + 1;
    }
    if (has_te && (has_cl || req->connect))
        return refuse(req, 400, "Transfer-Encoding with Content-Length or CONNECT");
    if (has_cl > 1 || has_te > 1)
        return refuse(req, 400, "a framing header is repeated");
    if (!req->connect) {
        puts_(&o, "Connection: close\r\n\r\n");
        if (o.over)
            return refuse(req, 431, "the request head is too large to forward");
        *outlen = o.len;
    }
    return 0;
}

/* ---- host patterns ------------------------------------------------------ */

/* Does one pattern p[0..n) (trimmed, any case) match host? */
static int pattern_match(const char *p, size_t n, const char *host)
{
    if (n > 1 && p[n - 1] == '.')
        n--;
    if (n == 1 && p[0] == '*')
        return 1;
    size_t hl = strlen(host);
    if (n > 2 && p[0] == '*' && p[1] == '.') {
        size_t sl = n - 1; /* ".example.org" */
        return hl > sl && strncasecmp(host + hl - sl, p + 1, sl) == 0;
    }
    return hl == n && strncasecmp(host, p, n) == 0;
}

int skd__egress_host_match(const char *patterns, const char *host)
{
    const char *s = patterns;
    while (s && *s) {
        const char *e = strchr(s, ',');
        size_t n = e ? (size_t)(e - s) : strlen(s);
        const char *q = s;
        while (n && (*q == ' ' || *q == '\t')) {
            q++;
            n--;
        }
        while (n && (q[n - 1] == ' ' || q[n - 1] == '\t'))
            n--;
        if (n && pattern_match(q, n, host))
            return 1;
        s = e ? e + 1 : NULL;
    }
    return 0;
}

/* ---- the policy ---------------------------------------------------------- */

void skd__egress_policy_defaults(skd_egress_policy *p, const skd_config *cfg)
{
    memset(p, 0, sizeof(*p));
    p->limits.max_conns = (int)skd_config_int(cfg, "SKILLS_SANDBOX_EGRESS_MAX_CONNECTIONS");
    p->limits.max_bytes_up = skd_config_int(cfg, "SKILLS_SANDBOX_EGRESS_MAX_BYTES_UP");
    p->limits.max_bytes_down = skd_config_int(cfg, "SKILLS_SANDBOX_EGRESS_MAX_BYTES_DOWN");
    p->limits.idle_ms = skd_config_int(cfg, "SKILLS_SANDBOX_EGRESS_IDLE_MS");
    p->limits.conn_ms = skd_config_int(cfg, "SKILLS_SANDBOX_EGRESS_CONN_MS");
    p->allow[p->nallow++] = skd_config_str(cfg, "SKILLS_SANDBOX_EGRESS_ALLOW_HOSTS");
    p->deny[p->ndeny++] = skd_config_str(cfg, "SKILLS_SANDBOX_EGRESS_DENY_HOSTS");
}

int skd__egress_policy_narrow(skd_egress_policy *p, const char *allow, const char *deny,
                              skd_err *err)
{
    if ((allow && p->nallow >= SKD_EGRESS_MAX_LISTS) || (deny && p->ndeny >= SKD_EGRESS_MAX_LISTS))
        return skd_err_set(err, SKD_EINVAL, "too many egress host lists");
    if (allow)
        p->allow[p->nallow++] = allow;
    if (deny)
        p->deny[p->ndeny++] = deny;
    return 0;
}

const char *skd__egress_key_hosts(const skd_config *cfg, const char *key, char *buf, size_t cap)
{
    const char *s = skd_config_str(cfg, "SKILLS_SANDBOX_EGRESS_KEY_ALLOW_HOSTS");
    size_t kl = key ? strlen(key) : 0;
    while (kl && s && *s) {
        while (*s == ' ' || *s == ';')
            s++;
        const char *end = strchr(s, ';');
        size_t n = end ? (size_t)(end - s) : strlen(s);
        if (n > kl && strncmp(s, key, kl) == 0 && s[kl] == '=') {
            buf[0] = '\0';
            if (n - kl - 1 < cap) {
                memcpy(buf, s + kl + 1, n - kl - 1);
                buf[n - kl - 1] = '\0';
            }
            return buf;
        }
        s = end;
    }
    return NULL;
}

int skd__egress_policy_check_host(const skd_egress_policy *p, const char *host, skd_err *err)
{
    for (size_t i = 0; i < p->ndeny; i++)
        if (p->deny[i] && skd__egress_host_match(p->deny[i], host))
            return skd_err_set(err, SKD_EFORBIDDEN, "host %s is denied by the egress policy%s",
                               host, i == 0 ? " (SKILLS_SANDBOX_EGRESS_DENY_HOSTS)" : "");
    for (size_t i = 0; i < p->nallow; i++)
        if (!p->allow[i] || !skd__egress_host_match(p->allow[i], host))
            return skd_err_set(err, SKD_EFORBIDDEN, "host %s is not in the egress allow list%s",
                               host,
                               i == 0 ? " (SKILLS_SANDBOX_EGRESS_ALLOW_HOSTS)"
                                      : " (narrowed for this key or skill)");
    return 0;
}
