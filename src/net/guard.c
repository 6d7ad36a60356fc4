/*
 * The outbound guard (see include/skilld/net.h): the policy over socket
 * addresses and the administrator's exceptions.
 *
 * Trusts nothing it is given: a socket address is judged by its bytes, with
 * every IPv6 form that wraps an IPv4 address unwrapped first; host names are
 * only ever compared against the administrator's lists, never used to decide
 * that an address is safe. The settings come from the configuration, which is
 * trusted (the administrator wrote it).
 */
#include "net/pin.h"
#include "skilld/net.h"
#include "skilld/util.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- the default policy ---------------------------------------------- */

struct range4 {
    uint32_t net;
    int prefix;
    const char *why;
};

/* Most specific first: the first match gives the reason. */
static const struct range4 deny4[] = {
    {0xA9FEA9FEu, 32, "cloud metadata"},            /* 169.254.169.254 */
    {0x646464C8u, 32, "cloud metadata"},            /* 100.100.100.200 */
    {0xFFFFFFFFu, 32, "broadcast"},                 /* 255.255.255.255 */
    {0x00000000u, 8, "unspecified"},                /* 0.0.0.0/8 */
    {0x0A000000u, 8, "private network"},            /* 10/8 */
    {0x64400000u, 10, "carrier-grade NAT"},         /* 100.64/10 */
    {0x7F000000u, 8, "loopback"},                   /* 127/8 */
    {0xA9FE0000u, 16, "link-local"},                /* 169.254/16 */
    {0xAC100000u, 12, "private network"},           /* 172.16/12 */
    {0xC0000000u, 24, "IETF protocol assignments"}, /* 192.0.0/24 */
    {0xC0000200u, 24, "documentation"},             /* 192.0.2/24 */
    {0xC0586300u, 24, "6to4 relay anycast"},        /* 192.88.99/24 */
    {0xC0A80000u, 16, "private network"},           /* 192.168/16 */
    {0xC6120000u, 15, "benchmarking"},              /* 198.18/15 */
    {0xC6336400u, 24, "documentation"},             /* 198.51.100/24 */
    {0xCB007100u, 24, "documentation"},             /* 203.0.113/24 */
    {0xE0000000u, 4, "multicast"},                  /* 224/4 */
    {0xF0000000u, 4, "reserved"},                   /* 240/4 */
};

static int in_prefix(const uint8_t *a, const uint8_t *net, int prefix)
{
    int full = prefix / 8, rest = prefix % 8;
    if (memcmp(a, net, (size_t)full) != 0)
        return 0;
    if (rest == 0)
        return 1;
    uint8_t mask = (uint8_t)(0xFF << (8 - rest));
    return (a[full] & mask) == (net[full] & mask);
}

static const char *v4_forbidden(uint32_t a)
{
    for (size_t i = 0; i < sizeof(deny4) / sizeof(deny4[0]); i++) {
        uint32_t mask = deny4[i].prefix ? 0xFFFFFFFFu << (32 - deny4[i].prefix) : 0;
        if ((a & mask) == (deny4[i].net & mask))
            return deny4[i].why;
    }
    return NULL;
}

static uint32_t load32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

struct range6 {
    uint8_t net[16];
    int prefix;
    const char *why;
};

static const struct range6 deny6[] = {
    {{0xfd, 0x00, 0x0e, 0xc2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x02, 0x54}, 128, "cloud metadata"},
    {{0x00, 0x64, 0xff, 0x9b, 0x00, 0x01}, 48, "local NAT64"},
    {{0x01, 0x00}, 64, "discard-only"},
    {{0x20, 0x01, 0x0d, 0xb8}, 32, "documentation"},
    {{0x20, 0x01, 0x00, 0x02, 0x00, 0x00}, 48, "benchmarking"},
    {{0x20, 0x01, 0x00, 0x10}, 28, "ORCHID"},
    {{0x20, 0x01, 0x00, 0x20}, 28, "ORCHIDv2"},
    {{0x20, 0x01, 0x00, 0x00}, 32, "Teredo tunnel"},
    {{0x3f, 0xff}, 20, "documentation"},
    {{0xfc}, 7, "unique local (private)"},
    {{0xfe, 0x80}, 10, "link-local"},
    {{0xfe, 0xc0}, 10, "site-local"},
    {{0xff}, 8, "multicast"},
};

static const char *v6_forbidden(const uint8_t *a)
{
    static const uint8_t zero12[12] = {0};
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    static const uint8_t nat64[12] = {0x00, 0x64, 0xff, 0x9b};
    if (memcmp(a, zero12, 12) == 0) {
        uint32_t v4 = load32(a + 12);
        if (v4 == 0)
            return "unspecified";
        if (v4 == 1)
            return "loopback";
        return v4_forbidden(v4); /* IPv4-compatible ::a.b.c.d */
    }
    if (memcmp(a, mapped, 12) == 0 || memcmp(a, nat64, 12) == 0)
        return v4_forbidden(load32(a + 12));
    if (a[0] == 0x20 && a[1] == 0x02) /* 6to4 2002:AABB:CCDD::/48 */
        return v4_forbidden(load32(a + 2));
    for (size_t i = 0; i < sizeof(deny6) / sizeof(deny6[0]); i++)
        if (in_prefix(a, deny6[i].net, deny6[i].prefix))
            return deny6[i].why;
    /* Whatever is left outside global unicast 2000::/3 is reserved. */
    if ((a[0] & 0xE0) != 0x20)
        return "reserved";
    return NULL;
}

const char *skd_net_addr_forbidden(const struct sockaddr *sa, size_t salen)
{
    if (!sa)
        return "no address";
    if (sa->sa_family == AF_INET && salen >= sizeof(struct sockaddr_in)) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        return v4_forbidden(ntohl(in->sin_addr.s_addr));
    }
    if (sa->sa_family == AF_INET6 && salen >= sizeof(struct sockaddr_in6)) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
        return v6_forbidden(in6->sin6_addr.s6_addr);
    }
    return "address family not allowed";
}

/* ---- administrator's exceptions --------------------------------------- */

struct cidr {
    int family;
    uint8_t net[16];
    int prefix;
};

struct skd_net_guard {
    struct cidr *allow;
    size_t nallow;
    char **allow_hosts;
    size_t nallow_hosts;
    char **deny_hosts;
    size_t ndeny_hosts;
    char **pins;
    size_t npins;
};

static _Atomic uint64_t blocked_total;

uint64_t skd_net_blocked_total(void)
{
    return atomic_load(&blocked_total);
}

/* Split a comma-separated list into trimmed non-empty strings (new array of
 * new strings, caller frees both). Host names are lower-cased and lose one
 * trailing dot when `hosts`. */
static int split_list(const char *s, int hosts, char ***out, size_t *n)
{
    *out = NULL;
    *n = 0;
    size_t cap = 1;
    for (const char *p = s; *p; p++)
        cap += *p == ',';
    char **v = calloc(cap, sizeof(*v));
    if (!v)
        return SKD_ENOMEM;
    const char *p = s;
    while (*p) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        const char *q = p;
        while (len && (*q == ' ' || *q == '\t')) {
            q++;
            len--;
        }
        while (len && (q[len - 1] == ' ' || q[len - 1] == '\t'))
            len--;
        if (hosts && len > 1 && q[len - 1] == '.')
            len--;
        if (len) {
            char *item = strndup(q, len);
            if (!item)
                goto nomem;
            if (hosts)
                for (char *c = item; *c; c++)
                    *c = (char)(*c >= 'A' && *c <= 'Z' ? *c + 32 : *c);
            v[(*n)++] = item;
        }
        p = e ? e + 1 : p + strlen(p);
    }
    *out = v;
    return 0;
nomem:
    for (size_t i = 0; i < *n; i++)
        free(v[i]);
    free(v);
    *n = 0;
    return SKD_ENOMEM;
}

static void free_list(char **v, size_t n)
{
    for (size_t i = 0; v && i < n; i++)
        free(v[i]);
    free(v);
}

static int parse_cidr(const char *s, struct cidr *c)
{
    char addr[INET6_ADDRSTRLEN + 8];
    const char *slash = strchr(s, '/');
    size_t len = slash ? (size_t)(slash - s) : strlen(s);
    if (len == 0 || len >= sizeof(addr))
        return SKD_EINVAL;
    memcpy(addr, s, len);
    addr[len] = '\0';
    memset(c, 0, sizeof(*c));
    int max;
    if (inet_pton(AF_INET, addr, c->net) == 1) {
        c->family = AF_INET;
        max = 32;
    } else if (inet_pton(AF_INET6, addr, c->net) == 1) {
        c->family = AF_INET6;
        max = 128;
    } else {
        return SKD_EINVAL;
    }
    int64_t prefix = max;
    if (slash && skd_parse_i64(slash + 1, 0, max, &prefix))
        return SKD_EINVAL;
    c->prefix = (int)prefix;
    return 0;
}

int skd__pin_parse(const char *s, struct skd__pin *out)
{
    const char *c1 = strchr(s, ':');
    const char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
    char port[8], addr[INET6_ADDRSTRLEN + 2];
    size_t hlen = c1 ? (size_t)(c1 - s) : 0, plen = c2 ? (size_t)(c2 - c1 - 1) : 0;
    int64_t pn;
    if (!c2 || hlen == 0 || hlen > SKD__PIN_HOST_MAX || plen == 0 || plen >= sizeof(port))
        return SKD_EINVAL;
    memset(out, 0, sizeof(*out));
    for (size_t i = 0; i < hlen; i++)
        out->host[i] = (char)(s[i] >= 'A' && s[i] <= 'Z' ? s[i] + 32 : s[i]);
    memcpy(port, c1 + 1, plen);
    port[plen] = '\0';
    if (skd_parse_i64(port, 1, 65535, &pn))
        return SKD_EINVAL;
    out->port = (int)pn;
    const char *a = c2 + 1;
    size_t alen = strlen(a);
    if (alen >= 2 && a[0] == '[' && a[alen - 1] == ']') {
        a++;
        alen -= 2;
    }
    if (alen == 0 || alen >= sizeof(addr))
        return SKD_EINVAL;
    memcpy(addr, a, alen);
    addr[alen] = '\0';
    struct sockaddr_in *in = (struct sockaddr_in *)&out->sa;
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&out->sa;
    if (inet_pton(AF_INET, addr, &in->sin_addr) == 1) {
        in->sin_family = AF_INET;
        in->sin_port = htons((uint16_t)out->port);
        out->salen = sizeof(*in);
    } else if (inet_pton(AF_INET6, addr, &in6->sin6_addr) == 1) {
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons((uint16_t)out->port);
        out->salen = sizeof(*in6);
    } else {
        return SKD_EINVAL;
    }
    return 0;
}

int skd_net_guard_new(const skd_config *cfg, skd_net_guard **out, skd_err *err)
{
    char **cidrs = NULL;
    size_t ncidrs = 0;
    int rc;
    *out = NULL;
    skd_net_guard *g = calloc(1, sizeof(*g));
    if (!g)
        return skd_err_set(err, SKD_ENOMEM, "out of memory");
    if (split_list(skd_config_str(cfg, "SKILLS_OUTBOUND_ALLOW_CIDRS"), 0, &cidrs, &ncidrs) ||
        split_list(skd_config_str(cfg, "SKILLS_OUTBOUND_ALLOW_HOSTS"), 1, &g->allow_hosts,
                   &g->nallow_hosts) ||
        split_list(skd_config_str(cfg, "SKILLS_OUTBOUND_DENY_HOSTS"), 1, &g->deny_hosts,
                   &g->ndeny_hosts) ||
        split_list(skd_config_str(cfg, "SKILLS_OUTBOUND_RESOLVE"), 0, &g->pins, &g->npins)) {
        rc = skd_err_set(err, SKD_ENOMEM, "out of memory");
        goto out;
    }
    g->allow = calloc(ncidrs ? ncidrs : 1, sizeof(*g->allow));
    if (!g->allow) {
        rc = skd_err_set(err, SKD_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < ncidrs; i++) {
        if (parse_cidr(cidrs[i], &g->allow[g->nallow++])) {
            rc = skd_err_set(err, SKD_ECONFIG, "SKILLS_OUTBOUND_ALLOW_CIDRS: bad CIDR '%s'",
                             cidrs[i]);
            goto out;
        }
    }
    for (size_t i = 0; i < g->npins; i++) {
        struct skd__pin pin;
        if (skd__pin_parse(g->pins[i], &pin) != 0) {
            rc = skd_err_set(err, SKD_ECONFIG,
                             "SKILLS_OUTBOUND_RESOLVE: '%s' is not host:port:address", g->pins[i]);
            goto out;
        }
    }
    free_list(cidrs, ncidrs);
    *out = g;
    return 0;
out:
    free_list(cidrs, ncidrs);
    skd_net_guard_free(g);
    return rc;
}

void skd_net_guard_free(skd_net_guard *g)
{
    if (!g)
        return;
    free(g->allow);
    free_list(g->allow_hosts, g->nallow_hosts);
    free_list(g->deny_hosts, g->ndeny_hosts);
    free_list(g->pins, g->npins);
    free(g);
}

const char *const *skd_net_guard_pins(const skd_net_guard *g, size_t *n)
{
    *n = g->npins;
    return (const char *const *)g->pins;
}

/* host lower-cased without one trailing dot into buf; 0 or SKD_ETOOBIG. */
static int norm_host(const char *host, char *buf, size_t cap)
{
    size_t len = strlen(host);
    if (len > 1 && host[len - 1] == '.')
        len--;
    if (len >= cap)
        return SKD_ETOOBIG;
    for (size_t i = 0; i < len; i++)
        buf[i] = (char)(host[i] >= 'A' && host[i] <= 'Z' ? host[i] + 32 : host[i]);
    buf[len] = '\0';
    return 0;
}

int skd_net_guard_check_host(const skd_net_guard *g, const char *host, skd_err *err)
{
    char h[512];
    if (!host || !*host || norm_host(host, h, sizeof(h)))
        return skd_err_set(err, SKD_EINVAL, "the URL has no usable host");
    size_t hl = strlen(h);
    for (size_t i = 0; i < g->ndeny_hosts; i++) {
        const char *d = g->deny_hosts[i];
        size_t dl = strlen(d);
        if (strcmp(h, d) == 0 ||
            (hl > dl && h[hl - dl - 1] == '.' && strcmp(h + hl - dl, d) == 0)) {
            atomic_fetch_add(&blocked_total, 1);
            return skd_err_set(err, SKD_EBLOCKED, "host %s is denied by SKILLS_OUTBOUND_DENY_HOSTS",
                               h);
        }
    }
    return 0;
}

static int allowed_by_cidr(const skd_net_guard *g, const struct sockaddr *sa, size_t salen)
{
    uint8_t a[16];
    int family = sa->sa_family;
    if (family == AF_INET && salen >= sizeof(struct sockaddr_in)) {
        memcpy(a, &((const struct sockaddr_in *)sa)->sin_addr, 4);
    } else if (family == AF_INET6 && salen >= sizeof(struct sockaddr_in6)) {
        memcpy(a, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
        static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
        if (memcmp(a, mapped, 12) == 0) { /* the same IPv4 host */
            memmove(a, a + 12, 4);
            family = AF_INET;
        }
    } else {
        return 0;
    }
    for (size_t i = 0; i < g->nallow; i++)
        if (g->allow[i].family == family && in_prefix(a, g->allow[i].net, g->allow[i].prefix))
            return 1;
    return 0;
}

static void addr_text(const struct sockaddr *sa, char *buf, size_t cap)
{
    const void *src = NULL;
    if (sa->sa_family == AF_INET)
        src = &((const struct sockaddr_in *)sa)->sin_addr;
    else if (sa->sa_family == AF_INET6)
        src = &((const struct sockaddr_in6 *)sa)->sin6_addr;
    if (!src || !inet_ntop(sa->sa_family, src, buf, (socklen_t)cap))
        skd_strlcpy(buf, "?", cap);
}

int skd_net_guard_check_addr(const skd_net_guard *g, const char *host, const struct sockaddr *sa,
                             size_t salen, skd_err *err)
{
    const char *why = skd_net_addr_forbidden(sa, salen);
    if (!why)
        return 0;
    if (allowed_by_cidr(g, sa, salen))
        return 0;
    char h[512];
    if (host && !norm_host(host, h, sizeof(h))) {
        for (size_t i = 0; i < g->nallow_hosts; i++)
            if (strcmp(h, g->allow_hosts[i]) == 0)
                return 0;
    }
    atomic_fetch_add(&blocked_total, 1);
    char text[INET6_ADDRSTRLEN];
    addr_text(sa, text, sizeof(text));
    return skd_err_set(err, SKD_EBLOCKED, "connection to %s (%s) refused by the outbound guard: %s",
                       host ? host : "?", text, why);
}

/* ---- URL checks ------------------------------------------------------- */

int skd_net_url_check(const char *url, int code, skd_err *err)
{
    CURLU *u = NULL;
    char *scheme = NULL, *host = NULL, *user = NULL, *pass = NULL;
    int rc = 0;
    if (!url || !*url)
        return skd_err_set(err, code, "the URL is empty");
    if (strlen(url) > SKD_NET_URL_MAX)
        return skd_err_set(err, code, "the URL is longer than %d bytes", SKD_NET_URL_MAX);
    if (!(u = curl_url()))
        return skd_err_set(err, SKD_ENOMEM, "out of memory");
    if (curl_url_set(u, CURLUPART_URL, url, CURLU_NON_SUPPORT_SCHEME) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK) {
        rc = skd_err_set(err, code, "not a valid absolute URL");
        goto out;
    }
    if (strcasecmp(scheme, "http") != 0 && strcasecmp(scheme, "https") != 0) {
        rc = skd_err_set(err, code, "scheme %s is not allowed (only http and https)", scheme);
        goto out;
    }
    if (curl_url_get(u, CURLUPART_USER, &user, 0) == CURLUE_OK ||
        curl_url_get(u, CURLUPART_PASSWORD, &pass, 0) == CURLUE_OK) {
        rc = skd_err_set(err, code, "credentials in URLs are not allowed");
        goto out;
    }
    if (curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK || !host || !*host) {
        rc = skd_err_set(err, code, "the URL has no host");
        goto out;
    }
out:
    curl_free(scheme);
    curl_free(host);
    curl_free(user);
    curl_free(pass);
    curl_url_cleanup(u);
    return rc;
}
