/*
 * Housekeeping for the container engines, outside any one run: removing
 * containers a crashed skilld left behind, and loading an image tarball
 * into an engine so that one tarball serves native, docker and podman.
 *
 * Trust: the engine is trusted; the image tarball is the operator's
 * choice (the allow-list still decides which image a run may use). Only
 * containers labelled skilld=1 are ever touched.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sandbox/container/container.h"
#include "sandbox/provider.h"
#include "skilld/log.h"
#include "skilld/util.h"

#define ADMIN_TIMEOUT_MS 30000
#define LOAD_TIMEOUT_MS 600000
#define REAP_BATCH 32

static int engine_name_ok(const char *engine)
{
    return engine && (strcmp(engine, "docker") == 0 || strcmp(engine, "podman") == 0);
}

/* Remove up to REAP_BATCH listed container ids. */
static int remove_ids(const skd__engine *e, char **ids, int n, skd__ctr_cmd *r)
{
    const char *args[REAP_BATCH + 3];
    int k = 0;
    args[k++] = "rm";
    args[k++] = "-f";
    for (int i = 0; i < n; i++)
        args[k++] = ids[i];
    args[k] = NULL;
    if (skd__ctr_run(e, args, ADMIN_TIMEOUT_MS, r, NULL) != 0 || r->status != 0) {
        skd_log(SKD_LOG_WARN, "%s: removing leftover containers failed: %s", e->name,
                skd__ctr_errline(r->errout));
        return 0;
    }
    return n;
}

/* Remove a batch of containers, then what podman runs leave outside the
 * engine (the per-run cgroup parent and working directory). */
static int remove_batch(const skd__engine *e, char **ids, char **runs, int n, skd__ctr_cmd *r)
{
    int removed = remove_ids(e, ids, n, r);
    if (removed > 0)
        for (int i = 0; i < n; i++)
            if (strlen(runs[i]) == SKD_UUID_LEN &&
                strspn(runs[i], "0123456789abcdef-") == SKD_UUID_LEN) {
                if (strcmp(e->name, "podman") == 0)
                    skd__ctr_cg_remove(runs[i]);
                skd__ctr_rundir_remove(runs[i]); /* docker too: a networkEnabled run's files */
            }
    return removed;
}

int skd__containers_reap_leftovers(const char *engine, int including_live)
{
    skd__engine e;
    skd_err err = {0};
    if (!engine_name_ok(engine))
        return SKD_EINVAL;
    if (skd__engine_resolve(engine, &e, &err) != 0)
        return SKD_ESANDBOX;
    skd__ctr_cmd *r = calloc(1, sizeof(*r));
    char *list = NULL;
    int removed = 0, rc = 0;
    if (!r)
        return SKD_ENOMEM;
    /* docker's ps template has .Label "k"; podman's has a map .Labels. */
    const char *fmt = strcmp(engine, "docker") == 0
                          ? "{{.ID}} {{.Label \"skilld.run\"}} {{.Label \"skilld.owner\"}}"
                          : "{{.ID}} {{index .Labels \"skilld.run\"}} "
                            "{{index .Labels \"skilld.owner\"}}";
    const char *args[] = {"ps", "-a", "--filter", "label=skilld=1", "--format", fmt, NULL};
    if (skd__ctr_run(&e, args, ADMIN_TIMEOUT_MS, r, &err) != 0 || r->status != 0) {
        rc = SKD_ESANDBOX;
        goto out;
    }
    /* The list is parsed from a copy: r is reused for the removals. */
    if (!(list = strdup(r->out))) {
        rc = SKD_ENOMEM;
        goto out;
    }
    char *ids[REAP_BATCH], *runs[REAP_BATCH];
    int n = 0;
    char *save = NULL;
    for (char *line = strtok_r(list, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *fields[3] = {line, "", ""};
        for (int f = 1; f < 3; f++) {
            char *sp = strchr(fields[f - 1], ' ');
            if (!sp)
                break;
            *sp = '\0';
            fields[f] = sp + 1;
        }
        if (!*line || strspn(line, "0123456789abcdef") != strlen(line))
            continue;
        if (!including_live && *fields[2] && skd__ctr_owner_alive(fields[2]))
            continue;
        ids[n] = line;
        runs[n++] = fields[1];
        if (n == REAP_BATCH) {
            removed += remove_batch(&e, ids, runs, n, r);
            n = 0;
        }
    }
    if (n > 0)
        removed += remove_batch(&e, ids, runs, n, r);
    if (removed > 0)
        skd_log(SKD_LOG_INFO, "%s: removed %d leftover skilld container(s)", engine, removed);
out:
    free(list);
    free(r);
    return rc ? rc : removed;
}

void skd__containers_reap_once(const char *engine)
{
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    static int done_docker, done_podman;
    if (!engine_name_ok(engine))
        return;
    int *done = strcmp(engine, "docker") == 0 ? &done_docker : &done_podman;
    pthread_mutex_lock(&mu); /* held across the reap: a second caller waits for it */
    if (!*done) {
        *done = 1;
        skd__containers_reap_leftovers(engine, 0);
    }
    pthread_mutex_unlock(&mu);
}

/* From `load` output, the name or id of the image it loaded (last
 * "Loaded image: X" or "Loaded image ID: X" line). Writes into out. */
static int loaded_name(const char *text, char *out, size_t cap)
{
    static const char *const keys[] = {"Loaded image: ", "Loaded image ID: ", "Loaded image(s): "};
    int found = 0;
    for (const char *line = text; line && *line;) {
        const char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
            size_t kl = strlen(keys[k]);
            if (len > kl && strncmp(line, keys[k], kl) == 0 && len - kl < cap) {
                memcpy(out, line + kl, len - kl);
                out[len - kl] = '\0';
                char *comma = strchr(out, ','); /* podman may list several */
                if (comma)
                    *comma = '\0';
                found = 1;
            }
        }
        line = nl ? nl + 1 : NULL;
    }
    return found ? 0 : -1;
}

int skd__containers_image_load(const char *engine, const char *tar_path, const char *ref,
                               int is_archive, skd_err *err)
{
    skd__engine e;
    int rc;
    if (!engine_name_ok(engine))
        return skd_err_set(err, SKD_EINVAL, "unknown container engine '%s'", engine ? engine : "");
    if (!ref || !*ref || ref[0] == '-' || !tar_path || tar_path[0] == '-')
        return skd_err_set(err, SKD_EINVAL, "bad image name or path");
    if ((rc = skd__engine_resolve(engine, &e, err)) != 0)
        return rc;
    /* The engine's client runs in "/" (skd__ctr_fork_exec): a relative
     * path would name another file there. */
    char abs[PATH_MAX];
    if (!realpath(tar_path, abs))
        return skd_err_set(err, SKD_ENOENT, "%s: %s", tar_path, strerror(errno));
    tar_path = abs;
    skd__ctr_cmd *r = calloc(1, sizeof(*r));
    if (!r)
        return skd_err_set(err, SKD_ENOMEM, "out of memory");
    if (!is_archive) {
        const char *args[] = {"import", tar_path, ref, NULL};
        if ((rc = skd__ctr_run(&e, args, LOAD_TIMEOUT_MS, r, err)) == 0 && r->status != 0)
            rc = skd_err_set(err, SKD_ESANDBOX, "%s import failed: %s", engine,
                             skd__ctr_errline(r->errout));
        goto out;
    }
    const char *load[] = {"load", "-i", tar_path, NULL};
    if ((rc = skd__ctr_run(&e, load, LOAD_TIMEOUT_MS, r, err)) != 0)
        goto out;
    if (r->status != 0) {
        rc = skd_err_set(err, SKD_ESANDBOX, "%s load failed: %s", engine,
                         skd__ctr_errline(r->errout));
        goto out;
    }
    char loaded[512];
    if (loaded_name(r->out, loaded, sizeof(loaded)) != 0) {
        rc = skd_err_set(err, SKD_ESANDBOX, "%s load did not say which image it loaded", engine);
        goto out;
    }
    const char *tag[] = {"tag", loaded, ref, NULL};
    if ((rc = skd__ctr_run(&e, tag, ADMIN_TIMEOUT_MS, r, err)) == 0 && r->status != 0)
        rc = skd_err_set(err, SKD_ESANDBOX, "%s tag %s %s failed: %s", engine, loaded, ref,
                         skd__ctr_errline(r->errout));
out:
    free(r);
    if (rc == SKD_ETIMEOUT)
        rc = SKD_ESANDBOX;
    return rc;
}
