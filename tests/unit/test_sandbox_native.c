/*
 * What the native provider promises, checked from inside a run: status
 * line (no_new_privs, no capabilities, seccomp filter), identity, read-only
 * root, fresh /proc with only the sandbox's processes, loopback-only
 * network, the idmapped workspace (writes land owned by root on the host;
 * read-only when asked), memory limit -> oomKilled, pids limit, no
 * grandchild surviving a timeout, no cgroup left behind, seccomp denials.
 */
#include "sandbox_test.h"
#include "sandbox/native/native.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

static skd_runner *R;
static char WS[64];

static int run_sh(const char *script, const skd_sandbox_config *cfg, skd_sandbox_result *res)
{
    const char *argv[] = {"sh", "-c", script, NULL};
    return sbt_run(R, argv, cfg, NULL, WS, res);
}

TEST(status_line)
{
    skd_sandbox_result res;
    CHECK_EQ_INT(run_sh("grep -E '^(NoNewPrivs|CapEff|CapPrm|CapBnd|CapAmb|Seccomp):' "
                        "/proc/self/status",
                        NULL, &res),
                 0);
    CHECK(strstr(S(res.out), "NoNewPrivs:\t1") != NULL);
    CHECK(strstr(S(res.out), "CapEff:\t0000000000000000") != NULL);
    CHECK(strstr(S(res.out), "CapPrm:\t0000000000000000") != NULL);
    CHECK(strstr(S(res.out), "CapBnd:\t0000000000000000") != NULL);
    CHECK(strstr(S(res.out), "Seccomp:\t2") != NULL);
    skd_sandbox_result_free(&res);
}

TEST(identity_and_root)
{
    skd_sandbox_result res;
    CHECK_EQ_INT(
        run_sh("id -u; id -g; hostname; pwd; cat /etc/shadow 2>/dev/null || echo noshadow;"
               " touch /usr/x 2>/dev/null || echo rofs; touch /etc/x 2>/dev/null || "
               "echo roetc; cat /proc/1/comm; ls /proc | grep -E '^[0-9]+$' | sort -n | tail -n 1",
               NULL, &res),
        0);
    /* A fresh pid namespace: the shell is pid 1 and no host pid shows. */
    CHECK(strncmp(S(res.out), "1000\n1000\nsandbox\n/workspace\nnoshadow\nrofs\nroetc\nsh\n", 52) ==
          0);
    const char *last = strrchr(S(res.out), '\n');
    while (last && last > S(res.out) && last[-1] != '\n')
        last--;
    CHECK(last && strtol(last, NULL, 10) < 20);
    skd_sandbox_result_free(&res);
}

TEST(network_is_loopback_only)
{
    skd_sandbox_result res;
    CHECK_EQ_INT(run_sh("ls /sys/class/net 2>/dev/null; cat /proc/net/dev | tail -n +3 | "
                        "cut -d: -f1 | tr -d ' '",
                        NULL, &res),
                 0);
    CHECK_STR(S(res.out), "lo\n");
    skd_sandbox_result_free(&res);
}

TEST(workspace_round_trip)
{
    skd_sandbox_result res;
    char path[128];
    struct stat st;
    CHECK_EQ_INT(run_sh("echo from-sandbox > /workspace/out.txt && mkdir -p /workspace/d && "
                        "echo x > /workspace/d/y && stat -c %u /workspace/out.txt",
                        NULL, &res),
                 0);
    CHECK_EQ_INT(res.exit_code, 0);
    CHECK_STR(S(res.out), "1000\n");
    skd_sandbox_result_free(&res);
    snprintf(path, sizeof(path), "%s/out.txt", WS);
    CHECK_EQ_INT(stat(path, &st), 0);
    CHECK_EQ_INT(st.st_uid, 0);
    CHECK_EQ_INT(st.st_gid, 0);
    FILE *f = fopen(path, "r");
    char line[64] = "";
    CHECK(f && fgets(line, sizeof(line), f));
    if (f)
        fclose(f);
    CHECK_STR(line, "from-sandbox\n");
    /* Read-only workspace: reading works, writing does not. */
    skd_sandbox_config c = sbt_cfg();
    c.workspace_read_only = 1;
    CHECK_EQ_INT(
        run_sh("cat /workspace/out.txt; echo y > /workspace/new.txt || echo denied", &c, &res), 0);
    CHECK_STR(S(res.out), "from-sandbox\ndenied\n");
    skd_sandbox_result_free(&res);
    snprintf(path, sizeof(path), "%s/new.txt", WS);
    CHECK(access(path, F_OK) != 0);
}

TEST(tmp_is_private_and_limited)
{
    skd_sandbox_result res;
    skd_sandbox_config c = sbt_cfg();
    c.tmp_size = 1 << 20;
    CHECK_EQ_INT(run_sh("ls -A /tmp /dev/shm | wc -w; echo leftover > /tmp/mark; "
                        "head -c 2000000 /dev/zero > /tmp/big 2>/dev/null || echo full",
                        &c, &res),
                 0);
    CHECK_STR(S(res.out), "2\nfull\n"); /* "ls" prints the two headers only */
    skd_sandbox_result_free(&res);
    CHECK_EQ_INT(run_sh("cat /tmp/mark 2>/dev/null || echo clean", &c, &res), 0);
    CHECK_STR(S(res.out), "clean\n");
    skd_sandbox_result_free(&res);
}

/* Runs one after the other take pre-made sandboxes, whose /tmp and
 * /dev/shm are mounted ahead with the default size: a run of the default
 * size keeps them, a run of another size gets fresh ones; each gets its own
 * size, empty. */
/* A pre-made sandbox is cloned from a spawner that may hold hundreds of
 * descriptors (other runs'): it keeps its own among them and closes the
 * rest. Inherited ones above HIGH_FD with gaps between them once made it
 * close one of its own (a gap closed below was reused by the next copy). */
TEST(a_pre_made_sandbox_keeps_its_descriptors_among_inherited_ones)
{
    pid_t p = fork();
    if (p == 0) {
        struct skd__native_child c;
        memset(&c, 0, sizeof(c));
        int base = open("/dev/null", O_RDONLY | O_CLOEXEC);
        for (int fd = 20; fd < 30; fd++)
            dup2(base, fd);
        static const int inherited[] = {200, 201, 203, 206, 210, 211, 215};
        for (size_t i = 0; i < sizeof(inherited) / sizeof(inherited[0]); i++)
            dup2(base, inherited[i]);
        c.in_fd = 20, c.out_fd = 21, c.err_fd = 22, c.sync_fd = 23, c.ctl_fd = 24;
        c.status_fd = 25, c.ncg = 4;
        for (int i = 0; i < 4; i++)
            c.cg_fds[i] = 26 + i;
        skd__native_keep_own_fds(&c);
        int kept[] = {c.in_fd,     c.out_fd,    c.err_fd,    c.sync_fd,   c.ctl_fd,
                      c.status_fd, c.cg_fds[0], c.cg_fds[1], c.cg_fds[2], c.cg_fds[3]};
        int bad = 0, open_fds = 0;
        for (int i = 0; i < 10; i++)
            bad += fcntl(kept[i], F_GETFD) < 0;
        for (int fd = 0; fd < 1024; fd++)
            open_fds += fcntl(fd, F_GETFD) >= 0;
        _exit(bad ? 1 : open_fds == 10 ? 0 : 2);
    }
    int st = -1;
    CHECK(p > 0 && waitpid(p, &st, 0) == p);
    CHECK(WIFEXITED(st));
    CHECK_EQ_INT(WEXITSTATUS(st), 0);
}

TEST(tmp_size_of_each_run)
{
    static const int mib[] = {0, 2, 0, 8, 8, 0}; /* 0: the default, 64 MiB */
    for (size_t i = 0; i < sizeof(mib) / sizeof(mib[0]); i++) {
        skd_sandbox_result res;
        skd_sandbox_config c = sbt_cfg();
        if (mib[i])
            c.tmp_size = (int64_t)mib[i] << 20;
        int kib = (int)(c.tmp_size >> 10);
        CHECK_EQ_INT(run_sh("df -k /tmp /dev/shm | awk 'NR>1{printf \"%s \", $2}'; "
                            "ls -A /tmp /dev/shm | wc -w; echo x > /tmp/m; echo x > /dev/shm/m",
                            &c, &res),
                     0);
        char want[64];
        snprintf(want, sizeof(want), "%d %d 2\n", kib, kib < 65536 ? kib : 65536);
        CHECK_STR(S(res.out), want);
        skd_sandbox_result_free(&res);
    }
}

TEST(memory_limit_oom)
{
    skd_sandbox_result res;
    skd_sandbox_config c = sbt_cfg();
    c.memory_limit = 32;
    CHECK_EQ_INT(run_sh("python3 -c 's = b\"x\" * (200 << 20)'; echo after $?", &c, &res), 0);
    CHECK_EQ_INT(res.oom_killed, 1);
    CHECK_STR(S(res.out), "after 137\n");
    CHECK_EQ_INT(res.killed, 1);
    skd_sandbox_result_free(&res);
}

/* A pre-made sandbox's cgroup has the default limits written ahead; a run
 * with others gets its own, raised (memory+swap first on cgroup v1) or
 * lowered, and a run with the defaults gets the defaults. */
TEST(memory_limit_above_and_below_the_default)
{
    static const struct {
        int mib, alloc, oom;
    } runs[] = {{1024, 700, 0}, {0, 700, 1}, {256, 300, 1}, {256, 100, 0}, {1024, 700, 0}};
    for (size_t i = 0; i < sizeof(runs) / sizeof(runs[0]); i++) {
        skd_sandbox_result res;
        skd_sandbox_config c = sbt_cfg(); /* default memoryLimit: 512 MiB */
        if (runs[i].mib)
            c.memory_limit = runs[i].mib;
        char script[128];
        snprintf(script, sizeof(script), "python3 -c 's = b\"x\" * (%d << 20)'; echo after $?",
                 runs[i].alloc);
        CHECK_EQ_INT(run_sh(script, &c, &res), 0);
        CHECK_EQ_INT(res.oom_killed, runs[i].oom);
        CHECK_STR(S(res.out), runs[i].oom ? "after 137\n" : "after 0\n");
        skd_sandbox_result_free(&res);
    }
}

/* A write-ahead whose last step the kernel refuses (a CPU quota of 0)
 * leaves memory and memory+swap written: a run that raises the memory
 * limit must still get it (cgroup v1: memory+swap first). */
TEST(limits_after_a_failed_write_ahead)
{
    skd__cgroup *cg = NULL;
    skd_err err = {0};
    char name[64];
    snprintf(name, sizeof(name), "ahead-test-%d", (int)getpid());
    CHECK_EQ_INT(skd__cgroup_create_bare(name, &cg, &err), 0);
    if (!cg)
        return;
    skd__cgroup_open_limits(cg);
    skd_sandbox_config ahead = sbt_cfg();
    ahead.memory_limit = 512;
    ahead.cpu_limit = 0;
    skd__cgroup_write_ahead(cg, &ahead);
    skd_sandbox_config run = ahead;
    run.memory_limit = 1024;
    run.cpu_limit = 50;
    CHECK_EQ_INT(skd__cgroup_apply(cg, &run, &err), 0);
    if (err.code)
        printf("# %s\n", skd_err_msg(&err));
    skd__cgroup_destroy(cg);
}

TEST(pids_limit)
{
    skd_sandbox_result res;
    skd_sandbox_config c = sbt_cfg();
    c.pids_limit = 8;
    CHECK_EQ_INT(run_sh("for i in $(seq 1 30); do sleep 5 & done; echo all-started", &c, &res), 0);
    CHECK(res.exit_code != 0);
    CHECK(strstr(S(res.err), "fork") != NULL);
    CHECK(strstr(S(res.out), "all-started") == NULL);
    skd_sandbox_result_free(&res);
}

/* Host processes whose command line is "sleep <token>": the sandbox user's
 * id is shared by every sandbox on the machine (other runs may be going
 * on), so the grandchild is recognised by a token unique to this test. */
static int procs_with_token(const char *token)
{
    DIR *d = opendir("/proc");
    struct dirent *de;
    int n = 0;
    while (d && (de = readdir(d))) {
        char p[300], buf[256];
        if (de->d_name[0] < '0' || de->d_name[0] > '9')
            continue;
        snprintf(p, sizeof(p), "/proc/%s/cmdline", de->d_name);
        int fd = open(p, O_RDONLY);
        if (fd < 0)
            continue;
        ssize_t k = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (k <= 6 || memcmp(buf, "sleep", 6) != 0)
            continue;
        buf[k] = '\0';
        if (strcmp(buf + 6, token) == 0) {
            /* Its state and parent, for a failure's report. */
            char st[1024] = "";
            snprintf(p, sizeof(p), "/proc/%s/status", de->d_name);
            FILE *f = fopen(p, "re");
            char line[256];
            while (f && fgets(line, sizeof(line), f))
                if (!strncmp(line, "State:", 6) || !strncmp(line, "PPid:", 5) ||
                    !strncmp(line, "SigPnd:", 7) || !strncmp(line, "ShdPnd:", 7))
                    strncat(st, line, sizeof(st) - strlen(st) - 1);
            if (f)
                fclose(f);
            snprintf(p, sizeof(p), "/proc/%s/stack", de->d_name);
            int sfd = open(p, O_RDONLY); /* its kernel stack: where it waits */
            size_t at = strlen(st);
            ssize_t sk = sfd >= 0 ? read(sfd, st + at, sizeof(st) - at - 1) : 0;
            st[at + (sk > 0 ? (size_t)sk : 0)] = '\0';
            if (sfd >= 0)
                close(sfd);
            for (char *q = st; *q; q++)
                if (*q == '\n' || *q == '\t')
                    *q = ' ';
            printf("# running: pid %s %s\n", de->d_name, st);
            n++;
        }
    }
    if (d)
        closedir(d);
    return n;
}

TEST(no_grandchild_survives_timeout)
{
    skd_sandbox_result res;
    skd_sandbox_config c = sbt_cfg();
    char token[32], script[256];
    c.timeout_ms = 500;
    snprintf(token, sizeof(token), "300.%06d", (int)(getpid() % 1000000));
    snprintf(script, sizeof(script),
             "(setsid sh -c 'trap \"\" TERM HUP; exec sleep %s' &) ; trap '' TERM; "
             "sleep 0.2; n=$(for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' <$f; echo; done | "
             "grep -c '^sleep %.3s[.]%s'); echo up $n; sleep 300",
             token, token, token + 4);
    CHECK_EQ_INT(run_sh(script, &c, &res), 0);
    CHECK_EQ_INT(res.timed_out, 1);
    CHECK_STR(S(res.out), "up 1\n"); /* the daemon was running inside */
    skd_sandbox_result_free(&res);
    CHECK_EQ_INT(procs_with_token(token), 0);
    /* The run's cgroup is gone too (the spawner's directory stays). */
    char dir[160];
    long sp = skd_runner_spawner_pid(R);
    CHECK(sp > 0 && sp != (long)getpid());
    snprintf(dir, sizeof(dir), "/sys/fs/cgroup/pids/skilld/%ld", sp);
    CHECK(access(dir, F_OK) == 0);
    snprintf(dir, sizeof(dir), "/sys/fs/cgroup/pids/skilld/%ld/%s", sp, res.id);
    CHECK(access(dir, F_OK) != 0);
}

TEST(seccomp_denials)
{
    skd_sandbox_result res;
    CHECK_EQ_INT(run_sh("unshare -U true 2>/dev/null && echo unshare-ok || echo unshare-denied;"
                        "python3 -c 'import socket\n"
                        "for fam in (16, 40, 5):\n"
                        "  try:\n"
                        "    socket.socket(fam, socket.SOCK_DGRAM); print(\"open\")\n"
                        "  except OSError as e: print(e.errno)\n"
                        "socket.socket(socket.AF_UNIX); print(\"unix\")'",
                        NULL, &res),
                 0);
    CHECK_STR(S(res.out), "unshare-denied\n97\n97\n97\nunix\n");
    skd_sandbox_result_free(&res);
}

/* The helper process of dies_with_server: a "server" that starts a
 * sandboxed `sleep TOKEN`, says so on stdout and waits to be killed. */
static int orphan_helper(const char *token)
{
    skd_runner *r = NULL;
    skd_err err = {0};
    if (skd_runner_new(NULL, NULL, &r, &err))
        return 1;
    /* Tell the test which spawner (and so which cgroup directory) is ours. */
    printf("%ld\n", skd_runner_spawner_pid(r));
    fflush(stdout);
    const char *argv[] = {"sleep", token, NULL};
    skd_sandbox_spec spec = {.argv = argv};
    skd_sandbox_result res;
    int rc = skd_sandbox_run(r, &spec, &res, &err); /* the first is killed before it returns */
    if (rc == 0)
        skd_sandbox_result_free(&res);
    skd_runner_free(r);
    return rc;
}

static char *SELF;

TEST(dies_with_server)
{
    char token[32];
    snprintf(token, sizeof(token), "301.%06d", (int)(getpid() % 1000000));
    int pfd[2];
    CHECK(pipe(pfd) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(pfd[1], 1);
        execl(SELF, SELF, "--orphan-helper", token, (char *)NULL);
        _exit(127);
    }
    CHECK(pid > 0);
    close(pfd[1]);
    char line[32] = {0};
    CHECK(read(pfd[0], line, sizeof(line) - 1) > 0);
    close(pfd[0]);
    long sp = strtol(line, NULL, 10);
    CHECK(sp > 0);
    int seen = 0;
    for (int i = 0; i < 500 && !seen; i++) {
        struct timespec ts = {0, 10000000L};
        nanosleep(&ts, NULL);
        seen = procs_with_token(token);
    }
    CHECK_EQ_INT(seen, 1);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    /* The parent-death signal reaches the sandbox's init once the spawner
     * has exited; allow the kernel a bounded moment to tear it all down.
     * 10 s, not 2: one whole-suite run saw the sleep alive after 2 s, and
     * the cause (perhaps the spawner held in uninterruptible kernel work
     * while its SIGKILL waited) was not pinned down. The server-level check
     * (server_spawner_stress.sh, 16 sandboxes) keeps its 2 s. */
    int left = 1;
    for (int i = 0; i < 1000 && left; i++) {
        struct timespec ts = {0, 10000000L};
        nanosleep(&ts, NULL);
        left = procs_with_token(token);
    }
    if (left) { /* for the report: the spawner, if it is still there */
        char p[64], sline[256];
        snprintf(p, sizeof(p), "/proc/%ld/status", sp);
        FILE *f = fopen(p, "re");
        while (f && fgets(sline, sizeof(sline), f))
            if (!strncmp(sline, "State:", 6) || !strncmp(sline, "Name:", 5))
                printf("# spawner %ld %s", sp, sline);
        if (f)
            fclose(f);
        else
            printf("# spawner %ld is gone\n", sp);
    }
    CHECK_EQ_INT(left, 0);
    /* What the dead server left in the cgroup tree goes with the next
     * process that sets cgroups up (here: the next helper run; any other
     * skilld on the machine may have cleared it already). */
    char dir[160];
    snprintf(dir, sizeof(dir), "/sys/fs/cgroup/pids/skilld/%ld", sp);
    pid_t again = fork();
    if (again == 0) {
        execl(SELF, SELF, "--orphan-helper", "0", (char *)NULL);
        _exit(127);
    }
    waitpid(again, NULL, 0);
    CHECK(access(dir, F_OK) != 0);
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--orphan-helper") == 0)
        return orphan_helper(argv[2]);
    SELF = argv[0];
    sbt_maybe_reexec(argc, argv);
    TAP_BEGIN("test_sandbox_native");
    skd_err err = {0};
    snprintf(WS, sizeof(WS), "/tmp/skd-sbws.XXXXXX");
    if (!mkdtemp(WS) || skd_runner_new(NULL, NULL, &R, &err)) {
        printf("FAIL test_sandbox_native: setup: %s\n", skd_err_msg(&err));
        return 1;
    }
    RUN(status_line);
    RUN(identity_and_root);
    RUN(network_is_loopback_only);
    RUN(workspace_round_trip);
    RUN(tmp_is_private_and_limited);
    RUN(a_pre_made_sandbox_keeps_its_descriptors_among_inherited_ones);
    RUN(tmp_size_of_each_run);
    RUN(memory_limit_oom);
    RUN(memory_limit_above_and_below_the_default);
    RUN(limits_after_a_failed_write_ahead);
    RUN(pids_limit);
    RUN(no_grandchild_survives_timeout);
    RUN(seccomp_denials);
    RUN(dies_with_server);
    skd_runner_free(R);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "%s/d/y", WS);
    unlink(cmd);
    snprintf(cmd, sizeof(cmd), "%s/d", WS);
    rmdir(cmd);
    snprintf(cmd, sizeof(cmd), "%s/out.txt", WS);
    unlink(cmd);
    rmdir(WS);
    return TAP_END();
}
