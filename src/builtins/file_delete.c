/*
 * file_delete: remove a file or an empty directory of the caller's
 * workspace. Input {path}; result {success, path}.
 *
 * The name is removed from its parent directory, opened beneath the
 * workspace, with unlinkat: a symlink is removed itself (never followed),
 * a hard link loses only this name, and a FIFO or device node is removed
 * without being opened. The workspace itself cannot be deleted
 * (forbidden); a directory must be empty (not_empty).
 */
#include "builtins/builtins.h"
#include "builtins/fileskill.h"
#include "skilld/workspace.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char schema_text[] =
    "{\"type\":\"object\",\"additionalProperties\":false,\"required\":[\"path\"],"
    "\"properties\":{"
    "\"path\":{\"type\":\"string\","
    "\"description\":\"file or empty directory, relative to the workspace\"}}}";

static json_t *handle(const skd_ctx *ctx, const json_t *input, void *udata)
{
    (void)udata;
    skd_err err = {0};
    const char *path = NULL;
    char name[SKD_WS_NAME_MAX + 1];
    struct stat st;
    json_t *result = NULL;
    if (skd__file_path(input, 1, &path, &err))
        return skd_result_from_err(&err);
    if (skd_workspace_path_is_root(path))
        return skd_result_error(SKD_EFORBIDDEN, "the workspace itself cannot be deleted");
    int dirfd = skd_workspace_open_parent(ctx->ws, path, 0, name, &err);
    if (dirfd < 0)
        return skd_result_from_err(&err);
    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
        result = errno == ENOENT ? skd_result_error(SKD_ENOENT, "%s: not found", path)
                                 : skd_result_error(SKD_EIO, "%s: %s", path, strerror(errno));
        goto out;
    }
    int flags = S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0;
    if (unlinkat(dirfd, name, flags) != 0) {
        int e = errno;
        if (e == ENOTEMPTY || e == EEXIST)
            result = skd_result_error(SKD_ENOTEMPTY, "%s: the directory is not empty", path);
        else if (e == ENOENT)
            result = skd_result_error(SKD_ENOENT, "%s: not found", path);
        else if (e == EISDIR || e == ENOTDIR)
            result = skd_result_error(SKD_EIO, "%s: changed while being deleted", path);
        else
            result = skd_result_error(SKD_EIO, "%s: %s", path, strerror(e));
        goto out;
    }
    fsync(dirfd); /* best effort: the removal itself has happened */
    result = json_pack("{s:b, s:s}", "success", 1, "path", path);
out:
    close(dirfd);
    return result;
}

void skd__builtin_file_delete_def(skd_skill_def *d)
{
    d->name = "file_delete";
    d->version = "1.0.0";
    d->description = "Delete a file or an empty directory of the caller's workspace.";
    d->input_schema = skd__file_schema(schema_text);
    d->mode = SKD_MODE_DIRECT;
    d->handler = handle;
}
