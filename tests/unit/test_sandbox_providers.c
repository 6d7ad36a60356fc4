/*
 * The same provider test set, through the runner (skd_sandbox_run /
 * skd_sandbox_start), against native, docker and podman, all running the
 * busybox test image (build/test-image.tar, imported under a temporary
 * DATA_DIR for native and into both engines by scripts/setup-containers.sh,
 * which this program runs first).
 *
 * Cases: echo + exit code + stdin + environment, workspace read-write and
 * read-only, network off, timeout with partial output, memory limit
 * reported as oomKilled, pids limit, output cap, kill of a running
 * sandbox, kill_all; after each, no skilld container is left in the
 * engine.
 *
 * Valgrind 3.19 lacks pidfd_open and clone3, so under SKILLD_UNDER_VALGRIND
 * the program re-executes itself natively (valgrind runs with
 * --trace-children=no) and runs on docker only, the same assertions.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandbox/container/container.h"
#include "sandbox/provider.h"
#include "skilld/image.h"
#include "skilld/sandbox.h"
#include "skilld/util.h"
#include "tap.h"

#define IMAGE "skilld-test:1"
#define S(x) ((x) ? (x) : "")

static skd_runner *runner;
static const char *runtime;
static char data_dir[64], ws_dir[64];

static skd_sandbox_config cfg(void)
{
    skd_sandbox_config c;
    skd_sandbox_config_defaults(&c, NULL);
    c.memory_limit = 64;
    c.pids_limit = 64;
    c.timeout_ms = 20000;
    return c;
}

static int run(const char *const *argv, const skd_sandbox_config *c, const char *in, const char *ws,
               skd_sandbox_result *res)
{
    skd_sandbox_spec spec = {0};
    skd_err err = {0};
    const char *env[] = {"PATH=/bin:/usr/bin", "SKD_GREETING=hello there", NULL};
    spec.runtime = runtime;
    spec.image = IMAGE;
    spec.argv = argv;
    spec.env = env;
    spec.config = c;
    spec.stdin_data = in;
    spec.stdin_len = in ? strlen(in) : 0;
    spec.workspace = ws;
    spec.key_id = "k";
    int rc = skd_sandbox_run(runner, &spec, res, &err);
    if (rc)
        printf("# %s: run refused: %s\n", runtime, skd_err_msg(&err));
    else if (res->error)
        printf("# %s: sandbox error: %s\n", runtime, res->message);
    return rc;
}

/* 1 when the engine of this runtime still holds a container made by this
 * process (its owner label), so other skilld users of the same engine on
 * the machine do not count. */
static int leftovers(void)
{
    if (strcmp(runtime, "native") == 0)
        return 0;
    skd__engine e;
    skd__ctr_cmd c;
    char owner[160];
    snprintf(owner, sizeof(owner), "label=skilld.owner=%s", skd__ctr_owner());
    const char *args[] = {"ps", "-a", "-q", "--filter", owner, NULL};
    if (skd__engine_resolve(runtime, &e, NULL) != 0 ||
        skd__ctr_run(&e, args, 20000, &c, NULL) != 0 || c.status != 0)
        return -1;
    return c.out[0] != '\0';
}

TEST(echo_exit_stdin_env)
{
    skd_sandbox_config c = cfg();
    skd_sandbox_result r;
    const char *argv[] = {"sh", "-c", "echo out; echo err >&2; cat; echo \"$SKD_GREETING\"; exit 7",
                          NULL};
    CHECK_EQ_INT(run(argv, &c, "from stdin\n", NULL, &r), 0);
    CHECK_EQ_INT(r.error, 0);
    CHECK(r.exited && r.exit_code == 7);
    CHECK_STR(S(r.out), "out\nfrom stdin\nhello there\n");
    CHECK_STR(S(r.err), "err\n");
    CHECK_STR(r.runtime, runtime);
    CHECK(!r.killed && !r.timed_out && !r.oom_killed && !r.truncated);
    skd_sandbox_result_free(&r);
    CHECK_EQ_INT(leftovers(), 0);
}

TEST(workspace_rw_ro)
{
    skd_sandbox_config c = cfg();
    skd_sandbox_result r;
    const char *w[] = {"sh", "-c", "echo data > /workspace/made && cat /workspace/seed && pwd",
                       NULL};
    CHECK_EQ_INT(run(w, &c, NULL, ws_dir, &r), 0);
    CHECK(r.exited && r.exit_code == 0);
    CHECK_STR(S(r.out), "seed\n/workspace\n");
    skd_sandbox_result_free(&r);
    char path[128];
    struct stat st;
    snprintf(path, sizeof(path), "%s/made", ws_dir);
    CHECK(stat(path, &st) == 0 && st.st_uid == 0); /* handed back to root */
    CHECK(stat(ws_dir, &st) == 0 && st.st_uid == 0 && (st.st_mode & 0777) == 0700);
    c.workspace_read_only = 1;
    const char *ro[] = {"sh", "-c", "cat /workspace/made; echo x > /workspace/new", NULL};
    CHECK_EQ_INT(run(ro, &c, NULL, ws_dir, &r), 0);
    CHECK(r.exited && r.exit_code != 0);
    CHECK_STR(S(r.out), "data\n");
    skd_sandbox_result_free(&r);
    snprintf(path, sizeof(path), "%s/new", ws_dir);
    CHECK(access(path, F_OK) != 0);
    unlink(path);
    CHECK_EQ_INT(leftovers(), 0);
}

TEST(network_off)
{
    skd_sandbox_config c = cfg();
    skd_sandbox_result r;
    const char *argv[] = {"sh", "-c", "cat /proc/net/dev", NULL};
    CHECK_EQ_INT(run(argv, &c, NULL, NULL, &r), 0);
    CHECK(r.exited && r.exit_code == 0);
    CHECK(strstr(S(r.out), "lo:") != NULL);
    CHECK(strstr(S(r.out), "eth") == NULL);
    skd_sandbox_result_free(&r);
}

TEST(timeout_partial_output)
{
    skd_sandbox_config c = cfg();
    c.timeout_ms = 1500;
    skd_sandbox_result r;
    const char *argv[] = {"sh", "-c", "echo started; sleep 30; echo never", NULL};
    CHECK_EQ_INT(run(argv, &c, NULL, NULL, &r), 0);
    CHECK(r.timed_out && r.killed && !r.exited);
    CHECK_STR(S(r.out), "started\n");
    CHECK(r.duration_ms < 15000);
    skd_sandbox_result_free(&r);
    CHECK_EQ_INT(leftovers(), 0);
}

TEST(memory_oom)
{
    skd_sandbox_config c = cfg();
    c.memory_limit = 16;
    skd_sandbox_result r;
    const char *argv[] = {"sh", "-c", "echo before; x=aaaaaaaa; while :; do x=$x$x; done", NULL};
    CHECK_EQ_INT(run(argv, &c, NULL, NULL, &r), 0);
    CHECK(r.oom_killed && r.killed && !r.exited);
    CHECK(!r.timed_out);
    CHECK_STR(S(r.out), "before\n");
    skd_sandbox_result_free(&r);
    CHECK_EQ_INT(leftovers(), 0);
}

TEST(pids_limit)
{
    skd_sandbox_config c = cfg();
    c.pids_limit = 8;
    skd_sandbox_result r;
    const char *argv[] = {
        "sh", "-c", "n=0; while [ $n -lt 20 ]; do sleep 3 & n=$((n+1)); done; echo spawned", NULL};
    CHECK_EQ_INT(run(argv, &c, NULL, NULL, &r), 0);
    CHECK(strstr(S(r.err), "fork") != NULL || strstr(S(r.err), "Resource") != NULL);
    skd_sandbox_result_free(&r);
    CHECK_EQ_INT(leftovers(), 0);
}

TEST(output_cap)
{
    skd_sandbox_config c = cfg();
    c.output_limit = 1000;
    skd_sandbox_result r;
    const char *argv[] = {"sh", "-c", "yes | head -c 100000", NULL};
    CHECK_EQ_INT(run(argv, &c, NULL, NULL, &r), 0);
    CHECK(r.exited && r.exit_code == 0);
    CHECK(r.truncated);
    CHECK_EQ_INT(r.out_len, 1000);
    CHECK_EQ_INT(r.out_total, 100000);
    skd_sandbox_result_free(&r);
    CHECK_EQ_INT(leftovers(), 0);
}

/* Async completion: park the result for the test thread. */
struct slot {
    volatile int done;
    skd_sandbox_result res;
};

static void on_done(void *arg, skd_sandbox_result *res)
{
    struct slot *s = arg;
    s->res = *res;
    __atomic_store_n(&s->done, 1, __ATOMIC_RELEASE);
}

static int start_sleeper(struct slot *s, char id[SKD_UUID_LEN + 1])
{
    skd_sandbox_config c = cfg();
    skd_sandbox_spec spec = {0};
    const char *argv[] = {"sh", "-c", "echo up; sleep 60", NULL};
    spec.runtime = runtime;
    spec.image = IMAGE;
    spec.argv = argv;
    spec.config = &c;
    spec.key_id = "k";
    memset(s, 0, sizeof(*s));
    return skd_sandbox_start(runner, &spec, on_done, s, id, NULL);
}

static int wait_done(struct slot *s, int64_t ms)
{
    int64_t t0 = skd_mono_ms();
    while (!__atomic_load_n(&s->done, __ATOMIC_ACQUIRE) && skd_mono_ms() - t0 < ms)
        usleep(20000);
    return s->done;
}

TEST(kill_running)
{
    struct slot s;
    char id[SKD_UUID_LEN + 1];
    CHECK_EQ_INT(start_sleeper(&s, id), 0);
    for (int i = 0; i < 200 && skd_runner_running_count(runner) < 1; i++)
        usleep(10000);
    usleep(800000); /* let it print */
    CHECK(skd_runner_is_running(runner, id));
    CHECK_EQ_INT(skd_runner_kill(runner, id), 0);
    CHECK(wait_done(&s, 20000));
    CHECK(s.res.killed && !s.res.exited && !s.res.timed_out);
    CHECK_STR(S(s.res.out), "up\n");
    skd_sandbox_result_free(&s.res);
    CHECK(!skd_runner_is_running(runner, id));
    CHECK_EQ_INT(leftovers(), 0);
}

TEST(kill_all)
{
    struct slot a, b;
    char ia[SKD_UUID_LEN + 1], ib[SKD_UUID_LEN + 1];
    CHECK_EQ_INT(start_sleeper(&a, ia), 0);
    CHECK_EQ_INT(start_sleeper(&b, ib), 0);
    for (int i = 0; i < 500 && skd_runner_running_count(runner) < 2; i++)
        usleep(10000);
    usleep(500000);
    CHECK_EQ_INT(skd_runner_kill_all(runner), 2);
    CHECK(wait_done(&a, 20000) && wait_done(&b, 20000));
    CHECK(a.res.killed && b.res.killed);
    skd_sandbox_result_free(&a.res);
    skd_sandbox_result_free(&b.res);
    CHECK_EQ_INT(skd_runner_running_count(runner), 0);
    CHECK_EQ_INT(leftovers(), 0);
}

/* docker/podman: what they cannot run is refused before anything runs. */
TEST(engine_refusals)
{
    skd_sandbox_config c = cfg();
    skd_sandbox_spec spec = {0};
    skd_sandbox_result r;
    skd_err err = {0};
    const char *argv[] = {"true", NULL};
    spec.runtime = runtime;
    spec.argv = argv;
    spec.config = &c;
    spec.image = "host"; /* native only */
    CHECK_EQ_INT(skd_sandbox_run(runner, &spec, &r, &err), SKD_ESANDBOX);
    CHECK(strstr(err.msg, "needs an image") != NULL);
    spec.image = "skilld-test:404"; /* allowed, not in the engine: never pulled */
    skd_err_clear(&err);
    CHECK_EQ_INT(skd_sandbox_run(runner, &spec, &r, &err), SKD_ESANDBOX);
    CHECK(strstr(err.msg, "refused") != NULL);
    CHECK_EQ_INT(leftovers(), 0);
}

static int sh(const char *const *argv)
{
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open("/dev/null", O_WRONLY);
        dup2(fd, 1);
        execvp(argv[0], (char *const *)argv);
        _exit(127);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

static int setup(void)
{
    const char *s[] = {"scripts/setup-containers.sh", NULL};
    if (sh(s) != 0)
        return -1;
    snprintf(data_dir, sizeof(data_dir), "/tmp/skilld-prov-data.XXXXXX");
    snprintf(ws_dir, sizeof(ws_dir), "/tmp/skilld-prov-ws.XXXXXX");
    if (!mkdtemp(data_dir) || !mkdtemp(ws_dir))
        return -1;
    skd_err err = {0};
    if (skd_image_import(data_dir, IMAGE, "build/test-image.tar", NULL, NULL, &err) != 0) {
        printf("# image import: %s\n", skd_err_msg(&err));
        return -1;
    }
    char seed[128];
    snprintf(seed, sizeof(seed), "%s/seed", ws_dir);
    FILE *f = fopen(seed, "w");
    if (!f)
        return -1;
    fputs("seed\n", f);
    fclose(f);
    return 0;
}

int main(int argc, char **argv)
{
    (void)argc;
    if (getenv("SKILLD_UNDER_VALGRIND") && !getenv("SKILLD_PROVIDERS_NATIVE_RUN")) {
        setenv("SKILLD_PROVIDERS_NATIVE_RUN", "1", 1);
        execv(argv[0], argv);
    }
    int light = getenv("SKILLD_PROVIDERS_NATIVE_RUN") != NULL;
    TAP_BEGIN("test_sandbox_providers");
    if (setup() != 0) {
        printf("FAIL test_sandbox_providers: setup\n");
        return 1;
    }
    static const char *const all[] = {"native", "docker", "podman"};
    static const char *const some[] = {"docker"};
    const char *const *rts = light ? some : all;
    size_t n = light ? 1 : 3;
    for (size_t i = 0; i < n; i++) {
        runtime = rts[i];
        char prog[64];
        snprintf(prog, sizeof(prog), "test_sandbox_providers/%s", runtime);
        TAP_BEGIN(prog);
        skd_err err = {0};
        if (skd_sandbox_provider_detect(runtime, &err) != 0) {
            printf("FAIL %s: detect: %s\n", prog, skd_err_msg(&err));
            tap_failed_total++;
            continue;
        }
        skd_runner_opts o = {
            .runtime = runtime, .data_dir = data_dir, .allowed_images = "skilld-test"};
        if (skd_runner_new(NULL, &o, &runner, &err) != 0) {
            printf("FAIL %s: runner: %s\n", prog, skd_err_msg(&err));
            tap_failed_total++;
            continue;
        }
        RUN(echo_exit_stdin_env);
        RUN(workspace_rw_ro);
        RUN(network_off);
        RUN(timeout_partial_output);
        RUN(memory_oom);
        RUN(output_cap);
        RUN(kill_running);
        if (!light) {
            RUN(pids_limit);
            RUN(kill_all);
            if (strcmp(runtime, "native") != 0)
                RUN(engine_refusals);
        }
        skd_runner_free(runner);
        runner = NULL;
    }
    const char *rm1[] = {"rm", "-rf", data_dir, ws_dir, NULL};
    sh(rm1);
    return TAP_END();
}
