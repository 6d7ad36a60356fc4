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
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "sandbox/provider.h"
#include "skilld/image.h"
#include "skilld/util.h"

/* Load the imported tarball into the container engines that engine names
 * ("docker", "podman", "all", "none"). Returns CLI_OK or CLI_FAIL. */
static int load_into_engines(skd_cli *cli, const char *engine, const char *ref, const char *tar,
                             int archive)
{
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

/* In the unprivileged child: import job[1] as job[0] into DATA_DIR; write
 * 'e' (a docker export) or 'a' (another archive) and the manifest as JSON
 * text to fd. */
struct import_job {
    const char *ref, *tar;
    int tar_fd; /* opened by the parent, which may read what the child may not */
};

/* A tarball the unprivileged child cannot open itself (a root-only file, as
 * `docker save -o` writes them): copied from the parent's descriptor into
 * DATA_DIR (its own), refused past cap bytes. Returns 0 (path filled) or
 * -1 after saying why. */
static int copy_in(skd_cli *cli, const struct import_job *job, int64_t cap, char *path, size_t size)
{
    char uuid[SKD_UUID_LEN + 1];
    if (skd_uuid(uuid) != 0 || snprintf(path, size, "%s/.import-%s.tar",
                                        skd_config_str(cli->cfg, "DATA_DIR"), uuid) >= (int)size)
        return -1;
    int out = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (out < 0) {
        fprintf(stderr, "%s: image import: %s: %s\n", cli->prog, path, strerror(errno));
        return -1;
    }
    char buf[65536];
    int64_t total = 0;
    int rc = 0;
    while (total <= cap) {
        ssize_t n = read(job->tar_fd, buf, sizeof(buf));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            rc = n < 0 ? -1 : 0;
            break;
        }
        if ((rc = skd_write_all(out, buf, (size_t)n)) != 0)
            break;
        total += n;
    }
    if (close(out) != 0 || rc != 0 || total > cap) {
        if (total > cap)
            fprintf(stderr,
                    "%s: image import: %s is larger than %lld bytes (twice "
                    "SKILLS_IMAGE_MAX_BYTES and 64 MiB; make it readable by the service user "
                    "to import it in place) (invalid_input)\n",
                    cli->prog, job->tar, (long long)cap);
        else
            fprintf(stderr, "%s: image import: copying %s: %s\n", cli->prog, job->tar,
                    strerror(errno));
        unlink(path);
        return -1;
    }
    return 0;
}

static int import_child(skd_cli *cli, void *arg, int fd)
{
    const struct import_job *job = arg;
    skd_err err = {0};
    json_t *m = NULL;
    skd_image_limits lim = {skd_config_int(cli->cfg, "SKILLS_IMAGE_MAX_BYTES"),
                            skd_config_int(cli->cfg, "SKILLS_IMAGE_MAX_ENTRIES")};
    const char *tar = job->tar;
    char copy[PATH_MAX] = "";
    if (access(tar, R_OK) != 0) {
        int64_t cap = lim.max_bytes > 0 && lim.max_bytes < INT64_MAX / 4
                          ? 2 * lim.max_bytes + (64LL << 20)
                          : INT64_MAX - 1;
        if (copy_in(cli, job, cap, copy, sizeof(copy)) != 0)
            return CLI_FAIL;
        tar = copy;
    }
    int rc = skd_image_import(skd_config_str(cli->cfg, "DATA_DIR"), job->ref, tar, &lim, &m, &err);
    if (copy[0])
        unlink(copy);
    if (rc) {
        fprintf(stderr, "%s: image import: %s (%s)\n", cli->prog, skd_err_msg(&err),
                skd_errcode(rc));
        return CLI_FAIL;
    }
    char kind = strcmp(skd_json_str(m, "source", "docker-export"), "docker-export") ? 'a' : 'e';
    char *text = json_dumps(m, JSON_INDENT(2) | JSON_ENCODE_ANY);
    json_decref(m);
    if (!text)
        return CLI_FAIL;
    size_t n = strlen(text);
    text[n] = '\n'; /* replaces the NUL: the length is known */
    int ok = skd_write_all(fd, &kind, 1) == 0 && skd_write_all(fd, text, n + 1) == 0;
    free(text);
    return ok ? CLI_OK : CLI_FAIL;
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
    /* The tarball is hostile input: libarchive reads it in a child without
     * privileges (src/cli/privsep.c). Its answer is one byte (the archive
     * kind the engines need) and the manifest's text, printed as it is. */
    char *reply = NULL;
    size_t len = 0;
    struct import_job job = {argv[2], argv[3], open(argv[3], O_RDONLY | O_CLOEXEC)};
    if (job.tar_fd < 0) {
        fprintf(stderr, "%s: image import: %s: %s (%s)\n", cli->prog, argv[3], strerror(errno),
                skd_errcode(errno == ENOENT ? SKD_ENOENT : SKD_EINVAL));
        return CLI_FAIL;
    }
    int rc = skd__cli_unprivileged(cli, import_child, &job, &reply, &len, 1 << 20);
    close(job.tar_fd);
    if (rc != CLI_OK)
        return CLI_FAIL;
    if (len < 1 || (reply[0] != 'e' && reply[0] != 'a')) {
        fprintf(stderr, "%s: image import: no answer from the import\n", cli->prog);
        free(reply);
        return CLI_FAIL;
    }
    if (strcmp(engine, "none") != 0 &&
        load_into_engines(cli, engine, argv[2], argv[3], reply[0] == 'a') != CLI_OK) {
        free(reply);
        return CLI_FAIL;
    }
    fwrite(reply + 1, 1, len - 1, stdout);
    fflush(stdout);
    free(reply);
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
