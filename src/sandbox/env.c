/*
 * The sandbox's fixed environment (see env.h): the table's rows as the
 * NULL-terminated vectors execve takes, and the test of a name.
 */
#include "sandbox/env.h"
#include "net/egress.h"

#include <string.h>

_Static_assert(SKD_EGRESS_PORT == 3128, "SKD__SANDBOX_PROXY_URL names the egress proxy's port");

#define ROW_BASE(name, value) #name "=" value,
#define ROW_PROXY(name, value)
#define AS_BASE(name, value, kind) ROW_##kind(name, value)
const char *const skd__sandbox_env_base[] = {SKD__SANDBOX_ENV(AS_BASE) NULL};
#undef ROW_BASE
#undef ROW_PROXY

#define ROW_BASE(name, value)
#define ROW_PROXY(name, value) #name "=" value,
#define AS_PROXY(name, value, kind) ROW_##kind(name, value)
const char *const skd__sandbox_env_proxy[] = {SKD__SANDBOX_ENV(AS_PROXY) NULL};

int skd__sandbox_env_is_proxy(const char *entry)
{
    size_t len = strcspn(entry, "=");
    for (const char *const *p = skd__sandbox_env_proxy; *p; p++)
        if (strncmp(*p, entry, len) == 0 && (*p)[len] == '=')
            return 1;
    return 0;
}
