/*
 * The egress proxy: the only way out of a sandbox that has network.
 *
 * A sandbox with networkEnabled keeps a network namespace of its own with
 * nothing but loopback. skilld places a listening TCP socket on that
 * loopback (127.0.0.1:3128) and hands its descriptor to this proxy, which
 * the unprivileged server runs. The proxy speaks two things on it:
 *
 *   CONNECT host:port HTTP/1.1     a tunnel (TLS stays end to end; skilld
 *                                  terminates nothing)
 *   GET http://host[:port]/p HTTP/1.1   plain HTTP in absolute form, sent
 *                                  upstream in origin form with
 *                                  "Connection: close"
 *
 * Every upstream connection is made by skilld: the host is matched against
 * the operator's host patterns (narrowed per key and per skill), resolved by
 * skilld (SKILLS_OUTBOUND_RESOLVE pins, then the system resolver), and each
 * address is put through the outbound guard (skd_net_guard_check_addr, the
 * check http_request uses) right before connect(). The sandbox has no
 * resolver and needs none.
 *
 * What it trusts: nothing that arrives on a proxy socket. The request head
 * is parsed by a bounded parser (skd__egress_parse_head) that refuses
 * anything it does not fully understand. The configuration is trusted.
 *
 * Threads: one event-loop thread (epoll) serves every run's sockets, with
 * two helper threads for blocking name resolution. A connection that
 * carries a secret (a CONNECT to a host one is bound to, intercepted; a
 * plain-HTTP request a value went into) is handed, once connected, to a
 * thread of its own (egress_worker.c); every other one stays on the loop.
 * The functions below are thread-safe.
 */
#ifndef SKILLD_NET_EGRESS_H
#define SKILLD_NET_EGRESS_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "skilld/config.h"
#include "skilld/error.h"
#include "skilld/net.h"

/* Port of the proxy on the sandbox's loopback. */
#define SKD_EGRESS_PORT 3128

/* Parser bounds: a request head (request line and headers, blank line
 * included), one line of it, and the number of header lines. */
#define SKD_EGRESS_HEAD_MAX 16384
#define SKD_EGRESS_LINE_MAX 8192
#define SKD_EGRESS_HEADERS_MAX 100
#define SKD_EGRESS_HOST_MAX 253

/* ---- the request-head parser (pure; fuzzed by tests/fuzz/fuzz_egress.c) */

typedef struct skd_egress_req {
    int connect;                        /* 1: CONNECT; 0: absolute-URI HTTP */
    char method[24];                    /* as sent (a token) */
    char host[SKD_EGRESS_HOST_MAX + 1]; /* lower case, no trailing dot, no [] */
    int port;                           /* 1..65535 */
    size_t head_len;                    /* bytes of the head, blank line included */
    int status;                         /* on refusal: 400, 403, 414, 431, 501 */
    char reason[160];                   /* on refusal: why, for a person */
} skd_egress_req;

/*
 * Parse the request head at buf[0..len). Returns 1 when the head is not
 * complete yet (read more; len is below SKD_EGRESS_HEAD_MAX), 0 when it is
 * complete and acceptable, SKD_EINVAL when it is refused (req->status and
 * req->reason say why). For plain HTTP, the head to send upstream (origin
 * form, Host from the URI, proxy and hop-by-hop headers dropped,
 * "Connection: close") is written to out (at most outcap bytes, which must
 * be at least SKD_EGRESS_HEAD_MAX + 256) with its length in *outlen; for
 * CONNECT *outlen is 0. Everything is borrowed.
 */
int skd__egress_parse_head(const char *buf, size_t len, skd_egress_req *req, char *out,
                           size_t outcap, size_t *outlen);

/* 1 when host (normalised: lower case, no trailing dot) matches one of the
 * comma-separated patterns: "*" matches every host, "*.example.org" every
 * name below example.org (not example.org itself), anything else exactly
 * that host. Case and one trailing dot of a pattern are ignored. */
int skd__egress_host_match(const char *patterns, const char *host);

/* ---- secrets (egress_secret.c) ------------------------------------------ */

/* Secrets a run may carry at most (bits of a uint64_t). */
#define SKD_EGRESS_MAX_SECRETS 64
/* The longest request head once placeholders are replaced; a longer one is
 * refused (431). */
#define SKD_EGRESS_SUBST_MAX (48 * 1024)

/* Bit i set when secret i is bound to host. */
uint64_t skd__egress_secrets_bound(const skd_secret *s, size_t n, const char *host);

/*
 * Copy the request head in[0..inlen) to out (cap bytes), replacing in the
 * header lines (never the request line) each placeholder of a secret bound
 * to host, in a header the secret allows, by its value. Bit i of *used is
 * set for a secret put in, of *elsewhere for a placeholder of secret i left
 * as it was (another host, or a header it may not go in). 0 with *outlen,
 * or SKD_ETOOBIG when out is too small. Everything borrowed.
 */
int skd__egress_subst_head(const skd_secret *s, size_t n, const char *host, const char *in,
                           size_t inlen, char *out, size_t cap, size_t *outlen, uint64_t *used,
                           uint64_t *elsewhere);

/* The head again for a connection that carries a secret: the headers that
 * would keep it open or upgrade it, and Accept-Encoding, dropped (so a
 * response comes as plain bytes the scrub can read), then
 * "Accept-Encoding: identity" and "Connection: close". 0 with *outlen,
 * SKD_ETOOBIG, or SKD_EINVAL when in holds no complete head. */
int skd__egress_close_head(const char *in, size_t inlen, char *out, size_t cap, size_t *outlen);

/* The status of the response at buf (HTTP/1.x NNN), or -1. */
int skd__egress_resp_status(const char *buf, size_t len);

/* The length of the complete response at buf[0..len) (the head and the
 * body its framing gives; no_body for the answer to HEAD), 0 when more is
 * needed, -1 when it lasts until the connection ends. */
long skd__egress_resp_complete(const char *buf, size_t len, int no_body);

/*
 * The response in[0..len) with every value of s replaced by its
 * placeholder, in its head and its body (a chunked body is decoded first,
 * so a value split across chunks is found; the answer then carries a
 * Content-Length). Returns 0 when nothing changes (forward in as it is), 1
 * with *out (a new buffer, caller frees) and *outlen, or SKD_ENOMEM.
 */
int skd__egress_scrub(const skd_secret *s, size_t n, const char *in, size_t len, int no_body,
                      char **out, size_t *outlen);

/* ---- one run's policy -------------------------------------------------- */

typedef struct skd_egress_limits {
    int max_conns;          /* connections at once */
    int64_t max_bytes_up;   /* bytes from the sandbox, all its connections together */
    int64_t max_bytes_down; /* bytes to the sandbox, all its connections together */
    int64_t idle_ms;        /* a connection with no byte either way is closed after this */
    int64_t conn_ms;        /* the longest a connection may live */
} skd_egress_limits;

/* At most this many lists of each kind in a policy (operator, key, skill). */
#define SKD_EGRESS_MAX_LISTS 4

typedef struct skd_egress_policy {
    skd_egress_limits limits;
    /* A host must match every allow list and no deny list. The operator's
     * lists are always the first; a key or a skill can only add lists, so it
     * can narrow what is reachable, never widen it. Strings borrowed. */
    const char *allow[SKD_EGRESS_MAX_LISTS];
    size_t nallow;
    const char *deny[SKD_EGRESS_MAX_LISTS];
    size_t ndeny;
    /* The key's secrets (borrowed; attach copies them), at most
     * SKD_EGRESS_MAX_SECRETS. */
    const skd_secret *secrets;
    size_t nsecrets;
} skd_egress_policy;

/* The operator's policy from cfg (borrowed; the strings point into it):
 * SKILLS_SANDBOX_EGRESS_ALLOW_HOSTS, ..._DENY_HOSTS and the limits. */
void skd__egress_policy_defaults(skd_egress_policy *p, const skd_config *cfg);

/* Add a narrowing allow list and/or a deny list (either may be NULL).
 * SKD_EINVAL when the policy holds SKD_EGRESS_MAX_LISTS lists already. */
int skd__egress_policy_narrow(skd_egress_policy *p, const char *allow, const char *deny,
                              skd_err *err);

/* The operator's narrowing for key from SKILLS_SANDBOX_EGRESS_KEY_ALLOW_HOSTS
 * ("key=pattern,pattern;key2=pattern"): the patterns copied into buf (cap
 * bytes), or NULL when the key has no entry (or it does not fit: then ""
 * in buf, which matches nothing: fail closed). */
const char *skd__egress_key_hosts(const skd_config *cfg, const char *key, char *buf, size_t cap);

/* The host decision alone: 0, or SKD_EFORBIDDEN with the reason. */
int skd__egress_policy_check_host(const skd_egress_policy *p, const char *host, skd_err *err);

/* ---- the proxy service ------------------------------------------------- */

typedef struct skd_egress skd_egress;
typedef struct skd_egress_run skd_egress_run;

/* Start the service (its event loop and resolver threads). cfg is borrowed
 * and must outlive the service (the guard is built from it). Caller frees
 * with skd__egress_free. */
int skd__egress_new(const skd_config *cfg, skd_egress **out, skd_err *err);

/* Close every run's sockets and connections, stop the threads, free. NULL ok. */
void skd__egress_free(skd_egress *e);

/*
 * Serve the listening TCP socket listen_fd (steals it: closed on every
 * path) for one run under policy p (copied, with its strings). *out is the
 * run's handle for skd__egress_detach. SKD_EINVAL for a bad fd or policy.
 */
int skd__egress_attach(skd_egress *e, int listen_fd, const skd_egress_policy *p,
                       skd_egress_run **out, skd_err *err);

/*
 * Stop serving run: the listening socket and every connection of the run are
 * closed. Returns what the run did as a new JSON array (one object per
 * destination and verdict: host, port, address, connections, bytesUp,
 * bytesDown, verdict "allowed" | "refused" | "cut", reason), or NULL when
 * out of memory. run is freed. NULL run gives NULL.
 */
json_t *skd__egress_detach(skd_egress *e, skd_egress_run *run);

/*
 * What run did since it was attached or last taken, as skd__egress_detach
 * gives it (connections that ended; one still open is counted when it
 * ends), and forget it: the run goes on being served. For a proxy that
 * lives longer than one command (a live sandbox's). New JSON array, or
 * NULL when out of memory (nothing is forgotten then). NULL run gives NULL.
 */
json_t *skd__egress_take(skd_egress_run *run);

/* Connections of run open at this moment (accepted, not yet ended and
 * recorded). Thread-safe; NULL run gives 0. */
int skd__egress_open_conns(skd_egress_run *run);

/* Requests the proxies refused (403 and the like) and connections they cut
 * at a limit, since the process started (for /metrics). Thread-safe. */
uint64_t skd_egress_refused_total(void);
uint64_t skd_egress_cut_total(void);

/* The egress CA's certificate (PEM) as a new string in *pem (NULL: only
 * make sure it exists), made in DATA_DIR on first use (egress_tls.c). 0,
 * or SKD_E* with err: a run with secrets then does not start. */
int skd__egress_ca_pem(skd_egress *e, char **pem, skd_err *err);

/* Runs being served at this moment (for doctor and tests). */
int skd__egress_active_runs(skd_egress *e);

/* The egress proxy's state for `skilld doctor` (egress_doctor.c): a line
 * in detail (cap bytes). 0: off, or on and a probe proxy refused a tunnel
 * to the metadata address; 1: on, but this process cannot place the
 * socket (not root); SKD_E* with err when the probe failed. */
int skd__egress_doctor(const skd_config *cfg, char *detail, size_t cap, skd_err *err);

#endif
