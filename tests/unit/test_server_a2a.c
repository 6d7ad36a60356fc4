/* Unit tests for the transport-neutral A2A layer (src/server/a2a.c):
 * the agent card, SendMessage in both dialects, the skill-naming rules,
 * GetTask/ListTasks scoped to the key, streaming events in order,
 * SubscribeToTask, CancelTask of a running skill, and the spec error
 * codes. C skills stand in for real ones so no sandbox is needed. */
#include "server/a2a.h"
#include "skilld/store.h"
#include "tap.h"

#include <pthread.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static char tmpdir[64];
static skd_config *cfg;
static skd_engine *eng;
static skd_a2a *a2a;

static json_t *echo(const skd_ctx *ctx, const json_t *input, void *udata)
{
    (void)ctx, (void)udata;
    json_t *r = skd_result_ok();
    json_object_set(r, "echo", json_object_get(input, "msg"));
    json_object_set_new(r, "output", json_string("text out"));
    return r;
}

/* Runs `steps` steps of 20 ms (0: until cancelled), reporting progress. */
static json_t *slow(const skd_ctx *ctx, const json_t *input, void *udata)
{
    (void)udata;
    long long steps = skd_json_int(input, "steps", 0);
    for (long long i = 0; steps == 0 || i < steps; i++) {
        if (skd_cancel_is_set(ctx->cancel))
            return skd_result_error(SKD_ECANCELLED, "cancelled at step %lld", i);
        if (ctx->progress)
            ctx->progress(ctx->progress_arg, (double)i, (double)steps, "step");
        usleep(20000);
    }
    return skd_result_ok();
}

static void add_skill(const char *name, skd_handler_fn fn, const char *owner)
{
    json_t *schema = json_pack("{s:s}", "type", "object");
    skd_skill_def d = {.name = name,
                       .version = "1.0.0",
                       .description = "test",
                       .input_schema = schema,
                       .handler = fn,
                       .owner = owner};
    skd_registry_add(skd_engine_registry(eng), &d, 0, NULL);
    json_decref(schema);
}

static json_t *call(const char *key, const char *version, const char *text)
{
    json_t *rq = json_loads(text, 0, NULL);
    json_t *rep = skd__a2a_handle(a2a, key, SKD_SCOPE_ALL, version, rq, NULL, NULL);
    json_decref(rq);
    return rep;
}

static json_t *send_skill(const char *key, const char *method, const char *skill, const char *extra)
{
    char buf[1024];
    snprintf(buf, sizeof(buf),
             "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"%s\",\"params\":{\"message\":"
             "{\"role\":\"ROLE_USER\",\"messageId\":\"m1\",\"parts\":[{\"data\":{\"skill\":\"%s\","
             "\"input\":{\"msg\":\"hi\",\"steps\":3}}}]}%s}}",
             method, skill, extra ? extra : "");
    return call(key, "1.0", buf);
}

static long long err_code(const json_t *rep)
{
    return skd_json_int(json_object_get(rep, "error"), "code", 0);
}

static const char *path_str(const json_t *v, const char *p1, const char *p2, const char *p3)
{
    v = json_object_get(v, p1);
    if (p2)
        v = json_object_get(v, p2);
    return p3 ? skd_json_str(v, p3, NULL) : json_string_value(v);
}

TEST(agent_card)
{
    json_t *card = skd__a2a_card(a2a, "http://h:1", NULL, 0);
    json_t *ifs = json_object_get(card, "supportedInterfaces");
    CHECK_STR(skd_json_str(json_array_get(ifs, 0), "url", NULL), "http://h:1/a2a");
    CHECK_STR(skd_json_str(json_array_get(ifs, 0), "protocolVersion", NULL), "1.0");
    CHECK(json_is_true(json_object_get(json_object_get(card, "capabilities"), "streaming")));
    json_t *skills = json_object_get(card, "skills");
    int seen_echo = 0, seen_private = 0;
    size_t i;
    json_t *s;
    json_array_foreach (skills, i, s) {
        seen_echo |= strcmp(skd_json_str(s, "id", ""), "echo") == 0;
        seen_private |= strcmp(skd_json_str(s, "id", ""), "mine") == 0;
    }
    CHECK(seen_echo && !seen_private);
    CHECK(json_object_get(json_object_get(card, "securitySchemes"), "bearer") != NULL);
    json_decref(card);
    card = skd__a2a_card(a2a, "http://h:1", "kalice", 0);
    seen_private = 0;
    json_array_foreach (json_object_get(card, "skills"), i, s)
        seen_private |= strcmp(skd_json_str(s, "id", ""), "mine") == 0;
    CHECK(seen_private);
    json_decref(card);
    card = skd__a2a_card(a2a, "http://h:1", NULL, 1);
    CHECK_STR(skd_json_str(card, "url", NULL), "http://h:1/a2a");
    CHECK_STR(skd_json_str(card, "protocolVersion", NULL), "0.3.0");
    json_decref(card);
}

TEST(send_message_both_dialects)
{
    json_t *rep = send_skill("kalice", "SendMessage", "echo", NULL);
    json_t *task = json_object_get(json_object_get(rep, "result"), "task");
    CHECK_EQ_INT(skd_json_int(rep, "id", 0), 7);
    CHECK_STR(path_str(task, "status", NULL, "state"), "TASK_STATE_COMPLETED");
    json_t *parts = json_object_get(json_array_get(json_object_get(task, "artifacts"), 0), "parts");
    json_t *data = json_object_get(json_array_get(parts, 0), "data");
    CHECK(json_is_true(json_object_get(data, "success")));
    CHECK_STR(skd_json_str(data, "echo", NULL), "hi");
    CHECK_STR(skd_json_str(json_array_get(parts, 1), "text", NULL), "text out");
    CHECK_STR(path_str(json_array_get(json_object_get(task, "history"), 0), "role", NULL, NULL),
              "ROLE_USER");
    json_decref(rep);

    rep = call("kalice", NULL,
               "{\"jsonrpc\":\"2.0\",\"id\":\"x\",\"method\":\"message/send\",\"params\":{"
               "\"message\":{\"kind\":\"message\",\"role\":\"user\",\"messageId\":\"m2\","
               "\"parts\":[{\"kind\":\"data\",\"data\":{\"skill\":\"echo\",\"input\":{\"msg\":"
               "\"yo\"}}}]}}}");
    task = json_object_get(rep, "result");
    CHECK_STR(skd_json_str(task, "kind", NULL), "task");
    CHECK_STR(path_str(task, "status", NULL, "state"), "completed");
    parts = json_object_get(json_array_get(json_object_get(task, "artifacts"), 0), "parts");
    CHECK_STR(skd_json_str(json_array_get(parts, 0), "kind", NULL), "data");
    CHECK_STR(skd_json_str(json_object_get(json_array_get(parts, 0), "data"), "echo", NULL), "yo");
    json_decref(rep);
}

TEST(message_must_name_a_skill)
{
    json_t *rep = call("kalice", "1.0",
                       "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"SendMessage\",\"params\":{"
                       "\"message\":{\"role\":\"ROLE_USER\",\"parts\":[{\"text\":\"hello\"}]}}}");
    CHECK_EQ_INT(err_code(rep), -32602);
    json_t *names =
        json_object_get(json_object_get(json_object_get(rep, "error"), "data"), "skills");
    CHECK(json_array_size(names) >= 2);
    CHECK(strstr(path_str(rep, "error", NULL, "message"), "echo") != NULL);
    json_decref(rep);
    rep = send_skill("kbob", "SendMessage", "mine", NULL); /* alice's private skill */
    CHECK_EQ_INT(err_code(rep), -32602);
    json_decref(rep);
    rep = call("kalice", "1.0",
               "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"SendMessage\","
               "\"params\":{\"message\":{\"parts\":[]}}}");
    CHECK_EQ_INT(err_code(rep), -32602);
    json_decref(rep);
}

TEST(get_and_list_scoped_to_key)
{
    json_t *rep = send_skill("kcarol", "SendMessage", "echo", NULL);
    char id[64];
    snprintf(id, sizeof(id), "%s",
             path_str(rep, "result", "task", "id") ? path_str(rep, "result", "task", "id") : "");
    json_decref(rep);
    rep = send_skill("kcarol", "SendMessage", "echo", NULL);
    json_decref(rep);
    char buf[256];
    snprintf(buf, sizeof(buf),
             "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"GetTask\",\"params\":{\"id\":\"%s\"}}",
             id);
    rep = call("kcarol", "1.0", buf);
    CHECK_STR(path_str(rep, "result", "status", "state"), "TASK_STATE_COMPLETED");
    CHECK_STR(path_str(rep, "result", NULL, "id"), id);
    json_decref(rep);
    rep = call("kbob", "1.0", buf);
    CHECK_EQ_INT(err_code(rep), -32001);
    json_decref(rep);
    rep = call("kcarol", "1.0",
               "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ListTasks\","
               "\"params\":{\"pageSize\":1}}");
    json_t *res = json_object_get(rep, "result");
    CHECK_EQ_INT(skd_json_int(res, "totalSize", -1), 2);
    CHECK_EQ_INT(json_array_size(json_object_get(res, "tasks")), 1);
    CHECK_STR(skd_json_str(res, "nextPageToken", NULL), "1");
    json_decref(rep);
    rep = call("kdave", "1.0", "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ListTasks\"}");
    CHECK_EQ_INT(skd_json_int(json_object_get(rep, "result"), "totalSize", -1), 0);
    json_decref(rep);
}

struct events {
    json_t *list;
};

static int collect(void *arg, const json_t *msg)
{
    struct events *ev = arg;
    json_array_append(ev->list, (json_t *)msg);
    return 0;
}

static const char *event_kind(const json_t *msg)
{
    json_t *res = json_object_get(msg, "result");
    const char *k[] = {"task", "statusUpdate", "artifactUpdate", "message"};
    for (size_t i = 0; i < 4; i++)
        if (json_object_get(res, k[i]))
            return k[i];
    return "?";
}

TEST(streaming_events_in_order)
{
    struct events ev = {json_array()};
    json_t *rq = json_loads("{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"SendStreamingMessage\","
                            "\"params\":{\"message\":{\"role\":\"ROLE_USER\",\"parts\":[{\"data\":"
                            "{\"skill\":\"slow\",\"input\":{\"steps\":40}}}]}}}",
                            0, NULL);
    CHECK(skd__a2a_is_stream(rq));
    json_t *rep = skd__a2a_handle(a2a, "kalice", SKD_SCOPE_ALL, "1.0", rq, collect, &ev);
    CHECK(rep == NULL);
    size_t n = json_array_size(ev.list);
    CHECK(n >= 5);
    CHECK_STR(event_kind(json_array_get(ev.list, 0)), "task");
    CHECK_STR(
        path_str(json_object_get(json_array_get(ev.list, 0), "result"), "task", "status", "state"),
        "TASK_STATE_SUBMITTED");
    CHECK_STR(event_kind(json_array_get(ev.list, 1)), "statusUpdate");
    int progress = 0;
    for (size_t i = 2; i + 2 < n; i++)
        progress += strcmp(event_kind(json_array_get(ev.list, i)), "statusUpdate") == 0;
    CHECK(progress >= 1); /* 40 steps of 20 ms: at least one progress note */
    CHECK_STR(event_kind(json_array_get(ev.list, n - 2)), "artifactUpdate");
    json_t *last =
        json_object_get(json_object_get(json_array_get(ev.list, n - 1), "result"), "statusUpdate");
    CHECK_STR(path_str(last, "status", NULL, "state"), "TASK_STATE_COMPLETED");
    CHECK_EQ_INT(skd_json_int(json_array_get(ev.list, n - 1), "id", 0), 9);
    json_decref(rq);
    json_decref(ev.list);
}

TEST(cancel_and_subscribe)
{
    json_t *rep = send_skill("kalice", "SendMessage", "slow",
                             ",\"configuration\":{\"returnImmediately\":true}");
    json_t *task = json_object_get(json_object_get(rep, "result"), "task");
    char id[64], buf[256];
    snprintf(id, sizeof(id), "%s", skd_json_str(task, "id", ""));
    json_decref(rep);
    /* steps 3 in send_skill; use an endless one instead */
    rep = call("kalice", "1.0",
               "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"SendMessage\",\"params\":{\"message\":"
               "{\"role\":\"ROLE_USER\",\"parts\":[{\"data\":{\"skill\":\"slow\",\"input\":{}}}]},"
               "\"configuration\":{\"returnImmediately\":true}}}");
    snprintf(id, sizeof(id), "%s", path_str(rep, "result", "task", "id"));
    CHECK(strcmp(path_str(json_object_get(rep, "result"), "task", "status", "state"),
                 "TASK_STATE_CANCELED") != 0);
    json_decref(rep);
    snprintf(buf, sizeof(buf),
             "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"CancelTask\",\"params\":{\"id\":\"%s\"}}",
             id);
    rep = call("kbob", "1.0", buf);
    CHECK_EQ_INT(err_code(rep), -32001); /* not bob's */
    json_decref(rep);
    rep = call("kalice", "1.0", buf);
    CHECK_STR(path_str(rep, "result", "status", "state"), "TASK_STATE_CANCELED");
    json_decref(rep);
    rep = call("kalice", "1.0", buf);
    CHECK_EQ_INT(err_code(rep), -32002);
    json_decref(rep);
    snprintf(
        buf, sizeof(buf),
        "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"SubscribeToTask\",\"params\":{\"id\":\"%s\"}}",
        id);
    struct events ev = {json_array()};
    json_t *rq = json_loads(buf, 0, NULL);
    rep = skd__a2a_handle(a2a, "kalice", SKD_SCOPE_ALL, "1.0", rq, collect, &ev);
    CHECK_EQ_INT(err_code(rep), -32004);
    json_decref(rep);
    json_decref(rq);
    json_decref(ev.list);

    /* subscribe to a running task: events until it completes */
    rep = call("kalice", "1.0",
               "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"SendMessage\",\"params\":{\"message\":"
               "{\"role\":\"ROLE_USER\",\"parts\":[{\"data\":{\"skill\":\"slow\",\"input\":"
               "{\"steps\":15}}}]},\"configuration\":{\"returnImmediately\":true}}}");
    snprintf(
        buf, sizeof(buf),
        "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"SubscribeToTask\",\"params\":{\"id\":\"%s\"}}",
        path_str(rep, "result", "task", "id"));
    json_decref(rep);
    ev.list = json_array();
    rq = json_loads(buf, 0, NULL);
    rep = skd__a2a_handle(a2a, "kalice", SKD_SCOPE_ALL, "1.0", rq, collect, &ev);
    CHECK(rep == NULL);
    size_t n = json_array_size(ev.list);
    CHECK(n >= 2);
    CHECK_STR(event_kind(json_array_get(ev.list, 0)), "task");
    CHECK_STR(path_str(json_object_get(json_array_get(ev.list, n - 1), "result"), "statusUpdate",
                       "status", "state"),
              "TASK_STATE_COMPLETED");
    json_decref(rq);
    json_decref(ev.list);
}

TEST(spec_errors)
{
    json_t *rep = call("kalice", "2.0",
                       "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"GetTask\","
                       "\"params\":{\"id\":\"x\"}}");
    CHECK_EQ_INT(err_code(rep), -32009);
    json_decref(rep);
    rep = call("kalice", "1.0", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"Nope\"}");
    CHECK_EQ_INT(err_code(rep), -32601);
    json_decref(rep);
    rep = call("kalice", "1.0",
               "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":"
               "\"CreateTaskPushNotificationConfig\",\"params\":{}}");
    CHECK_EQ_INT(err_code(rep), -32003);
    json_decref(rep);
    rep = call("kalice", "1.0",
               "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"GetTask\","
               "\"params\":{\"id\":\"no-such\"}}");
    CHECK_EQ_INT(err_code(rep), -32001);
    json_decref(rep);
    rep = call("kalice", "1.0",
               "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"GetTask\","
               "\"params\":{}}");
    CHECK_EQ_INT(err_code(rep), -32602);
    json_decref(rep);
    rep = call("kalice", "1.0", "{\"id\":1,\"method\":\"GetTask\"}");
    CHECK_EQ_INT(err_code(rep), -32600);
    json_decref(rep);
}

int main(void)
{
    TAP_BEGIN("test_server_a2a");
    skd_err err = {0};
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/skd-a2a-XXXXXX");
    if (!mkdtemp(tmpdir))
        return 1;
    skd_log_set_level(SKD_LOG_ERROR);
    cfg = skd_config_new();
    skd_config_set(cfg, "DATA_DIR", tmpdir, &err);
    if (skd_engine_open(cfg, &eng, &err)) {
        printf("FAIL test_server_a2a: engine: %s\n", err.msg);
        return 1;
    }
    add_skill("echo", echo, NULL);
    add_skill("slow", slow, NULL);
    add_skill("mine", echo, "kalice");
    a2a = skd__a2a_new(eng);
    RUN(agent_card);
    RUN(send_message_both_dialects);
    RUN(message_must_name_a_skill);
    RUN(get_and_list_scoped_to_key);
    RUN(streaming_events_in_order);
    RUN(cancel_and_subscribe);
    RUN(spec_errors);
    skd__a2a_free(a2a);
    skd_engine_close(eng);
    skd_config_free(cfg);
    int rc = TAP_END();
    pid_t pid = fork();
    if (pid == 0) {
        execl("/bin/rm", "rm", "-rf", tmpdir, (char *)NULL);
        _exit(127);
    }
    if (pid > 0)
        waitpid(pid, NULL, 0);
    return rc;
}
