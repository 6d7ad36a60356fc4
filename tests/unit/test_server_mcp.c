/* Unit tests for the transport-neutral MCP dispatcher (src/server/mcp*.c):
 * lifecycle and version negotiation, JSON-RPC errors, tools/list paging,
 * tools/call results and errors, scopes, progress, cancellation, logging
 * and tools/list_changed. Messages go in as text, replies are checked. */
#include "server_fixture.h"
#include "tap.h"

static struct fixture F;

TEST(initialize_negotiates_versions)
{
    const char *asks[][2] = {{"2025-11-25", "2025-11-25"},
                             {"2025-06-18", "2025-06-18"},
                             {"2025-03-26", "2025-03-26"},
                             {"2024-11-05", "2025-11-25"},
                             {"1999-01-01", "2025-11-25"}};
    for (size_t i = 0; i < sizeof(asks) / sizeof(asks[0]); i++) {
        skd_mcp_session *s = skd__mcp_session_new(F.m, "k1", SKD_SCOPE_ALL);
        char msg[256];
        snprintf(msg, sizeof(msg),
                 "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{"
                 "\"protocolVersion\":\"%s\",\"capabilities\":{}}}",
                 asks[i][0]);
        json_t *r = rpc(s, msg, NULL);
        json_t *res = json_object_get(r, "result");
        CHECK_STR(skd_json_str(res, "protocolVersion", NULL), asks[i][1]);
        CHECK(json_is_true(json_object_get(
            json_object_get(json_object_get(res, "capabilities"), "tools"), "listChanged")));
        CHECK_STR(skd_json_str(json_object_get(res, "serverInfo"), "name", NULL), "skilld");
        json_decref(r);
        /* A second initialize on the same session is refused. */
        r = rpc(s, msg, NULL);
        CHECK_EQ_INT(rpc_code(r), -32600);
        json_decref(r);
        skd__mcp_session_close(s);
        skd__mcp_session_unref(s);
    }
    skd_mcp_session *s = skd__mcp_session_new(F.m, "k1", SKD_SCOPE_ALL);
    json_t *r = rpc(s, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{}}",
                    NULL);
    CHECK_EQ_INT(rpc_code(r), -32602);
    json_decref(r);
    skd__mcp_session_close(s);
    skd__mcp_session_unref(s);
}

TEST(jsonrpc_errors)
{
    skd_mcp_session *s = fixture_session(&F, "k1", SKD_SCOPE_ALL, "2025-11-25");
    struct {
        const char *in;
        long long code;
        int id_null;
    } cases[] = {
        {"{\"jsonrpc\":\"2.0\",\"id\":1,", -32700, 1},
        {"not json", -32700, 1},
        {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"x\":\"\xff\xfe\"}", -32700, 1},
        {"[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]", -32600, 1},
        {"42", -32600, 1},
        {"{\"jsonrpc\":\"1.0\",\"id\":7,\"method\":\"ping\"}", -32600, 0},
        {"{\"id\":7,\"method\":\"ping\"}", -32600, 0},
        {"{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"ping\"}", -32600, 1},
        {"{\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"ping\"}", -32600, 1},
        {"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":42}", -32600, 0},
        {"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"ping\",\"params\":[1]}", -32600, 0},
        {"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"no/such\"}", -32601, 0},
        {"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{}}", -32602, 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        json_t *r = rpc(s, cases[i].in, NULL);
        CHECK_EQ_INT(rpc_code(r), cases[i].code);
        if (cases[i].id_null)
            CHECK(json_is_null(json_object_get(r, "id")));
        else
            CHECK_EQ_INT(json_integer_value(json_object_get(r, "id")), 7);
        CHECK_STR(skd_json_str(r, "jsonrpc", NULL), "2.0");
        json_decref(r);
    }
    /* Deep nesting is a parse error, not a crash. */
    char deep[4096];
    size_t n = 0;
    n += (size_t)snprintf(deep, sizeof(deep), "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\","
                                              "\"params\":{\"a\":");
    for (int i = 0; i < 1000 && n < sizeof(deep) - 8; i++)
        deep[n++] = '[';
    deep[n] = '\0';
    json_t *r = rpc(s, deep, NULL);
    CHECK_EQ_INT(rpc_code(r), -32700);
    json_decref(r);
    /* Notifications and responses get no reply. */
    CHECK(rpc(s, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/whatever\"}", NULL) == NULL);
    CHECK(rpc(s, "{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{}}", NULL) == NULL);
    r = rpc(s, "{\"jsonrpc\":\"2.0\",\"id\":\"p\",\"method\":\"ping\"}", NULL);
    CHECK(json_is_object(json_object_get(r, "result")));
    CHECK_STR(skd_json_str(r, "id", NULL), "p");
    json_decref(r);
    skd__mcp_session_close(s);
    skd__mcp_session_unref(s);
}

TEST(tools_list_pages_with_cursor)
{
    skd_mcp_session *s = fixture_session(&F, "k1", SKD_SCOPE_ALL, "2025-11-25");
    json_t *names = json_array();
    char cursor[64] = "";
    int pages = 0;
    for (;;) {
        char msg[256];
        if (cursor[0])
            snprintf(msg, sizeof(msg),
                     "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{"
                     "\"cursor\":\"%s\"}}",
                     cursor);
        else
            snprintf(msg, sizeof(msg), "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}");
        json_t *r = rpc(s, msg, NULL);
        json_t *res = json_object_get(r, "result");
        json_t *tools = json_object_get(res, "tools");
        CHECK(json_array_size(tools) <= 2);
        size_t i;
        json_t *t;
        json_array_foreach(tools, i, t) {
            json_array_append(names, json_object_get(t, "name"));
            CHECK_STR(skd_json_str(json_object_get(t, "inputSchema"), "type", NULL), "object");
            CHECK(json_is_object(json_object_get(t, "outputSchema")));
        }
        pages++;
        const char *next = skd_json_str(res, "nextCursor", NULL);
        if (next)
            snprintf(cursor, sizeof(cursor), "%s", next);
        json_decref(r);
        if (!next || pages > 10)
            break;
    }
    /* 3 generic tools + debug_sleep + echo = 5 tools over 3 pages. */
    CHECK_EQ_INT(json_array_size(names), 5);
    CHECK_EQ_INT(pages, 3);
    CHECK_STR(json_string_value(json_array_get(names, 0)), "skills_list");
    CHECK_STR(json_string_value(json_array_get(names, 3)), "debug_sleep");
    CHECK_STR(json_string_value(json_array_get(names, 4)), "echo");
    json_decref(names);
    json_t *r = rpc(s,
                    "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{"
                    "\"cursor\":\"bogus\"}}",
                    NULL);
    CHECK_EQ_INT(rpc_code(r), -32602);
    json_decref(r);
    r = rpc(s,
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{"
            "\"cursor\":\"99\"}}",
            NULL);
    CHECK_EQ_INT(rpc_code(r), -32602);
    json_decref(r);
    skd__mcp_session_close(s);
    skd__mcp_session_unref(s);
}

static json_t *call(skd_mcp_session *s, const char *tool, const char *args, struct sink *sk)
{
    char msg[1024];
    snprintf(msg, sizeof(msg),
             "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{\"name\":"
             "\"%s\",\"arguments\":%s}}",
             tool, args);
    return rpc(s, msg, sk);
}

static const char *result_text(const json_t *r)
{
    json_t *c = json_array_get(json_object_get(json_object_get(r, "result"), "content"), 0);
    return skd_json_str(c, "text", "");
}

static int is_error(const json_t *r)
{
    return json_is_true(json_object_get(json_object_get(r, "result"), "isError"));
}

TEST(tools_call_results_and_errors)
{
    skd_mcp_session *s = fixture_session(&F, "k1", SKD_SCOPE_ALL, "2025-11-25");
    json_t *r = call(s, "echo", "{\"msg\":\"hi\"}", NULL);
    json_t *sc = json_object_get(json_object_get(r, "result"), "structuredContent");
    CHECK(!is_error(r));
    CHECK(json_is_true(json_object_get(sc, "success")));
    CHECK_STR(skd_json_str(sc, "key", NULL), "k1");
    CHECK(strstr(result_text(r), "\"hi\"") != NULL);
    json_decref(r);
    /* Invalid arguments come back as a tool error the model can read. */
    r = call(s, "echo", "{\"msg\":42}", NULL);
    CHECK(is_error(r));
    CHECK(strncmp(result_text(r), "invalid_input: ", 15) == 0);
    CHECK(json_object_get(json_object_get(r, "result"), "structuredContent") == NULL);
    json_decref(r);
    r = call(s, "echo", "{\"msg\":\"hi\",\"extra\":1}", NULL);
    CHECK(is_error(r));
    json_decref(r);
    /* Through the generic entry point. */
    r = call(s, "skills_execute", "{\"skill\":\"echo\",\"input\":{\"msg\":\"yo\"}}", NULL);
    CHECK(!is_error(r));
    CHECK(strstr(result_text(r), "\"yo\"") != NULL);
    json_decref(r);
    r = call(s, "skills_execute", "{\"skill\":\"echo@1.0.0\",\"input\":{\"msg\":\"v\"}}", NULL);
    CHECK(!is_error(r));
    json_decref(r);
    r = call(s, "skills_execute", "{\"skill\":\"echo\",\"version\":\"9.9.9\",\"input\":{}}", NULL);
    CHECK(is_error(r));
    CHECK(strncmp(result_text(r), "not_found: ", 11) == 0);
    json_decref(r);
    r = call(s, "skills_execute", "{\"input\":{}}", NULL);
    CHECK(is_error(r));
    json_decref(r);
    r = call(s, "skills_execute", "{\"skill\":\"nope\"}", NULL);
    CHECK(is_error(r));
    json_decref(r);
    /* A failing skill is isError with code and message. */
    r = call(s, "debug_sleep", "{\"ms\":0,\"fail\":true}", NULL);
    CHECK(is_error(r));
    CHECK(strncmp(result_text(r), "io_error: ", 10) == 0);
    json_decref(r);
    /* Unknown tools and bad params are protocol errors. */
    r = call(s, "no_such_tool", "{}", NULL);
    CHECK_EQ_INT(rpc_code(r), -32602);
    json_decref(r);
    r = call(s, "echo", "[1,2]", NULL);
    CHECK_EQ_INT(rpc_code(r), -32602);
    json_decref(r);
    /* skills_list and skills_executions. */
    r = call(s, "skills_list", "{}", NULL);
    sc = json_object_get(json_object_get(r, "result"), "structuredContent");
    CHECK_EQ_INT(json_array_size(json_object_get(sc, "skills")), 2);
    json_decref(r);
    r = call(s, "skills_executions", "{\"limit\":3}", NULL);
    sc = json_object_get(json_object_get(r, "result"), "structuredContent");
    CHECK_EQ_INT(json_array_size(json_object_get(sc, "executions")), 3);
    json_decref(r);
    r = call(s, "skills_executions", "{\"limit\":\"x\"}", NULL);
    CHECK(is_error(r));
    json_decref(r);
    skd__mcp_session_close(s);
    skd__mcp_session_unref(s);
}

TEST(scopes_and_identity)
{
    skd_mcp_session *ro = fixture_session(&F, "reader", SKD_SCOPE_READ, "2025-11-25");
    json_t *r = call(ro, "echo", "{\"msg\":\"hi\"}", NULL);
    CHECK(is_error(r));
    CHECK(strncmp(result_text(r), "forbidden: ", 11) == 0);
    json_decref(r);
    skd_mcp_session *xo = fixture_session(&F, "runner", SKD_SCOPE_EXECUTE, "2025-11-25");
    r = call(xo, "skills_list", "{}", NULL);
    CHECK(is_error(r));
    json_decref(r);
    r = call(xo, "echo", "{\"msg\":\"hi\"}", NULL);
    CHECK(!is_error(r));
    json_decref(r);
    /* One key never sees another key's executions. */
    skd_mcp_session *other = fixture_session(&F, "other", SKD_SCOPE_ALL, "2025-11-25");
    r = call(other, "skills_executions", "{}", NULL);
    json_t *sc = json_object_get(json_object_get(r, "result"), "structuredContent");
    CHECK(json_is_array(json_object_get(sc, "executions")));
    CHECK_EQ_INT(json_array_size(json_object_get(sc, "executions")), 0);
    json_decref(r);
    /* Sessions are found only by their own key. */
    skd_mcp_session *f = skd__mcp_session_find(F.m, skd__mcp_session_id(ro), "runner");
    CHECK(f == NULL);
    f = skd__mcp_session_find(F.m, skd__mcp_session_id(ro), "reader");
    CHECK(f == ro);
    skd__mcp_session_unref(f);
    skd_mcp_session *all[] = {ro, xo, other};
    for (int i = 0; i < 3; i++) {
        skd__mcp_session_close(all[i]);
        skd__mcp_session_unref(all[i]);
    }
}

TEST(older_version_has_no_structured_output)
{
    skd_mcp_session *s = fixture_session(&F, "k1", SKD_SCOPE_ALL, "2025-03-26");
    json_t *r = call(s, "echo", "{\"msg\":\"hi\"}", NULL);
    CHECK(!is_error(r));
    CHECK(json_object_get(json_object_get(r, "result"), "structuredContent") == NULL);
    json_decref(r);
    r = rpc(s, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}", NULL);
    json_t *t0 = json_array_get(json_object_get(json_object_get(r, "result"), "tools"), 0);
    CHECK(t0 && json_object_get(t0, "outputSchema") == NULL);
    json_decref(r);
    skd__mcp_session_close(s);
    skd__mcp_session_unref(s);
}

TEST(progress_notifications)
{
    skd_mcp_session *s = fixture_session(&F, "k1", SKD_SCOPE_ALL, "2025-11-25");
    struct sink sk;
    sink_init(&sk);
    json_t *r = rpc(s,
                    "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/call\",\"params\":{\"name\":"
                    "\"debug_sleep\",\"arguments\":{\"ms\":30,\"steps\":3},\"_meta\":{"
                    "\"progressToken\":\"tok\"}}}",
                    &sk);
    CHECK(!is_error(r));
    CHECK_EQ_INT(sink_count(&sk, "notifications/progress"), 3);
    double last = 0;
    size_t i;
    json_t *m;
    json_array_foreach(sk.msgs, i, m) {
        json_t *p = json_object_get(m, "params");
        CHECK_STR(skd_json_str(p, "progressToken", NULL), "tok");
        double v = json_number_value(json_object_get(p, "progress"));
        CHECK(v > last);
        last = v;
    }
    CHECK(last == 3.0);
    json_decref(r);
    /* A handler that reports nothing still shows it is alive. */
    json_array_clear(sk.msgs);
    r = rpc(s,
            "{\"jsonrpc\":\"2.0\",\"id\":10,\"method\":\"tools/call\",\"params\":{\"name\":"
            "\"debug_sleep\",\"arguments\":{\"ms\":400,\"report\":false},\"_meta\":{"
            "\"progressToken\":11}}}",
            &sk);
    CHECK(!is_error(r));
    CHECK(sink_count(&sk, "notifications/progress") >= 1);
    json_decref(r);
    /* Without a token, no progress. */
    json_array_clear(sk.msgs);
    r = call(s, "debug_sleep", "{\"ms\":30,\"steps\":3}", &sk);
    CHECK_EQ_INT(sink_count(&sk, "notifications/progress"), 0);
    json_decref(r);
    sink_free(&sk);
    skd__mcp_session_close(s);
    skd__mcp_session_unref(s);
}

struct bg {
    skd_mcp_session *s;
    json_t *reply;
    int cancelled;
};

static void *bg_call(void *arg)
{
    struct bg *b = arg;
    const char *msg = "{\"jsonrpc\":\"2.0\",\"id\":\"long\",\"method\":\"tools/call\",\"params\":{"
                      "\"name\":\"debug_sleep\",\"arguments\":{\"ms\":20000}}}";
    skd_mcp_io io = {0};
    b->reply = skd__mcp_handle_raw(b->s, msg, strlen(msg), &io);
    b->cancelled = io.cancelled;
    return NULL;
}

TEST(cancellation_stops_the_call)
{
    skd_mcp_session *s = fixture_session(&F, "k1", SKD_SCOPE_ALL, "2025-11-25");
    struct bg b = {s, NULL, 0};
    pthread_t t;
    int64_t t0 = skd_mono_ms();
    pthread_create(&t, NULL, bg_call, &b);
    while (skd__calls_count(F.calls) == 0 && skd_mono_ms() - t0 < 10000)
        usleep(1000);
    CHECK_EQ_INT(skd__calls_count(F.calls), 1);
    /* Another id or another session does not cancel it. */
    json_decref(rpc(s,
                    "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{"
                    "\"requestId\":\"other\"}}",
                    NULL));
    usleep(20000);
    CHECK_EQ_INT(skd__calls_count(F.calls), 1);
    CHECK(rpc(s,
              "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{"
              "\"requestId\":\"long\",\"reason\":\"test\"}}",
              NULL) == NULL);
    pthread_join(t, NULL);
    CHECK(b.cancelled);
    CHECK_EQ_INT(rpc_code(b.reply), -32800);
    CHECK(skd_mono_ms() - t0 < 15000); /* not a timing assertion: 20 s would mean no cancel */
    json_decref(b.reply);
    CHECK_EQ_INT(skd__calls_count(F.calls), 0);
    skd__mcp_session_close(s);
    skd__mcp_session_unref(s);
}

TEST(logging_set_level)
{
    skd_mcp_session *s = fixture_session(&F, "k1", SKD_SCOPE_ALL, "2025-11-25");
    struct sink sk;
    sink_init(&sk);
    json_t *r = call(s, "echo", "{\"msg\":\"a\"}", &sk);
    CHECK_EQ_INT(sink_count(&sk, "notifications/message"), 0);
    json_decref(r);
    r = rpc(s,
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"logging/setLevel\",\"params\":{\"level\":"
            "\"loud\"}}",
            NULL);
    CHECK_EQ_INT(rpc_code(r), -32602);
    json_decref(r);
    r = rpc(s,
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"logging/setLevel\",\"params\":{\"level\":"
            "\"info\"}}",
            NULL);
    CHECK(json_is_object(json_object_get(r, "result")));
    json_decref(r);
    r = call(s, "echo", "{\"msg\":\"a\"}", &sk);
    CHECK_EQ_INT(sink_count(&sk, "notifications/message"), 1);
    json_t *m = json_array_get(sk.msgs, 0);
    CHECK_STR(skd_json_str(json_object_get(m, "params"), "level", NULL), "info");
    json_decref(r);
    sink_free(&sk);
    skd__mcp_session_close(s);
    skd__mcp_session_unref(s);
}

TEST(list_changed_on_registry_change)
{
    skd_mcp_session *s = fixture_session(&F, "k1", SKD_SCOPE_ALL, "2025-11-25");
    skd_mcp_session *fresh = skd__mcp_session_new(F.m, "k1", SKD_SCOPE_ALL); /* not initialized */
    struct sink sk, sk2;
    sink_init(&sk);
    sink_init(&sk2);
    skd__mcp_session_set_sink(s, sink_send, &sk, NULL);
    skd__mcp_session_set_sink(fresh, sink_send, &sk2, NULL);
    CHECK_EQ_INT(fixture_add_echo(&F, "echo2"), 0);
    CHECK_EQ_INT(sink_count(&sk, "notifications/tools/list_changed"), 1);
    CHECK_EQ_INT(sink_count(&sk2, "notifications/tools/list_changed"), 0);
    skd_err err = {0};
    CHECK_EQ_INT(skd_registry_set_enabled(skd_engine_registry(F.e), "echo2", NULL, NULL, 0, &err),
                 0);
    CHECK_EQ_INT(sink_count(&sk, "notifications/tools/list_changed"), 2);
    /* A disabled skill is no longer a tool. */
    json_t *r = call(s, "echo2", "{\"msg\":\"a\"}", NULL);
    CHECK_EQ_INT(rpc_code(r), -32602);
    json_decref(r);
    skd__mcp_session_set_sink(s, NULL, NULL, NULL);
    CHECK_EQ_INT(skd_registry_remove(skd_engine_registry(F.e), "echo2", NULL, NULL, &err), 0);
    CHECK_EQ_INT(sink_count(&sk, "notifications/tools/list_changed"), 2);
    skd__mcp_session_close(s);
    skd__mcp_session_unref(s);
    skd__mcp_session_close(fresh);
    skd__mcp_session_unref(fresh);
    sink_free(&sk);
    sink_free(&sk2);
}

TEST(expose_skills_switch)
{
    skd_err err = {0};
    CHECK_EQ_INT(skd_config_set(F.cfg, "SKILLD_MCP_EXPOSE_SKILLS", "false", &err), 0);
    skd_mcp *m = skd__mcp_new(F.e, F.calls);
    skd_mcp_session *s = skd__mcp_session_new(m, "k1", SKD_SCOPE_ALL);
    json_decref(rpc(s, "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{"
                       "\"protocolVersion\":\"2025-11-25\",\"capabilities\":{}}}",
                    NULL));
    json_t *r = rpc(s, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}", NULL);
    json_t *tools = json_object_get(json_object_get(r, "result"), "tools");
    CHECK_EQ_INT(json_array_size(tools), 2); /* page size 2: skills_list, skills_execute */
    CHECK_STR(skd_json_str(json_object_get(r, "result"), "nextCursor", NULL), "2");
    json_decref(r);
    r = rpc(s,
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{\"cursor\":"
            "\"2\"}}",
            NULL);
    tools = json_object_get(json_object_get(r, "result"), "tools");
    CHECK_EQ_INT(json_array_size(tools), 1);
    CHECK(json_object_get(json_object_get(r, "result"), "nextCursor") == NULL);
    json_decref(r);
    /* The skill is still reachable through skills_execute, not directly. */
    r = call(s, "echo", "{\"msg\":\"hi\"}", NULL);
    CHECK_EQ_INT(rpc_code(r), -32602);
    json_decref(r);
    r = call(s, "skills_execute", "{\"skill\":\"echo\",\"input\":{\"msg\":\"hi\"}}", NULL);
    CHECK(!is_error(r));
    json_decref(r);
    skd__mcp_session_close(s);
    skd__mcp_session_unref(s);
    skd__mcp_free(m);
    CHECK_EQ_INT(skd_config_set(F.cfg, "SKILLD_MCP_EXPOSE_SKILLS", "true", &err), 0);
    /* Freeing one dispatcher leaves the other subscribed to changes. */
    skd_mcp_session *s2 = fixture_session(&F, "k1", SKD_SCOPE_ALL, "2025-11-25");
    struct sink sk;
    sink_init(&sk);
    skd__mcp_session_set_sink(s2, sink_send, &sk, NULL);
    CHECK_EQ_INT(fixture_add_echo(&F, "echo3"), 0);
    CHECK_EQ_INT(sink_count(&sk, "notifications/tools/list_changed"), 1);
    skd__mcp_session_close(s2);
    skd__mcp_session_unref(s2);
    sink_free(&sk);
}

int main(void)
{
    TAP_BEGIN("test_server_mcp");
    if (fixture_open(&F, "2") != 0) {
        printf("FAIL test_server_mcp: fixture: could not open an engine\n");
        return 1;
    }
    RUN(initialize_negotiates_versions);
    RUN(jsonrpc_errors);
    RUN(tools_list_pages_with_cursor);
    RUN(tools_call_results_and_errors);
    RUN(scopes_and_identity);
    RUN(older_version_has_no_structured_output);
    RUN(progress_notifications);
    RUN(cancellation_stops_the_call);
    RUN(logging_set_level);
    RUN(list_changed_on_registry_change);
    RUN(expose_skills_switch);
    fixture_close(&F);
    return TAP_END();
}
