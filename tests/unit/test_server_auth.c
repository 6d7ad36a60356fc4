/* Unit tests for the DNS-rebinding checks (src/server/auth.c): Host values
 * against SKILLD_ALLOWED_HOSTS (port ignored) and Origin values (local
 * origins always allowed, others only when listed). */
#include "server/http.h"
#include "tap.h"

TEST(host_allow_list)
{
    const char *def = "localhost,127.0.0.1,[::1]";
    CHECK(skd__auth_host_allowed(def, "localhost"));
    CHECK(skd__auth_host_allowed(def, "localhost:8080"));
    CHECK(skd__auth_host_allowed(def, "LOCALHOST:1"));
    CHECK(skd__auth_host_allowed(def, "127.0.0.1:9"));
    CHECK(skd__auth_host_allowed(def, "[::1]:8080"));
    CHECK(skd__auth_host_allowed(def, "[::1]"));
    CHECK(!skd__auth_host_allowed(def, "evil.example"));
    CHECK(!skd__auth_host_allowed(def, "evil.example:8080"));
    CHECK(!skd__auth_host_allowed(def, "localhost.evil.example"));
    CHECK(!skd__auth_host_allowed(def, "127.0.0.1.nip.io"));
    CHECK(!skd__auth_host_allowed(def, "127.0.0.2"));
    CHECK(!skd__auth_host_allowed(def, "[::2]:80"));
    CHECK(!skd__auth_host_allowed(def, ""));
    CHECK(!skd__auth_host_allowed(def, NULL));
    CHECK(!skd__auth_host_allowed(def, "local"));
    CHECK(skd__auth_host_allowed("skills.example.com, localhost", "skills.example.com:443"));
    CHECK(skd__auth_host_allowed("*", "anything.example"));
    CHECK(!skd__auth_host_allowed("", "localhost"));
}

TEST(origin_allow_list)
{
    CHECK(skd__auth_origin_allowed("", NULL)); /* not a browser */
    CHECK(skd__auth_origin_allowed("", "http://localhost:3000"));
    CHECK(skd__auth_origin_allowed("", "https://127.0.0.1"));
    CHECK(skd__auth_origin_allowed("", "http://[::1]:5173"));
    CHECK(!skd__auth_origin_allowed("", "http://evil.example"));
    CHECK(!skd__auth_origin_allowed("", "null"));
    CHECK(!skd__auth_origin_allowed("", "file://"));
    CHECK(!skd__auth_origin_allowed("", "http://localhost.evil.example"));
    CHECK(!skd__auth_origin_allowed("", "http://localhost/evil"));
    CHECK(!skd__auth_origin_allowed("", "ftp://localhost"));
    CHECK(skd__auth_origin_allowed("https://app.example", "https://app.example"));
    CHECK(!skd__auth_origin_allowed("https://app.example", "http://app.example"));
    CHECK(!skd__auth_origin_allowed("https://app.example", "https://app.example.evil"));
}

int main(void)
{
    TAP_BEGIN("test_server_auth");
    RUN(host_allow_list);
    RUN(origin_allow_list);
    return TAP_END();
}
