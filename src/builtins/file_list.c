/*
 * file_list: list a directory of the caller's workspace.
 *
 * Input {path?, recursive?}; result {success, path, entries: [{path, type,
 * size}], truncated, skipped}. Entry paths are relative to the workspace
 * root, ready to pass to file_read. Types: file, directory, symlink, other
 * (FIFO, socket, device). Symlinks are reported, never followed; every
 * directory descended into is opened beneath its parent with openat2. The
 * listing stops at LIST_MAX entries (truncated:true) and LIST_MAX_DEPTH
 * levels; names that are not valid UTF-8 cannot be put in JSON and are
 * counted in "skipped". Entries are sorted by path.
 */
#include "builtins/builtins.h"
#include "builtins/fileskill.h"
#include "skilld/workspace.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define LIST_MAX 10000
#define LIST_MAX_DEPTH 64
#define ENTRY_PATH_MAX 4096

static const char schema_text[] =
    "{\"type\":\"object\",\"additionalProperties\":false,"
    "\"properties\":{"
    "\"path\":{\"type\":\"string\",\"description\":\"directory relative to the workspace "
    "(default: the workspace itself)\"},"
    "\"recursive\":{\"type\":\"boolean\",\"default\":false}}}";

struct entry {
    char *path; /* owned */
    const char *type;
    uint64_t size;
};

struct listing {
    skd_workspace *ws;
    struct entry *v;
    size_t n, cap;
    int truncated;
    size_t skipped;
};

static int add(struct listing *l, const char *path, const char *type, uint64_t size, skd_err *err)
{
    if (l->n == LIST_MAX) {
        l->truncated = 1;
        return 0;
    }
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        struct entry *v = realloc(l->v, cap * sizeof(*v));
        if (!v)
            return skd_err_set(err, SKD_ENOMEM, "out of memory");
        l->v = v;
        l->cap = cap;
    }
    if (!(l->v[l->n].path = strdup(path)))
        return skd_err_set(err, SKD_ENOMEM, "out of memory");
    l->v[l->n].type = type;
    l->v[l->n].size = size;
    l->n++;
    return 0;
}

static const char *type_of(mode_t m)
{
    return S_ISREG(m) ? "file" : S_ISDIR(m) ? "directory" : S_ISLNK(m) ? "symlink" : "other";
}

/* List dirfd (closed here) whose workspace-relative path is prefix. */
static int list_dir(struct listing *l, int dirfd, const char *prefix, int recursive, int depth,
                    skd_err *err)
{
    DIR *d = fdopendir(dirfd);
    int rc = 0;
    if (!d) {
        close(dirfd);
        return skd_err_set(err, SKD_EIO, "%s: %s", prefix, strerror(errno));
    }
    while (!l->truncated) {
        errno = 0;
        struct dirent *de = readdir(d);
        if (!de) {
            if (errno)
                rc = skd_err_set(err, SKD_EIO, "%s: %s", prefix, strerror(errno));
            break;
        }
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        char path[ENTRY_PATH_MAX];
        struct stat st;
        int n = snprintf(path, sizeof(path), "%s%s%s", prefix, *prefix ? "/" : "", de->d_name);
        if (n < 0 || (size_t)n >= sizeof(path) || !skd_utf8_valid(path, (size_t)n) ||
            fstatat(dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
            l->skipped++;
            continue;
        }
        if ((rc = add(l, path, type_of(st.st_mode), S_ISREG(st.st_mode) ? (uint64_t)st.st_size : 0,
                      err)) != 0)
            break;
        if (!recursive || !S_ISDIR(st.st_mode))
            continue;
        if (depth >= LIST_MAX_DEPTH) {
            l->truncated = 1;
            break;
        }
        skd_err e2 = {0};
        int sub = skd_workspace_openat_in(l->ws, dirfd, de->d_name, O_RDONLY | O_DIRECTORY, 0, &e2);
        if (sub < 0) {
            l->skipped++; /* replaced meanwhile, or a name we refuse */
            continue;
        }
        if ((rc = list_dir(l, sub, path, recursive, depth + 1, err)) != 0)
            break;
    }
    closedir(d);
    return rc;
}

static int by_path(const void *a, const void *b)
{
    return strcmp(((const struct entry *)a)->path, ((const struct entry *)b)->path);
}

/* "./a//b/" -> "a/b" (the prefix of entry paths). */
static void normalise(const char *in, char *out, size_t cap)
{
    size_t o = 0;
    for (const char *p = in; *p;) {
        while (*p == '/')
            p++;
        const char *e = p;
        while (*e && *e != '/')
            e++;
        size_t k = (size_t)(e - p);
        if (k && !(k == 1 && *p == '.') && o + k + 2 <= cap) {
            if (o)
                out[o++] = '/';
            memcpy(out + o, p, k);
            o += k;
        }
        p = e;
    }
    out[o] = '\0';
}

static json_t *to_json(struct listing *l, const char *path)
{
    json_t *arr = json_array();
    if (!arr)
        return NULL;
    if (l->n) /* an empty listing has no array: qsort's NULL is undefined */
        qsort(l->v, l->n, sizeof(*l->v), by_path);
    for (size_t i = 0; i < l->n; i++) {
        json_t *e = json_pack("{s:s, s:s, s:I}", "path", l->v[i].path, "type", l->v[i].type, "size",
                              (json_int_t)l->v[i].size);
        if (!e || json_array_append_new(arr, e)) {
            json_decref(arr);
            return NULL;
        }
    }
    return json_pack("{s:b, s:s, s:o, s:b, s:I}", "success", 1, "path", path, "entries", arr,
                     "truncated", l->truncated, "skipped", (json_int_t)l->skipped);
}

static json_t *handle(const skd_ctx *ctx, const json_t *input, void *udata)
{
    (void)udata;
    skd_err err = {0};
    const char *path = NULL;
    char prefix[SKD_WS_PATH_MAX + 1];
    struct listing l = {.ws = ctx->ws};
    json_t *result = NULL;
    struct stat st;
    if (skd__file_path(input, 1, &path, &err))
        return skd_result_from_err(&err);
    int fd = skd_workspace_openat(ctx->ws, path, O_RDONLY, 0, &err);
    if (fd < 0)
        return skd_result_from_err(&err);
    if (fstat(fd, &st) != 0 || !S_ISDIR(st.st_mode)) {
        close(fd);
        return skd_result_error(SKD_ENOTDIR, "%s: is not a directory (use file_read)", path);
    }
    normalise(path, prefix, sizeof(prefix));
    if (list_dir(&l, fd, prefix, skd_json_bool(input, "recursive", 0), 0, &err))
        result = skd_result_from_err(&err);
    else if (!(result = to_json(&l, path)))
        result = skd_result_error(SKD_ENOMEM, "out of memory");
    for (size_t i = 0; i < l.n; i++)
        free(l.v[i].path);
    free(l.v);
    return result;
}

void skd__builtin_file_list_def(skd_skill_def *d)
{
    d->name = "file_list";
    d->version = "1.0.0";
    d->description = "List a directory of the caller's workspace (optionally recursively); "
                     "symlinks are reported, not followed.";
    d->input_schema = skd__file_schema(schema_text);
    d->mode = SKD_MODE_DIRECT;
    d->handler = handle;
}
