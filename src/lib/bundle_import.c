/*
 * Importing a SKILL.md bundle from a tarball (POST /v1/skills with
 * Content-Type application/x-tar, and skills_register {bundleTar}).
 *
 * The archive is hostile: it is extracted with the image importer's layer
 * code (src/sandbox/image/image_layer.c: every entry placed beneath a directory
 * fd one component at a time, absolute names, ".." and paths through
 * symlinks refused, set-id bits stripped, devices skipped) into a fresh
 * staging directory under DATA_DIR/bundles, within the Skills extension's
 * limits. The bundle is SKILL.md at the archive's root, or in its single
 * top-level directory. Its front matter names it; the folder then moves to
 * DATA_DIR/bundles/<owner tag>/<name> and is registered for the actor like
 * any folder (src/lib/custom.c), so a symlink that points out of it is
 * refused by the scan as well.
 */
#include "sandbox/image/image_internal.h"
#include "skilld/bundle.h"
#include "skilld/custom.h"
#include "skilld/json.h"
#include "skilld/util.h"

#include <archive.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* mkdir -p for base/bundles/tag (each 0755: the sandbox reads bundles
 * through their "other" bits). */
static int bundles_dir(const char *data, const char *tag, char *out, size_t cap, skd_err *err)
{
    char *abs = realpath(data, NULL);
    if (!abs)
        return skd_err_set(err, SKD_EIO, "DATA_DIR %s: %s", data, strerror(errno));
    int n = snprintf(out, cap, "%s/bundles", abs);
    free(abs);
    if (n < 0 || (size_t)n >= cap)
        return skd_err_set(err, SKD_EPATH, "DATA_DIR is too long");
    if (mkdir(out, 0755) != 0 && errno != EEXIST)
        return skd_err_set(err, SKD_EIO, "mkdir %s: %s", out, strerror(errno));
    size_t len = strlen(out);
    if (snprintf(out + len, cap - len, "/%s", tag) >= (int)(cap - len))
        return skd_err_set(err, SKD_EPATH, "DATA_DIR is too long");
    if (mkdir(out, 0755) != 0 && errno != EEXIST)
        return skd_err_set(err, SKD_EIO, "mkdir %s: %s", out, strerror(errno));
    return 0;
}

/* a/b into out; -1 when it does not fit. */
static int join(char *out, size_t cap, const char *a, const char *b)
{
    int n = snprintf(out, cap, "%s/%s", a, b);
    return n < 0 || (size_t)n >= cap ? -1 : 0;
}

static int extract(const char *dir, const void *data, size_t len, skd_err *err)
{
    struct archive *a = archive_read_new();
    if (!a)
        return skd_err_set(err, SKD_ENOMEM, "out of memory");
    archive_read_support_format_tar(a);
    archive_read_support_filter_gzip(a);
    int rc = 0;
    if (archive_read_open_memory(a, data, len) != ARCHIVE_OK) {
        rc = skd_err_set(err, SKD_EINVAL, "not a tar archive: %s", archive_error_string(a));
        archive_read_free(a);
        return rc;
    }
    int rootfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (rootfd < 0) {
        archive_read_free(a);
        return skd_err_set(err, SKD_EIO, "open %s: %s", dir, strerror(errno));
    }
    skd__layer_ctx c;
    skd__layer_ctx_init(&c, rootfd, SKD_BUNDLE_MAX_BYTES, 4 * SKD_BUNDLE_MAX_FILES, 0);
    rc = skd__layer_apply(&c, a, err);
    skd__layer_ctx_free(&c);
    close(rootfd);
    archive_read_free(a);
    return rc;
}

/* The folder holding SKILL.md: staging itself, or its one subdirectory. */
static int find_root(const char *staging, char *root, size_t cap, skd_err *err)
{
    struct stat st;
    char path[PATH_MAX];
    if (join(path, sizeof(path), staging, "SKILL.md"))
        return skd_err_set(err, SKD_EPATH, "path too long");
    if (lstat(path, &st) == 0)
        return skd_strlcpy(root, staging, cap) ? skd_err_set(err, SKD_EPATH, "path too long") : 0;
    DIR *d = opendir(staging);
    struct dirent *de;
    int dirs = 0, other = 0;
    char only[NAME_MAX + 1] = "";
    while (d && (de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        if (join(path, sizeof(path), staging, de->d_name) == 0 && lstat(path, &st) == 0 &&
            S_ISDIR(st.st_mode)) {
            dirs++;
            skd_strlcpy(only, de->d_name, sizeof(only));
        } else {
            other++;
        }
    }
    if (d)
        closedir(d);
    if (dirs != 1 || other)
        return skd_err_set(err, SKD_EINVAL,
                           "the archive holds no SKILL.md at its root or in a single top-level "
                           "folder");
    if (join(root, cap, staging, only) || join(path, sizeof(path), root, "SKILL.md"))
        return skd_err_set(err, SKD_EPATH, "path too long");
    if (lstat(path, &st) != 0)
        return skd_err_set(err, SKD_EINVAL, "the archive's folder %s holds no SKILL.md", only);
    return 0;
}

int skd_bundle_import_tar(skd_engine *e, const skd_actor *who, const void *data, size_t len,
                          int replace, skd_skill **skill, json_t **name_out, skd_err *err)
{
    char base[PATH_MAX], staging[PATH_MAX], root[PATH_MAX], final[PATH_MAX], old[PATH_MAX];
    char id[SKD_UUID_LEN + 1], tag[SKD_SHA256_HEX_LEN + 1];
    json_t *fm = NULL, *manifest = NULL;
    int rc;
    if (skill)
        *skill = NULL;
    if (name_out)
        *name_out = NULL;
    if (who->key_id && !(who->scopes & (SKD_SCOPE_EXECUTE | SKD_SCOPE_ADMIN)))
        return skd_err_set(err, SKD_EFORBIDDEN,
                           "registering a skill needs the skills:execute or skills:admin scope");
    /* One folder per owner: a key's bundles never share a path with
     * another's. */
    const char *owner = who->key_id ? who->key_id : (who->owner_key ? who->owner_key : "");
    skd_sha256_hex(owner, strlen(owner), tag);
    tag[16] = '\0';
    if ((rc = bundles_dir(skd_config_str(skd_engine_config(e), "DATA_DIR"), tag, base, sizeof(base),
                          err)) != 0)
        return rc;
    if ((rc = skd_uuid(id)) != 0)
        return skd_err_set(err, rc, "no randomness for a staging name");
    char leaf[64];
    snprintf(leaf, sizeof(leaf), ".import-%s", id);
    if (join(staging, sizeof(staging), base, leaf))
        return skd_err_set(err, SKD_EPATH, "DATA_DIR is too long");
    if (mkdir(staging, 0755) != 0)
        return skd_err_set(err, SKD_EIO, "mkdir %s: %s", staging, strerror(errno));
    if ((rc = extract(staging, data, len, err)) != 0 ||
        (rc = find_root(staging, root, sizeof(root), err)) != 0 ||
        (rc = skd__skill_folder_load(root, &fm, &manifest, err)) != 0)
        goto out;
    const char *name = skd_json_str(fm, "name", "");
    snprintf(leaf, sizeof(leaf), ".old-%s", id);
    if (join(final, sizeof(final), base, name) || join(old, sizeof(old), base, leaf)) {
        rc = skd_err_set(err, SKD_EPATH, "DATA_DIR is too long");
        goto out;
    }
    struct stat st;
    int exists = lstat(final, &st) == 0;
    if (exists && !replace) {
        rc = skd_err_set(err, SKD_EEXISTS, "a bundle %s was already imported; send replace", name);
        goto out;
    }
    if (exists && rename(final, old) != 0) {
        rc = skd_err_set(err, SKD_EIO, "rename %s: %s", final, strerror(errno));
        goto out;
    }
    if (rename(root, final) != 0) {
        rc = skd_err_set(err, SKD_EIO, "rename %s: %s", root, strerror(errno));
        if (exists)
            (void)rename(old, final);
        goto out;
    }
    rc = skd__custom_register_bundle(e, who, final, 1, replace, skill, err);
    if (rc) {
        skd__rm_tree_path(final);
        if (exists)
            (void)rename(old, final); /* the previous import stays served */
    } else if (exists) {
        skd__rm_tree_path(old);
    }
    if (rc == 0 && name_out)
        *name_out = json_string(name);
out:
    skd__rm_tree_path(staging);
    json_decref(fm);
    json_decref(manifest);
    return rc;
}
