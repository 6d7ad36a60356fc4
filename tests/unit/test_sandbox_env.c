/* Unit tests for the sandbox's one environment table (src/sandbox/env.h):
 * the base rows, the proxy rows, the test of a name, the names a secret
 * may not take and the texts of the files skilld puts in the root. */
#include "sandbox/env.h"
#include "skilld/sandbox.h"
#include "tap.h"

#include <stdlib.h>
#include <string.h>

TEST(base_rows)
{
    const char *const *b = skd__sandbox_env_base;
    CHECK_STR(b[0], "PATH=/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin");
    CHECK_STR(b[1], "HOME=/workspace");
    CHECK_STR(b[2], "LANG=C.UTF-8");
    CHECK_STR(b[3], "TMPDIR=/tmp");
    CHECK(b[4] == NULL);
}

TEST(proxy_rows)
{
    const char *const *p = skd__sandbox_env_proxy;
    size_t n = 0;
    for (; p[n]; n++)
        CHECK(skd__sandbox_env_is_proxy(p[n]));
    CHECK_EQ_INT(n, 9);
    CHECK_STR(p[0], "HTTP_PROXY=http://127.0.0.1:3128");
    CHECK_STR(p[6], "NO_PROXY=");
    CHECK_STR(p[8], "NODE_USE_ENV_PROXY=1");
    CHECK(skd__sandbox_env_is_proxy("https_proxy=http://elsewhere:1"));
    CHECK(skd__sandbox_env_is_proxy("no_proxy"));
    CHECK(!skd__sandbox_env_is_proxy("HTTP_PROXYX=1"));
    CHECK(!skd__sandbox_env_is_proxy("HTTP_PROX=1"));
    CHECK(!skd__sandbox_env_is_proxy("PATH=/bin"));
    CHECK(!skd__sandbox_env_is_proxy(""));
}

/* The names a secret may not take, and the files skilld puts in the root. */
TEST(reserved_and_files)
{
    CHECK(skd_sandbox_env_reserved("NODE_OPTIONS"));
    CHECK(skd_sandbox_env_reserved("SSL_CERT_FILE"));
    CHECK(skd_sandbox_env_reserved("SSL_CERT_DIR"));
    CHECK(skd_sandbox_env_reserved("SKILLS_X"));
    CHECK(!skd_sandbox_env_reserved("GH_TOKEN"));
    CHECK(!skd_sandbox_env_reserved("NODE_OPTIONSX"));
    CHECK_STR(SKD__SANDBOX_NODE_OPTION, "--require=/.skilld-egress.cjs");
    CHECK(strncmp(skd__sandbox_node_preload, "'use strict';\n", 14) == 0);
    static const char ca[] = "-----BEGIN CERTIFICATE-----\nX\n-----END CERTIFICATE-----\n";
    char *t = skd__sandbox_trust_text(ca);
    CHECK(t != NULL);
    size_t len = t ? strlen(t) : 0, clen = strlen(ca);
    CHECK(len >= clen && strcmp(t + len - clen, ca) == 0); /* the CA last */
    CHECK(len == clen || t[len - clen - 1] == '\n');       /* after the system's roots */
    free(t);
}

int main(void)
{
    TAP_BEGIN("test_sandbox_env");
    RUN(base_rows);
    RUN(proxy_rows);
    RUN(reserved_and_files);
    return TAP_END();
}
