/*
 * The docker and podman providers driven directly through the provider
 * interface, the way the runner drives them: prepare, spawn, feed stdin,
 * read both pipes, wait on the pidfd, kill on a deadline, cleanup. Needs
 * the engines and the test image: scripts/setup-containers.sh is run first
 * (it starts dockerd and imports build/test-image.tar).
 *
 * Cases per engine: echo + exit code, stdin, environment, workspace
 * read-write and read-only, network off, memory limit (OOM), pids limit,
 * a refused image, kill of a running container, and no container left
 * behind after any of them.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandbox/container.h"
#include "sandbox/provider.h"
#include "skilld/util.h"
#include "tap.h"

#define IMAGE "skilld-test:1"

typedef struct run_out {
    int prep_rc, spawn_rc;
    char msg[SKD_ERR_MSG_MAX];
    skd__outcome o;
    char out[8192], err[8192];
    size_t out_len, err_len;
} run_out;

static const skd__provider *prov;
static char ws_dir[64];

static void read_some(int *fd, char *buf, size_t cap, size_t *len)
{
    char tmp[4096];
    ssize_t n = read(*fd, tmp, sizeof(tmp));
    if (n > 0) {
        size_t k = (size_t)n < cap - 1 - *len ? (size_t)n : cap - 1 - *len;
        memcpy(buf + *len, tmp, k);
        *len += k;
        buf[*len] = '\0';
    } else if (n == 0 || errno != EAGAIN) {
        close(*fd);
        *fd = -1;
    }
}

/* One run through the provider. kill_ms > 0: kill after that long. */
static void run(const char *const *argv, const char *in, const skd_sandbox_config *cfg,
                const char *ws, const char *image, int64_t kill_ms, run_out *r)
{
    memset(r, 0, sizeof(*r));
    char id[SKD_UUID_LEN + 1];
    skd_uuid(id);
    char *env[] = {"PATH=/bin", "SKD_GREETING=hello there", NULL};
    skd__sandbox_req req = {.id = id, .image = image, .argv = (char *const *)argv, .envp = env,
                            .workspace = ws, .cwd = ws ? "/workspace" : "/tmp", .cfg = cfg,
                            .data_dir = "/tmp"};
    skd_err e = {0};
    void *st = NULL;
    if ((r->prep_rc = prov->prepare(&req, &st, &e)) != 0) {
        skd_strlcpy(r->msg, skd_err_msg(&e), sizeof(r->msg));
        return;
    }
    skd__spawned sp;
    if ((r->spawn_rc = prov->spawn(st, &sp, &e)) != 0) {
        skd_strlcpy(r->msg, skd_err_msg(&e), sizeof(r->msg));
        prov->cleanup(st, &r->o);
        return;
    }
    if (in && *in && write(sp.stdin_fd, in, strlen(in)) < 0)
        r->msg[0] = '!';
    close(sp.stdin_fd);
    int64_t t0 = skd_mono_ms();
    int exited = 0;
    while (!exited || sp.stdout_fd >= 0 || sp.stderr_fd >= 0) {
        struct pollfd pf[3] = {{sp.stdout_fd, POLLIN, 0}, {sp.stderr_fd, POLLIN, 0},
                               {exited ? -1 : sp.pidfd, POLLIN, 0}};
        poll(pf, 3, 100);
        if (pf[0].revents)
            read_some(&sp.stdout_fd, r->out, sizeof(r->out), &r->out_len);
        if (pf[1].revents)
            read_some(&sp.stderr_fd, r->err, sizeof(r->err), &r->err_len);
        if (pf[2].revents)
            exited = 1;
        if (kill_ms > 0 && !r->o.killed && skd_mono_ms() - t0 > kill_ms) {
            r->o.killed = 1;
            prov->kill(st);
        }
        if (skd_mono_ms() - t0 > 60000 && !r->o.killed) { /* test safety net */
            r->o.killed = 1;
            prov->kill(st);
        }
    }
    siginfo_t si = {0};
    waitid(P_PIDFD, (id_t)sp.pidfd, &si, WEXITED);
    close(sp.pidfd);
    r->o.exited = si.si_code == CLD_EXITED;
    r->o.exit_code = r->o.exited ? si.si_status : 0;
    r->o.signal = r->o.exited ? 0 : si.si_status;
    prov->cleanup(st, &r->o);
}

static int leftovers(void)
{
    skd__engine e;
    skd__ctr_cmd c;
    const char *args[] = {"ps", "-a", "-q", "--filter", "label=skilld=1", NULL};
    if (skd__engine_resolve(prov->name, &e, NULL) != 0 ||
        skd__ctr_run(&e, args, 20000, &c, NULL) != 0 || c.status != 0)
        return -1;
    return c.out[0] != '\0';
}

static skd_sandbox_config base(void)
{
    skd_sandbox_config c = {.cpu_limit = 100, .memory_limit = 64, .timeout_ms = 10000,
                            .read_only = 1, .pids_limit = 64, .output_limit = 4096,
                            .file_size_limit = 1 << 20, .tmp_size = 16 << 20};
    return c;
}

TEST(echo_exit_code_env_stdin)
{
    skd_sandbox_config c = base();
    run_out r;
    const char *argv[] = {"sh", "-c", "echo out; echo err >&2; cat; echo \"$SKD_GREETING\"; id -u; exit 7", NULL};
    run(argv, "from stdin\n", &c, NULL, IMAGE, 0, &r);
    CHECK_EQ_INT(r.prep_rc, 0);
    CHECK_EQ_INT(r.spawn_rc, 0);
    CHECK(r.o.exited && r.o.exit_code == 7);
    CHECK_STR(r.out, "out\nfrom stdin\nhello there\n65534\n");
    CHECK_STR(r.err, "err\n");
    CHECK(!r.o.oom_killed && !r.o.setup_error[0]);
    CHECK_EQ_INT(leftovers(), 0);
}

TEST(workspace_rw_and_ro)
{
    skd_sandbox_config c = base();
    run_out r;
    const char *w[] = {"sh", "-c", "echo data > /workspace/made && cat /workspace/seed && pwd", NULL};
    run(w, NULL, &c, ws_dir, IMAGE, 0, &r);
    CHECK(r.o.exited && r.o.exit_code == 0);
    CHECK_STR(r.out, "seed\n/workspace\n");
    char path[128];
    snprintf(path, sizeof(path), "%s/made", ws_dir);
    CHECK(access(path, F_OK) == 0);
    c.workspace_read_only = 1;
    const char *ro[] = {"sh", "-c", "cat /workspace/made; echo x > /workspace/new", NULL};
    run(ro, NULL, &c, ws_dir, IMAGE, 0, &r);
    CHECK(r.o.exited && r.o.exit_code != 0);
    CHECK_STR(r.out, "data\n");
    CHECK(strstr(r.err, "Read-only") != NULL);
    snprintf(path, sizeof(path), "%s/new", ws_dir);
    CHECK(access(path, F_OK) != 0);
    const char *root[] = {"sh", "-c", "echo x > /etc/x", NULL};
    run(root, NULL, &c, NULL, IMAGE, 0, &r);
    CHECK(r.o.exited && r.o.exit_code != 0); /* read-only root */
    CHECK_EQ_INT(leftovers(), 0);
}

TEST(network_off)
{
    skd_sandbox_config c = base();
    run_out r;
    const char *argv[] = {"sh", "-c", "ls /sys/class/net", NULL};
    run(argv, NULL, &c, NULL, IMAGE, 0, &r);
    CHECK(r.o.exited && r.o.exit_code == 0);
    CHECK_STR(r.out, "lo\n");
}

TEST(memory_limit_oom)
{
    skd_sandbox_config c = base();
    c.memory_limit = 16;
    run_out r;
    const char *argv[] = {"sh", "-c", "echo before; x=aaaaaaaa; while :; do x=$x$x; done", NULL};
    run(argv, NULL, &c, NULL, IMAGE, 0, &r);
    CHECK_EQ_INT(r.prep_rc, 0);
    CHECK(r.o.oom_killed);
    CHECK(!r.o.exited && r.o.signal == SIGKILL);
    CHECK_STR(r.out, "before\n");
    CHECK_EQ_INT(leftovers(), 0);
}

TEST(pids_limit)
{
    skd_sandbox_config c = base();
    c.pids_limit = 8;
    run_out r;
    const char *argv[] = {"sh", "-c",
                          "n=0; while [ $n -lt 20 ]; do sleep 5 & n=$((n+1)); done; echo spawned", NULL};
    run(argv, NULL, &c, NULL, IMAGE, 20000, &r);
    CHECK(strstr(r.err, "fork") != NULL || strstr(r.err, "Resource") != NULL);
    CHECK_EQ_INT(leftovers(), 0);
}

TEST(kill_running_container)
{
    skd_sandbox_config c = base();
    run_out r;
    const char *argv[] = {"sh", "-c", "echo started; sleep 30; echo never", NULL};
    int64_t t0 = skd_mono_ms();
    run(argv, NULL, &c, NULL, IMAGE, 1500, &r);
    CHECK(skd_mono_ms() - t0 < 20000);
    CHECK(r.o.killed && !r.o.exited && r.o.signal == SIGKILL);
    CHECK_STR(r.out, "started\n");
    CHECK_EQ_INT(leftovers(), 0);
}

TEST(refusals)
{
    skd_sandbox_config c = base();
    run_out r;
    const char *argv[] = {"true", NULL};
    run(argv, NULL, &c, NULL, "host", 0, &r);
    CHECK_EQ_INT(r.prep_rc, SKD_ESANDBOX);
    run(argv, NULL, &c, NULL, "skilld-no-such-image:1", 0, &r);
    CHECK_EQ_INT(r.prep_rc, SKD_ESANDBOX);
    CHECK(strstr(r.msg, "refused") != NULL);
    run(argv, NULL, &c, NULL, "--privileged", 0, &r);
    CHECK(r.prep_rc != 0);
    c.network_enabled = 1; /* dockerd runs with --bridge=none here: no bridge */
    CHECK_EQ_INT(leftovers(), 0);
}

static int setup(void)
{
    char *argv[] = {"scripts/setup-containers.sh", NULL};
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open("/dev/null", O_WRONLY);
        dup2(fd, 1);
        execv(argv[0], argv);
        _exit(127);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

int main(void)
{
    TAP_BEGIN("test_sandbox_containers");
    if (setup() != 0) {
        printf("FAIL test_sandbox_containers: setup: scripts/setup-containers.sh failed\n");
        return 1;
    }
    snprintf(ws_dir, sizeof(ws_dir), "/tmp/skilld-ctr-ws.XXXXXX");
    if (!mkdtemp(ws_dir))
        return 1;
    char seed[128];
    snprintf(seed, sizeof(seed), "%s/seed", ws_dir);
    FILE *f = fopen(seed, "w");
    fputs("seed\n", f);
    fclose(f);
    chmod(seed, 0600);
    const skd__provider *const engines[] = {&skd__provider_docker, &skd__provider_podman};
    int light = getenv("SKILLD_UNDER_VALGRIND") != NULL;
    for (size_t i = 0; i < 2; i++) {
        prov = engines[i];
        TAP_BEGIN(i == 0 ? "test_sandbox_containers/docker" : "test_sandbox_containers/podman");
        skd_err e = {0};
        if (prov->detect(&e) != 0) {
            printf("FAIL test_sandbox_containers: %s detect: %s\n", prov->name, skd_err_msg(&e));
            tap_failed_total++;
            continue;
        }
        skd__containers_reap_leftovers(prov->name, 1);
        RUN(echo_exit_code_env_stdin);
        RUN(workspace_rw_and_ro);
        RUN(network_off);
        RUN(memory_limit_oom);
        RUN(kill_running_container);
        if (!light) {
            RUN(pids_limit);
            RUN(refusals);
        }
    }
    char *rm[] = {"rm", "-rf", ws_dir, NULL};
    pid_t p = fork();
    if (p == 0) {
        execvp(rm[0], rm);
        _exit(127);
    }
    waitpid(p, NULL, 0);
    return TAP_END();
}
