/*
 * `skilld image`: import, list and remove sandbox images under
 * $DATA_DIR/images. A thin client of skd_image_* (include/skilld/image.h);
 * it trusts nothing more than the library does.
 *
 *   skilld image import NAME[:TAG] FILE.tar [--engine docker|podman|all|none]
 *                                             prints the new manifest; the
 *                                             image is also loaded into the
 *                                             container engine(s) named, by
 *                                             default the one chosen by
 *                                             SKILLS_SANDBOX_RUNTIME (docker
 *                                             or podman), so that one tarball
 *                                             serves every provider
 *   skilld image list [--json]                a table, or the JSON array
 *   skilld image rm NAME[:TAG]
 */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "sandbox/provider.h"
#include "skilld/image.h"

/* Load the imported tarball into the container engines that engine names
 * ("docker", "podman", "all", "none"). Returns CLI_OK or CLI_FAIL. */
static int load_into_engines(skd_cli *cli, const char *engine, const char *ref, const char *tar,
                             const json_t *manifest)
{
    const char *source = skd_json_str(manifest, "source", "docker-export");
    int archive = strcmp(source, "docker-export") != 0;
    int all = strcmp(engine, "all") == 0;
    static const char *const engines[] = {"docker", "podman"};
    for (size_t i = 0; i < 2; i++) {
        if (!all && strcmp(engine, engines[i]) != 0)
            continue;
        skd_err err = {0};
        if (skd__containers_image_load(engines[i], tar, ref, archive, &err) != 0) {
            fprintf(stderr, "%s: image import: loading into %s: %s\n", cli->prog, engines[i],
                    skd_err_msg(&err));
            return CLI_FAIL;
        }
    }
    return CLI_OK;
}

static int image_import(skd_cli *cli, int argc, char **argv)
{
    const char *rt = skd_config_str(cli->cfg, "SKILLS_SANDBOX_RUNTIME");
    const char *engine =
        rt && (strcmp(rt, "docker") == 0 || strcmp(rt, "podman") == 0) ? rt : "none";
    if (argc == 6 && strcmp(argv[4], "--engine") == 0) {
        engine = argv[5];
        argc = 4;
    }
    if (argc != 4 || (strcmp(engine, "docker") && strcmp(engine, "podman") &&
                      strcmp(engine, "all") && strcmp(engine, "none")))
        return skd__cli_usage(
            "image", "usage: image import NAME[:TAG] FILE.tar [--engine docker|podman|all|none]");
    skd_err err = {0};
    json_t *m = NULL;
    skd_image_limits lim = {skd_config_int(cli->cfg, "SKILLS_IMAGE_MAX_BYTES"),
                            skd_config_int(cli->cfg, "SKILLS_IMAGE_MAX_ENTRIES")};
    int rc =
        skd_image_import(skd_config_str(cli->cfg, "DATA_DIR"), argv[2], argv[3], &lim, &m, &err);
    if (rc) {
        fprintf(stderr, "%s: image import: %s (%s)\n", cli->prog, skd_err_msg(&err),
                skd_errcode(rc));
        return CLI_FAIL;
    }
    if (strcmp(engine, "none") != 0 &&
        load_into_engines(cli, engine, argv[2], argv[3], m) != CLI_OK) {
        json_decref(m);
        return CLI_FAIL;
    }
    skd__cli_print_json(m);
    json_decref(m);
    return CLI_OK;
}

static void print_table(const json_t *arr)
{
    printf("%-24s %-16s %-14s %12s %8s  %s\n", "NAME", "TAG", "SOURCE", "SIZE", "FILES", "CREATED");
    size_t i;
    json_t *m;
    json_array_foreach (arr, i, m) {
        const char *error = skd_json_str(m, "error", NULL);
        if (error) {
            printf("%-24s %-16s %s\n", skd_json_str(m, "name", "?"), skd_json_str(m, "tag", "?"),
                   error);
            continue;
        }
        printf("%-24s %-16s %-14s %12lld %8lld  %s\n", skd_json_str(m, "name", "?"),
               skd_json_str(m, "tag", "?"), skd_json_str(m, "source", "?"),
               skd_json_int(m, "size", 0), skd_json_int(m, "files", 0),
               skd_json_str(m, "created", ""));
    }
}

static int image_list(skd_cli *cli, int argc, char **argv)
{
    int as_json = argc == 3 && strcmp(argv[2], "--json") == 0;
    if (argc > 3 || (argc == 3 && !as_json))
        return skd__cli_usage("image", "usage: image list [--json]");
    skd_err err = {0};
    json_t *arr = NULL;
    int rc = skd_image_list(skd_config_str(cli->cfg, "DATA_DIR"), &arr, &err);
    if (rc) {
        fprintf(stderr, "%s: image list: %s\n", cli->prog, skd_err_msg(&err));
        return CLI_FAIL;
    }
    if (as_json)
        skd__cli_print_json(arr);
    else
        print_table(arr);
    json_decref(arr);
    return CLI_OK;
}

static int image_rm(skd_cli *cli, int argc, char **argv)
{
    if (argc != 3)
        return skd__cli_usage("image", "usage: image rm NAME[:TAG]");
    skd_err err = {0};
    int rc = skd_image_remove(skd_config_str(cli->cfg, "DATA_DIR"), argv[2], &err);
    if (rc) {
        fprintf(stderr, "%s: image rm: %s (%s)\n", cli->prog, skd_err_msg(&err), skd_errcode(rc));
        return CLI_FAIL;
    }
    printf("removed %s\n", argv[2]);
    return CLI_OK;
}

int skd__cli_image(skd_cli *cli, int argc, char **argv)
{
    if (argc < 2)
        return skd__cli_usage("image", "usage: image import|list|rm ...");
    if (strcmp(argv[1], "import") == 0)
        return image_import(cli, argc, argv);
    if (strcmp(argv[1], "list") == 0 || strcmp(argv[1], "ls") == 0)
        return image_list(cli, argc, argv);
    if (strcmp(argv[1], "rm") == 0)
        return image_rm(cli, argc, argv);
    return skd__cli_usage("image", "unknown image command %s (import, list, rm)", argv[1]);
}
