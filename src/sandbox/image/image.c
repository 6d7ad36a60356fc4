/*
 * The image store: naming, the allow-list, resolving an image for a run,
 * and import / list / remove under $DATA_DIR/images/<name>/<tag>/.
 *
 * Trust: DATA_DIR comes from the operator's configuration. Image names and
 * tags come from callers and are validated to a small character set before
 * they become path components. Archives are hostile and handled by
 * image_format.c and image_layer.c. An import builds the image in a fresh
 * directory images/.import-XXXXXX and renames it into place with
 * RENAME_NOREPLACE, so a reader never sees half an image and two imports of
 * one name cannot both win. Removal renames the image away first, then
 * deletes it. Each import sweeps what a crash left behind (.remove-*, and
 * .import-* a day old).
 */
#include "skilld/image.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sandbox/image/image_format.h"
#include "skilld/buf.h"
#include "skilld/json.h"
#include "skilld/util.h"

#define MANIFEST "manifest.json"
#define MANIFEST_MAX (1 << 20)
#define STALE_IMPORT_S (24 * 3600)

/* ---- names -------------------------------------------------------------- */

static int is_lower_alnum(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9');
}

static int is_alnum(char ch)
{
    return is_lower_alnum(ch) || (ch >= 'A' && ch <= 'Z');
}

/* path-component: [a-z0-9]+ ((\.|_|__|-+)[a-z0-9]+)* */
static int valid_path_component(const char *s, size_t n)
{
    size_t i = 0;
    if (n == 0 || !is_lower_alnum(s[0]) || !is_lower_alnum(s[n - 1]))
        return 0;
    while (i < n) {
        if (is_lower_alnum(s[i])) {
            i++;
            continue;
        }
        size_t j = i;
        while (j < n && !is_lower_alnum(s[j]))
            j++;
        size_t sl = j - i; /* a separator run, followed by an alnum (s[n-1] is one) */
        int ok = (sl == 1 && (s[i] == '.' || s[i] == '_' || s[i] == '-')) ||
                 (sl == 2 && s[i] == '_' && s[i + 1] == '_') || strspn(s + i, "-") >= sl;
        if (!ok)
            return 0;
        i = j;
    }
    return 1;
}

/* domain: component(.component)*[:port], component [A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])? */
static int valid_domain(const char *s, size_t n)
{
    const char *colon = memchr(s, ':', n);
    size_t hn = colon ? (size_t)(colon - s) : n;
    if (colon) {
        size_t pn = n - hn - 1;
        if (pn == 0 || pn > 5 || strspn(colon + 1, "0123456789") < pn)
            return 0;
    }
    size_t i = 0;
    while (i <= hn) {
        size_t j = i;
        while (j < hn && s[j] != '.')
            j++;
        if (j == i || !is_alnum(s[i]) || !is_alnum(s[j - 1]))
            return 0;
        for (size_t k = i; k < j; k++)
            if (!is_alnum(s[k]) && s[k] != '-')
                return 0;
        i = j + 1;
    }
    return 1;
}

/* name: [domain/]component(/component)*; *has_domain set. */
static int valid_name(const char *s, size_t n, int *has_domain)
{
    *has_domain = 0;
    if (n == 0 || n > SKD_IMAGE_NAME_MAX)
        return 0;
    const char *slash = memchr(s, '/', n);
    size_t i = 0;
    if (slash) {
        size_t fl = (size_t)(slash - s);
        if ((memchr(s, '.', fl) || memchr(s, ':', fl) || (fl == 9 && !memcmp(s, "localhost", 9)))) {
            if (!valid_domain(s, fl))
                return 0;
            *has_domain = 1;
            i = fl + 1;
        }
    }
    while (i <= n) {
        const char *e = memchr(s + i, '/', n - i);
        size_t cl = e ? (size_t)(e - (s + i)) : n - i;
        if (!valid_path_component(s + i, cl))
            return 0;
        i += cl + 1;
    }
    return 1;
}

static int valid_tag(const char *s, size_t n)
{
    if (n == 0 || n > SKD_IMAGE_TAG_MAX || s[0] == '.' || s[0] == '-')
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!is_alnum(s[i]) && s[i] != '.' && s[i] != '_' && s[i] != '-')
            return 0;
    return 1;
}

static int valid_digest(const char *s, size_t n)
{
    return n == SKD_IMAGE_DIGEST_MAX && strncmp(s, "sha256:", 7) == 0 &&
           strspn(s + 7, "0123456789abcdef") >= 64;
}

/* The parse without the "host" refusal (the allow-list sees host too). */
static int parse_ref(const char *ref, skd_image_ref *out, skd_err *err)
{
    memset(out, 0, sizeof(*out));
    if (!ref || !*ref)
        return skd_err_set(err, SKD_EINVAL, "no image name");
    size_t len = strlen(ref);
    const char *at = strchr(ref, '@');
    size_t nl = at ? (size_t)(at - ref) : len; /* name[:tag] */
    if (at && !valid_digest(at + 1, len - nl - 1))
        return skd_err_set(err, SKD_EINVAL,
                           "invalid digest in '%.200s': use @sha256: and 64 lowercase hex digits",
                           ref);
    const char *slash = memrchr(ref, '/', nl);
    const char *colon =
        memchr(slash ? slash : ref, ':', nl - (size_t)((slash ? slash : ref) - ref));
    size_t namel = colon ? (size_t)(colon - ref) : nl;
    if (colon && !valid_tag(colon + 1, nl - namel - 1))
        return skd_err_set(err, SKD_EINVAL,
                           "invalid image tag in '%.200s': use 1-%d of A-Z a-z 0-9 . _ - "
                           "not starting with . or -",
                           ref, SKD_IMAGE_TAG_MAX);
    if (!valid_name(ref, namel, &out->has_domain))
        return skd_err_set(err, SKD_EINVAL,
                           "invalid image name in '%.200s': use [registry[:port]/]path[:tag]"
                           "[@sha256:...], path components of a-z 0-9 joined by . _ __ or -, "
                           "at most %d bytes",
                           ref, SKD_IMAGE_NAME_MAX);
    memcpy(out->name, ref, namel);
    for (size_t i = 0; i < namel; i++)
        out->dir[i] = ref[i] == '/' ? '+' : ref[i];
    out->has_tag = colon != NULL;
    if (colon)
        memcpy(out->tag, colon + 1, nl - namel - 1);
    else
        skd_strlcpy(out->tag, SKD_IMAGE_DEFAULT_TAG, sizeof(out->tag));
    if (at)
        memcpy(out->digest, at + 1, SKD_IMAGE_DIGEST_MAX);
    skd_strlcpy(out->version, at ? out->digest : out->tag, sizeof(out->version));
    return 0;
}

int skd_image_parse_ref(const char *ref, skd_image_ref *out, skd_err *err)
{
    int rc = parse_ref(ref, out, err);
    if (rc == 0 && strcmp(out->name, SKD_IMAGE_HOST) == 0)
        return skd_err_set(err, SKD_EINVAL, "'host' is the built-in image and cannot be stored");
    return rc;
}

/* Does allow-list entry e (n bytes) allow r? */
static int entry_allows(const char *e, size_t n, const skd_image_ref *r)
{
    char buf[SKD_IMAGE_NAME_MAX + SKD_IMAGE_TAG_MAX + SKD_IMAGE_DIGEST_MAX + 3];
    skd_image_ref er;
    if (n == 0 || n >= sizeof(buf))
        return 0;
    memcpy(buf, e, n);
    buf[n] = '\0';
    if (parse_ref(buf, &er, NULL) != 0 || strcmp(er.name, r->name) != 0)
        return 0;
    if (er.digest[0])
        return strcmp(er.digest, r->digest) == 0;
    if (er.has_tag)
        return !r->digest[0] && strcmp(er.tag, r->tag) == 0;
    return 1; /* the bare name: every tag and digest */
}

int skd_image_allowed(const char *allow_list, const char *ref)
{
    skd_image_ref r;
    if (!ref || !*ref || strcmp(ref, SKD_IMAGE_HOST) == 0)
        return 1;
    if (parse_ref(ref, &r, NULL) != 0)
        return 0;
    const char *p = allow_list ? allow_list : "";
    while (*p) {
        const char *e = strchr(p, ',');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        const char *s = p;
        while (n && (*s == ' ' || *s == '\t'))
            s++, n--;
        while (n && (s[n - 1] == ' ' || s[n - 1] == '\t'))
            n--;
        if (n == 1 && s[0] == '*')
            return 1; /* every image the operator imported */
        if (entry_allows(s, n, &r))
            return 1;
        p += e ? (size_t)(e - p) + 1 : strlen(p);
    }
    return 0;
}

/* "name:tag" or "name@digest", for messages. */
static const char *ref_text(const skd_image_ref *r, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s%s%s", r->name, r->digest[0] ? "@" : ":", r->version);
    return buf;
}

/* ---- paths ---------------------------------------------------------------- */

static int images_dir(const char *data_dir, char *out, size_t cap, skd_err *err)
{
    if (!data_dir || !*data_dir)
        return skd_err_set(err, SKD_ECONFIG, "DATA_DIR is not set");
    if (snprintf(out, cap, "%s/images", data_dir) >= (int)cap)
        return skd_err_set(err, SKD_EPATH, "DATA_DIR is too long");
    return 0;
}

static int mkdir_ok(const char *path, mode_t mode, skd_err *err)
{
    if (mkdir(path, mode) == 0 || errno == EEXIST)
        return 0;
    return skd_err_set(err, SKD_EIO, "mkdir %s: %s", path, strerror(errno));
}

/* Create DATA_DIR (0700, state), DATA_DIR/images and images/<name> (0755:
 * a sandbox whose user namespace maps to another uid must traverse them). */
static int ensure_dirs(const char *data_dir, const char *name, char *img, size_t cap, skd_err *err)
{
    int rc = images_dir(data_dir, img, cap, err);
    if (rc == 0)
        rc = mkdir_ok(data_dir, 0700, err);
    if (rc == 0)
        rc = mkdir_ok(img, 0755, err);
    char path[PATH_MAX];
    if (rc == 0 && snprintf(path, sizeof(path), "%s/%s", img, name) >= (int)sizeof(path))
        rc = skd_err_set(err, SKD_EPATH, "DATA_DIR is too long");
    if (rc == 0)
        rc = mkdir_ok(path, 0755, err);
    return rc;
}

/* ---- import --------------------------------------------------------------- */

static const char *format_name(skd__image_format f)
{
    return f == SKD__IMG_OCI ? "oci" : f == SKD__IMG_DOCKER_SAVE ? "docker-save" : "docker-export";
}

/* Mount points the native provider needs in a read-only root. Existing
 * entries (of any type) are left for the provider to judge. */
static int ensure_mountpoints(int rootfd, skd_err *err)
{
    static const char *const dirs[] = {"dev", "proc", "tmp", "workspace", "etc"};
    for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
        if (mkdirat(rootfd, dirs[i], strcmp(dirs[i], "tmp") == 0 ? 01777 : 0755) < 0 &&
            errno != EEXIST)
            return skd_err_set(err, SKD_EIO, "mkdir %s in the rootfs: %s", dirs[i],
                               strerror(errno));
        if (strcmp(dirs[i], "tmp") == 0)
            (void)fchmodat(rootfd, "tmp", 01777, 0); /* umask may have cut it */
    }
    return 0;
}

static json_t *make_manifest(const skd_image_ref *r, const skd__image_plan *plan,
                             const skd__layer_ctx *c)
{
    char created[32];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(created, sizeof(created), "%Y-%m-%dT%H:%M:%SZ", &tm);
    json_t *m = json_pack("{s:s, s:s, s:s, s:s, s:I, s:I, s:i, s:I}", "name", r->name, "tag",
                          r->tag, "created", created, "source", format_name(plan->format), "size",
                          (json_int_t)c->bytes, "files", (json_int_t)c->files, "layers",
                          plan->format == SKD__IMG_EXPORT ? 1 : plan->nlayers, "skipped",
                          (json_int_t)c->skipped);
    if (m && plan->config)
        json_object_set(m, "config", plan->config);
    return m;
}

static int write_manifest(const char *dir, const json_t *m, skd_err *err)
{
    char path[PATH_MAX];
    if (snprintf(path, sizeof(path), "%s/%s", dir, MANIFEST) >= (int)sizeof(path))
        return skd_err_set(err, SKD_EPATH, "DATA_DIR is too long");
    char *text = json_dumps(m, JSON_INDENT(2) | JSON_SORT_KEYS);
    if (!text)
        return skd_err_set(err, SKD_ENOMEM, "out of memory");
    int rc = 0;
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    size_t len = strlen(text);
    if (fd < 0 || write(fd, text, len) != (ssize_t)len || write(fd, "\n", 1) != 1 || fsync(fd) < 0)
        rc = skd_err_set(err, SKD_EIO, "writing %s: %s", path, strerror(errno));
    if (fd >= 0)
        close(fd);
    free(text);
    return rc;
}

/* Build the rootfs of the archive into tmp/rootfs. */
static int build_rootfs(const char *tmp, const char *tar_path, const skd_image_limits *lim,
                        skd__image_plan *plan, skd__layer_ctx *c, skd_err *err)
{
    char path[PATH_MAX];
    if (snprintf(path, sizeof(path), "%s/rootfs", tmp) >= (int)sizeof(path))
        return skd_err_set(err, SKD_EPATH, "DATA_DIR is too long");
    if (mkdir(path, 0755) < 0)
        return skd_err_set(err, SKD_EIO, "mkdir %s: %s", path, strerror(errno));
    (void)chmod(path, 0755);
    int rootfd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (rootfd < 0)
        return skd_err_set(err, SKD_EIO, "open %s: %s", path, strerror(errno));
    int rc = skd__image_scan(tar_path, lim->max_entries, plan, err);
    if (rc == 0)
        rc = skd__image_plan_layers(tar_path, plan, err);
    skd__layer_ctx_init(c, rootfd, lim->max_bytes, lim->max_entries,
                        plan->format != SKD__IMG_EXPORT);
    if (rc == 0 && plan->format == SKD__IMG_EXPORT)
        rc = skd__image_apply_export(c, tar_path, err);
    for (int i = 0; rc == 0 && i < plan->nlayers; i++)
        rc = skd__image_apply_layer(c, tar_path, &plan->layers[i], err);
    if (rc == 0 && plan->format != SKD__IMG_EXPORT && plan->nlayers == 0)
        rc = skd_err_set(err, SKD_EINVAL, "the image has no layers");
    if (rc == 0)
        rc = ensure_mountpoints(rootfd, err);
    skd__layer_ctx_free(c);
    close(rootfd);
    return rc;
}

/* Delete what a crash left in images/: .remove-* at once (already renamed
 * away from readers), .import-* when a day old (younger ones may belong to
 * an import still running). Best effort. */
static void sweep_stale(const char *img)
{
    int fd = open(img, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
        return;
    }
    time_t now = time(NULL);
    struct dirent *de;
    struct stat st;
    while ((de = readdir(d))) {
        int rm = strncmp(de->d_name, ".remove-", 8) == 0;
        if (!rm && strncmp(de->d_name, ".import-", 8) == 0 &&
            fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
            now - st.st_mtime > STALE_IMPORT_S)
            rm = 1;
        if (rm)
            (void)skd__rm_tree_at(dirfd(d), de->d_name);
    }
    closedir(d);
}

int skd_image_import(const char *data_dir, const char *ref, const char *tar_path,
                     const skd_image_limits *lim, json_t **manifest, skd_err *err)
{
    skd_image_ref r;
    skd_image_limits l = {SKD_IMAGE_DEFAULT_MAX_BYTES, SKD_IMAGE_DEFAULT_MAX_ENTRIES};
    char img[PATH_MAX], tmp[PATH_MAX], final[PATH_MAX];
    skd__image_plan *plan = NULL;
    skd__layer_ctx c;
    json_t *m = NULL;
    int rc, made_tmp = 0;
    if (lim && lim->max_bytes > 0)
        l.max_bytes = lim->max_bytes;
    if (lim && lim->max_entries > 0)
        l.max_entries = lim->max_entries;
    char txt[sizeof(r.name) + sizeof(r.version) + 2];
    if ((rc = skd_image_parse_ref(ref, &r, err)))
        return rc;
    if (r.digest[0]) /* a digest names content the engines computed; an import cannot promise it */
        return skd_err_set(err, SKD_EINVAL,
                           "import under a tag (name:tag), not a digest: the archive's digest "
                           "is not checked here");
    if ((rc = ensure_dirs(data_dir, r.dir, img, sizeof(img), err)))
        return rc;
    ref_text(&r, txt, sizeof(txt));
    if (snprintf(final, sizeof(final), "%s/%s/%s", img, r.dir, r.version) >= (int)sizeof(final) ||
        snprintf(tmp, sizeof(tmp), "%s/.import-XXXXXX", img) >= (int)sizeof(tmp))
        return skd_err_set(err, SKD_EPATH, "DATA_DIR is too long");
    if (access(final, F_OK) == 0)
        return skd_err_set(err, SKD_EEXISTS, "image %s already exists; remove it first", txt);
    sweep_stale(img);
    if (!(plan = calloc(1, sizeof(*plan))))
        return skd_err_set(err, SKD_ENOMEM, "out of memory");
    if (!mkdtemp(tmp)) {
        rc = skd_err_set(err, SKD_EIO, "mkdtemp in %s: %s", img, strerror(errno));
        goto out;
    }
    made_tmp = 1;
    (void)chmod(tmp, 0755);
    rc = build_rootfs(tmp, tar_path, &l, plan, &c, err);
    if (rc)
        goto out;
    if (!(m = make_manifest(&r, plan, &c))) {
        rc = skd_err_set(err, SKD_ENOMEM, "out of memory");
        goto out;
    }
    if ((rc = write_manifest(tmp, m, err)))
        goto out;
    if (renameat2(AT_FDCWD, tmp, AT_FDCWD, final, RENAME_NOREPLACE) < 0) {
        rc = errno == EEXIST || errno == ENOTEMPTY
                 ? skd_err_set(err, SKD_EEXISTS, "image %s already exists", txt)
                 : skd_err_set(err, SKD_EIO, "rename into %s: %s", final, strerror(errno));
        goto out;
    }
    made_tmp = 0;
    if (manifest) {
        *manifest = m;
        m = NULL;
    }
out:
    if (made_tmp)
        skd__rm_tree_path(tmp);
    if (rc && snprintf(final, sizeof(final), "%s/%s", img, r.dir) < (int)sizeof(final))
        (void)rmdir(final); /* the name directory this import made, when empty */
    if (plan)
        skd__image_plan_free(plan);
    free(plan);
    json_decref(m);
    return rc;
}

/* ---- list, remove, resolve ------------------------------------------------ */

static int name_filter(const struct dirent *de)
{
    return de->d_name[0] != '.';
}

/* The name a store directory holds ('+' back to '/'), when it is one. */
static int dir_to_name(const char *dir, char *out, size_t cap)
{
    size_t n = strlen(dir);
    int has_domain;
    if (n >= cap)
        return -1;
    for (size_t i = 0; i <= n; i++)
        out[i] = dir[i] == '+' ? '/' : dir[i];
    return valid_name(out, n, &has_domain) ? 0 : -1;
}

static json_t *list_entry(int tagdirfd, const char *name, const char *tag)
{
    char *text = NULL;
    size_t len = 0;
    json_t *m = NULL;
    if (skd_read_alloc(tagdirfd, MANIFEST, O_NOFOLLOW, MANIFEST_MAX, &text, &len) == 0)
        m = skd_json_parse(text, len, NULL);
    free(text);
    if (!json_is_object(m)) {
        json_decref(m);
        return json_pack("{s:s, s:s, s:s}", "name", name, "tag", tag, "error",
                         "manifest.json is missing or invalid");
    }
    return m;
}

int skd_image_list(const char *data_dir, json_t **out, skd_err *err)
{
    char img[PATH_MAX], path[PATH_MAX];
    int rc = images_dir(data_dir, img, sizeof(img), err);
    if (rc)
        return rc;
    json_t *arr = json_array();
    if (!arr)
        return skd_err_set(err, SKD_ENOMEM, "out of memory");
    struct dirent **names = NULL;
    int nn = scandir(img, &names, name_filter, alphasort);
    if (nn < 0 && errno != ENOENT) {
        json_decref(arr);
        return skd_err_set(err, SKD_EIO, "%s: %s", img, strerror(errno));
    }
    for (int i = 0; i < nn; i++) {
        const char *name = names[i]->d_name;
        struct dirent **tags = NULL;
        int nt = -1;
        char shown[SKD_IMAGE_NAME_MAX + 1];
        if (dir_to_name(name, shown, sizeof(shown)) == 0 &&
            snprintf(path, sizeof(path), "%s/%s", img, name) < (int)sizeof(path))
            nt = scandir(path, &tags, name_filter, alphasort);
        int dfd = nt > 0 ? open(path, O_PATH | O_DIRECTORY | O_CLOEXEC) : -1;
        for (int j = 0; j < nt; j++) {
            const char *tag = tags[j]->d_name;
            int tfd = dfd >= 0 && (valid_tag(tag, strlen(tag)) || valid_digest(tag, strlen(tag)))
                          ? openat(dfd, tag, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                          : -1;
            if (tfd >= 0) {
                json_t *e = list_entry(tfd, shown, tag);
                if (e)
                    json_array_append_new(arr, e);
                close(tfd);
            }
            free(tags[j]);
        }
        if (dfd >= 0)
            close(dfd);
        free(tags);
        free(names[i]);
    }
    free(names);
    *out = arr;
    return 0;
}

int skd_image_remove(const char *data_dir, const char *ref, skd_err *err)
{
    skd_image_ref r;
    char img[PATH_MAX], final[PATH_MAX], gone[PATH_MAX], uuid[SKD_UUID_LEN + 1];
    int rc = skd_image_parse_ref(ref, &r, err);
    if (rc == 0)
        rc = images_dir(data_dir, img, sizeof(img), err);
    if (rc)
        return rc;
    if (skd_uuid(uuid))
        return skd_err_set(err, SKD_EINTERNAL, "no randomness");
    char txt[sizeof(r.name) + sizeof(r.version) + 2];
    ref_text(&r, txt, sizeof(txt));
    if (snprintf(final, sizeof(final), "%s/%s/%s", img, r.dir, r.version) >= (int)sizeof(final) ||
        snprintf(gone, sizeof(gone), "%s/.remove-%s", img, uuid) >= (int)sizeof(gone))
        return skd_err_set(err, SKD_EPATH, "DATA_DIR is too long");
    struct stat st;
    if (lstat(final, &st) < 0 || !S_ISDIR(st.st_mode))
        return skd_err_set(err, SKD_ENOENT, "image %s is not imported", txt);
    if (renameat2(AT_FDCWD, final, AT_FDCWD, gone, RENAME_NOREPLACE) < 0)
        return skd_err_set(err, errno == ENOENT ? SKD_ENOENT : SKD_EIO, "removing %s: %s", txt,
                           strerror(errno));
    skd__rm_tree_path(gone);
    if (snprintf(final, sizeof(final), "%s/%s", img, r.dir) < (int)sizeof(final))
        (void)rmdir(final); /* the name goes when its last tag does */
    return 0;
}

int skd_image_rootfs(const char *data_dir, const char *allow_list, const char *image, char **rootfs,
                     skd_err *err)
{
    *rootfs = NULL;
    if (!image || !*image || strcmp(image, SKD_IMAGE_HOST) == 0)
        return 0;
    skd_image_ref r;
    char txt[sizeof(r.name) + sizeof(r.version) + 2];
    int rc = skd_image_parse_ref(image, &r, err);
    if (rc)
        return rc;
    ref_text(&r, txt, sizeof(txt));
    if (!skd_image_allowed(allow_list, image))
        return skd_err_set(err, SKD_EFORBIDDEN, "image %s is not in SKILLS_ALLOWED_SANDBOX_IMAGES",
                           txt);
    char abs[PATH_MAX], path[PATH_MAX];
    if (!data_dir || !*data_dir)
        data_dir = ".";
    if (!realpath(data_dir, abs))
        return skd_err_set(err, SKD_ENOENT,
                           "image %s is not imported (DATA_DIR %s: %s); run skilld image import",
                           txt, data_dir, strerror(errno));
    struct stat st;
    if (snprintf(path, sizeof(path), "%s/images/%s/%s/rootfs", abs, r.dir, r.version) >=
            (int)sizeof(path) ||
        lstat(path, &st) < 0 || !S_ISDIR(st.st_mode))
        return skd_err_set(err, SKD_ENOENT,
                           "image %s is not imported; run skilld image import %s FILE.tar", txt,
                           txt);
    if (!(*rootfs = strdup(path)))
        return skd_err_set(err, SKD_ENOMEM, "out of memory");
    return 0;
}

int skd_image_resolve(const skd_config *cfg, const char *image, char **rootfs, skd_err *err)
{
    return skd_image_rootfs(skd_config_str(cfg, "DATA_DIR"),
                            skd_config_str(cfg, "SKILLS_ALLOWED_SANDBOX_IMAGES"), image, rootfs,
                            err);
}
