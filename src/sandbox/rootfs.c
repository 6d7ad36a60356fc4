/*
 * Image names to root filesystems. "host" is the host image (built by the
 * native provider from the host's /usr and a minimal /etc); any other image
 * is "name[:tag]" imported by `skilld image import` into
 * $DATA_DIR/images/<name>/<tag>/rootfs and may run only when listed in
 * SKILLS_ALLOWED_SANDBOX_IMAGES. Names come from clients: they are checked
 * character by character before they touch a path.
 */
#include "skilld/sandbox.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define NAME_MAX_LEN 128
#define TAG_MAX_LEN 128

static int name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
}

/* name: components of [a-z0-9._-] separated by '/', none empty, "." or "..",
 * none starting with '.' or '-'. */
static int name_valid(const char *s, size_t n)
{
    if (n == 0 || n > NAME_MAX_LEN)
        return 0;
    size_t start = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && s[i] != '/') {
            if (!name_char(s[i]))
                return 0;
            continue;
        }
        if (i == start || s[start] == '.' || s[start] == '-')
            return 0;
        start = i + 1;
    }
    return 1;
}

static int tag_valid(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > TAG_MAX_LEN || s[0] == '.' || s[0] == '-')
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!name_char(s[i]) && !(s[i] >= 'A' && s[i] <= 'Z'))
            return 0;
    return 1;
}

/* 1 when "name:tag" is in the comma-separated allowed list. An entry without
 * a tag allows every tag of the name; "*" allows every image. */
static int allowed_image(const char *allowed, const char *name, const char *tag)
{
    if (!allowed)
        return 0;
    size_t nl = strlen(name), tl = strlen(tag);
    const char *p = allowed;
    while (*p) {
        while (*p == ',' || *p == ' ')
            p++;
        const char *e = p;
        while (*e && *e != ',')
            e++;
        size_t l = (size_t)(e - p);
        while (l && p[l - 1] == ' ')
            l--;
        if (l == 1 && p[0] == '*')
            return 1;
        if (l == nl && memcmp(p, name, nl) == 0)
            return 1;
        if (l == nl + 1 + tl && memcmp(p, name, nl) == 0 && p[nl] == ':' &&
            memcmp(p + nl + 1, tag, tl) == 0)
            return 1;
        p = e;
    }
    return 0;
}

int skd_sandbox_image_rootfs(const char *data_dir, const char *allowed, const char *image,
                             char **rootfs, skd_err *err)
{
    *rootfs = NULL;
    if (!image || !*image || strcmp(image, "host") == 0)
        return 0;
    char name[NAME_MAX_LEN + 1];
    const char *colon = strrchr(image, ':');
    const char *tag = "latest";
    size_t nl = colon ? (size_t)(colon - image) : strlen(image);
    if (colon && strchr(colon, '/'))
        return skd_err_set(err, SKD_EINVAL, "image name '%.64s' is not valid", image);
    if (colon)
        tag = colon + 1;
    if (!name_valid(image, nl) || !tag_valid(tag))
        return skd_err_set(err, SKD_EINVAL,
                           "image name '%.64s' is not valid (name[:tag], lower-case name)", image);
    memcpy(name, image, nl);
    name[nl] = '\0';
    if (!allowed_image(allowed, name, tag))
        return skd_err_set(err, SKD_EFORBIDDEN,
                           "image %s:%s is not in SKILLS_ALLOWED_SANDBOX_IMAGES", name, tag);
    char path[PATH_MAX];
    int n = snprintf(path, sizeof(path), "%s/images/%s/%s/rootfs", data_dir ? data_dir : ".", name,
                     tag);
    if (n < 0 || (size_t)n >= sizeof(path))
        return skd_err_set(err, SKD_EINVAL, "image path is too long");
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
        return skd_err_set(err, SKD_ENOENT, "image %s:%s is not imported (skilld image import)",
                           name, tag);
    *rootfs = realpath(path, NULL);
    if (!*rootfs)
        return skd_err_set(err, SKD_EIO, "image %s:%s: %s", name, tag, strerror(errno));
    return 0;
}
