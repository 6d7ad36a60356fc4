/*
 * skilld skills [--json] [--key KEY_ID]: list the skills a key sees, with
 * their input schemas. Plain output is one line per skill followed by its
 * schema; --json prints the array the REST API returns.
 */
#include "cli/cli.h"

#include <string.h>

int skd__cli_skills(skd_cli *cli, int argc, char **argv)
{
    int as_json = 0;
    const char *key = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0)
            as_json = 1;
        else if (strcmp(argv[i], "--key") == 0 && i + 1 < argc)
            key = argv[++i];
        else
            return skd__cli_usage("skills", "unknown argument %s", argv[i]);
    }
    skd_engine *e = skd__cli_engine(cli);
    if (!e)
        return CLI_FAIL;
    size_t n = 0;
    skd_skill **list = skd_registry_list(skd_engine_registry(e), key, 0, 1, &n);
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++) {
        if (as_json) {
            json_array_append_new(arr, skd_skill_to_json(list[i]));
            continue;
        }
        char *schema = json_dumps(skd_skill_input_schema(list[i]), JSON_COMPACT);
        printf("%s@%s  [%s%s]  %s\n    input: %s\n", skd_skill_name(list[i]),
               skd_skill_version(list[i]), skd_mode_name(skd_skill_mode(list[i])),
               skd_skill_enabled(list[i]) ? "" : ", disabled", skd_skill_description(list[i]),
               schema ? schema : "{}");
        free(schema);
    }
    if (as_json)
        skd__cli_print_json(arr);
    json_decref(arr);
    skd_skill_list_free(list, n);
    return CLI_OK;
}
