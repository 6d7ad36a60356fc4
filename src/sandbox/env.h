/*
 * Library-internal: the sandbox's fixed environment, one table for every
 * provider and every caller (the runner, the sandbox skills).
 *
 * BASE rows are what every sandbox starts with: a run whose spec has no
 * env gets them, and the sandbox skills put a caller's variables on top
 * (a caller's entry of the same name replaces a BASE one). PROXY rows are
 * the egress proxy's: a run with networkEnabled gets them in place of any
 * entry of those names, so no tool inside can be pointed around the proxy.
 * TRUST rows name the trust bundle (the system's roots and the egress CA)
 * given to a run with secrets (docs/egress.md, Secrets): TLS to a host a
 * secret is bound to is terminated by the proxy with a leaf of that CA.
 */
#ifndef SKILLD_SANDBOX_ENV_H
#define SKILLD_SANDBOX_ENV_H

#define SKD__SANDBOX_PROXY_URL "http://127.0.0.1:3128" /* SKD_EGRESS_PORT, net/egress.h */
#define SKD__SANDBOX_TRUST_BUNDLE "/.skilld-trust.pem" /* in the sandbox's root */
/* networkEnabled: node's fetch through the proxy (node < 22.21), a file of
 * the sandbox's root that NODE_OPTIONS requires (SKD__SANDBOX_NODE_OPTION,
 * put before any NODE_OPTIONS of the caller's). */
#define SKD__SANDBOX_NODE_PRELOAD "/.skilld-egress.cjs"
#define SKD__SANDBOX_NODE_OPTION "--require=" SKD__SANDBOX_NODE_PRELOAD

/* X(name, value, kind) */
#define SKD__SANDBOX_ENV(X)                                                                        \
    X(PATH, "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin", BASE)                  \
    X(HOME, "/workspace", BASE)                                                                    \
    X(LANG, "C.UTF-8", BASE)                                                                       \
    X(TMPDIR, "/tmp", BASE)                                                                        \
    X(HTTP_PROXY, SKD__SANDBOX_PROXY_URL, PROXY)                                                   \
    X(HTTPS_PROXY, SKD__SANDBOX_PROXY_URL, PROXY)                                                  \
    X(http_proxy, SKD__SANDBOX_PROXY_URL, PROXY)                                                   \
    X(https_proxy, SKD__SANDBOX_PROXY_URL, PROXY)                                                  \
    X(ALL_PROXY, SKD__SANDBOX_PROXY_URL, PROXY)                                                    \
    X(all_proxy, SKD__SANDBOX_PROXY_URL, PROXY)                                                    \
    X(NO_PROXY, "", PROXY) /* nothing bypasses the proxy */                                        \
    X(no_proxy, "", PROXY)                                                                         \
    X(NODE_USE_ENV_PROXY, "1", PROXY) /* node >= 24 then honours the ones above */                 \
    X(SSL_CERT_FILE, SKD__SANDBOX_TRUST_BUNDLE, TRUST) /* OpenSSL, Python */                       \
    X(REQUESTS_CA_BUNDLE, SKD__SANDBOX_TRUST_BUNDLE, TRUST)                                        \
    X(NODE_EXTRA_CA_CERTS, SKD__SANDBOX_TRUST_BUNDLE, TRUST)                                       \
    X(CURL_CA_BUNDLE, SKD__SANDBOX_TRUST_BUNDLE, TRUST)                                            \
    X(GIT_SSL_CAINFO, SKD__SANDBOX_TRUST_BUNDLE, TRUST)

/* The BASE, PROXY and TRUST rows as "NAME=value" strings, NULL-terminated,
 * static. */
extern const char *const skd__sandbox_env_base[];
extern const char *const skd__sandbox_env_proxy[];
extern const char *const skd__sandbox_env_trust[];

/* The text of SKD__SANDBOX_NODE_PRELOAD (env.c). */
extern const char skd__sandbox_node_preload[];

/* The trust bundle's text: the system's roots (the host's
 * /etc/ssl/certs/ca-certificates.crt, when there is one of at most 768 KiB)
 * then ca_pem. Returns a new string (caller frees), or NULL when out of
 * memory. */
char *skd__sandbox_trust_text(const char *ca_pem);

/* 1 when the NAME=value entry (or a bare NAME) names a PROXY row. */
int skd__sandbox_env_is_proxy(const char *entry);

#endif
