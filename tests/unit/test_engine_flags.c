/* The sandbox-only engine (SKD_ENGINE_SANDBOX_ONLY, used by `skilld exec`):
 * it creates DATA_DIR but opens no store (no skilld.db appears), has an
 * empty registry, refuses skd_engine_execute, and still gives a runner. A
 * full engine over the same DATA_DIR afterwards is unaffected. */
#include "skilld/sandbox.h"
#include "skilld/skilld.h"
#include "tap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char tmpdir[64];
static char datadir[128];

static int exists(const char *dir, const char *name)
{
    char p[256];
    struct stat st;
    snprintf(p, sizeof(p), "%s/%s", dir, name);
    return stat(p, &st) == 0;
}

TEST(sandbox_only_has_no_store)
{
    skd_err err = {0};
    skd_config *cfg = skd_config_new();
    CHECK(cfg != NULL);
    CHECK_EQ_INT(skd_config_set(cfg, "DATA_DIR", datadir, &err), 0);
    skd_engine *e = NULL;
    CHECK_EQ_INT(skd_engine_open_flags(cfg, SKD_ENGINE_SANDBOX_ONLY, &e, &err), 0);
    CHECK(e != NULL);
    CHECK(exists(datadir, "."));          /* DATA_DIR made, with its parents */
    CHECK(!exists(datadir, "skilld.db")); /* no store opened */
    CHECK(skd_engine_store(e) == NULL);
    skd_skill *s = skd_registry_lookup(skd_engine_registry(e), "file_read", "k", &err);
    CHECK(s == NULL); /* no built-ins registered */
    skd_skill_unref(s);
    skd_call c = {.key_id = "k", .scopes = SKD_SCOPE_EXECUTE, .skill = "file_read"};
    json_t *r = skd_engine_execute(e, &c, NULL);
    CHECK(r != NULL && !skd_result_success(r));
    CHECK_STR(skd_result_code(r), "internal_error");
    json_decref(r);
    CHECK(skd_engine_runner(e, &err) != NULL); /* what skilld exec needs */
    skd_engine_close(e);
    /* A full engine over the same DATA_DIR opens its store and built-ins. */
    CHECK_EQ_INT(skd_engine_open_flags(cfg, 0, &e, &err), 0);
    CHECK(skd_engine_store(e) != NULL);
    CHECK(exists(datadir, "skilld.db"));
    s = skd_registry_lookup(skd_engine_registry(e), "file_read", "k", &err);
    CHECK(s != NULL);
    skd_skill_unref(s);
    skd_engine_close(e);
    skd_config_free(cfg);
}

static json_t *noop(const skd_ctx *ctx, const json_t *input, void *udata)
{
    (void)ctx, (void)input, (void)udata;
    return skd_result_ok();
}

/* Which calls a transport may run on its event thread: the skills whose
 * definition says quick (the built-in file_read); writers (a lock),
 * sandboxes, the network, unknown names and an engine without a store
 * never. Quick is the skill's property, not its name: a C skill that says
 * so is quick, and a key's own skill named file_read is not. */
TEST(quick_skills_are_the_read_only_builtins)
{
    skd_err err = {0};
    skd_config *cfg = skd_config_new();
    CHECK(cfg != NULL);
    CHECK_EQ_INT(skd_config_set(cfg, "DATA_DIR", datadir, &err), 0);
    skd_engine *e = NULL;
    CHECK_EQ_INT(skd_engine_open_flags(cfg, 0, &e, &err), 0);
    if (e) {
        CHECK_EQ_INT(skd_engine_skill_is_quick(e, "file_read", "k"), 1);
        static const char *const slow[] = {
            "file_list",      "file_write", "file_delete",   "execute_command",
            "http_request",   "web_fetch",  "no_such_skill", "",
            "file_read@9.9.9"};
        for (size_t i = 0; i < sizeof(slow) / sizeof(slow[0]); i++)
            CHECK_EQ_INT(skd_engine_skill_is_quick(e, slow[i], "k"), 0);
        CHECK_EQ_INT(skd_engine_skill_is_quick(e, NULL, "k"), 0);
        json_t *schema = json_pack("{s:s}", "type", "object");
        skd_skill_def d = {.name = "peek",
                           .version = "1.0.0",
                           .description = "test",
                           .input_schema = schema,
                           .mode = SKD_MODE_DIRECT,
                           .quick = 1,
                           .handler = noop};
        CHECK_EQ_INT(skd_registry_add(skd_engine_registry(e), &d, 0, &err), 0);
        CHECK_EQ_INT(skd_engine_skill_is_quick(e, "peek", "k"), 1);
        d.name = "file_read";
        d.quick = 0;
        d.owner = "k";
        CHECK_EQ_INT(skd_registry_add(skd_engine_registry(e), &d, 0, &err), 0);
        CHECK_EQ_INT(skd_engine_skill_is_quick(e, "file_read", "k"), 0);
        CHECK_EQ_INT(skd_engine_skill_is_quick(e, "file_read", "other"), 1);
        json_decref(schema);
    }
    skd_engine_close(e);
    e = NULL;
    CHECK_EQ_INT(skd_engine_open_flags(cfg, SKD_ENGINE_SANDBOX_ONLY, &e, &err), 0);
    if (e)
        CHECK_EQ_INT(skd_engine_skill_is_quick(e, "file_read", "k"), 0);
    skd_engine_close(e);
    skd_config_free(cfg);
}

int main(void)
{
    TAP_BEGIN("test_engine_flags");
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/skd-engine-flags.XXXXXX");
    if (!mkdtemp(tmpdir))
        return 1;
    snprintf(datadir, sizeof(datadir), "%s/a/b/var", tmpdir);
    RUN(sandbox_only_has_no_store);
    RUN(quick_skills_are_the_read_only_builtins);
    char cmd[160];
    snprintf(cmd, sizeof(cmd), "%s", tmpdir);
    pid_t pid = fork();
    if (pid == 0) {
        execlp("rm", "rm", "-rf", cmd, (char *)NULL);
        _exit(127);
    }
    int st;
    waitpid(pid, &st, 0);
    return TAP_END();
}
