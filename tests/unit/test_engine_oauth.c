/*
 * The OAuth resource server's settings (src/engine/oauth.c): off without
 * an issuer, refused without a public URL or with a bad issuer or scope
 * list, and the protected-resource metadata (RFC 9728) it serves. The
 * network side (discovery, key sets, rotation, the refetch limit) is
 * driven against a real provider by tests/node/oauth.test.mjs.
 */
#include "skilld/config.h"
#include "skilld/oauth.h"
#include "skilld/registry.h"
#include "tap.h"

/* A configuration with the given settings (NULL: unset). */
static skd_config *cfg_with(const char *pub, const char *iss, const char *scopes)
{
    skd_config *cfg = skd_config_new();
    if (pub)
        skd_config_set(cfg, "SKILLD_PUBLIC_URL", pub, NULL);
    if (iss)
        skd_config_set(cfg, "SKILLD_OAUTH_ISSUER", iss, NULL);
    if (scopes)
        skd_config_set(cfg, "SKILLD_OAUTH_SCOPES", scopes, NULL);
    return cfg;
}

/* skd_oauth_new's code for these settings, and err's message holding why. */
static int refused(const char *pub, const char *iss, const char *scopes, const char *why)
{
    skd_config *cfg = cfg_with(pub, iss, scopes);
    skd_oauth *o = NULL;
    skd_err err = {0};
    int rc = skd_oauth_new(cfg, &o, &err);
    int ok = rc == SKD_ECONFIG && !o && strstr(skd_err_msg(&err), why);
    if (!ok)
        printf("# rc %d: %s (wanted %s)\n", rc, skd_err_msg(&err), why);
    skd_oauth_free(o);
    skd_config_free(cfg);
    return ok;
}

TEST(off_without_issuer)
{
    skd_config *cfg = cfg_with("https://s.example", NULL, NULL);
    skd_oauth *o = (skd_oauth *)1;
    skd_err err = {0};
    CHECK_EQ_INT(skd_oauth_new(cfg, &o, &err), 0);
    CHECK(o == NULL);
    skd_config_free(cfg);
}

TEST(bad_settings_refused)
{
    CHECK(refused(NULL, "https://id.example", NULL, "SKILLD_PUBLIC_URL"));
    CHECK(refused("ftp://s.example", "https://id.example", NULL, "SKILLD_PUBLIC_URL"));
    CHECK(refused("https://s.example", "id.example", NULL, "SKILLD_OAUTH_ISSUER"));
    CHECK(refused("https://s.example", "https://id.example/?x=1", NULL, "SKILLD_OAUTH_ISSUER"));
    CHECK(refused("https://s.example", "https://u:p@id.example", NULL, "SKILLD_OAUTH_ISSUER"));
    CHECK(refused("https://s.example", " , ", NULL, "names no issuer"));
    CHECK(refused("https://s.example", "https://id.example", "skills:read openid",
                  "SKILLD_OAUTH_SCOPES"));
    CHECK(refused("https://s.example", "https://id.example", " ", "SKILLD_OAUTH_SCOPES"));
}

TEST(metadata_two_issuers)
{
    skd_config *cfg = cfg_with("https://s.example/base/", "https://a.example, https://b.example/r",
                               "skills:read,skills:admin");
    skd_oauth *o = NULL;
    skd_err err = {0};
    CHECK_EQ_INT(skd_oauth_new(cfg, &o, &err), 0);
    CHECK(o != NULL);
    if (o) {
        CHECK_STR(skd_oauth_resource(o), "https://s.example/base/mcp");
        CHECK_STR(skd_oauth_metadata_url(o),
                  "https://s.example/base/.well-known/oauth-protected-resource/mcp");
        CHECK_EQ_INT(skd_oauth_allowed_scopes(o), SKD_SCOPE_READ | SKD_SCOPE_ADMIN);
        json_t *m = skd_oauth_metadata(o);
        char *s = json_dumps(m, JSON_COMPACT | JSON_SORT_KEYS);
        CHECK_STR(s, "{\"authorization_servers\":[\"https://a.example\",\"https://b.example/r\"],"
                     "\"bearer_methods_supported\":[\"header\"],"
                     "\"resource\":\"https://s.example/base/mcp\",\"resource_name\":\"skilld\","
                     "\"scopes_supported\":[\"skills:read\",\"skills:admin\"]}");
        free(s);
        json_decref(m);
        CHECK_EQ_INT(skd_oauth_jwks_fetches(o), 0); /* nothing is fetched before a token */
    }
    skd_oauth_free(o);
    skd_config_free(cfg);
}

/* A token of an issuer that is not configured is refused before any
 * fetch; so is one that is not a JWT. */
TEST(verify_refuses_before_fetching)
{
    skd_config *cfg = cfg_with("https://s.example", "https://a.example", NULL);
    skd_oauth *o = NULL;
    skd_err err = {0};
    CHECK_EQ_INT(skd_oauth_new(cfg, &o, &err), 0);
    skd_oauth_identity id;
    /* {"alg":"RS256","typ":"at+jwt","kid":"k"} . {"iss":"https://evil.example"} . sig */
    const char *tok = "eyJhbGciOiJSUzI1NiIsInR5cCI6ImF0K2p3dCIsImtpZCI6ImsifQ."
                      "eyJpc3MiOiJodHRwczovL2V2aWwuZXhhbXBsZSJ9.c2ln";
    CHECK_EQ_INT(skd_oauth_verify(o, tok, &id, &err), SKD_EUNAUTH);
    CHECK(strstr(skd_err_msg(&err), "not a configured issuer") != NULL);
    CHECK_EQ_INT(skd_oauth_verify(o, "skd_not_a_jwt", &id, &err), SKD_EUNAUTH);
    CHECK_EQ_INT(skd_oauth_jwks_fetches(o), 0);
    CHECK(id.sub[0] == '\0');
    skd_oauth_free(o);
    skd_config_free(cfg);
}

int main(void)
{
    TAP_BEGIN("test_engine_oauth");
    RUN(off_without_issuer);
    RUN(bad_settings_refused);
    RUN(metadata_two_issuers);
    RUN(verify_refuses_before_fetching);
    return TAP_END();
}
