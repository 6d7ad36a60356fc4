/* Unit tests for the sandbox's one environment table (src/sandbox/env.h):
 * the base rows, the proxy rows, and the test of a name. */
#include "sandbox/env.h"
#include "tap.h"

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

int main(void)
{
    TAP_BEGIN("test_sandbox_env");
    RUN(base_rows);
    RUN(proxy_rows);
    return TAP_END();
}
