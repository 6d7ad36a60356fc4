/*
 * skilld skills: list the skills a key sees, and manage custom skills.
 *   skills [list] [--json] [--key KEY_ID]     list with input schemas; --json
 *                                             prints the array the REST API returns
 *   skills add FILE|DIR [--key KEY_ID] [--replace]
 *                                             register a manifest (JSON file) or an
 *                                             Agent Skills folder (with SKILL.md)
 *   skills rm NAME[@VERSION] [--key KEY_ID]   remove (every version without @)
 *   skills enable|disable NAME[@VERSION] [--key KEY_ID]
 *   skills publish|unpublish NAME --key KEY_ID
 *                                             make KEY_ID's SKILL.md bundle visible to
 *                                             every key over MCP (or private again)
 * The command line acts as the operator: skills are global unless --key
 * names the key that owns them.
 */
#include "cli/cli.h"
#include "skilld/bundle.h"
#include "skilld/custom.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int list(skd_cli *cli, int as_json, const char *key)
{
    skd_engine *e = skd__cli_engine(cli);
    if (!e)
        return CLI_FAIL;
    size_t n = 0;
    skd_skill **items = skd_registry_list(skd_engine_registry(e), key, 0, 1, &n);
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++) {
        if (as_json) {
            json_array_append_new(arr, skd_skill_to_json(items[i]));
            continue;
        }
        char *schema = json_dumps(skd_skill_input_schema(items[i]), JSON_COMPACT);
        printf("%s@%s  [%s%s]  %s\n    input: %s\n", skd_skill_name(items[i]),
               skd_skill_version(items[i]), skd_mode_name(skd_skill_mode(items[i])),
               skd_skill_enabled(items[i]) ? "" : ", disabled", skd_skill_description(items[i]),
               schema ? schema : "{}");
        free(schema);
    }
    if (as_json)
        skd__cli_print_json(arr);
    json_decref(arr);
    skd_skill_list_free(items, n);
    return CLI_OK;
}

static int fail(const skd_err *err)
{
    fprintf(stderr, "skilld skills: %s: %s\n", skd_errcode(err->code), skd_err_msg(err));
    return CLI_FAIL;
}

static int add(skd_cli *cli, const char *path, const skd_actor *who, int replace)
{
    skd_err err = {0};
    skd_skill *s = NULL;
    struct stat st;
    int rc;
    if (stat(path, &st) != 0)
        return skd__cli_usage("skills add", "%s: no such file or directory", path);
    skd_engine *e = skd__cli_engine(cli);
    if (!e)
        return CLI_FAIL;
    if (S_ISDIR(st.st_mode)) {
        char *abs = realpath(path, NULL);
        if (!abs)
            return skd__cli_usage("skills add", "%s: cannot resolve the path", path);
        rc = skd_custom_register_folder(skd_engine_skills(e), who, abs, 1, replace, &s, &err);
        free(abs);
    } else {
        char arg[PATH_MAX + 2];
        snprintf(arg, sizeof(arg), "@%s", path);
        json_t *m = skd__cli_read_json(cli, arg);
        if (!m)
            return CLI_FAIL;
        rc = skd_custom_register(skd_engine_skills(e), who, m, replace, &s, &err);
        json_decref(m);
    }
    if (rc)
        return fail(&err);
    /* A SKILL.md folder without an entry script is a bundle only. */
    json_t *j = s ? skd_skill_to_json(s) : json_pack("{s:s, s:b}", "bundle", path, "callable", 0);
    skd__cli_print_json(j);
    json_decref(j);
    skd_skill_unref(s);
    return CLI_OK;
}

int skd__cli_skills(skd_cli *cli, int argc, char **argv)
{
    int as_json = 0, replace = 0, i = 1;
    const char *key = NULL, *verb = "list", *target = NULL;
    if (argc > 1 && argv[1][0] != '-')
        verb = argv[i++];
    for (; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0)
            as_json = 1;
        else if (strcmp(argv[i], "--replace") == 0)
            replace = 1;
        else if (strcmp(argv[i], "--key") == 0 && i + 1 < argc)
            key = argv[++i];
        else if (argv[i][0] != '-' && !target)
            target = argv[i];
        else
            return skd__cli_usage("skills", "unknown argument %s", argv[i]);
    }
    if (strcmp(verb, "list") == 0)
        return target ? skd__cli_usage("skills", "unknown argument %s", target)
                      : list(cli, as_json, key);
    if (!target)
        return skd__cli_usage("skills", "%s needs an argument", verb);
    skd_actor who = {.key_id = NULL, .scopes = SKD_SCOPE_ALL, .owner_key = key};
    if (strcmp(verb, "add") == 0)
        return add(cli, target, &who, replace);
    skd_engine *e = skd__cli_engine(cli);
    if (!e)
        return CLI_FAIL;
    skd_err err = {0};
    int rc;
    if (strcmp(verb, "rm") == 0 || strcmp(verb, "remove") == 0)
        rc = skd_custom_remove(skd_engine_skills(e), &who, target, &err);
    else if (strcmp(verb, "enable") == 0 || strcmp(verb, "disable") == 0)
        rc = skd_custom_set_enabled(skd_engine_skills(e), &who, target, verb[0] == 'e', &err);
    else if (strcmp(verb, "publish") == 0 || strcmp(verb, "unpublish") == 0)
        rc = skd_bundle_set_public(skd_engine_skills(e), &who, target, key, verb[0] == 'p', &err);
    else
        return skd__cli_usage(
            "skills", "unknown subcommand %s (list, add, rm, enable, disable, publish, unpublish)",
            verb);
    if (rc)
        return fail(&err);
    printf("%s: %s\n", verb, target);
    return CLI_OK;
}
