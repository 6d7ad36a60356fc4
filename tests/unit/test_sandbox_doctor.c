/*
 * skd_doctor_run: the report's shape (every check named, with a status and a
 * detail, and a fix when not ok; the overall status is the worst of the
 * non-optional checks), and the probes that must hold on any machine that
 * can run this test: /proc answers, so the kernel and protected_* checks
 * read real values. Which features pass depends on the machine (and under
 * valgrind openat2/clone3 look missing), so that is checked by
 * tests/integration/image_cli.sh on the real binary instead.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandbox/native/native.h"
#include "skilld/doctor.h"
#include "skilld/json.h"
#include "tap.h"

static const json_t *find(const json_t *report, const char *name)
{
    size_t i;
    json_t *c;
    json_array_foreach (json_object_get(report, "checks"), i, c) {
        if (strcmp(skd_json_str(c, "name", ""), name) == 0)
            return c;
    }
    return NULL;
}

static int status_rank(const char *s)
{
    return strcmp(s, "ok") == 0 ? 0 : strcmp(s, "warn") == 0 ? 1 : strcmp(s, "fail") == 0 ? 2 : -1;
}

TEST(shape)
{
    json_t *r = skd_doctor_run(NULL);
    CHECK(r != NULL);
    static const char *const names[] = {
        "kernel",        "userns",        "cgroup_v2",          "cgroup_v1",
        "cgroup_limits", "seccomp",       "no_new_privs",       "openat2",
        "clone3",        "pidfd_open",    "protected_symlinks", "protected_hardlinks",
        "docker",        "podman",        "native_sandbox",     "mode_root",
        "mode_rootless", "sandbox_limits"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        CHECK(find(r, names[i]) != NULL);
    int worst = 0;
    size_t i;
    json_t *c;
    json_array_foreach (json_object_get(r, "checks"), i, c) {
        const char *st = skd_json_str(c, "status", "");
        CHECK(status_rank(st) >= 0);
        CHECK(*skd_json_str(c, "detail", "") != '\0');
        CHECK((strcmp(st, "ok") == 0) == (json_object_get(c, "fix") == NULL));
        const char *name = skd_json_str(c, "name", "");
        /* The mode this process does not run in is reported, not required. */
        int optional = strcmp(name, "docker") == 0 || strcmp(name, "podman") == 0 ||
                       strcmp(name, "mode_root") == 0 || strcmp(name, "mode_rootless") == 0;
        int rank = status_rank(st);
        if (optional && rank == 1)
            rank = 0;
        if (rank > worst)
            worst = rank;
    }
    CHECK_EQ_INT(status_rank(skd_json_str(r, "status", "")), worst);
    CHECK(*skd_json_str(r, "kernel", "") != '\0');
    CHECK(strstr(skd_json_str(find(r, "kernel"), "detail", ""), "Linux ") != NULL);
    CHECK(strstr(skd_json_str(find(r, "protected_hardlinks"), "detail", ""), "= -1") == NULL);
    CHECK(json_is_integer(json_object_get(r, "uid")));
    json_decref(r);
}

/* Where the memory, pids and cpu controllers live on cgroup v1 (this
 * development machine: a hybrid hierarchy), cgroup v2 cannot be delegated
 * with them, so rootless mode is unavailable and doctor must say why; where
 * cgroup v2 has them, the rootless check says what it found. Root mode is
 * the one a root process runs in. */
TEST(modes)
{
    json_t *r = skd_doctor_run(NULL);
    CHECK(r != NULL);
    const json_t *rl = find(r, "mode_rootless"), *rt = find(r, "mode_root");
    CHECK(rl != NULL && rt != NULL);
    const char *detail = skd_json_str(rl, "detail", "");
    char ctl[512] = "";
    FILE *f = fopen("/sys/fs/cgroup/cgroup.controllers", "re");
    if (f) {
        if (!fgets(ctl, sizeof(ctl), f))
            ctl[0] = '\0';
        fclose(f);
    }
    if (access("/sys/fs/cgroup/memory/memory.limit_in_bytes", F_OK) == 0 &&
        !strstr(ctl, "memory")) {
        CHECK(strcmp(skd_json_str(rl, "status", ""), "ok") != 0);
        CHECK(strstr(detail, "rootless mode unavailable") != NULL);
        CHECK(strstr(detail, "cgroup v1") != NULL);
        CHECK(strstr(skd_json_str(rl, "fix", ""), "unified_cgroup_hierarchy") != NULL);
    } else {
        CHECK(strstr(detail, "rootless mode") != NULL);
    }
    if (geteuid() == 0)
        CHECK(strstr(skd_json_str(rt, "detail", ""), "root mode runs") != NULL);
    json_decref(r);
}

/* Which processes of a cgroup are skilld's (the set-up moves those into
 * its leaf without systemd, and refuses to move anyone else's): a fork of
 * this program is, a `sleep` is not and is named with its pid. The cgroup
 * is a new one in the v2 tree, which holds processes without controllers
 * (this machine's is empty; elsewhere it is the whole tree). Needs root. */
TEST(foreign_procs)
{
    const char *tree = access("/sys/fs/cgroup/unified/cgroup.procs", F_OK) == 0
                           ? "/sys/fs/cgroup/unified"
                           : "/sys/fs/cgroup";
    char dir[256], procs[300], names[200], want[64];
    snprintf(dir, sizeof(dir), "%s/skd-test-foreign-%d", tree, (int)getpid());
    snprintf(procs, sizeof(procs), "%s/cgroup.procs", dir);
    CHECK(geteuid() == 0);
    CHECK(mkdir(dir, 0755) == 0);
    CHECK_EQ_INT(skd__cgroup_foreign_procs(dir, names, sizeof(names)), 0);
    CHECK_STR(names, "");
    pid_t ours = fork();
    if (ours == 0) {
        pause();
        _exit(0);
    }
    pid_t sleeper = fork();
    if (sleeper == 0) {
        execlp("sleep", "sleep", "60", (char *)NULL);
        _exit(127);
    }
    usleep(200000); /* the exec has happened */
    FILE *f = fopen(procs, "we");
    CHECK(f != NULL);
    if (f) {
        setvbuf(f, NULL, _IONBF, 0);
        CHECK(fprintf(f, "%d\n", (int)ours) > 0);
        CHECK(fprintf(f, "%d\n", (int)sleeper) > 0);
        fclose(f);
    }
    CHECK_EQ_INT(skd__cgroup_foreign_procs(dir, names, sizeof(names)), 1);
    snprintf(want, sizeof(want), "sleep (pid %d)", (int)sleeper);
    CHECK_STR(names, want);
    kill(ours, SIGKILL);
    kill(sleeper, SIGKILL);
    waitpid(ours, NULL, 0);
    waitpid(sleeper, NULL, 0);
    CHECK_EQ_INT(skd__cgroup_foreign_procs(dir, names, sizeof(names)), 0);
    CHECK(rmdir(dir) == 0);
    CHECK_EQ_INT(skd__cgroup_foreign_procs(dir, names, sizeof(names)), -1);
}

int main(void)
{
    TAP_BEGIN("test_sandbox_doctor");
    RUN(shape);
    RUN(modes);
    RUN(foreign_procs);
    return TAP_END();
}
