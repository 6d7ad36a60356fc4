/* Unit tests for the registry and the engine's execution path: lookup by
 * name and name@version, shadowing, enable/disable, removal, input
 * validation before the handler, scope checks and audit rows. */
#include "skilld/skilld.h"
#include "skilld/store.h"
#include "tap.h"

#include <stdlib.h>
#include <unistd.h>

static int handler_calls;

static json_t *echo(const skd_ctx *ctx, const json_t *input, void *udata)
{
    handler_calls++;
    json_t *r = skd_result_ok();
    json_object_set_new(r, "tag", json_string((const char *)udata));
    json_object_set_new(r, "key", json_string(ctx->key_id));
    json_object_set(r, "input", (json_t *)input);
    return r;
}

static json_t *bad_handler(const skd_ctx *ctx, const json_t *input, void *udata)
{
    (void)ctx, (void)input, (void)udata;
    return json_pack("{s:i}", "no_success", 1);
}

static int add(skd_registry *r, const char *name, const char *version, const char *owner,
               const char *tag)
{
    json_t *schema = json_pack("{s:s, s:{s:{s:s, s:i}}, s:[s], s:b}", "type", "object",
                               "properties", "msg", "type", "string", "maxLength", 8, "required",
                               "msg", "additionalProperties", 0);
    skd_skill_def d = {.name = name,
                       .version = version,
                       .description = "echo",
                       .input_schema = schema,
                       .mode = SKD_MODE_DIRECT,
                       .handler = echo,
                       .udata = (void *)tag,
                       .owner = owner};
    skd_err e = {0};
    int rc = skd_registry_add(r, &d, 0, &e);
    json_decref(schema);
    return rc;
}

TEST(lookup_versions_and_shadowing)
{
    skd_registry *r = skd_registry_new();
    skd_err e = {0};
    CHECK_EQ_INT(add(r, "echo", "1.0.0", NULL, "g100"), 0);
    CHECK_EQ_INT(add(r, "echo", "1.2.0", NULL, "g120"), 0);
    CHECK_EQ_INT(add(r, "echo", "1.2.0", "alice", "a120"), 0);
    CHECK_EQ_INT(add(r, "echo", "1.0.0", NULL, "dup"), SKD_EEXISTS);
    CHECK_EQ_INT(add(r, "Bad", "1.0.0", NULL, "x"), SKD_EINVAL);
    CHECK_EQ_INT(add(r, "echo", "1.0", NULL, "x"), SKD_EINVAL);

    skd_skill *s = skd_registry_lookup(r, "echo", NULL, &e);
    CHECK(s && strcmp(skd_skill_version(s), "1.2.0") == 0 && !skd_skill_owner(s));
    skd_skill_unref(s);
    s = skd_registry_lookup(r, "echo", "alice", &e);
    CHECK(s && skd_skill_owner(s) && strcmp(skd_skill_owner(s), "alice") == 0);
    skd_skill_unref(s);
    s = skd_registry_lookup(r, "echo@1.0.0", "alice", &e);
    CHECK(s && strcmp(skd_skill_version(s), "1.0.0") == 0);
    skd_skill_unref(s);
    CHECK(!skd_registry_lookup(r, "echo@9.9.9", NULL, &e));
    CHECK_EQ_INT(e.code, SKD_ENOENT);
    CHECK(!skd_registry_lookup(r, "../etc", NULL, &e));
    CHECK_EQ_INT(e.code, SKD_EINVAL);

    size_t n;
    skd_skill **l = skd_registry_list(r, "bob", 1, 0, &n);
    CHECK_EQ_INT(n, 1);
    skd_skill_list_free(l, n);
    l = skd_registry_list(r, "alice", 0, 0, &n);
    CHECK_EQ_INT(n, 3);
    skd_skill_list_free(l, n);

    unsigned long g = skd_registry_generation(r);
    CHECK_EQ_INT(skd_registry_set_enabled(r, "echo", "1.2.0", NULL, 0, &e), 0);
    CHECK(skd_registry_generation(r) > g);
    l = skd_registry_list(r, NULL, 1, 0, &n);
    CHECK(n == 1 && strcmp(skd_skill_version(l[0]), "1.0.0") == 0);
    skd_skill_list_free(l, n);

    /* a looked-up skill survives removal */
    s = skd_registry_lookup(r, "echo@1.0.0", NULL, &e);
    CHECK_EQ_INT(skd_registry_remove(r, "echo", "1.0.0", NULL, &e), 0);
    CHECK(s && strcmp(skd_skill_name(s), "echo") == 0);
    skd_skill_unref(s);
    CHECK_EQ_INT(skd_registry_remove(r, "echo", "1.0.0", NULL, &e), SKD_ENOENT);
    skd_registry_free(r);
}

TEST(engine_validates_and_audits)
{
    char dir[] = "/tmp/skilld-eng-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    skd_config *cfg = skd_config_new();
    skd_err e = {0};
    CHECK_EQ_INT(skd_config_set(cfg, "DATA_DIR", dir, &e), 0);
    skd_engine *eng = NULL;
    CHECK_EQ_INT(skd_engine_open(cfg, &eng, &e), 0);
    if (!eng) {
        skd_config_free(cfg);
        return;
    }
    CHECK_EQ_INT(add(skd_engine_registry(eng), "echo", "1.0.0", NULL, "g"), 0);
    skd_skill_def d = {.name = "broken", .version = "1.0.0", .handler = bad_handler,
                       .input_schema = json_object()};
    CHECK_EQ_INT(skd_registry_add(skd_engine_registry(eng), &d, 0, &e), 0);
    json_decref(d.input_schema);

    json_t *in = json_pack("{s:s}", "msg", "hi");
    skd_call c = {.key_id = "alice", .scopes = SKD_SCOPE_ALL, .skill = "echo", .input = in};
    char id[37];
    handler_calls = 0;
    json_t *r = skd_engine_execute(eng, &c, id);
    CHECK(skd_result_success(r));
    CHECK_STR(skd_json_str(r, "key", NULL), "alice");
    CHECK_EQ_INT(handler_calls, 1);
    json_decref(r);
    json_t *row = skd_store_audit_get(skd_engine_store(eng), "alice", id, &e);
    CHECK(row && strcmp(skd_json_str(row, "status", ""), "success") == 0);
    CHECK(row && strlen(skd_json_str(row, "inputSha256", "")) == 64);
    json_decref(row);
    CHECK(!skd_store_audit_get(skd_engine_store(eng), "bob", id, &e));

    /* schema violations never reach the handler */
    json_t *bad[] = {json_pack("{s:i}", "msg", 1), json_pack("{s:s}", "msg", "far too long"),
                     json_pack("{}"), json_pack("{s:s, s:i}", "msg", "x", "extra", 1)};
    for (size_t i = 0; i < 4; i++) {
        c.input = bad[i];
        r = skd_engine_execute(eng, &c, NULL);
        CHECK_STR(skd_result_code(r), "invalid_input");
        json_decref(r);
        json_decref(bad[i]);
    }
    CHECK_EQ_INT(handler_calls, 1);

    c.input = in;
    c.scopes = SKD_SCOPE_READ;
    r = skd_engine_execute(eng, &c, NULL);
    CHECK_STR(skd_result_code(r), "forbidden");
    json_decref(r);
    c.scopes = SKD_SCOPE_ALL;
    c.skill = "nope";
    r = skd_engine_execute(eng, &c, NULL);
    CHECK_STR(skd_result_code(r), "not_found");
    json_decref(r);
    /* A long multibyte name: the error message is cut at its cap, never
     * in the middle of a character (the result would not build). */
    char longname[700] = "";
    for (size_t i = 0; i + 2 < sizeof(longname); i += 2)
        memcpy(longname + i, "\xc3\xa9", 2);
    longname[sizeof(longname) - 1] = '\0';
    longname[sizeof(longname) - 2] = 'x';
    c.skill = longname;
    r = skd_engine_execute(eng, &c, NULL);
    CHECK_STR(skd_result_code(r), "invalid_input");
    json_decref(r);
    c.skill = "broken";
    r = skd_engine_execute(eng, &c, NULL);
    CHECK_STR(skd_result_code(r), "internal_error");
    json_decref(r);
    skd_registry_set_enabled(skd_engine_registry(eng), "echo", NULL, NULL, 0, &e);
    c.skill = "echo";
    r = skd_engine_execute(eng, &c, NULL);
    CHECK_STR(skd_result_code(r), "skill_disabled");
    json_decref(r);

    json_t *list = skd_store_audit_list(skd_engine_store(eng), "alice", 100, &e);
    CHECK(json_array_size(list) >= 7);
    json_decref(list);
    json_decref(in);
    skd_engine_close(eng);
    skd_config_free(cfg);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
}

TEST(keys_hash_and_revoke)
{
    char dir[] = "/tmp/skilld-keys-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char db[128];
    snprintf(db, sizeof(db), "%s/skilld.db", dir);
    skd_store *st = NULL;
    skd_err e = {0};
    CHECK_EQ_INT(skd_store_open(db, &st, &e), 0);
    char *secret = NULL;
    skd_key_info k, got;
    CHECK_EQ_INT(skd_store_key_create(st, "ci", SKD_SCOPE_READ | SKD_SCOPE_EXECUTE, &secret, &k,
                                      &e),
                 0);
    CHECK(secret && strncmp(secret, "skd_", 4) == 0);
    CHECK_EQ_INT(skd_store_key_auth(st, secret, &got, &e), 0);
    CHECK_STR(got.id, k.id);
    CHECK_EQ_INT(got.scopes, SKD_SCOPE_READ | SKD_SCOPE_EXECUTE);
    char wrong[100];
    snprintf(wrong, sizeof(wrong), "%s", secret);
    wrong[strlen(wrong) - 1] = wrong[strlen(wrong) - 1] == 'a' ? 'b' : 'a';
    CHECK_EQ_INT(skd_store_key_auth(st, wrong, &got, &e), SKD_EUNAUTH);
    CHECK_EQ_INT(skd_store_key_auth(st, "", &got, &e), SKD_EUNAUTH);
    CHECK_EQ_INT(skd_store_key_auth(st, "Bearer x", &got, &e), SKD_EUNAUTH);
    CHECK_EQ_INT(skd_store_key_revoke(st, k.id, &e), 0);
    CHECK_EQ_INT(skd_store_key_auth(st, secret, &got, &e), SKD_EUNAUTH);
    CHECK_EQ_INT(skd_store_key_revoke(st, "missing", &e), SKD_ENOENT);
    unsigned sc;
    CHECK_EQ_INT(skd_scopes_parse("skills:read,skills:admin", &sc, &e), 0);
    CHECK_EQ_INT(sc, SKD_SCOPE_READ | SKD_SCOPE_ADMIN);
    CHECK_EQ_INT(skd_scopes_parse("skills:root", &sc, &e), SKD_EINVAL);
    /* the database never holds the secret */
    skd_store_close(st);
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "grep -c '%s' %s/skilld.db* >/dev/null", secret + 21, dir);
    CHECK(system(cmd) != 0);
    free(secret);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
}

int main(void)
{
    TAP_BEGIN("test_core_registry");
    RUN(lookup_versions_and_shadowing);
    RUN(engine_validates_and_audits);
    RUN(keys_hash_and_revoke);
    return TAP_END();
}
