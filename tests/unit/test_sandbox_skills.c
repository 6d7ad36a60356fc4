/*
 * The sandbox skills through the engine: execute_command and eval_code
 * results, cancellation (the call's token kills the run), progress while
 * running, the engine's lazily started runner, and input refusals.
 */
#include "sandbox_test.h"
#include "skilld/skilld.h"

#include <pthread.h>
#include <sys/wait.h>
#include <time.h>

static skd_engine *E;

static json_t *call(const char *skill, const char *input_json, skd_cancel *cancel,
                    skd_progress_fn progress, void *parg)
{
    json_t *in = json_loads(input_json, 0, NULL);
    skd_call c = {
        .key_id = "skills-test",
        .scopes = SKD_SCOPE_ALL,
        .skill = skill,
        .input = in,
        .cancel = cancel,
        .progress = progress,
        .progress_arg = parg,
    };
    json_t *res = skd_engine_execute(E, &c, NULL);
    json_decref(in);
    return res;
}

static const char *jstr(const json_t *o, const char *k)
{
    return json_string_value(json_object_get(o, k));
}

TEST(execute_command_result_shape)
{
    json_t *r = call("execute_command",
                     "{\"command\": \"sh\", \"args\": [\"-c\", \"echo out; echo err >&2; exit 4\"]}",
                     NULL, NULL, NULL);
    CHECK(json_is_false(json_object_get(r, "success")));
    CHECK_EQ_INT(json_integer_value(json_object_get(r, "exitCode")), 4);
    CHECK_STR(jstr(r, "stdout"), "out\n");
    CHECK_STR(jstr(r, "stderr"), "err\n");
    CHECK_STR(jstr(r, "output"), "out\nerr\n");
    CHECK(json_is_integer(json_object_get(r, "durationMs")));
    CHECK(json_is_false(json_object_get(r, "killed")));
    CHECK(json_is_false(json_object_get(r, "timedOut")));
    CHECK(json_is_false(json_object_get(r, "oomKilled")));
    CHECK(json_is_null(json_object_get(r, "signal")));
    CHECK(json_is_false(json_object_get(r, "truncated")));
    json_decref(r);
    /* A NUL byte in the output: "output" is still stdout + stderr whole. */
    r = call("execute_command",
             "{\"command\": \"sh\", \"args\": [\"-c\", \"printf 'a\\\\0b'; printf 'c' >&2\"]}",
             NULL, NULL, NULL);
    CHECK_EQ_INT(json_string_length(json_object_get(r, "stdout")), 3);
    CHECK_EQ_INT(json_string_length(json_object_get(r, "output")), 5);
    CHECK(memcmp(jstr(r, "output"), "a\0b\nc", 5) == 0);
    json_decref(r);
    r = call("eval_code", "{\"language\": \"sh\", \"code\": \"echo $((2 + 3))\"}", NULL, NULL,
             NULL);
    CHECK(json_is_true(json_object_get(r, "success")));
    CHECK_STR(jstr(r, "stdout"), "5\n");
    json_decref(r);
}

TEST(input_refusals)
{
    json_t *r = call("execute_command", "{\"command\": \"true\", \"env\": {\"1BAD\": \"x\"}}", NULL,
                     NULL, NULL);
    CHECK_STR(skd_result_code(r), "invalid_input");
    json_decref(r);
    r = call("execute_command", "{\"command\": \"true\", \"timeoutMs\": 60001}", NULL, NULL, NULL);
    CHECK_STR(skd_result_code(r), "invalid_input");
    json_decref(r);
    r = call("eval_code", "{\"language\": \"cobol\", \"code\": \"x\"}", NULL, NULL, NULL);
    CHECK_STR(skd_result_code(r), "invalid_input");
    json_decref(r);
    r = call("execute_command", "{\"command\": \"true\", \"image\": \"evil:1\"}", NULL, NULL,
             NULL);
    CHECK_STR(skd_result_code(r), "forbidden");
    json_decref(r);
}

static void *fire_later(void *arg)
{
    struct timespec ts = {0, 300 * 1000000L};
    nanosleep(&ts, NULL);
    skd_cancel_fire(arg);
    return NULL;
}

TEST(cancel_kills_the_run)
{
    skd_cancel *c = skd_cancel_new();
    pthread_t t;
    pthread_create(&t, NULL, fire_later, c);
    json_t *r = call("execute_command", "{\"command\": \"sleep\", \"args\": [\"30\"]}", c, NULL,
                     NULL);
    pthread_join(t, NULL);
    CHECK(json_is_false(json_object_get(r, "success")));
    CHECK(json_is_true(json_object_get(r, "killed")));
    CHECK(json_is_false(json_object_get(r, "timedOut")));
    CHECK_STR(skd_result_code(r), "cancelled");
    CHECK(json_integer_value(json_object_get(r, "durationMs")) < 20000);
    json_decref(r);
    /* A token that fired before the call: the run is killed at once, or
     * (the engine's admission to a sandbox place sees the token first)
     * never starts. Either way the call is cancelled, and fast. */
    r = call("execute_command", "{\"command\": \"sleep\", \"args\": [\"30\"]}", c, NULL, NULL);
    CHECK(json_is_false(json_object_get(r, "success")));
    CHECK(json_is_true(json_object_get(r, "killed")) || !json_object_get(r, "exitCode"));
    CHECK_STR(skd_result_code(r), "cancelled");
    json_decref(r);
    skd_cancel_free(c);
}

struct prog {
    int calls;
    double last, total;
};

static void on_progress(void *arg, double progress, double total, const char *msg)
{
    struct prog *p = arg;
    p->calls++;
    p->last = progress;
    p->total = total;
    (void)msg;
}

TEST(progress_while_running)
{
    struct prog p = {0};
    json_t *r = call("execute_command",
                     "{\"command\": \"sleep\", \"args\": [\"2.3\"], \"timeoutMs\": 20000}", NULL,
                     on_progress, &p);
    CHECK(json_is_true(json_object_get(r, "success")));
    CHECK(p.calls >= 2);
    CHECK(p.last >= 1000);
    CHECK(p.total == 20000);
    json_decref(r);
}

int main(int argc, char **argv)
{
    sbt_maybe_reexec(argc, argv);
    TAP_BEGIN("test_sandbox_skills");
    char dir[64] = "/tmp/skd-sbsk.XXXXXX";
    skd_config *cfg = skd_config_new();
    skd_err err = {0};
    if (!mkdtemp(dir) || skd_config_set(cfg, "DATA_DIR", dir, &err) ||
        skd_engine_open(cfg, &E, &err)) {
        printf("FAIL test_sandbox_skills: setup: %s\n", skd_err_msg(&err));
        return 1;
    }
    RUN(execute_command_result_shape);
    RUN(input_refusals);
    RUN(cancel_kills_the_run);
    RUN(progress_while_running);
    skd_engine_close(E);
    skd_config_free(cfg);
    pid_t pid = fork();
    if (pid == 0) {
        execl("/bin/rm", "rm", "-rf", "--", dir, (char *)NULL);
        _exit(127);
    }
    waitpid(pid, NULL, 0);
    return TAP_END();
}
