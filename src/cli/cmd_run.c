/*
 * skilld run SKILL [--key KEY_ID] [--input JSON | @FILE | -]
 * Runs one skill through the engine as the given key (default "local"; the
 * command line is trusted, so it may act as any key id) and prints the
 * result object. Exit 0 when success is true, 1 when false, 2 on usage.
 */
#include "cli/cli.h"

#include <string.h>

int skd__cli_run(skd_cli *cli, int argc, char **argv)
{
    const char *skill = NULL, *key = "local", *input_arg = NULL, *version = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if ((strcmp(a, "--key") == 0 || strcmp(a, "--input") == 0 || strcmp(a, "--version") == 0) &&
            i + 1 >= argc)
            return skd__cli_usage("run", "%s needs a value", a);
        if (strcmp(a, "--key") == 0)
            key = argv[++i];
        else if (strcmp(a, "--input") == 0)
            input_arg = argv[++i];
        else if (strcmp(a, "--version") == 0)
            version = argv[++i];
        else if (a[0] == '-' && a[1])
            return skd__cli_usage("run", "unknown flag %s", a);
        else if (!skill)
            skill = a;
        else
            return skd__cli_usage("run", "unexpected argument %s", a);
    }
    if (!skill)
        return skd__cli_usage("run", "name the skill to run");
    if (!*key)
        return skd__cli_usage("run", "--key must not be empty");
    json_t *input = input_arg ? skd__cli_read_json(cli, input_arg) : json_object();
    if (!input)
        return CLI_USAGE;
    skd_engine *e = skd__cli_engine(cli);
    if (!e) {
        json_decref(input);
        return CLI_FAIL;
    }
    skd_call call = {
        .key_id = key,
        .scopes = SKD_SCOPE_ALL,
        .skill = skill,
        .version = version,
        .input = input,
    };
    json_t *result = skd_engine_execute(e, &call, NULL);
    int ok = skd_result_success(result);
    skd__cli_print_json(result);
    json_decref(result);
    json_decref(input);
    return ok ? CLI_OK : CLI_FAIL;
}
