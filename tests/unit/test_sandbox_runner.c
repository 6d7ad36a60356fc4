/*
 * Runner semantics through the native provider: output, exit codes, stdin
 * (also for commands that exit before their descriptors are watched),
 * environment, timeouts with partial output, output caps, kill, kill_all,
 * the global and per-key caps with their queue, and setup failures.
 */
#include "sandbox_test.h"

#include <pthread.h>
#include <time.h>

static skd_runner *R;

TEST(echo_output)
{
    skd_sandbox_result res;
    const char *argv[] = {"echo", "hello", "world", NULL};
    CHECK_EQ_INT(sbt_run(R, argv, NULL, NULL, NULL, &res), 0);
    CHECK_EQ_INT(res.error, 0);
    CHECK_EQ_INT(res.exited, 1);
    CHECK_EQ_INT(res.exit_code, 0);
    CHECK_STR(res.out, "hello world\n");
    CHECK_EQ_INT(res.err_len, 0);
    CHECK_STR(res.runtime, "native");
    CHECK_EQ_INT(strlen(res.id), 36);
    CHECK(!res.killed && !res.timed_out && !res.truncated && !res.oom_killed);
    json_t *j = skd_sandbox_result_to_json(&res);
    CHECK(j != NULL);
    CHECK_EQ_INT(json_integer_value(json_object_get(j, "exitCode")), 0);
    CHECK_STR(json_string_value(json_object_get(j, "stdout")), "hello world\n");
    CHECK(json_is_null(json_object_get(j, "signal")));
    json_decref(j);
    skd_sandbox_result_free(&res);
}

TEST(exit_codes_and_stderr)
{
    skd_sandbox_result res;
    const char *argv[] = {"sh", "-c", "echo oops >&2; exit 3", NULL};
    CHECK_EQ_INT(sbt_run(R, argv, NULL, NULL, NULL, &res), 0);
    CHECK_EQ_INT(res.exit_code, 3);
    CHECK_STR(res.err, "oops\n");
    skd_sandbox_result_free(&res);
    const char *missing[] = {"no-such-command-xyz", NULL};
    CHECK_EQ_INT(sbt_run(R, missing, NULL, NULL, NULL, &res), 0);
    CHECK_EQ_INT(res.error, 0);
    CHECK_EQ_INT(res.exit_code, 127);
    CHECK(strstr(S(res.err), "no-such-command-xyz") != NULL);
    skd_sandbox_result_free(&res);
}

TEST(stdin_and_env)
{
    skd_sandbox_result res;
    const char *cat[] = {"cat", NULL};
    CHECK_EQ_INT(sbt_run(R, cat, NULL, "line one\nline two\n", NULL, &res), 0);
    CHECK_STR(res.out, "line one\nline two\n");
    skd_sandbox_result_free(&res);
    const char *env[] = {"PATH=/usr/bin:/bin", "GREETING=bonjour", NULL};
    const char *argv[] = {"sh", "-c", "echo $GREETING; echo ${HOME:-unset}", NULL};
    skd_sandbox_spec spec = {.argv = argv, .env = env};
    skd_err err = {0};
    CHECK_EQ_INT(skd_sandbox_run(R, &spec, &res, &err), 0);
    CHECK_STR(res.out, "bonjour\nunset\n");
    skd_sandbox_result_free(&res);
}

TEST(fast_runs_with_stdin)
{
    /* A command that exits at once, with stdin to write: its descriptors
     * can all be ready before the supervisor watches them, so one epoll
     * batch holds every event of the run, the stdin watch after the one
     * that completes it. The run must not be freed under that event (it
     * was: a crash in free() of the server, once, in tenant_http.sh). */
    int ok = 0, n = sbt_light ? 20 : 150;
    for (int i = 0; i < n; i++) {
        skd_sandbox_result res;
        const char *argv[] = {"true", NULL};
        if (sbt_run(R, argv, NULL, "{}", NULL, &res) == 0 && res.error == 0 && res.exited &&
            res.exit_code == 0)
            ok++;
        skd_sandbox_result_free(&res);
    }
    CHECK_EQ_INT(ok, n);
}

TEST(timeout_keeps_partial_output)
{
    skd_sandbox_result res;
    skd_sandbox_config c = sbt_cfg();
    c.timeout_ms = 400;
    const char *argv[] = {"sh", "-c", "echo started; sleep 30; echo never", NULL};
    CHECK_EQ_INT(sbt_run(R, argv, &c, NULL, NULL, &res), 0);
    CHECK_EQ_INT(res.timed_out, 1);
    CHECK_EQ_INT(res.killed, 1);
    CHECK_EQ_INT(res.exited, 0);
    CHECK_EQ_INT(res.signal, 9);
    CHECK_STR(res.out, "started\n");
    json_t *j = skd_sandbox_result_to_json(&res);
    CHECK(json_is_null(json_object_get(j, "exitCode")));
    CHECK_STR(json_string_value(json_object_get(j, "signal")), "SIGKILL");
    CHECK(json_is_true(json_object_get(j, "timedOut")));
    json_decref(j);
    skd_sandbox_result_free(&res);
}

TEST(non_utf8_output_is_replaced)
{
    skd_sandbox_result res;
    const char *argv[] = {"printf", "a\\377b", NULL};
    CHECK_EQ_INT(sbt_run(R, argv, NULL, NULL, NULL, &res), 0);
    CHECK_EQ_INT(res.out_len, 3);
    json_t *j = skd_sandbox_result_to_json(&res);
    CHECK_STR(json_string_value(json_object_get(j, "stdout")), "a\xef\xbf\xbd"
                                                               "b");
    json_decref(j);
    skd_sandbox_result_free(&res);
}

TEST(output_is_capped_and_counted)
{
    skd_sandbox_result res;
    skd_sandbox_config c = sbt_cfg();
    c.output_limit = 1000;
    const char *argv[] = {"sh", "-c", "head -c 3000000 /dev/zero | tr '\\0' x; echo e >&2", NULL};
    CHECK_EQ_INT(sbt_run(R, argv, &c, NULL, NULL, &res), 0);
    CHECK_EQ_INT(res.exit_code, 0);
    CHECK_EQ_INT(res.out_len, 1000);
    CHECK_EQ_INT(res.out_total, 3000000);
    CHECK_EQ_INT(res.truncated, 1);
    CHECK_STR(res.err, "e\n");
    CHECK(res.out[0] == 'x' && res.out[999] == 'x');
    skd_sandbox_result_free(&res);
}

/* Metering: a run's CPU time and memory peak come from its own cgroup
 * (v2 cpu.stat and memory.peak, v1 cpuacct.usage and
 * memory.max_usage_in_bytes); the loop counts its own CPU time, so the
 * check holds on a loaded machine too. */
TEST(usage_from_the_cgroup)
{
    skd_sandbox_result res;
    const char *argv[] = {"python3", "-c",
                          "import time\n"
                          "b = bytearray(32 << 20)\n"
                          "while time.process_time() < 0.5: pass\n",
                          NULL};
    CHECK_EQ_INT(sbt_run(R, argv, NULL, NULL, NULL, &res), 0);
    CHECK_EQ_INT(res.exit_code, 0);
    CHECK(res.cpu_us >= 450000);
    CHECK(res.cpu_us < 60000000);
    CHECK(res.mem_peak_bytes >= (32 << 20));
    skd_usage u = {0};
    skd_sandbox_usage_add(&u, &res);
    skd_sandbox_usage_add(&u, &res);
    skd_sandbox_usage_add(NULL, &res); /* NULL: nothing metered */
    CHECK_EQ_INT(u.sandbox_runs, 2);
    CHECK(u.cpu_us == 2 * res.cpu_us);
    CHECK(u.mem_peak_bytes == res.mem_peak_bytes); /* the largest, not a sum */
    skd_sandbox_result_free(&res);
    /* The egress record's bytes, both ways. */
    skd_sandbox_result eg;
    memset(&eg, 0, sizeof(eg));
    eg.egress = json_pack("[{s:I, s:I}, {s:I, s:I}]", "bytesUp", (json_int_t)100, "bytesDown",
                          (json_int_t)2000, "bytesUp", (json_int_t)5, "bytesDown", (json_int_t)0);
    eg.ws_written = 777;
    skd_usage v = {0};
    skd_sandbox_usage_add(&v, &eg);
    CHECK_EQ_INT(v.egress_bytes, 2105);
    CHECK_EQ_INT(v.workspace_bytes, 777);
    skd_sandbox_result_free(&eg);
}

/* Async completions for kill tests. */
struct done_box {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int n;
    skd_sandbox_result res[8];
};

static void on_done(void *arg, skd_sandbox_result *res)
{
    struct done_box *b = arg;
    pthread_mutex_lock(&b->mu);
    if (b->n < 8)
        b->res[b->n] = *res;
    else
        skd_sandbox_result_free(res);
    b->n++;
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
}

static void box_wait(struct done_box *b, int n)
{
    pthread_mutex_lock(&b->mu);
    while (b->n < n)
        pthread_cond_wait(&b->cv, &b->mu);
    pthread_mutex_unlock(&b->mu);
}

static void box_free(struct done_box *b)
{
    for (int i = 0; i < b->n && i < 8; i++)
        skd_sandbox_result_free(&b->res[i]);
    pthread_mutex_destroy(&b->mu);
    pthread_cond_destroy(&b->cv);
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Wait (bounded) until cond_fn says yes. */
static int wait_for(skd_runner *r, int (*fn)(skd_runner *), int want)
{
    for (int i = 0; i < 500; i++) {
        if (fn(r) == want)
            return 1;
        sleep_ms(10);
    }
    return 0;
}

static int start_sleep(skd_runner *r, const char *key, struct done_box *b, char id[37])
{
    static const char *const argv[] = {"sleep", "30", NULL};
    skd_sandbox_spec spec = {.argv = argv, .key_id = key};
    skd_err err = {0};
    return skd_sandbox_start(r, &spec, on_done, b, id, &err);
}

TEST(kill_one_and_all)
{
    struct done_box b = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    char a[37], c[37], d[37];
    CHECK_EQ_INT(start_sleep(R, "k1", &b, a), 0);
    CHECK(wait_for(R, skd_runner_running_count, 1));
    CHECK(skd_runner_is_running(R, a));
    CHECK_EQ_INT(skd_runner_kill(R, a), 0);
    box_wait(&b, 1);
    CHECK_EQ_INT(b.res[0].killed, 1);
    CHECK_EQ_INT(b.res[0].timed_out, 0);
    CHECK_EQ_INT(b.res[0].signal, 9);
    CHECK(!skd_runner_is_running(R, a));
    CHECK_EQ_INT(skd_runner_kill(R, a), SKD_ENOENT);
    CHECK_EQ_INT(start_sleep(R, "k1", &b, c), 0);
    CHECK_EQ_INT(start_sleep(R, "k2", &b, d), 0);
    CHECK(wait_for(R, skd_runner_running_count, 2));
    CHECK_EQ_INT(skd_runner_kill_all(R), 2);
    box_wait(&b, 3);
    CHECK(b.res[1].killed && b.res[2].killed);
    CHECK(wait_for(R, skd_runner_running_count, 0));
    box_free(&b);
}

TEST(global_cap_queues_in_order)
{
    skd_runner *r = NULL;
    skd_err err = {0};
    skd_runner_opts o = {.max_concurrent = 1, .max_per_key = 1};
    CHECK_EQ_INT(skd_runner_new(NULL, &o, &r, &err), 0);
    struct done_box b = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    char ids[3][37];
    for (int i = 0; i < 3; i++)
        CHECK_EQ_INT(start_sleep(r, i == 0 ? "a" : "b", &b, ids[i]), 0);
    CHECK(wait_for(r, skd_runner_running_count, 1));
    CHECK_EQ_INT(skd_runner_queued_count(r), 2);
    CHECK(skd_runner_is_running(r, ids[2]));
    /* Killing the running one lets the first queued one start. */
    CHECK_EQ_INT(skd_runner_kill(r, ids[0]), 0);
    box_wait(&b, 1);
    CHECK_STR(b.res[0].id, ids[0]);
    CHECK(wait_for(r, skd_runner_queued_count, 1));
    CHECK_EQ_INT(skd_runner_running_count(r), 1);
    /* A queued run killed before it started completes with killed. */
    CHECK_EQ_INT(skd_runner_kill(r, ids[2]), 0);
    box_wait(&b, 2);
    CHECK_STR(b.res[1].id, ids[2]);
    CHECK_EQ_INT(b.res[1].killed, 1);
    CHECK_EQ_INT(b.res[1].error, SKD_ECANCELLED);
    skd_runner_free(r); /* kills ids[1] and waits for it */
    CHECK_EQ_INT(b.n, 3);
    CHECK_STR(b.res[2].id, ids[1]);
    box_free(&b);
}

TEST(per_key_cap)
{
    skd_runner *r = NULL;
    skd_err err = {0};
    skd_runner_opts o = {.max_concurrent = 4, .max_per_key = 1};
    CHECK_EQ_INT(skd_runner_new(NULL, &o, &r, &err), 0);
    struct done_box b = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    char ids[3][37];
    CHECK_EQ_INT(start_sleep(r, "same", &b, ids[0]), 0);
    CHECK_EQ_INT(start_sleep(r, "same", &b, ids[1]), 0);
    CHECK_EQ_INT(start_sleep(r, "other", &b, ids[2]), 0);
    CHECK(wait_for(r, skd_runner_running_count, 2));
    CHECK_EQ_INT(skd_runner_queued_count(r), 1);
    skd_runner_free(r);
    CHECK_EQ_INT(b.n, 3);
    box_free(&b);
}

TEST(queue_is_bounded)
{
    skd_runner *r = NULL;
    skd_err err = {0};
    skd_runner_opts o = {.max_concurrent = 1, .max_per_key = 1, .max_queued = 1};
    CHECK_EQ_INT(skd_runner_new(NULL, &o, &r, &err), 0);
    struct done_box b = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    char ids[3][37];
    CHECK_EQ_INT(start_sleep(r, "k", &b, ids[0]), 0);
    CHECK(wait_for(r, skd_runner_running_count, 1));
    CHECK_EQ_INT(start_sleep(r, "k", &b, ids[1]), 0);
    CHECK_EQ_INT(start_sleep(r, "k", &b, ids[2]), SKD_EBUSY);
    CHECK_EQ_INT(skd_runner_queued_count(r), 1);
    skd_runner_free(r);
    CHECK_EQ_INT(b.n, 2);
    box_free(&b);
}

TEST(refusals)
{
    skd_sandbox_result res;
    skd_err err = {0};
    skd_sandbox_config c = sbt_cfg();
    c.network_enabled = 1; /* the runner's operator (cfg NULL) allows no network */
    const char *argv[] = {"true", NULL};
    skd_sandbox_spec spec = {.argv = argv, .config = &c};
    CHECK_EQ_INT(skd_sandbox_run(R, &spec, &res, &err), SKD_EFORBIDDEN);
    CHECK(strstr(err.msg, "networkEnabled") != NULL);
    c.network_enabled = 0;
    c.memory_limit = 4096; /* above the built-in ceiling of 1024 MiB */
    CHECK_EQ_INT(skd_sandbox_run(R, &spec, &res, &err), SKD_EINVAL);
    CHECK(strstr(err.msg, "SKILLS_SANDBOX_MAX_MEMORY_MB") != NULL);
    const char *none[] = {NULL};
    spec.argv = none;
    spec.config = NULL;
    CHECK_EQ_INT(skd_sandbox_run(R, &spec, &res, &err), SKD_EINVAL);
    spec.argv = argv;
    spec.image = "notallowed:1";
    CHECK_EQ_INT(skd_sandbox_run(R, &spec, &res, &err), SKD_EFORBIDDEN);
    spec.image = "../etc";
    CHECK_EQ_INT(skd_sandbox_run(R, &spec, &res, &err), SKD_EINVAL);
    spec.image = NULL;
    spec.runtime = "nonsense";
    CHECK_EQ_INT(skd_sandbox_run(R, &spec, &res, &err), SKD_ESANDBOX);
    /* A setup step that fails: the command does not run and the step is
     * named. */
    spec.runtime = NULL;
    spec.cwd = "/does/not/exist";
    CHECK_EQ_INT(skd_sandbox_run(R, &spec, &res, &err), 0);
    CHECK_EQ_INT(res.error, SKD_ESANDBOX);
    CHECK(strstr(S(res.message), "working directory") != NULL);
    CHECK_EQ_INT(res.exited, 0);
    skd_sandbox_result_free(&res);
}

TEST(config_json)
{
    skd_sandbox_config c;
    skd_err err = {0};
    skd_sandbox_config_defaults(&c, NULL);
    json_t *in = json_pack("{s:i, s:i, s:b, s:i}", "cpuLimit", 50, "memoryLimit", 64,
                           "workspaceReadOnly", 1, "timeout", 1500);
    CHECK_EQ_INT(skd_sandbox_config_from_json(&c, in, &err), 0);
    CHECK_EQ_INT(c.cpu_limit, 50);
    CHECK_EQ_INT(c.memory_limit, 64);
    CHECK_EQ_INT(c.workspace_read_only, 1);
    CHECK_EQ_INT(c.timeout_ms, 1500);
    json_decref(in);
    in = json_pack("{s:i}", "memoryLimit", 1);
    CHECK_EQ_INT(skd_sandbox_config_from_json(&c, in, &err), SKD_EINVAL);
    CHECK_EQ_INT(c.memory_limit, 64);
    json_decref(in);
    in = json_pack("{s:s}", "bogus", "x");
    CHECK_EQ_INT(skd_sandbox_config_from_json(&c, in, &err), SKD_EINVAL);
    json_decref(in);
    json_t *out = skd_sandbox_config_to_json(&c);
    CHECK_EQ_INT(json_integer_value(json_object_get(out, "pidsLimit")), 64);
    CHECK(json_is_true(json_object_get(out, "readOnly")));
    json_decref(out);
}

int main(int argc, char **argv)
{
    sbt_maybe_reexec(argc, argv);
    TAP_BEGIN("test_sandbox_runner");
    skd_err err = {0};
    if (skd_runner_new(NULL, NULL, &R, &err)) {
        printf("FAIL test_sandbox_runner: runner: %s\n", skd_err_msg(&err));
        return 1;
    }
    RUN(config_json);
    RUN(echo_output);
    RUN(exit_codes_and_stderr);
    RUN(stdin_and_env);
    RUN(fast_runs_with_stdin);
    RUN(timeout_keeps_partial_output);
    RUN(output_is_capped_and_counted);
    RUN(non_utf8_output_is_replaced);
    RUN(usage_from_the_cgroup);
    RUN(kill_one_and_all);
    RUN(global_cap_queues_in_order);
    RUN(per_key_cap);
    RUN(queue_is_bounded);
    RUN(refusals);
    skd_runner_free(R);
    return TAP_END();
}
