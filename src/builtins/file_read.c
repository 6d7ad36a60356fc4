/*
 * file_read: read a file of the caller's workspace.
 *
 * Input {path, encoding utf8|base64, offset?, length?}; result {success,
 * path, content, encoding, size, truncated}. At most SKILLS_MAX_FILE_BYTES
 * are returned per call: asking for more with "length" is too_large, and a
 * read without "length" of a larger file returns the first bytes with
 * truncated:true (read the rest with offset). The size limit is applied to
 * the open descriptor (fstat), never to the path. Content read as utf8 must
 * be valid UTF-8; other bytes need encoding base64.
 */
#include "builtins/builtins.h"
#include "builtins/fileskill.h"
#include "skilld/util.h"
#include "skilld/workspace.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char schema_text[] =
    "{\"type\":\"object\",\"additionalProperties\":false,\"required\":[\"path\"],"
    "\"properties\":{"
    "\"path\":{\"type\":\"string\",\"description\":\"file path relative to the workspace\"},"
    "\"encoding\":{\"type\":\"string\",\"enum\":[\"utf8\",\"base64\"],\"default\":\"utf8\","
    "\"description\":\"utf8 for text, base64 for any bytes\"},"
    "\"offset\":{\"type\":\"integer\",\"minimum\":0,\"description\":\"first byte to read\"},"
    "\"length\":{\"type\":\"integer\",\"minimum\":0,\"description\":\"bytes to read\"}}}";

/* Read up to want bytes at offset into buf; returns bytes read or -1. */
static ssize_t read_at(int fd, char *buf, size_t want, uint64_t offset)
{
    size_t got = 0;
    while (got < want) {
        ssize_t r = pread(fd, buf + got, want - got, (off_t)(offset + got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -1;
        if (r == 0)
            break;
        got += (size_t)r;
    }
    return (ssize_t)got;
}

static json_t *make_result(const char *path, const char *data, size_t n, int base64, uint64_t size,
                           int truncated)
{
    json_t *content;
    if (base64) {
        size_t elen = 0;
        char *enc = skd__base64_encode((const unsigned char *)data, n, &elen);
        if (!enc)
            return skd_result_error(SKD_ENOMEM, "out of memory");
        content = json_stringn_nocheck(enc, elen);
        free(enc);
    } else {
        content = json_stringn(data, n);
    }
    if (!content)
        return skd_result_error(SKD_ENOMEM, "out of memory");
    return json_pack("{s:b, s:s, s:o, s:s, s:I, s:b}", "success", 1, "path", path, "content",
                     content, "encoding", base64 ? "base64" : "utf8", "size", (json_int_t)size,
                     "truncated", truncated);
}

static json_t *handle(const skd_ctx *ctx, const json_t *input, void *udata)
{
    (void)udata;
    skd_err err = {0};
    const char *path = NULL;
    json_t *result = NULL;
    char *buf = NULL;
    int fd = -1;
    struct stat st;
    if (skd__file_path(input, 0, &path, &err))
        return skd_result_from_err(&err);
    int base64 = strcmp(skd_json_str(input, "encoding", "utf8"), "base64") == 0;
    uint64_t max = skd__file_max_bytes(ctx);
    uint64_t offset = skd__file_uint(input, "offset", 0);
    int has_length = json_object_get(input, "length") != NULL;
    uint64_t length = skd__file_uint(input, "length", 0);
    if (has_length && length > max)
        return skd_result_error(SKD_ETOOBIG, "length %llu exceeds SKILLS_MAX_FILE_BYTES (%llu)",
                                (unsigned long long)length, (unsigned long long)max);
    fd = skd_workspace_openat_stat(ctx->ws, path, O_RDONLY, 0, &st, &err);
    if (fd < 0)
        return skd_result_from_err(&err);
    if (S_ISDIR(st.st_mode)) {
        result = skd_result_error(SKD_EISDIR, "%s: is a directory (use file_list)", path);
        goto out;
    }
    uint64_t size = (uint64_t)st.st_size;
    uint64_t avail = offset < size ? size - offset : 0;
    uint64_t range = has_length && length < avail ? length : avail;
    size_t want = (size_t)(range < max ? range : max);
    if (!(buf = malloc(want + 1))) {
        result = skd_result_error(SKD_ENOMEM, "out of memory");
        goto out;
    }
    ssize_t got = read_at(fd, buf, want, offset);
    if (got < 0) {
        result = skd_result_error(SKD_EIO, "%s: %s", path, strerror(errno));
        goto out;
    }
    size_t n = (size_t)got;
    if (!base64 && n == want && want < range)
        n = skd_utf8_cut(buf, n); /* cut at the cap: do not split a character */
    if (!base64 && !skd_utf8_valid(buf, n)) {
        result = skd_result_error(SKD_EINVAL,
                                  "%s is not valid UTF-8 text; read it with encoding base64", path);
        goto out;
    }
    result = make_result(path, buf, n, base64, size, n < range);
out:
    free(buf);
    if (fd >= 0)
        close(fd);
    return result;
}

void skd__builtin_file_read_def(skd_skill_def *d)
{
    d->name = "file_read";
    d->version = "1.0.0";
    d->description = "Read a file of the caller's workspace as UTF-8 text or base64, "
                     "at most SKILLS_MAX_FILE_BYTES per call (use offset/length for more).";
    d->input_schema = skd__file_schema(schema_text);
    d->mode = SKD_MODE_DIRECT;
    d->quick = 1; /* one bounded read; file_list is not: a listing may stat 10,000 entries */
    d->handler = handle;
}
