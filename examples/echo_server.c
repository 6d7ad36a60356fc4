/*
 * echo_server: the smallest program that embeds libskilld, adds its own
 * skill written in C, and serves it to agents.
 *
 *   echo_server DATA_DIR                 MCP over stdio (for a desktop client)
 *   echo_server DATA_DIR HOST:PORT       HTTP: MCP at /mcp, A2A at /a2a, REST at /v1;
 *                                        prints an API key secret on stdout
 *
 * The `echo` skill returns {"success": true, "echo": <message>, "caller":
 * <key id>}. It goes through the same engine as the built-ins: its input is
 * validated against its schema before the handler runs, each call is
 * audited, and the caller's identity comes from the transport, never from
 * the input. Build: `make` puts it in build/examples/echo_server.
 */
#include <skilld/server.h>
#include <skilld/skilld.h>
#include <skilld/store.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The handler: input is borrowed and already valid; return a new result. */
static json_t *echo(const skd_ctx *ctx, const json_t *input, void *udata)
{
    (void)udata;
    json_t *r = skd_result_ok();
    json_object_set(r, "echo", json_object_get(input, "message"));
    json_object_set_new(r, "caller", json_string(ctx->key_id));
    return r;
}

static int add_echo(skd_engine *e, skd_err *err)
{
    json_t *schema = json_pack("{s:s, s:{s:{s:s, s:i}}, s:[s], s:b}", "type", "object",
                               "properties", "message", "type", "string", "maxLength", 4096,
                               "required", "message", "additionalProperties", 0);
    json_t *tags = json_pack("[s]", "example");
    skd_skill_def def = {
        .name = "echo",
        .version = "1.0.0",
        .description = "Return the message it was given",
        .input_schema = schema, /* borrowed: the registry keeps its own reference */
        .tags = tags,
        .mode = SKD_MODE_DIRECT,
        .handler = echo,
    };
    int rc = skd_registry_add(skd_engine_registry(e), &def, 0, err);
    json_decref(schema);
    json_decref(tags);
    return rc;
}

static volatile sig_atomic_t stop;
static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

static int serve_http(skd_engine *e, const char *listen, skd_err *err)
{
    skd_server *srv = NULL;
    char *secret = NULL;
    skd_key_info key;
    int rc = skd_store_key_create(skd_engine_store(e), "echo-example", SKD_SCOPE_ALL, &secret, &key,
                                  err);
    if (rc == 0)
        rc = skd_server_start(e, listen, &srv, err);
    if (rc == 0) {
        printf("listening on port %u\nsecret: %s\n", skd_server_port(srv), secret);
        fflush(stdout);
        signal(SIGINT, on_signal);
        signal(SIGTERM, on_signal);
        while (!stop)
            pause();
        skd_server_free(srv);
    }
    free(secret);
    return rc;
}

int main(int argc, char **argv)
{
    skd_err err = {0};
    skd_engine *e = NULL;
    int rc = 1;
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: %s DATA_DIR [HOST:PORT]\n", argv[0]);
        return 2;
    }
    skd_config *cfg = skd_config_new();
    if (!cfg || skd_config_set(cfg, "DATA_DIR", argv[1], &err) || skd_engine_open(cfg, &e, &err) ||
        add_echo(e, &err))
        goto out;
    signal(SIGPIPE, SIG_IGN);
    if (argc == 3)
        rc = serve_http(e, argv[2], &err);
    else /* every call runs as the local key "echo-local" */
        rc = skd_mcp_stdio_run(e, "echo-local", SKD_SCOPE_ALL, STDIN_FILENO, STDOUT_FILENO, -1,
                               &err);
out:
    if (rc || err.code)
        fprintf(stderr, "echo_server: %s\n", err.code ? skd_err_msg(&err) : "out of memory");
    skd_engine_close(e);
    skd_config_free(cfg);
    return rc || err.code ? 1 : 0;
}
