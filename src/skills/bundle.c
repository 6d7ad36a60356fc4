/*
 * SKILL.md bundles (see include/skilld/bundle.h): scanning a folder into a
 * record, registering it, listing what a key sees, reading one file.
 *
 * Trust: the folder is the operator's or was extracted by an import, but
 * its content is untrusted: every file is opened beneath the folder's
 * directory fd with the workspace resolver (no "..", no symlink out, no
 * magic links), must be a regular file, and is bounded by the Skills
 * extension's limits. Digests are computed here once, at registration; a
 * read compares the bytes it is about to serve with them, so a change on
 * disk is never served under the old digest. A cheap stat walk (size,
 * mtime, ctime, inode of every file) on every listing catches changes
 * before a host sees them: a bundle whose content changed is withdrawn
 * until the operator or its owner registers it again. It is not silently
 * registered again, because a host may still hold the old entry (from an
 * earlier listing, or another replica's): while the record keeps the old
 * digests, that host's reads are refused, never answered with bytes that
 * fail its verification.
 */
#include "skilld/bundle.h"
#include "skilld/custom.h"
#include "skills/skills_int.h"
#include "skilld/image.h"
#include "skilld/json.h"
#include "skilld/log.h"
#include "skilld/util.h"
#include "workspace/resolve.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_DEPTH 8
#define MAX_PATH 1024
#define MAX_NAMES 4096 /* entries read from one directory */

struct walk {
    int root;
    int hash; /* read and hash every file (else stat only) */
    json_t *files;
    size_t bytes;
    skd_err *err;
};

static int name_ok(const char *n)
{
    size_t len = strlen(n);
    if (len == 0 || len > 255 || !skd_utf8_valid(n, len))
        return 0;
    for (const char *p = n; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f || *p == '\\')
            return 0;
    return 1;
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The sorted names of directory rel (beneath w->root), dot-names left out.
 * *names is malloc'd strings; free with free_names. */
static void free_names(char **names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

static int read_names(struct walk *w, const char *rel, char ***names, size_t *n)
{
    int fd = rel[0] ? skd__ws_open_beneath(w->root, rel, O_RDONLY | O_DIRECTORY, 0)
                    : openat(w->root, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return skd_err_set(w->err, SKD_EPATH, "bundle directory %s: %s", rel[0] ? rel : ".",
                           strerror(errno));
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return skd_err_set(w->err, SKD_EIO, "bundle directory %s: %s", rel, strerror(errno));
    }
    char **arr = NULL;
    size_t cnt = 0, cap = 0;
    int rc = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        if (cnt >= MAX_NAMES) {
            rc = skd_err_set(w->err, SKD_ETOOBIG, "bundle directory %s has too many entries", rel);
            break;
        }
        if (cnt == cap) {
            size_t nc = cap ? cap * 2 : 16;
            char **p = realloc(arr, nc * sizeof(*p));
            if (!p) {
                rc = skd_err_set(w->err, SKD_ENOMEM, "out of memory");
                break;
            }
            arr = p;
            cap = nc;
        }
        if (!(arr[cnt] = strdup(de->d_name))) {
            rc = skd_err_set(w->err, SKD_ENOMEM, "out of memory");
            break;
        }
        cnt++;
    }
    closedir(d);
    if (rc) {
        free_names(arr, cnt);
        return rc;
    }
    if (cnt)
        qsort(arr, cnt, sizeof(*arr), cmp_names);
    *names = arr;
    *n = cnt;
    return 0;
}

/* Read fd (st_size bytes) whole. */
static int read_all(int fd, size_t size, char **out, skd_err *err)
{
    char *buf = malloc(size + 1);
    size_t got = 0;
    if (!buf)
        return skd_err_set(err, SKD_ENOMEM, "out of memory");
    while (got < size) {
        ssize_t r = read(fd, buf + got, size - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    if (got != size) {
        free(buf);
        return skd_err_set(err, SKD_EIO, "a bundle file changed size while it was read");
    }
    buf[size] = '\0';
    *out = buf;
    return 0;
}

/* One file (rel), reached through the resolver: regular, within limits. */
static int add_file(struct walk *w, const char *rel)
{
    int fd = skd__ws_open_beneath(w->root, rel, O_RDONLY | O_NONBLOCK, 0);
    if (fd < 0)
        return skd_err_set(w->err, SKD_EPATH, "%s: %s (a bundle's links must stay inside it)", rel,
                           errno == EXDEV || errno == ELOOP ? "points outside the bundle"
                                                            : strerror(errno));
    struct stat st;
    int rc = 0;
    char *data = NULL;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        rc = skd_err_set(w->err, SKD_ESPECIAL, "%s is not a regular file", rel);
        goto out;
    }
    if (json_array_size(w->files) >= SKD_BUNDLE_MAX_FILES ||
        (size_t)st.st_size > SKD_BUNDLE_MAX_BYTES - w->bytes) {
        rc = skd_err_set(w->err, SKD_ETOOBIG, "the bundle holds more than %d files or %u bytes",
                         SKD_BUNDLE_MAX_FILES, SKD_BUNDLE_MAX_BYTES);
        goto out;
    }
    w->bytes += (size_t)st.st_size;
    json_t *f =
        json_pack("{s:s, s:I, s:I, s:I, s:I}", "path", rel, "size", (json_int_t)st.st_size,
                  "mtimeNs", (json_int_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec,
                  "ctimeNs", (json_int_t)st.st_ctim.tv_sec * 1000000000 + st.st_ctim.tv_nsec, "ino",
                  (json_int_t)st.st_ino);
    if (!f || json_array_append_new(w->files, f)) {
        rc = skd_err_set(w->err, SKD_ENOMEM, "out of memory");
        goto out;
    }
    if (w->hash) {
        char hex[SKD_SHA256_HEX_LEN + 1];
        if ((rc = read_all(fd, (size_t)st.st_size, &data, w->err)) != 0)
            goto out;
        skd_sha256_hex(data, (size_t)st.st_size, hex);
        json_object_set_new(f, "sha256", json_string(hex));
    }
out:
    free(data);
    close(fd);
    return rc;
}

static int walk_dir(struct walk *w, const char *rel, int depth)
{
    char **names = NULL;
    size_t n = 0;
    int rc = read_names(w, rel, &names, &n);
    if (rc)
        return rc;
    int dfd = rel[0] ? skd__ws_open_beneath(w->root, rel, O_RDONLY | O_DIRECTORY, 0)
                     : openat(w->root, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        rc = skd_err_set(w->err, SKD_EPATH, "bundle directory %s: %s", rel, strerror(errno));
    for (size_t i = 0; rc == 0 && i < n; i++) {
        char path[MAX_PATH];
        struct stat st;
        if (!name_ok(names[i])) {
            rc = skd_err_set(w->err, SKD_EPATH,
                             "bundle file name \"%.64s\" in %s is not valid (UTF-8, no control "
                             "characters or backslash)",
                             names[i], rel[0] ? rel : ".");
            break;
        }
        if (snprintf(path, sizeof(path), "%s%s%s", rel, rel[0] ? "/" : "", names[i]) >=
            (int)sizeof(path)) {
            rc = skd_err_set(w->err, SKD_ETOOBIG, "a bundle path is longer than %d bytes",
                             MAX_PATH - 1);
            break;
        }
        if (fstatat(dfd, names[i], &st, AT_SYMLINK_NOFOLLOW) != 0) {
            rc = skd_err_set(w->err, SKD_EIO, "%s: %s", path, strerror(errno));
            break;
        }
        if (S_ISDIR(st.st_mode)) {
            rc = depth >= MAX_DEPTH ? skd_err_set(w->err, SKD_ETOOBIG,
                                                  "%s: bundle directories nest too deep", path)
                                    : walk_dir(w, path, depth + 1);
        } else if (S_ISREG(st.st_mode) || S_ISLNK(st.st_mode)) {
            rc = add_file(w, path);
        } else {
            rc = skd_err_set(w->err, SKD_ESPECIAL, "%s is not a regular file or directory", path);
        }
    }
    if (dfd >= 0)
        close(dfd);
    free_names(names, n);
    return rc;
}

/* Walk dir into a files array (new reference in *files). */
static int walk(const char *dir, int hash, json_t **files, skd_err *err)
{
    struct walk w = {.hash = hash, .err = err};
    *files = NULL;
    w.root = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (w.root < 0)
        return skd_err_set(err, errno == ENOENT ? SKD_ENOENT : SKD_EIO, "%s: %s", dir,
                           strerror(errno));
    if (!(w.files = json_array())) {
        close(w.root);
        return skd_err_set(err, SKD_ENOMEM, "out of memory");
    }
    int rc = walk_dir(&w, "", 0);
    close(w.root);
    if (rc) {
        json_decref(w.files);
        return rc;
    }
    *files = w.files;
    return 0;
}

int skd_bundle_scan(const char *dir, json_t **record, skd_err *err)
{
    json_t *fm = NULL, *manifest = NULL, *files = NULL;
    *record = NULL;
    if (dir[0] != '/')
        return skd_err_set(err, SKD_EINVAL, "the bundle folder path must be absolute");
    int rc = skd__skill_folder_load(dir, &fm, &manifest, err);
    json_decref(manifest);
    if (rc == 0)
        rc = walk(dir, 1, &files, err);
    if (rc == 0) {
        /* SKILL.md was read twice (front matter, then the walk): the digest
         * is of the second read, so both must be of the same bytes. A
         * changed SKILL.md between them fails the next verification and is
         * scanned again. */
        *record = json_pack("{s:o, s:o}", "frontmatter", fm, "files", files);
        fm = files = NULL;
        if (!*record)
            rc = skd_err_set(err, SKD_ENOMEM, "out of memory");
    }
    json_decref(fm);
    json_decref(files);
    return rc;
}

int skd_bundle_register(skd_skills *sk, const char *owner, const char *dir, int public_,
                        json_t **row, skd_err *err)
{
    json_t *rec = NULL;
    if (row)
        *row = NULL;
    int rc = skd_bundle_scan(dir, &rec, err);
    if (rc)
        return rc;
    const char *name = skd_json_str(json_object_get(rec, "frontmatter"), "name", "");
    rc = skd_store_bundle_put(sk->store, owner, name, dir, public_, rec, err);
    if (rc == 0 && row) {
        *row = json_pack("{s:s, s:o, s:s, s:b, s:O, s:I}", "name", name, "owner",
                         owner ? json_string(owner) : json_null(), "dir", dir, "public", public_,
                         "record", rec, "updatedMs", (json_int_t)skd_wall_ms());
        if (!*row)
            rc = skd_err_set(err, SKD_ENOMEM, "out of memory");
    }
    json_decref(rec);
    return rc;
}

/* Same entries, equal in every one of the nkeys fields keys names? */
static int same_fields(const json_t *a, const json_t *b, const char *const *keys, size_t nkeys)
{
    if (json_array_size(a) != json_array_size(b))
        return 0;
    for (size_t i = 0; i < json_array_size(a); i++)
        for (size_t k = 0; k < nkeys; k++)
            if (!json_equal(json_object_get(json_array_get(a, i), keys[k]),
                            json_object_get(json_array_get(b, i), keys[k])))
                return 0;
    return 1;
}

/* Same files with the same stat signatures? */
static int same_stat(const json_t *a, const json_t *b)
{
    static const char *const keys[] = {"path", "size", "mtimeNs", "ctimeNs", "ino"};
    return same_fields(a, b, keys, sizeof(keys) / sizeof(keys[0]));
}

/* Same paths, sizes and digests: the content a host was told about. */
static int same_content(const json_t *a, const json_t *b)
{
    static const char *const keys[] = {"path", "size", "sha256"};
    return same_fields(a, b, keys, sizeof(keys) / sizeof(keys[0]));
}

/* The stat signatures changed: hash the folder again. The same content
 * (a touch, a copy that kept the bytes) only renews the signatures; other
 * content withdraws the bundle until it is registered again, so a host that
 * holds the old entry is refused its reads instead of getting bytes that
 * fail its verification. */
static int recheck(skd_skills *sk, json_t *row, skd_err *err)
{
    json_t *rec = NULL;
    const char *dir = skd_json_str(row, "dir", "");
    const char *name = skd_json_str(row, "name", "");
    int rc = skd_bundle_scan(dir, &rec, err);
    if (rc)
        return rc;
    const json_t *old = json_object_get(row, "record");
    if (!same_content(json_object_get(rec, "files"), json_object_get(old, "files")) ||
        !json_equal(json_object_get(rec, "frontmatter"), json_object_get(old, "frontmatter"))) {
        json_decref(rec);
        return skd_err_set(err, SKD_EIO,
                           "the bundle %s changed on disk since it was registered; register it "
                           "again (skilld skills add %s)",
                           name, dir);
    }
    rc = skd_store_bundle_put(sk->store, skd_json_str(row, "owner", NULL), name, dir,
                              skd_json_bool(row, "public", 0), rec, err);
    if (rc == 0)
        json_object_set(row, "record", rec);
    json_decref(rec);
    return rc;
}

/* Check row against the disk (stat signatures, then digests). */
static int refresh(skd_skills *sk, json_t *row, skd_err *err)
{
    json_t *files = NULL;
    int rc = walk(skd_json_str(row, "dir", ""), 0, &files, err);
    if (rc == 0 && same_stat(files, json_object_get(json_object_get(row, "record"), "files"))) {
        json_decref(files);
        return 0;
    }
    json_decref(files);
    skd_err_clear(err);
    return recheck(sk, row, err);
}

json_t *skd_bundle_list(skd_skills *sk, const char *key_id, const char *name, int fresh,
                        skd_err *err)
{
    json_t *rows = skd_store_bundle_list(sk->store, key_id, name, err);
    json_t *out = rows ? json_array() : NULL;
    const char *last = NULL;
    size_t i;
    json_t *row;
    if (!out) {
        json_decref(rows);
        return NULL;
    }
    json_array_foreach (rows, i, row) {
        skd_err rerr = {0};
        const char *n = skd_json_str(row, "name", "");
        if (last && strcmp(last, n) == 0)
            continue; /* shadowed by the key's own bundle of that name */
        last = n;
        if (fresh && refresh(sk, row, &rerr) != 0) {
            skd_warn("bundle %s (%s) is not served: %s", n, skd_json_str(row, "dir", "?"),
                     skd_err_msg(&rerr));
            continue;
        }
        json_array_append(out, row);
    }
    json_decref(rows);
    return out;
}

/* The record entry of path, or NULL. */
static const json_t *find_file(const json_t *row, const char *path)
{
    const json_t *files = json_object_get(json_object_get(row, "record"), "files");
    size_t i;
    const json_t *f;
    json_array_foreach (files, i, f)
        if (strcmp(skd_json_str(f, "path", ""), path) == 0)
            return f;
    return NULL;
}

int skd_bundle_read(skd_skills *sk, const json_t *row, const char *path, char **data, size_t *len,
                    skd_err *err)
{
    (void)sk; /* the read never changes the record: see recheck */
    *data = NULL;
    *len = 0;
    const json_t *f = find_file(row, path);
    if (!f)
        return skd_err_set(err, SKD_ENOENT, "%s is not a file of the bundle %s", path,
                           skd_json_str(row, "name", "?"));
    int root = open(skd_json_str(row, "dir", ""), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (root < 0)
        return skd_err_set(err, SKD_EIO, "the bundle folder is gone: %s", strerror(errno));
    int fd = skd__ws_open_beneath(root, path, O_RDONLY | O_NONBLOCK, 0);
    close(root);
    struct stat st;
    char *buf = NULL;
    int rc = 0, changed = 0;
    size_t want = (size_t)skd_json_int(f, "size", -1);
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (size_t)st.st_size != want) {
        changed = 1;
    } else if ((rc = read_all(fd, want, &buf, err)) == 0) {
        char hex[SKD_SHA256_HEX_LEN + 1];
        skd_sha256_hex(buf, want, hex);
        changed = strcmp(hex, skd_json_str(f, "sha256", "")) != 0;
    } else {
        changed = 1;
        skd_err_clear(err);
    }
    if (fd >= 0)
        close(fd);
    if (changed) {
        free(buf);
        return skd_err_set(err, SKD_EIO,
                           "%s of the bundle %s changed on disk since it was registered; it is "
                           "not served until it is registered again (skilld skills add %s)",
                           path, skd_json_str(row, "name", "?"), skd_json_str(row, "dir", "DIR"));
    }
    *data = buf;
    *len = want;
    return rc;
}

int skd_bundle_set_public(skd_skills *sk, const skd_actor *who, const char *name, const char *owner,
                          int public_, skd_err *err)
{
    if (who->key_id && !(who->scopes & SKD_SCOPE_ADMIN))
        return skd_err_set(err, SKD_EFORBIDDEN,
                           "publishing a bundle to every key needs the skills:admin scope");
    return skd_store_bundle_set_public(sk->store, owner, name, public_, err);
}

/* The folder of owner's bundle name (malloc'd), or NULL. */
static char *dir_of(skd_skills *sk, const char *owner, const char *name)
{
    json_t *rows = skd_store_bundle_list(sk->store, NULL, name, NULL);
    char *dir = NULL;
    size_t i;
    json_t *r;
    json_array_foreach (rows, i, r) {
        const char *o = skd_json_str(r, "owner", NULL);
        if (!dir && ((!o && !owner) || (o && owner && strcmp(o, owner) == 0)))
            dir = strdup(skd_json_str(r, "dir", ""));
    }
    json_decref(rows);
    return dir;
}

int skd_bundle_remove(skd_skills *sk, const char *owner, const char *name, skd_err *err)
{
    char *dir = dir_of(sk, owner, name);
    int rc = skd_store_bundle_delete(sk->store, owner, name, err);
    /* An imported bundle's folder is skilld's (DATA_DIR/bundles/...): it
     * goes with the bundle. A folder registered from elsewhere is the
     * operator's and stays. */
    char *data = realpath(skd_config_str(sk->cfg, "DATA_DIR"), NULL);
    char prefix[PATH_MAX];
    if (rc == 0 && dir && data &&
        snprintf(prefix, sizeof(prefix), "%s/bundles/", data) < (int)sizeof(prefix) &&
        strncmp(dir, prefix, strlen(prefix)) == 0 && !strstr(dir + strlen(prefix), "..")) {
        char *slash = strrchr(dir, '/');
        *slash = '\0';
        int pfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (pfd >= 0) {
            (void)skd_image_rm_tree_at(pfd, slash + 1);
            close(pfd);
        }
    }
    free(data);
    free(dir);
    return rc;
}
