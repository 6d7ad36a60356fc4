/*
 * skilld: the command-line front of libskilld. Global flags are parsed here
 * (they override the environment, which overrides an optional config file),
 * then the subcommand from the table below runs as a client of the library.
 */
#include "cli/cli.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const struct {
    const char *name;
    skd_cli_fn fn;
    const char *help;
} commands[] = {
    {"run", skd__cli_run, "run SKILL [--key KEY_ID] [--input JSON|@FILE|-]  run a skill"},
    {"skills", skd__cli_skills,
     "skills [list] [--json] | add FILE|DIR | rm|enable|disable NAME[@V]  [--key KEY_ID]"},
    {"keys", skd__cli_keys, "keys create NAME [--scopes S] | list | revoke ID"},
    {"secrets", skd__cli_secrets,
     "secrets set NAME --key K --hosts H,.. [--headers N,..] < VALUE | list --key K | rm NAME "
     "--key K"},
    {"exec", skd__cli_exec,
     "exec [--image I] [--key K] [--timeout MS] ... -- CMD ARGS  run in a sandbox"},
    {"image", skd__cli_image, "image import NAME:TAG FILE.tar | list [--json] | rm NAME:TAG"},
    {"doctor", skd__cli_doctor,
     "doctor [--json]                    which isolation features work here"},
    {"serve", skd__cli_serve, "serve [--listen HOST:PORT]         HTTP server: MCP, REST, metrics"},
    {"mcp", skd__cli_mcp, "mcp [--key KEY_ID]                MCP over stdio"},
};

static void usage(FILE *out, const char *prog)
{
    fprintf(out,
            "skilld %s: a secure skills server for AI agents\n\n"
            "usage: %s [global flags] COMMAND [args]\n\ncommands:\n",
            SKD_VERSION, prog);
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        fprintf(out, "  %s\n", commands[i].help);
    fprintf(out, "\nglobal flags:\n"
                 "  --data-dir DIR        state directory (DATA_DIR; default ./var, as "
                 "root " SKD_ROOT_DATA_DIR ")\n"
                 "  --config FILE         NAME=value settings file (SKILLD_CONFIG)\n"
                 "  --set NAME=VALUE      any setting by its environment name\n"
                 "  --log-format text|json, --log-level debug|info|warn|error\n"
                 "  --print-config        print every setting and exit\n"
                 "  -h, --help, --version\n");
}

int skd__cli_usage(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "skilld %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n(see skilld --help)\n");
    return CLI_USAGE;
}

skd_engine *skd__cli_engine(skd_cli *cli)
{
    return skd__cli_engine_flags(cli, 0); /* src/cli/privsep.c */
}

void skd__cli_print_json(const json_t *v)
{
    char *s = json_dumps(v, JSON_INDENT(2) | JSON_ENCODE_ANY);
    if (s) {
        fputs(s, stdout);
        fputc('\n', stdout);
        free(s);
    }
    fflush(stdout);
}

void skd__cli_block_stop_signals(sigset_t *set)
{
    sigemptyset(set);
    sigaddset(set, SIGINT);
    sigaddset(set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, set, NULL);
    signal(SIGPIPE, SIG_IGN);
}

json_t *skd__cli_read_json(skd_cli *cli, const char *arg)
{
    skd_err err = {0};
    size_t max = (size_t)skd_config_int(cli->cfg, "SKILLD_MAX_BODY_BYTES");
    if (arg[0] != '@' && strcmp(arg, "-") != 0) {
        json_t *v = skd_json_parse(arg, strlen(arg), &err);
        if (!v)
            fprintf(stderr, "skilld: --input: %s\n", skd_err_msg(&err));
        return v;
    }
    FILE *f = strcmp(arg, "-") == 0 ? stdin : fopen(arg + 1, "re");
    if (!f) {
        fprintf(stderr, "skilld: --input: cannot open %s: %s\n", arg + 1, strerror(errno));
        return NULL;
    }
    skd_buf b;
    char chunk[8192];
    size_t n;
    int rc = 0;
    skd_buf_init(&b, max);
    while (!rc && (n = fread(chunk, 1, sizeof(chunk), f)) > 0)
        rc = skd_buf_append(&b, chunk, n);
    if (f != stdin)
        fclose(f);
    json_t *v = NULL;
    if (rc)
        fprintf(stderr, "skilld: --input: larger than %zu bytes\n", max);
    else if (!(v = skd_json_parse(b.data ? b.data : "", b.len, &err)))
        fprintf(stderr, "skilld: --input: %s\n", skd_err_msg(&err));
    skd_buf_free(&b);
    return v;
}

/* Global flags that map to settings. */
static const struct {
    const char *flag, *setting;
} flag_map[] = {
    {"--data-dir", "DATA_DIR"},
    {"--log-format", "SKILLD_LOG_FORMAT"},
    {"--log-level", "SKILLD_LOG_LEVEL"},
};

static int apply_logging(const skd_config *cfg)
{
    const char *fmt = skd_config_str(cfg, "SKILLD_LOG_FORMAT");
    int level = skd_log_level_parse(skd_config_str(cfg, "SKILLD_LOG_LEVEL"));
    if (strcmp(fmt, "text") != 0 && strcmp(fmt, "json") != 0)
        return skd__cli_usage("--log-format", "expected text or json, got %s", fmt);
    if (level < 0)
        return skd__cli_usage("--log-level", "expected debug, info, warn, error or off");
    skd_log_set_json(strcmp(fmt, "json") == 0);
    skd_log_set_level(level);
    return 0;
}

/* Parse global flags into cfg; returns the index of the subcommand, or a
 * negative exit status + 1000 offset when done (help, version, error). */
static int parse_globals(skd_cli *cli, int argc, char **argv, int *exit_code)
{
    skd_err err = {0};
    const char *config_file = getenv("SKILLD_CONFIG");
    int i, print_config = 0;
    /* The config file must load before the environment and flags, so find it first. */
    for (i = 1; i < argc && argv[i][0] == '-'; i++)
        if (strcmp(argv[i], "--config") == 0 && i + 1 < argc)
            config_file = argv[++i];
    if ((config_file && skd_config_load_file(cli->cfg, config_file, &err)) ||
        skd_config_load_env(cli->cfg, &err)) {
        fprintf(stderr, "skilld: %s\n", skd_err_msg(&err));
        return *exit_code = CLI_USAGE, -1;
    }
    for (i = 1; i < argc && argv[i][0] == '-'; i++) {
        const char *a = argv[i];
        size_t k;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout, cli->prog);
            return *exit_code = CLI_OK, -1;
        }
        if (strcmp(a, "--version") == 0) {
            printf("skilld %s\n", SKD_VERSION);
            return *exit_code = CLI_OK, -1;
        }
        if (strcmp(a, "--print-config") == 0) {
            print_config = 1;
            continue;
        }
        if (strcmp(a, "--config") == 0) {
            i++;
            continue;
        }
        if (i + 1 >= argc)
            return *exit_code = skd__cli_usage(a, "needs a value"), -1;
        for (k = 0; k < sizeof(flag_map) / sizeof(flag_map[0]); k++)
            if (strcmp(a, flag_map[k].flag) == 0)
                break;
        int rc;
        if (k < sizeof(flag_map) / sizeof(flag_map[0])) {
            rc = skd_config_set(cli->cfg, flag_map[k].setting, argv[++i], &err);
        } else if (strcmp(a, "--set") == 0) {
            char *eq = strchr(argv[++i], '=');
            if (!eq)
                return *exit_code = skd__cli_usage("--set", "expected NAME=VALUE"), -1;
            *eq = '\0';
            rc = skd_config_set(cli->cfg, argv[i], eq + 1, &err);
            *eq = '=';
        } else {
            return *exit_code = skd__cli_usage(a, "unknown flag"), -1;
        }
        if (rc)
            return *exit_code = skd__cli_usage(a, "%s", skd_err_msg(&err)), -1;
    }
    if ((*exit_code = apply_logging(cli->cfg)) != 0)
        return -1;
    if (print_config) {
        skd_config_dump(cli->cfg, stdout);
        return *exit_code = CLI_OK, -1;
    }
    return i;
}

int main(int argc, char **argv)
{
    skd_cli cli = {.prog = "skilld"};
    int code = CLI_USAGE;
    cli.cfg = skd_config_new();
    /* Started as root, state goes where the FHS puts it (and where
     * skilld.service and quickstart.sh put it); the file, the environment
     * and the flags still override it. */
    if (!cli.cfg ||
        (geteuid() == 0 && skd_config_set(cli.cfg, "DATA_DIR", SKD_ROOT_DATA_DIR, NULL) != 0)) {
        fprintf(stderr, "skilld: out of memory\n");
        skd_config_free(cli.cfg);
        return CLI_FAIL;
    }
    int at = parse_globals(&cli, argc, argv, &code);
    if (at < 0)
        goto out;
    if (at >= argc) {
        usage(stderr, cli.prog);
        code = CLI_USAGE;
        goto out;
    }
    size_t k;
    for (k = 0; k < sizeof(commands) / sizeof(commands[0]); k++)
        if (strcmp(argv[at], commands[k].name) == 0)
            break;
    if (k == sizeof(commands) / sizeof(commands[0])) {
        code = skd__cli_usage(argv[at], "unknown command");
        goto out;
    }
    code = commands[k].fn(&cli, argc - at, argv + at);
out:
    skd_engine_close(cli.engine);
    skd_config_free(cli.cfg);
    return code;
}
