/*
 * skilld keys create NAME [--scopes skills:read,skills:execute] | list |
 * revoke ID. A new secret is printed once; only its digest is stored. The
 * command line acts as the local operator, through the engine.
 */
#include "cli/cli.h"
#include "skilld/store.h"
#include "skilld/tenancy.h"

#include <stdlib.h>
#include <string.h>

static int create(skd_engine *e, const skd_actor *op, int argc, char **argv)
{
    const char *name = NULL, *scopes_csv = "skills:read,skills:execute";
    int as_json = 0;
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--scopes") == 0 && i + 1 < argc)
            scopes_csv = argv[++i];
        else if (strcmp(argv[i], "--json") == 0)
            as_json = 1;
        else if (argv[i][0] != '-' && !name)
            name = argv[i];
        else
            return skd__cli_usage("keys create", "unexpected argument %s", argv[i]);
    }
    if (!name)
        return skd__cli_usage("keys create", "name the key");
    skd_err err = {0};
    unsigned scopes;
    if (skd_scopes_parse(scopes_csv, &scopes, &err))
        return skd__cli_usage("keys create", "%s", skd_err_msg(&err));
    char *secret = NULL;
    skd_key_info info;
    if (skd_engine_create_key(e, op, name, scopes, &secret, &info, &err)) {
        fprintf(stderr, "skilld keys create: %s\n", skd_err_msg(&err));
        return CLI_FAIL;
    }
    if (as_json) {
        json_t *o = json_pack("{s:s, s:s, s:s, s:o}", "id", info.id, "name", info.name, "secret",
                              secret, "scopes", skd_scopes_to_json(scopes));
        skd__cli_print_json(o);
        json_decref(o);
    } else {
        printf("key id:  %s\nname:    %s\nscopes:  %s\nsecret:  %s\n"
               "(the secret is shown only now; store it safely)\n",
               info.id, info.name, scopes_csv, secret);
    }
    free(secret);
    return CLI_OK;
}

int skd__cli_keys(skd_cli *cli, int argc, char **argv)
{
    if (argc < 2)
        return skd__cli_usage("keys", "expected create, list or revoke");
    const char *sub = argv[1];
    if (strcmp(sub, "create") != 0 && strcmp(sub, "list") != 0 && strcmp(sub, "revoke") != 0)
        return skd__cli_usage("keys", "unknown subcommand %s", sub);
    if (strcmp(sub, "revoke") == 0 && argc != 3)
        return skd__cli_usage("keys revoke", "expected one key id");
    skd_engine *e = skd__cli_engine(cli);
    if (!e)
        return CLI_FAIL;
    skd_actor op = {.key_id = NULL}; /* the local operator */
    skd_err err = {0};
    if (strcmp(sub, "create") == 0)
        return create(e, &op, argc, argv);
    if (strcmp(sub, "revoke") == 0) {
        if (skd_engine_revoke_key(e, &op, argv[2], &err)) {
            fprintf(stderr, "skilld keys revoke: %s\n", skd_err_msg(&err));
            return CLI_FAIL;
        }
        printf("revoked %s\n", argv[2]);
        return CLI_OK;
    }
    json_t *list = skd_engine_list_keys(e, &op, &err);
    if (!list) {
        fprintf(stderr, "skilld keys list: %s\n", skd_err_msg(&err));
        return CLI_FAIL;
    }
    skd__cli_print_json(list);
    json_decref(list);
    return CLI_OK;
}
