/*
 * SKILL.md bundles (src/skills/bundle.c): what a scan records and refuses,
 * visibility by owner, and that a file changed on disk is never served
 * under its recorded digest (the read is refused, the listing drops the
 * bundle until it is registered again, a touch changes nothing).
 */
#include "skilld/bundle.h"
#include "skilld/json.h"
#include "skilld/log.h"
#include "skilld/util.h"
#include "tap.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char tmpdir[64];

static void put(const char *dir, const char *rel, const char *text)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", dir, rel);
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

/* A fresh bundle folder tmpdir/name with SKILL.md and scripts/run.sh. */
static void make_bundle(char *dir, size_t cap, const char *name)
{
    char sub[600];
    snprintf(dir, cap, "%s/%s", tmpdir, name);
    mkdir(dir, 0755);
    snprintf(sub, sizeof(sub), "%s/scripts", dir);
    mkdir(sub, 0755);
    char md[256];
    snprintf(md, sizeof(md), "---\nname: %s\ndescription: a test bundle\n---\nBody\n", name);
    put(dir, "SKILL.md", md);
    put(dir, "scripts/run.sh", "echo hi\n");
    put(dir, ".hidden", "not part of the bundle\n");
}

static const json_t *file_of(const json_t *rec, const char *path)
{
    size_t i;
    const json_t *f;
    json_array_foreach (json_object_get(rec, "files"), i, f)
        if (strcmp(skd_json_str(f, "path", ""), path) == 0)
            return f;
    return NULL;
}

TEST(scan_records_sizes_and_digests)
{
    char dir[512], hex[SKD_SHA256_HEX_LEN + 1];
    json_t *rec = NULL;
    skd_err err = {0};
    make_bundle(dir, sizeof(dir), "scan-one");
    CHECK_EQ_INT(skd_bundle_scan(dir, &rec, &err), 0);
    CHECK_EQ_INT(json_array_size(json_object_get(rec, "files")), 2); /* .hidden left out */
    const json_t *f = file_of(rec, "scripts/run.sh");
    skd_sha256_hex("echo hi\n", 8, hex);
    CHECK(f != NULL);
    CHECK_EQ_INT(skd_json_int(f, "size", -1), 8);
    CHECK_STR(skd_json_str(f, "sha256", ""), hex);
    CHECK_STR(skd_json_str(json_object_get(rec, "frontmatter"), "name", ""), "scan-one");
    json_decref(rec);
}

TEST(scan_refuses_links_out_and_special_files)
{
    char dir[512], link[600], fifo[600];
    json_t *rec = NULL;
    skd_err err = {0};
    make_bundle(dir, sizeof(dir), "scan-link");
    snprintf(link, sizeof(link), "%s/passwd", dir);
    CHECK(symlink("/etc/passwd", link) == 0);
    CHECK_EQ_INT(skd_bundle_scan(dir, &rec, &err), SKD_EPATH);
    CHECK(strstr(err.msg, "outside") != NULL);
    unlink(link);
    CHECK(symlink("scripts/run.sh", link) == 0); /* a link that stays inside is a file */
    CHECK_EQ_INT(skd_bundle_scan(dir, &rec, &err), 0);
    json_decref(rec);
    rec = NULL;
    unlink(link);
    snprintf(fifo, sizeof(fifo), "%s/pipe", dir);
    CHECK(mkfifo(fifo, 0600) == 0);
    CHECK_EQ_INT(skd_bundle_scan(dir, &rec, &err), SKD_ESPECIAL);
    unlink(fifo);
    put(dir, "SKILL.md", "---\nname: Not_Valid\ndescription: d\n---\n");
    CHECK_EQ_INT(skd_bundle_scan(dir, &rec, &err), SKD_EINVAL);
    CHECK(rec == NULL);
    CHECK_EQ_INT(skd_bundle_scan("relative/dir", &rec, &err), SKD_EINVAL);
}

static skd_engine *open_engine(skd_config **cfg)
{
    skd_err err = {0};
    skd_engine *e = NULL;
    char data[128];
    snprintf(data, sizeof(data), "%s/data", tmpdir);
    mkdir(data, 0700);
    *cfg = skd_config_new();
    skd_config_set(*cfg, "DATA_DIR", data, &err);
    if (skd_engine_open(*cfg, &e, &err))
        printf("# engine: %s\n", err.msg);
    return e;
}

static size_t count_named(json_t *rows, const char *name)
{
    size_t n = 0, i;
    json_t *r;
    json_array_foreach (rows, i, r)
        n += strcmp(skd_json_str(r, "name", ""), name) == 0;
    return n;
}

TEST(owners_see_theirs_and_public_ones)
{
    skd_config *cfg = NULL;
    skd_engine *e = open_engine(&cfg);
    skd_err err = {0};
    char a[512], g[512];
    make_bundle(a, sizeof(a), "alice-only");
    make_bundle(g, sizeof(g), "for-all");
    CHECK_EQ_INT(skd_bundle_register(skd_engine_skills(e), "alice", a, 0, NULL, &err), 0);
    CHECK_EQ_INT(skd_bundle_register(skd_engine_skills(e), NULL, g, 1, NULL, &err), 0);
    json_t *ra = skd_bundle_list(skd_engine_skills(e), "alice", NULL, 1, &err),
           *rb = skd_bundle_list(skd_engine_skills(e), "bob", NULL, 1, &err);
    CHECK_EQ_INT(count_named(ra, "alice-only"), 1);
    CHECK_EQ_INT(count_named(ra, "for-all"), 1);
    CHECK_EQ_INT(count_named(rb, "alice-only"), 0);
    CHECK_EQ_INT(count_named(rb, "for-all"), 1);
    json_decref(ra);
    json_decref(rb);
    skd_actor bob = {.key_id = "bob", .scopes = SKD_SCOPE_READ | SKD_SCOPE_EXECUTE};
    CHECK_EQ_INT(skd_bundle_set_public(skd_engine_skills(e), &bob, "alice-only", "alice", 1, &err),
                 SKD_EFORBIDDEN);
    skd_actor op = {0};
    CHECK_EQ_INT(skd_bundle_set_public(skd_engine_skills(e), &op, "alice-only", "alice", 1, &err),
                 0);
    rb = skd_bundle_list(skd_engine_skills(e), "bob", NULL, 1, &err);
    CHECK_EQ_INT(count_named(rb, "alice-only"), 1);
    json_decref(rb);
    skd_engine_close(e);
    skd_config_free(cfg);
}

TEST(changed_on_disk_is_refused_until_registered_again)
{
    skd_config *cfg = NULL;
    skd_engine *e = open_engine(&cfg);
    skd_err err = {0};
    char dir[512], path[600];
    char *data = NULL;
    size_t len = 0;
    make_bundle(dir, sizeof(dir), "drifts");
    CHECK_EQ_INT(skd_bundle_register(skd_engine_skills(e), "k", dir, 0, NULL, &err), 0);
    json_t *rows = skd_bundle_list(skd_engine_skills(e), "k", "drifts", 1, &err);
    json_t *row = json_incref(json_array_get(rows, 0));
    json_decref(rows);
    CHECK(row != NULL);
    CHECK_EQ_INT(skd_bundle_read(skd_engine_skills(e), row, "scripts/run.sh", &data, &len, &err),
                 0);
    CHECK_EQ_INT((int)len, 8);
    free(data);
    data = NULL;
    CHECK_EQ_INT(skd_bundle_read(skd_engine_skills(e), row, "../SKILL.md", &data, &len, &err),
                 SKD_ENOENT);
    /* A touch keeps the bundle: same bytes, new stat signature. */
    snprintf(path, sizeof(path), "%s/scripts/run.sh", dir);
    CHECK(utimensat(AT_FDCWD, path, NULL, 0) == 0);
    rows = skd_bundle_list(skd_engine_skills(e), "k", "drifts", 1, &err);
    CHECK_EQ_INT(json_array_size(rows), 1);
    json_decref(rows);
    /* Other bytes: the read is refused, the listing leaves it out. */
    put(dir, "scripts/run.sh", "echo HI\n");
    CHECK_EQ_INT(skd_bundle_read(skd_engine_skills(e), row, "scripts/run.sh", &data, &len, &err),
                 SKD_EIO);
    CHECK(strstr(err.msg, "changed on disk") != NULL);
    CHECK(data == NULL);
    rows = skd_bundle_list(skd_engine_skills(e), "k", "drifts", 1, &err);
    CHECK_EQ_INT(json_array_size(rows), 0);
    json_decref(rows);
    /* Registered again: served with the new digest. */
    CHECK_EQ_INT(skd_bundle_register(skd_engine_skills(e), "k", dir, 0, NULL, &err), 0);
    rows = skd_bundle_list(skd_engine_skills(e), "k", "drifts", 1, &err);
    CHECK_EQ_INT(json_array_size(rows), 1);
    CHECK_EQ_INT(skd_bundle_read(skd_engine_skills(e), json_array_get(rows, 0), "scripts/run.sh",
                                 &data, &len, &err),
                 0);
    CHECK(data && strcmp(data, "echo HI\n") == 0);
    free(data);
    json_decref(rows);
    json_decref(row);
    skd_engine_close(e);
    skd_config_free(cfg);
}

int main(void)
{
    TAP_BEGIN("test_skills_bundle");
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/skd-bundle-XXXXXX");
    if (!mkdtemp(tmpdir))
        return 1;
    chmod(tmpdir, 0755);
    skd_log_set_level(SKD_LOG_ERROR);
    RUN(scan_records_sizes_and_digests);
    RUN(scan_refuses_links_out_and_special_files);
    RUN(owners_see_theirs_and_public_ones);
    RUN(changed_on_disk_is_refused_until_registered_again);
    int rc = TAP_END();
    pid_t pid = fork(); /* best-effort cleanup without a shell */
    if (pid == 0) {
        execl("/bin/rm", "rm", "-rf", tmpdir, (char *)NULL);
        _exit(127);
    }
    if (pid > 0)
        waitpid(pid, NULL, 0);
    return rc;
}
