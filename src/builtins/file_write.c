/*
 * file_write: write a file of the caller's workspace.
 *
 * Input {path, content, encoding utf8|base64, mode overwrite|append|create,
 * mkdirs?}; result {success, path, bytes}.
 *   overwrite  atomic: a temporary file in the same directory is written,
 *              fsynced and renamed over the target, and the directory is
 *              fsynced, so a crash leaves the old or the new file.
 *   create     the same, but published with linkat, which fails when the
 *              name exists (already_exists): never half a file either.
 *   append     appends to the existing file (created when missing).
 * Every mode runs under the workspace lock and checks the quota
 * (SKILLS_WORKSPACE_QUOTA_BYTES) against a fresh walk of the workspace, so
 * many small appends, or writers racing each other, cannot pass it. The
 * content may not exceed SKILLS_MAX_FILE_BYTES. Targets that are symlinks,
 * special files or files with several hard links are refused (forbidden).
 */
#include "builtins/builtins.h"
#include "builtins/fileskill.h"
#include "skilld/workspace.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char schema_text[] =
    "{\"type\":\"object\",\"additionalProperties\":false,\"required\":[\"path\",\"content\"],"
    "\"properties\":{"
    "\"path\":{\"type\":\"string\",\"description\":\"file path relative to the workspace\"},"
    "\"content\":{\"type\":\"string\",\"description\":\"text, or base64 of the bytes\"},"
    "\"encoding\":{\"type\":\"string\",\"enum\":[\"utf8\",\"base64\"],\"default\":\"utf8\"},"
    "\"mode\":{\"type\":\"string\",\"enum\":[\"overwrite\",\"append\",\"create\"],"
    "\"default\":\"overwrite\"},"
    "\"mkdirs\":{\"type\":\"boolean\",\"default\":false,"
    "\"description\":\"create missing parent directories\"}}}";

enum wmode { W_OVERWRITE, W_APPEND, W_CREATE };

struct wjob {
    const char *path; /* client path, borrowed */
    const char *data; /* bytes to write, borrowed */
    size_t len;
    enum wmode mode;
    int dirfd; /* parent directory */
    char name[SKD_WS_NAME_MAX + 1];
};

static int io_err(int e, const char *path, skd_err *err)
{
    if (e == ENOSPC || e == EDQUOT)
        return skd_err_set(err, SKD_EQUOTA, "%s: no space left on the device", path);
    if (e == EFBIG)
        return skd_err_set(err, SKD_ETOOBIG, "%s: the file is too large", path);
    return skd_err_set(err, SKD_EIO, "%s: %s", path, strerror(e));
}

/* What the target is now: 0 absent, 1 a regular file of *size bytes, or a
 * negative SKD_E* for what may not be written. */
static int inspect_target(const struct wjob *j, uint64_t *size, skd_err *err)
{
    struct stat st;
    *size = 0;
    if (fstatat(j->dirfd, j->name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
        if (errno == ENOENT)
            return 0;
        return io_err(errno, j->path, err);
    }
    if (S_ISDIR(st.st_mode))
        return skd_err_set(err, SKD_EISDIR, "%s: is a directory", j->path);
    if (S_ISLNK(st.st_mode))
        return skd_err_set(err, SKD_EFORBIDDEN, "%s: is a symbolic link", j->path);
    if (!S_ISREG(st.st_mode))
        return skd_err_set(err, SKD_EFORBIDDEN, "%s: is not a regular file", j->path);
    if (st.st_nlink > 1)
        return skd_err_set(err, SKD_EFORBIDDEN,
                           "%s: has several hard links; files with several links are refused",
                           j->path);
    *size = (uint64_t)st.st_size;
    return 1;
}

/* Write the content to a new temporary file in the target's directory.
 * Returns the fd with tmp holding its name, or a negative SKD_E*. */
static int write_temp(skd_workspace *ws, const struct wjob *j, char tmp[64], skd_err *err)
{
    unsigned char rnd[8];
    for (int attempt = 0; attempt < 8; attempt++) {
        if (skd_random(rnd, sizeof(rnd)))
            return skd_err_set(err, SKD_EINTERNAL, "no randomness for a temporary name");
        snprintf(tmp, 64, ".skd-tmp-%02x%02x%02x%02x%02x%02x%02x%02x", rnd[0], rnd[1], rnd[2],
                 rnd[3], rnd[4], rnd[5], rnd[6], rnd[7]);
        skd_err e2 = {0};
        int fd = skd_workspace_openat_in(ws, j->dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL, 0600, &e2);
        if (fd == SKD_EEXISTS)
            continue;
        if (fd < 0) {
            *err = e2;
            return fd;
        }
        if (skd_write_all(fd, j->data, j->len) != 0 || fsync(fd) != 0) {
            int rc = io_err(errno, j->path, err);
            close(fd);
            unlinkat(j->dirfd, tmp, 0);
            return rc;
        }
        return fd;
    }
    return skd_err_set(err, SKD_EIO, "%s: no free temporary name", j->path);
}

/* overwrite and create: temporary file, then rename (or link) into place. */
static int publish(skd_workspace *ws, const struct wjob *j, skd_err *err)
{
    char tmp[64];
    int fd = write_temp(ws, j, tmp, err);
    if (fd < 0)
        return fd;
    close(fd);
    int rc = 0;
    if (j->mode == W_CREATE) {
        /* linkat fails with EEXIST instead of replacing: create stays atomic. */
        if (linkat(j->dirfd, tmp, j->dirfd, j->name, 0) != 0)
            rc = errno == EEXIST ? skd_err_set(err, SKD_EEXISTS, "%s: already exists", j->path)
                                 : io_err(errno, j->path, err);
        unlinkat(j->dirfd, tmp, 0);
    } else if (renameat(j->dirfd, tmp, j->dirfd, j->name) != 0) {
        rc = errno == EISDIR ? skd_err_set(err, SKD_EISDIR, "%s: is a directory", j->path)
                             : io_err(errno, j->path, err);
        unlinkat(j->dirfd, tmp, 0);
    }
    if (rc == 0 && fsync(j->dirfd) != 0)
        rc = io_err(errno, j->path, err);
    return rc;
}

static int append(skd_workspace *ws, const struct wjob *j, skd_err *err)
{
    int fd =
        skd_workspace_openat_in(ws, j->dirfd, j->name, O_WRONLY | O_APPEND | O_CREAT, 0600, err);
    if (fd < 0)
        return fd;
    int rc = 0;
    if (skd_write_all(fd, j->data, j->len) != 0 || fsync(fd) != 0)
        rc = io_err(errno, j->path, err);
    close(fd);
    return rc;
}

static uint64_t max_entries_of(const skd_ctx *ctx)
{
    return (uint64_t)skd_config_int(ctx->cfg, "SKILLS_WORKSPACE_MAX_ENTRIES");
}

/* Under the workspace lock: check the target and the quota, then write.
 * pre: the workspace measured under this lock already (the directories
 * this call made included), or NULL to measure it here; made: how many
 * directories this call made for it. */
static int write_locked(const skd_ctx *ctx, struct wjob *j, const skd_ws_usage *pre, uint64_t made,
                        skd_err *err)
{
    uint64_t old = 0, used = 0;
    int kind = inspect_target(j, &old, err);
    if (kind < 0)
        return kind;
    if (kind == 1 && j->mode == W_CREATE)
        return skd_err_set(err, SKD_EEXISTS, "%s: already exists", j->path);
    /* Every entry counts once (a directory's blocks are not in bytes); a
     * new name is one more, a rewrite none. The walk stops past the bound. */
    uint64_t max_entries = max_entries_of(ctx);
    skd_ws_usage u;
    int rc = 0;
    if (pre)
        u = *pre;
    else if ((rc = skd_workspace_usage_sweep(skd_workspace_fd(ctx->ws), max_entries, &u, err)))
        return rc;
    used = u.bytes;
    if (kind == 0 && u.entries > max_entries)
        return skd_err_set(err, SKD_EQUOTA,
                           "the workspace holds more than %llu files, directories and links "
                           "(SKILLS_WORKSPACE_MAX_ENTRIES); remove some first",
                           (unsigned long long)max_entries);
    if (kind == 0 && u.entries + 1 > max_entries)
        return skd_err_set(err, SKD_EQUOTA,
                           "a new file would bring the workspace to %llu files, directories and "
                           "links; SKILLS_WORKSPACE_MAX_ENTRIES is %llu",
                           (unsigned long long)(u.entries + 1), (unsigned long long)max_entries);
    /* overwrite replaces the old bytes; append and create add to them.
     * Sandboxed code may change files meanwhile, hence the guard. */
    if (j->mode == W_OVERWRITE)
        used = used > old ? used - old : 0;
    uint64_t after = used + j->len;
    uint64_t quota = skd__file_quota_bytes(ctx);
    if (after > quota)
        return skd_err_set(err, SKD_EQUOTA,
                           "writing %zu bytes would bring the workspace to %llu bytes; "
                           "the quota is %llu",
                           j->len, (unsigned long long)after, (unsigned long long)quota);
    /* Every tenant within its quota can still fill the disk together: the
     * store's reserve is never given out. */
    if ((rc = skd_workspace_reserve_check(
             ctx->ws, j->len + SKD_WS_ENTRY_BYTES * (made + (kind == 0)),
             (uint64_t)skd_config_int(ctx->cfg, "SKILLS_DATA_RESERVE_BYTES"), err)) != 0)
        return rc;
    return j->mode == W_APPEND ? append(ctx->ws, j, err) : publish(ctx->ws, j, err);
}

static json_t *handle(const skd_ctx *ctx, const json_t *input, void *udata)
{
    (void)udata;
    skd_err err = {0};
    struct wjob j = {.dirfd = -1};
    unsigned char *decoded = NULL;
    json_t *content = json_object_get(input, "content");
    const char *mode = skd_json_str(input, "mode", "overwrite");
    uint64_t max = skd__file_max_bytes(ctx);
    int rc;

    if ((rc = skd__file_path(input, 0, &j.path, &err)) != 0)
        goto out;
    j.mode = strcmp(mode, "append") == 0   ? W_APPEND
             : strcmp(mode, "create") == 0 ? W_CREATE
                                           : W_OVERWRITE;
    if (!json_is_string(content)) {
        rc = skd_err_set(&err, SKD_EINVAL, "content must be a string");
        goto out;
    }
    if (strcmp(skd_json_str(input, "encoding", "utf8"), "base64") == 0) {
        if ((rc = skd__base64_decode(json_string_value(content), json_string_length(content),
                                     (size_t)max, &decoded, &j.len, &err)) != 0)
            goto out;
        j.data = (const char *)decoded;
    } else {
        j.data = json_string_value(content);
        j.len = json_string_length(content);
        if (j.len > max) {
            rc = skd_err_set(&err, SKD_ETOOBIG, "content is %zu bytes; the limit is %llu", j.len,
                             (unsigned long long)max);
            goto out;
        }
    }
    if (!skd_json_bool(input, "mkdirs", 0)) {
        j.dirfd = skd_workspace_open_parent(ctx->ws, j.path, 0, j.name, &err);
        if (j.dirfd < 0) {
            rc = j.dirfd;
            goto out;
        }
        if ((rc = skd_workspace_lock(ctx->ws, &err)) != 0)
            goto out;
        rc = write_locked(ctx, &j, NULL, 0, &err);
        skd_workspace_unlock(ctx->ws);
        goto out;
    }
    /* mkdirs: measured under the lock first, so that the directories it
     * makes are held to SKILLS_WORKSPACE_MAX_ENTRIES too (one slot kept for
     * the file), not made and then refused. */
    if ((rc = skd_workspace_lock(ctx->ws, &err)) != 0)
        goto out;
    uint64_t max_entries = max_entries_of(ctx);
    skd_ws_usage u;
    if ((rc = skd_workspace_usage_sweep(skd_workspace_fd(ctx->ws), max_entries, &u, &err)) == 0) {
        uint64_t budget = u.entries + 1 <= max_entries ? max_entries - u.entries - 1 : 0;
        uint64_t before = budget;
        j.dirfd = skd_workspace_open_parent_within(ctx->ws, j.path, &budget, j.name, &err);
        if (j.dirfd < 0) {
            rc = j.dirfd;
        } else {
            u.entries += before - budget;
            rc = write_locked(ctx, &j, &u, before - budget, &err);
        }
    }
    skd_workspace_unlock(ctx->ws);
out:
    free(decoded);
    if (j.dirfd >= 0)
        close(j.dirfd);
    if (rc)
        return skd_result_from_err(&err);
    if (ctx->usage) /* metering: the bytes this call wrote */
        ctx->usage->workspace_bytes += (int64_t)j.len;
    return json_pack("{s:b, s:s, s:I}", "success", 1, "path", j.path, "bytes", (json_int_t)j.len);
}

void skd__builtin_file_write_def(skd_skill_def *d)
{
    d->name = "file_write";
    d->version = "1.0.0";
    d->description = "Write a file of the caller's workspace (overwrite atomically, append, or "
                     "create when absent); SKILLS_MAX_FILE_BYTES per write, within the "
                     "workspace quota.";
    d->input_schema = skd__file_schema(schema_text);
    d->mode = SKD_MODE_DIRECT;
    d->handler = handle;
}
