/*
 * skilld serve [--listen ADDR] [--data-dir DIR]: run the HTTP server until
 * SIGTERM or SIGINT, then stop gracefully (stop accepting, cancel running
 * calls, wait SKILLD_SHUTDOWN_GRACE_MS, close). On the first start with no
 * API key in the store, create an admin key and print it once, with a
 * ready-to-paste MCP client configuration, on stdout (under a service
 * manager: into a 0600 file instead, see first_key).
 */
#include "cli/cli.h"
#include "skilld/sandbox.h"
#include "skilld/server.h"
#include "skilld/store.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Metrics getters: the engine whose runner /metrics reports (set once
 * before the server starts, read by scrapes). */
static skd_engine *metrics_engine;

static long running_sandboxes(void)
{
    skd_runner *r = metrics_engine ? skd_engine_runner(metrics_engine, NULL) : NULL;
    return r ? skd_runner_running_count(r) : 0;
}

/* Host part for client URLs: a wildcard listen address becomes 127.0.0.1. */
static void client_host(const char *listen, char *out, size_t cap)
{
    const char *colon = strrchr(listen, ':');
    size_t n = colon ? (size_t)(colon - listen) : 0;
    if (n == 0 || n >= cap || strncmp(listen, "0.0.0.0", n) == 0 ||
        strncmp(listen, "[::]", n) == 0) {
        skd_strlcpy(out, "127.0.0.1", cap);
        return;
    }
    memcpy(out, listen, n);
    out[n] = '\0';
}

/* Create the first admin key when the store has none. In a terminal (as
 * scripts/quickstart.sh runs it) the secret is printed once on stdout, as
 * before. Under a service manager, stdout goes to a log that may be kept
 * (a persistent journal): "under a service manager" means stdout or stderr
 * is the journal stream systemd names in JOURNAL_STREAM, or INVOCATION_ID
 * is set (systemd sets it for every unit it starts) and stdout is not a
 * terminal. Then the secret goes to $STATE_DIRECTORY/admin-key (else
 * DATA_DIR/admin-key), mode 0600, owned by the directory's owner (the
 * service user), and the log names that file, never the secret. */
static int first_key(skd_engine *e, const char *host, unsigned port)
{
    skd_store *st = skd_engine_store(e);
    skd_err err = {0};
    int64_t count = 0;
    if (skd_store_key_count(st, &count, &err)) {
        fprintf(stderr, "skilld serve: %s\n", skd_err_msg(&err));
        return -1;
    }
    if (count > 0)
        return 0;
    int service = getenv("INVOCATION_ID") && !isatty(STDOUT_FILENO);
    unsigned long long jdev, jino;
    const char *js = getenv("JOURNAL_STREAM");
    struct stat sb;
    for (int fd = 1; fd <= 2 && js && sscanf(js, "%llu:%llu", &jdev, &jino) == 2; fd++)
        if (fstat(fd, &sb) == 0 && sb.st_dev == jdev && sb.st_ino == jino)
            service = 1;
    char dir[PATH_MAX], path[PATH_MAX + 32], tmp[PATH_MAX + 32];
    if (service) {
        const char *sd = getenv("STATE_DIRECTORY"); /* may list several, ':'-separated */
        const char *dd = skd_config_str(skd_engine_config(e), "DATA_DIR");
        size_t n = sd && *sd ? strcspn(sd, ":") : 0;
        if (n ? snprintf(dir, sizeof(dir), "%.*s", (int)n, sd) >= (int)sizeof(dir)
              : skd_strlcpy(dir, dd ? dd : ".", sizeof(dir)) != 0) {
            fprintf(stderr, "skilld serve: state directory path too long\n");
            return -1;
        }
        snprintf(path, sizeof(path), "%s/admin-key", dir);
        snprintf(tmp, sizeof(tmp), "%s/.admin-key.%d", dir, (int)getpid());
    }
    char *secret = NULL;
    skd_key_info info;
    if (skd_store_key_create(st, "admin", SKD_SCOPE_ALL, &secret, &info, &err)) {
        fprintf(stderr, "skilld serve: cannot create the first key: %s\n", skd_err_msg(&err));
        return -1;
    }
    if (service) {
        /* A new file, written whole, then renamed: never a partial key. */
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        size_t len = strlen(secret);
        int ok = fd >= 0 && stat(dir, &sb) == 0 &&
                 (geteuid() != 0 || fchown(fd, sb.st_uid, sb.st_gid) == 0) &&
                 skd_write_all(fd, secret, len) == 0 && skd_write_all(fd, "\n", 1) == 0 &&
                 fsync(fd) == 0;
        if (fd >= 0 && close(fd) != 0)
            ok = 0;
        if (!ok || rename(tmp, path) != 0) {
            int saved = errno;
            unlink(tmp);
            fprintf(stderr, "skilld serve: cannot write the first admin key to %s: %s\n", path,
                    strerror(saved));
            free(secret);
            return -1;
        }
        skd_info("no API key existed, so an admin key (id %s) was created; its secret is in %s "
                 "(mode 0600), not in this log",
                 info.id, path);
        free(secret);
        return 0;
    }
    char url[300];
    snprintf(url, sizeof(url), "http://%s:%u/mcp", host, port);
    printf("skilld: no API key existed, so an admin key was created.\n"
           "The secret is shown only now; store it safely.\n\n"
           "  key id: %s\n  secret: %s\n\n"
           "MCP client configuration (Claude Desktop, Cursor, VS Code: mcp.json):\n"
           "{\n"
           "  \"mcpServers\": {\n"
           "    \"skilld\": {\n"
           "      \"type\": \"http\",\n"
           "      \"url\": \"%s\",\n"
           "      \"headers\": { \"Authorization\": \"Bearer %s\" }\n"
           "    }\n"
           "  }\n"
           "}\n\n"
           "Claude Code:\n"
           "  claude mcp add --transport http skilld %s --header \"Authorization: Bearer %s\"\n\n",
           info.id, secret, url, secret, url, secret);
    fflush(stdout);
    free(secret);
    return 0;
}

int skd__cli_serve(skd_cli *cli, int argc, char **argv)
{
    skd_err err = {0};
    for (int i = 1; i < argc; i++) {
        const char *setting = NULL;
        if (strcmp(argv[i], "--listen") == 0)
            setting = "SKILLD_LISTEN";
        else if (strcmp(argv[i], "--data-dir") == 0)
            setting = "DATA_DIR";
        else
            return skd__cli_usage("serve", "unexpected argument %s", argv[i]);
        if (i + 1 >= argc)
            return skd__cli_usage("serve", "%s needs a value", argv[i]);
        if (skd_config_set(cli->cfg, setting, argv[++i], &err))
            return skd__cli_usage("serve", "%s", skd_err_msg(&err));
    }
    skd_engine *e = skd__cli_engine(cli);
    if (!e)
        return CLI_FAIL;
    /* Block the stop signals before any thread starts, so every thread
     * inherits the mask and only sigwait below sees them. */
    sigset_t set;
    skd__cli_block_stop_signals(&set);
    metrics_engine = e; /* skd_server_start installs the outbound counter */
    skd_metrics_set_running_sandboxes_fn(running_sandboxes);
    const char *listen = skd_config_str(cli->cfg, "SKILLD_LISTEN");
    skd_server *srv = NULL;
    if (skd_server_start(e, listen, &srv, &err)) {
        fprintf(stderr, "skilld serve: %s\n", skd_err_msg(&err));
        return CLI_FAIL;
    }
    char host[256];
    client_host(listen, host, sizeof(host));
    int code = CLI_OK;
    skd_store *st = skd_engine_store(e);
    if (first_key(e, host, skd_server_port(srv)) != 0) {
        code = CLI_FAIL;
    } else if (skd_store_replica_start(st, skd_config_str(cli->cfg, "SKILLD_REPLICA_ID"),
                                       (int)skd_config_int(cli->cfg, "SKILLD_RUN_LEASE_MS"),
                                       &err) != 0) {
        fprintf(stderr, "skilld serve: %s\n", skd_err_msg(&err));
        code = CLI_FAIL;
    } else {
        skd_info("listening on http://%s:%u (MCP at /mcp, REST at /v1) as replica %s", host,
                 skd_server_port(srv), skd_store_replica_id(st));
        int sig = 0;
        sigwait(&set, &sig);
        skd_info("signal %d: stopping", sig);
        /* Drain: /healthz says 503 so the load balancer stops sending,
         * while calls in flight (and any that still arrive) go on. */
        int drain = (int)skd_config_int(cli->cfg, "SKILLD_DRAIN_MS");
        if (drain > 0) {
            skd_store_set_draining(st, 1);
            skd_info("draining for %d ms", drain);
            usleep((useconds_t)drain * 1000);
            /* then calls in flight finish, up to the grace period, before
             * the stop cancels what is left */
            int64_t until = skd_mono_ms() + skd_config_int(cli->cfg, "SKILLD_SHUTDOWN_GRACE_MS");
            while (skd_server_in_flight(srv) > 0 && skd_mono_ms() < until)
                usleep(50 * 1000);
        }
    }
    skd_server_stop(srv, (int)skd_config_int(cli->cfg, "SKILLD_SHUTDOWN_GRACE_MS"));
    skd_server_free(srv);
    skd_metrics_set_running_sandboxes_fn(NULL);
    skd_metrics_set_outbound_rejected_fn(NULL);
    metrics_engine = NULL;
    return code;
}
