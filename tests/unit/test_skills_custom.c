/* Unit tests for custom skills: manifest checking (each refusal names its
 * field), SKILL.md front matter parsing and entry choice, registration with
 * ownership and shadowing, removal, enable/disable, and persistence across
 * an engine reopen. No sandbox run here (integration tests do that). */
#include "skilld/custom.h"
#include "skilld/skilld.h"
#include "tap.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char tmpdir[64];

static json_t *manifest(const char *name, const char *version)
{
    return json_pack("{s:s, s:s, s:s, s:{s:s}, s:[s], s:{s:[s, s], s:s}}", "name", name, "version",
                     version, "description", "test skill", "inputSchema", "type", "object", "tags",
                     "t", "run", "command", "/bin/echo", "hi", "stdin", "none");
}

/* Check that mutate(manifest) is refused with a message starting with want. */
static int refused(const char *json_text, const char *want, skd_config *cfg)
{
    skd_err err = {0};
    json_t *m = json_loads(json_text, 0, NULL);
    int rc = skd_manifest_check(m, cfg, &err);
    json_decref(m);
    if (rc == 0 || strncmp(err.msg, want, strlen(want)) != 0) {
        printf("# got rc=%d msg=%s\n", rc, err.msg);
        return 0;
    }
    return 1;
}

#define BASE "\"description\":\"d\",\"inputSchema\":{\"type\":\"object\"}"

TEST(manifest_errors_name_the_field)
{
    skd_config *cfg = skd_config_new();
    skd_err err = {0};
    json_t *ok = manifest("ok", "1.0.0");
    CHECK_EQ_INT(skd_manifest_check(ok, cfg, &err), 0);
    json_decref(ok);
    CHECK(refused("[]", "manifest: must be a JSON object", cfg));
    CHECK(refused("{\"name\":\"Bad\",\"version\":\"1.0.0\"," BASE ",\"run\":{\"command\":[\"a\"]}}",
                  "manifest.name:", cfg));
    CHECK(refused("{\"version\":\"1.0.0\"," BASE ",\"run\":{\"command\":[\"a\"]}}",
                  "manifest.name: is required", cfg));
    CHECK(refused("{\"name\":\"a\",\"version\":\"01.0.0\"," BASE ",\"run\":{\"command\":[\"a\"]}}",
                  "manifest.version:", cfg));
    CHECK(refused("{\"name\":\"a\",\"version\":\"1.0.0\",\"description\":\"d\",\"inputSchema\":"
                  "{\"type\":\"string\"},\"run\":{\"command\":[\"a\"]}}",
                  "manifest.inputSchema.type:", cfg));
    CHECK(refused("{\"name\":\"a\",\"version\":\"1.0.0\",\"description\":\"d\",\"inputSchema\":"
                  "{\"type\":\"object\",\"properties\":5},\"run\":{\"command\":[\"a\"]}}",
                  "manifest.inputSchema:", cfg));
    CHECK(refused("{\"name\":\"a\",\"version\":\"1.0.0\"," BASE ",\"outputSchema\":[],"
                  "\"run\":{\"command\":[\"a\"]}}",
                  "manifest.outputSchema:", cfg));
    CHECK(refused("{\"name\":\"a\",\"version\":\"1.0.0\"," BASE ",\"tags\":[1],"
                  "\"run\":{\"command\":[\"a\"]}}",
                  "manifest.tags[0]:", cfg));
    CHECK(refused("{\"name\":\"a\",\"version\":\"1.0.0\"," BASE "}", "manifest.run: is required",
                  cfg));
    CHECK(refused("{\"name\":\"a\",\"version\":\"1.0.0\"," BASE ",\"run\":{\"command\":[]}}",
                  "manifest.run.command:", cfg));
    CHECK(refused("{\"name\":\"a\",\"version\":\"1.0.0\"," BASE ",\"run\":{\"command\":[\"\"]}}",
                  "manifest.run.command[0]:", cfg));
    CHECK(refused("{\"name\":\"a\",\"version\":\"1.0.0\"," BASE
                  ",\"run\":{\"command\":[\"a\"],\"stdin\":\"file\"}}",
                  "manifest.run.stdin:", cfg));
    CHECK(refused("{\"name\":\"a\",\"version\":\"1.0.0\"," BASE
                  ",\"run\":{\"command\":[\"a\"],\"timeoutMs\":0}}",
                  "manifest.run.timeoutMs:", cfg));
    CHECK(refused("{\"name\":\"a\",\"version\":\"1.0.0\"," BASE
                  ",\"run\":{\"command\":[\"a\"],\"memoryLimit\":1}}",
                  "manifest.run.memoryLimit:", cfg));
    CHECK(refused("{\"name\":\"a\",\"version\":\"1.0.0\"," BASE
                  ",\"run\":{\"command\":[\"a\"],\"networkEnabled\":1}}",
                  "manifest.run.networkEnabled:", cfg));
    CHECK(refused("{\"name\":\"a\",\"version\":\"1.0.0\"," BASE
                  ",\"run\":{\"command\":[\"a\"],\"timeout\":5}}",
                  "manifest.run.timeout: unknown field", cfg));
    CHECK(refused("{\"name\":\"a\",\"version\":\"1.0.0\"," BASE ",\"owner\":\"x\","
                  "\"run\":{\"command\":[\"a\"]}}",
                  "manifest.owner: unknown field", cfg));
    CHECK(refused("{\"name\":\"a\",\"version\":\"1.0.0\"," BASE
                  ",\"run\":{\"command\":[\"a\"],\"image\":\"alpine:3\"}}",
                  "manifest.run.image: \"alpine:3\" is not allowed", cfg));
    CHECK_EQ_INT(skd_config_set(cfg, "SKILLS_ALLOWED_SANDBOX_IMAGES", "debian, alpine:3", &err), 0);
    json_t *m = json_loads("{\"name\":\"a\",\"version\":\"1.0.0\"," BASE
                           ",\"run\":{\"command\":[\"a\"],\"image\":\"alpine:3\"}}",
                           0, NULL);
    CHECK_EQ_INT(skd_manifest_check(m, cfg, &err), 0);
    json_object_set_new(json_object_get(m, "run"), "image", json_string("debian:latest"));
    CHECK_EQ_INT(skd_manifest_check(m, cfg, &err), 0);
    json_object_set_new(json_object_get(m, "run"), "image", json_string("alpine"));
    CHECK_EQ_INT(skd_manifest_check(m, cfg, &err), SKD_EFORBIDDEN);
    json_decref(m);
    skd_config_free(cfg);
}

static void write_file(const char *dir, const char *name, const char *text)
{
    char path[256];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

TEST(skill_md_front_matter)
{
    char dir[128];
    skd_err err = {0};
    json_t *m = NULL;
    snprintf(dir, sizeof(dir), "%s/folder", tmpdir);
    mkdir(dir, 0700);
    write_file(dir, "SKILL.md",
               "---\nname: word-count\n# a comment\ndescription: >\n  Counts "
               "words\n  in text.\ntags: [text, \"count\"]\nlicense: MIT\n---\n"
               "# Word count\nBody text.\n");
    CHECK_EQ_INT(skd_skill_folder_read(dir, &m, &err), SKD_ENOENT); /* no entry script yet */
    char scripts[160];
    snprintf(scripts, sizeof(scripts), "%s/scripts", dir);
    mkdir(scripts, 0700);
    write_file(dir, "scripts/run.py", "print('{}')\n");
    CHECK_EQ_INT(skd_skill_folder_read(dir, &m, &err), 0);
    CHECK_STR(skd_json_str(m, "name", NULL), "word-count");
    CHECK_STR(skd_json_str(m, "version", NULL), "1.0.0");
    CHECK_STR(skd_json_str(m, "description", NULL), "Counts words in text.");
    CHECK_EQ_INT(json_array_size(json_object_get(m, "tags")), 2);
    CHECK_STR(json_string_value(json_array_get(json_object_get(m, "tags"), 1)), "count");
    json_t *cmd = json_object_get(json_object_get(m, "run"), "command");
    CHECK_STR(json_string_value(json_array_get(cmd, 1)), "/skill/scripts/run.py");
    CHECK_EQ_INT(skd_manifest_check(m, NULL, &err), 0);
    json_decref(m);
    m = NULL;

    write_file(dir, "SKILL.md", "---\nname: x\ndescription: d\nentry: ../escape.sh\n---\n");
    CHECK_EQ_INT(skd_skill_folder_read(dir, &m, &err), SKD_EINVAL);
    CHECK(strstr(err.msg, "entry") != NULL);
    write_file(dir, "SKILL.md", "---\nname: x\ndescription: d\n");
    CHECK_EQ_INT(skd_skill_folder_read(dir, &m, &err), SKD_EINVAL);
    CHECK(strstr(err.msg, "closing") != NULL);
    write_file(dir, "SKILL.md", "---\nname: X Y\ndescription: d\n---\n");
    CHECK_EQ_INT(skd_skill_folder_read(dir, &m, &err), SKD_EINVAL);
    write_file(dir, "SKILL.md", "---\nname: x\nname: y\ndescription: d\n---\n");
    CHECK_EQ_INT(skd_skill_folder_read(dir, &m, &err), SKD_EINVAL);
    CHECK(strstr(err.msg, "duplicate") != NULL);
    write_file(dir, "SKILL.md", "no front matter\n");
    CHECK_EQ_INT(skd_skill_folder_read(dir, &m, &err), SKD_EINVAL);
    /* Latin-1, not UTF-8: an input error naming the encoding (it was
     * reported as out of memory when the manifest would not build). */
    write_file(dir, "SKILL.md", "---\nname: x\ndescription: caf\xe9\n---\n");
    CHECK_EQ_INT(skd_skill_folder_read(dir, &m, &err), SKD_EINVAL);
    CHECK(strstr(err.msg, "UTF-8") != NULL);
    CHECK(m == NULL);
    write_file(dir, "SKILL.md", "---\nname: x\ndescription: d\nentry: tool.sh\n---\n");
    write_file(dir, "tool.sh", "echo hi\n");
    CHECK_EQ_INT(skd_skill_folder_read(dir, &m, &err), 0);
    cmd = json_object_get(json_object_get(m, "run"), "command");
    CHECK_STR(json_string_value(json_array_get(cmd, 0)), "/bin/sh");
    CHECK(m != NULL);
    json_decref(m);
}

static skd_engine *open_engine(skd_config **cfg)
{
    skd_err err = {0};
    skd_engine *e = NULL;
    *cfg = skd_config_new();
    skd_config_set(*cfg, "DATA_DIR", tmpdir, &err);
    if (skd_engine_open(*cfg, &e, &err))
        printf("# engine: %s\n", err.msg);
    return e;
}

static const char *owner_of(skd_engine *e, const char *ref, const char *key)
{
    static char buf[64];
    skd_skill *s = skd_registry_lookup(skd_engine_registry(e), ref, key, NULL);
    if (!s)
        return "(none)";
    snprintf(buf, sizeof(buf), "%s", skd_skill_owner(s) ? skd_skill_owner(s) : "(global)");
    skd_skill_unref(s);
    return buf;
}

TEST(register_ownership_and_persistence)
{
    skd_config *cfg = NULL;
    skd_engine *e = open_engine(&cfg);
    skd_err err = {0};
    CHECK(e != NULL);
    if (!e)
        return;
    skd_actor admin = {.key_id = "kadmin", .scopes = SKD_SCOPE_ALL};
    skd_actor alice = {.key_id = "kalice", .scopes = SKD_SCOPE_READ | SKD_SCOPE_EXECUTE};
    skd_actor bob = {.key_id = "kbob", .scopes = SKD_SCOPE_READ | SKD_SCOPE_EXECUTE};
    skd_actor reader = {.key_id = "kread", .scopes = SKD_SCOPE_READ};
    json_t *m = manifest("tool", "1.0.0");
    CHECK_EQ_INT(skd_custom_register(skd_engine_skills(e), &admin, m, 0, NULL, &err), 0);
    CHECK_EQ_INT(skd_custom_register(skd_engine_skills(e), &alice, m, 0, NULL, &err), 0);
    CHECK_EQ_INT(skd_custom_register(skd_engine_skills(e), &alice, m, 0, NULL, &err), SKD_EEXISTS);
    CHECK_EQ_INT(skd_custom_register(skd_engine_skills(e), &alice, m, 1, NULL, &err), 0);
    CHECK_EQ_INT(skd_custom_register(skd_engine_skills(e), &reader, m, 0, NULL, &err),
                 SKD_EFORBIDDEN);
    json_decref(m);
    m = manifest("private", "2.0.0");
    CHECK_EQ_INT(skd_custom_register(skd_engine_skills(e), &alice, m, 0, NULL, &err), 0);
    json_decref(m);
    CHECK_STR(owner_of(e, "tool", "kalice"), "kalice"); /* own shadows global */
    CHECK_STR(owner_of(e, "tool", "kbob"), "(global)");
    CHECK_STR(owner_of(e, "private", "kbob"), "(none)");
    CHECK_EQ_INT(skd_custom_remove(skd_engine_skills(e), &bob, "private", &err), SKD_ENOENT);
    CHECK_EQ_INT(skd_custom_set_enabled(skd_engine_skills(e), &bob, "tool", 0, &err), SKD_ENOENT);
    CHECK_EQ_INT(skd_custom_set_enabled(skd_engine_skills(e), &admin, "tool@1.0.0", 0, &err), 0);
    CHECK_EQ_INT(skd_custom_remove(skd_engine_skills(e), &alice, "bad name", &err), SKD_EINVAL);
    skd_engine_close(e);
    skd_config_free(cfg);

    e = open_engine(&cfg); /* everything comes back from the store */
    CHECK(e != NULL);
    if (!e)
        return;
    CHECK_STR(owner_of(e, "private@2.0.0", "kalice"), "kalice");
    CHECK_STR(owner_of(e, "tool", "kalice"), "kalice");
    skd_skill *s = skd_registry_lookup(skd_engine_registry(e), "tool", "kbob", NULL);
    CHECK(s && !skd_skill_enabled(s) && skd_skill_mode(s) == SKD_MODE_SANDBOX);
    CHECK(s && skd_skill_manifest(s) != NULL);
    skd_skill_unref(s);
    CHECK_EQ_INT(skd_custom_remove(skd_engine_skills(e), &alice, "tool", &err),
                 0); /* alice's own */
    CHECK_STR(owner_of(e, "tool", "kalice"), "(global)");
    CHECK_EQ_INT(skd_custom_remove(skd_engine_skills(e), &alice, "tool", &err),
                 SKD_ENOENT); /* not admin */
    CHECK_EQ_INT(skd_custom_remove(skd_engine_skills(e), &admin, "tool@1.0.0", &err), 0);
    CHECK_STR(owner_of(e, "tool", "kbob"), "(none)");
    skd_engine_close(e);
    skd_config_free(cfg);

    e = open_engine(&cfg);
    CHECK(e != NULL);
    if (!e)
        return;
    CHECK_STR(owner_of(e, "tool", "kalice"), "(none)");
    CHECK_STR(owner_of(e, "private", "kalice"), "kalice");
    skd_engine_close(e);
    skd_config_free(cfg);
}

TEST(data_dir_skills_folder_scanned)
{
    char dir[160];
    snprintf(dir, sizeof(dir), "%s/skills", tmpdir);
    mkdir(dir, 0700);
    snprintf(dir, sizeof(dir), "%s/skills/hello", tmpdir);
    mkdir(dir, 0700);
    write_file(dir, "SKILL.md", "---\nname: hello\ndescription: 'Says hello'\n---\nBody\n");
    write_file(dir, "run.sh", "echo hello\n");
    skd_config *cfg = NULL;
    skd_engine *e = open_engine(&cfg);
    CHECK(e != NULL);
    if (!e)
        return;
    skd_skill *s = skd_registry_lookup(skd_engine_registry(e), "hello", "anyone", NULL);
    CHECK(s != NULL);
    if (s) {
        CHECK_STR(skd_skill_description(s), "Says hello");
        CHECK(skd_skill_owner(s) == NULL);
    }
    skd_skill_unref(s);
    skd_engine_close(e);
    skd_config_free(cfg);
}

int main(void)
{
    TAP_BEGIN("test_skills_custom");
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/skd-custom-XXXXXX");
    if (!mkdtemp(tmpdir))
        return 1;
    skd_log_set_level(SKD_LOG_ERROR);
    RUN(manifest_errors_name_the_field);
    RUN(skill_md_front_matter);
    RUN(register_ownership_and_persistence);
    RUN(data_dir_skills_folder_scanned);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "%s", tmpdir);
    int rc = TAP_END();
    /* best-effort cleanup without a shell */
    pid_t pid = fork();
    if (pid == 0) {
        execl("/bin/rm", "rm", "-rf", cmd, (char *)NULL);
        _exit(127);
    }
    if (pid > 0)
        waitpid(pid, NULL, 0);
    return rc;
}
