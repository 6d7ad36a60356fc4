/*
 * Outbound networking: the guard that decides which addresses may be
 * reached, and the one fetch helper every outbound skill uses.
 *
 * The guard never trusts a host name as text. The decision is taken on the
 * socket address a connection is actually about to be made to, after DNS,
 * inside libcurl's open-socket callback, on every hop of a redirect chain.
 * Text checks on the URL (scheme, credentials, denied host names) come on
 * top of that, never instead of it.
 */
#ifndef SKILLD_NET_H
#define SKILLD_NET_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "skilld/config.h"
#include "skilld/error.h"

typedef struct skd_cancel skd_cancel;

/*
 * The default policy over one socket address (AF_INET or AF_INET6; any other
 * family is forbidden). Returns NULL when the address may be reached, else a
 * short static reason ("loopback", "private network", "cloud metadata", ...).
 * IPv6 forms that wrap an IPv4 address (mapped ::ffff:0:0/96, compatible
 * ::/96, NAT64 64:ff9b::/96, 6to4 2002::/16) are judged by the IPv4 address
 * they carry. Pure function; thread-safe.
 */
const char *skd_net_addr_forbidden(const struct sockaddr *sa, size_t salen);

/* The administrator's exceptions, parsed from the configuration:
 * SKILLS_OUTBOUND_ALLOW_CIDRS, SKILLS_OUTBOUND_ALLOW_HOSTS,
 * SKILLS_OUTBOUND_DENY_HOSTS and the test pins SKILLS_OUTBOUND_RESOLVE. */
typedef struct skd_net_guard skd_net_guard;

/* Parse the settings of cfg (borrowed, read once). SKD_ECONFIG with a message
 * naming the bad entry. Caller frees with skd_net_guard_free. */
int skd_net_guard_new(const skd_config *cfg, skd_net_guard **out, skd_err *err);
void skd_net_guard_free(skd_net_guard *g); /* NULL ok */

/* Text check of a URL host (as CURLU returns it; IPv6 in brackets): refused
 * with SKD_EBLOCKED when it is, or is below, a SKILLS_OUTBOUND_DENY_HOSTS
 * entry. Comparison ignores case and one trailing dot. */
int skd_net_guard_check_host(const skd_net_guard *g, const char *host, skd_err *err);

/* The decision for a connection to sa made on behalf of URL host `host`:
 * 0 when allowed (default policy, or an ALLOW_CIDRS entry covers the address,
 * or host is in ALLOW_HOSTS), else SKD_EBLOCKED with the reason. A refusal
 * counts in skd_net_blocked_total(). */
int skd_net_guard_check_addr(const skd_net_guard *g, const char *host, const struct sockaddr *sa,
                             size_t salen, skd_err *err);

/* The SKILLS_OUTBOUND_RESOLVE pins as "host:port:address" strings, borrowed
 * from g (count in *n). */
const char *const *skd_net_guard_pins(const skd_net_guard *g, size_t *n);

/* Connections refused by the guard since the process started (for
 * /metrics). Thread-safe. */
uint64_t skd_net_blocked_total(void);

/* Validate an outbound URL: http or https only, a host, no user name or
 * password, at most SKD_NET_URL_MAX bytes. code is SKD_EINVAL for a caller's
 * URL and SKD_EBLOCKED for a redirect target. */
#define SKD_NET_URL_MAX 8192
int skd_net_url_check(const char *url, int code, skd_err *err);

/*
 * A secret as the egress proxy uses it (src/net/egress_secret.c): the
 * sandbox holds only the placeholder; the proxy puts the value in its place
 * in request headers named by headers (comma-separated, lower case; "" for
 * any) on connections to a host that matches hosts (comma-separated
 * patterns, "*.example.org" for the names below example.org). Every string
 * is owned by the array (skd_secrets_free).
 */
typedef struct skd_secret {
    char *name;
    char *placeholder;
    char *value;
    char *hosts;
    char *headers;
} skd_secret;
/* Wipe every value and free the n secrets and s. NULL ok. */
void skd_secrets_free(skd_secret *s, size_t n);
/* A deep copy of the n secrets in *out (caller frees with skd_secrets_free);
 * SKD_ENOMEM. n 0 gives NULL. */
int skd_secrets_copy(const skd_secret *s, size_t n, skd_secret **out);

/* Redirects followed at most by skd_http_fetch. */
#define SKD_HTTP_MAX_REDIRECTS 5

/* One outbound request. Everything is borrowed. */
typedef struct skd_fetch_req {
    const char *url;
    const char *method; /* GET (default), HEAD, POST, PUT, PATCH, DELETE */
    /* "Name: value" lines, NULL or nheaders of them. After a redirect to another
     * origin only content-negotiation headers (accept*, content-type, if-*,
     * range, ...) follow, so a key or token never leaves its origin. */
    const char *const *headers;
    size_t nheaders;
    const void *body; /* request body or NULL */
    size_t body_len;
    int64_t timeout_ms;   /* one deadline: DNS, connect, every hop, the whole body */
    size_t max_bytes;     /* body bytes kept, counted after decompression */
    int follow_redirects; /* follow up to SKD_HTTP_MAX_REDIRECTS, each checked */
    skd_cancel *cancel;   /* optional */
    /* The URL is the operator's own configuration (an OAuth issuer and the
     * key set on its origin, src/engine/oauth.c): the default policy's
     * refusal of private and loopback addresses does not apply to it
     * (SKILLS_OUTBOUND_DENY_HOSTS still does). Never set for a URL that a
     * caller, a skill or a remote document chose. */
    int operator_url;
} skd_fetch_req;

/* The answer. Every pointer is owned by the response (skd_fetch_resp_free). */
typedef struct skd_fetch_resp {
    long status;
    char *status_text;  /* reason phrase ("" for HTTP/2 without a table entry) */
    char *final_url;    /* the URL of the last hop */
    char *content_type; /* lower-cased media type without parameters, "" if none */
    char *charset;      /* charset parameter, "" if none */
    json_t *headers;    /* object: lower-case name -> value (repeats joined by ", ") */
    char *body;         /* NUL-terminated (terminator not counted) */
    size_t body_len;
    int truncated; /* the body was cut at max_bytes */
    int redirects; /* hops followed */
    int64_t duration_ms;
} skd_fetch_resp;

/*
 * Make the request through the guard. Returns 0 with *resp filled (any HTTP
 * status is a success here), or an SKD_E* code with err set: SKD_EINVAL (bad
 * URL or method), SKD_EBLOCKED (guard refusal, redirect to a forbidden URL),
 * SKD_ETIMEOUT (the deadline passed), SKD_ENETWORK (DNS, connect, TLS, more
 * than SKD_HTTP_MAX_REDIRECTS redirects), SKD_ECANCELLED, SKD_ENOMEM.
 * cfg is borrowed. resp must be released with skd_fetch_resp_free whatever
 * the result.
 */
int skd_http_fetch(const skd_config *cfg, const skd_fetch_req *req, skd_fetch_resp *resp,
                   skd_err *err);
void skd_fetch_resp_free(skd_fetch_resp *resp); /* NULL ok; safe twice */

#endif
