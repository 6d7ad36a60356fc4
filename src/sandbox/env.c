/*
 * The sandbox's fixed environment (see env.h): the table's rows as the
 * NULL-terminated vectors execve takes, and the test of a name.
 */
#include "sandbox/env.h"
#include "net/egress.h"
#include "skilld/sandbox.h"

#include <string.h>

_Static_assert(SKD_EGRESS_PORT == 3128, "SKD__SANDBOX_PROXY_URL names the egress proxy's port");

#define ROW_BASE(name, value) #name "=" value,
#define ROW_PROXY(name, value)
#define ROW_TRUST(name, value)
#define AS_BASE(name, value, kind) ROW_##kind(name, value)
const char *const skd__sandbox_env_base[] = {SKD__SANDBOX_ENV(AS_BASE) NULL};
#undef ROW_BASE
#undef ROW_PROXY
#undef ROW_TRUST

#define ROW_BASE(name, value)
#define ROW_PROXY(name, value) #name "=" value,
#define ROW_TRUST(name, value)
#define AS_PROXY(name, value, kind) ROW_##kind(name, value)
const char *const skd__sandbox_env_proxy[] = {SKD__SANDBOX_ENV(AS_PROXY) NULL};
#undef ROW_BASE
#undef ROW_PROXY
#undef ROW_TRUST

#define ROW_BASE(name, value)
#define ROW_PROXY(name, value)
#define ROW_TRUST(name, value) #name "=" value,
#define AS_TRUST(name, value, kind) ROW_##kind(name, value)
const char *const skd__sandbox_env_trust[] = {SKD__SANDBOX_ENV(AS_TRUST) NULL};

int skd__sandbox_env_is_proxy(const char *entry)
{
    size_t len = strcspn(entry, "=");
    for (const char *const *p = skd__sandbox_env_proxy; *p; p++)
        if (strncmp(*p, entry, len) == 0 && (*p)[len] == '=')
            return 1;
    return 0;
}

/* A name a trust setting could be moved with besides the TRUST rows. */
static const char *const ca_names[] = {"SSL_CERT_DIR", NULL};

static int in_rows(const char *const *rows, const char *name, size_t len)
{
    for (const char *const *p = rows; *p; p++)
        if (strncmp(*p, name, len) == 0 && ((*p)[len] == '=' || (*p)[len] == '\0'))
            return 1;
    return 0;
}

int skd_sandbox_env_reserved(const char *name)
{
    size_t len = strcspn(name, "=");
    if (strncmp(name, "SKILLD_", 7) == 0 || strncmp(name, "SKILLS_", 7) == 0)
        return 1;
    return in_rows(skd__sandbox_env_base, name, len) ||
           in_rows(skd__sandbox_env_proxy, name, len) ||
           in_rows(skd__sandbox_env_trust, name, len) || in_rows(ca_names, name, len);
}
