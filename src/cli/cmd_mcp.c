/*
 * skilld mcp [--key KEY_ID]: MCP over stdio for a local client (Claude
 * Desktop, Claude Code, an SDK). Stdout carries protocol only; logs go to
 * stderr. The identity is the key named by --key (it must exist and not be
 * revoked; its scopes apply), else the key whose secret is in
 * SKILLD_API_KEY, else the local identity "local" with skills:read and
 * skills:execute (whoever runs this can read the data directory anyway).
 * Exits at end of input; SIGTERM or SIGINT cancels running calls.
 */
#include "cli/cli.h"
#include "skilld/server.h"
#include "skilld/store.h"
#include "skilld/tenancy.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

static int identity(skd_engine *e, const char *key_id, skd_key_info *info)
{
    skd_err err = {0};
    const char *secret = getenv("SKILLD_API_KEY");
    memset(info, 0, sizeof(*info));
    if (key_id) {
        if (skd_engine_key_get(e, key_id, info, &err) != 0) {
            fprintf(stderr, "skilld mcp: %s\n", skd_err_msg(&err));
            return -1;
        }
        if (info->revoked) {
            fprintf(stderr, "skilld mcp: API key %s has been revoked\n", key_id);
            return -1;
        }
        return 0;
    }
    if (secret && *secret) {
        if (skd_engine_authenticate(e, secret, info, &err) != 0) {
            fprintf(stderr, "skilld mcp: SKILLD_API_KEY: %s\n", skd_err_msg(&err));
            return -1;
        }
        return 0;
    }
    skd_strlcpy(info->id, "local", sizeof(info->id));
    info->scopes = SKD_SCOPE_READ | SKD_SCOPE_EXECUTE;
    return 0;
}

int skd__cli_mcp(skd_cli *cli, int argc, char **argv)
{
    const char *key_id = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--key") == 0 && i + 1 < argc)
            key_id = argv[++i];
        else
            return skd__cli_usage("mcp", "unexpected argument %s", argv[i]);
    }
    skd_engine *e = skd__cli_engine(cli);
    if (!e)
        return CLI_FAIL;
    skd_key_info info;
    if (identity(e, key_id, &info) != 0)
        return CLI_FAIL;
    sigset_t set;
    skd__cli_block_stop_signals(&set);
    int sfd = signalfd(-1, &set, SFD_CLOEXEC);
    skd_err err = {0};
    int rc = skd_mcp_stdio_run(e, info.id, info.scopes, STDIN_FILENO, STDOUT_FILENO, sfd, &err);
    if (sfd >= 0)
        close(sfd);
    if (rc) {
        fprintf(stderr, "skilld mcp: %s\n", skd_err_msg(&err));
        return CLI_FAIL;
    }
    return CLI_OK;
}
