/*
 * Library-internal: the sandbox's fixed environment, one table for every
 * provider and every caller (the runner, the sandbox skills).
 *
 * BASE rows are what every sandbox starts with: a run whose spec has no
 * env gets them, and the sandbox skills put a caller's variables on top
 * (a caller's entry of the same name replaces a BASE one). PROXY rows are
 * the egress proxy's: a run with networkEnabled gets them in place of any
 * entry of those names, so no tool inside can be pointed around the proxy.
 */
#ifndef SKILLD_SANDBOX_ENV_H
#define SKILLD_SANDBOX_ENV_H

#define SKD__SANDBOX_PROXY_URL "http://127.0.0.1:3128" /* SKD_EGRESS_PORT, net/egress.h */

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
    X(NODE_USE_ENV_PROXY, "1", PROXY) /* node >= 24 then honours the ones above */

/* The BASE and the PROXY rows as "NAME=value" strings, NULL-terminated,
 * static. */
extern const char *const skd__sandbox_env_base[];
extern const char *const skd__sandbox_env_proxy[];

/* 1 when the NAME=value entry (or a bare NAME) names a PROXY row. */
int skd__sandbox_env_is_proxy(const char *entry);

#endif
