/*
 * Sandbox images: root filesystems the native provider can run commands in.
 *
 * An image is a directory $DATA_DIR/images/<name>/<tag>/ holding `rootfs/`
 * (the extracted tree) and `manifest.json` ({"name", "tag", "created",
 * "source", "size", "files", "layers", "skipped", "config"?}). Images come
 * from tarballs an operator chose: a `docker export` tarball (a plain root
 * filesystem), a `docker save` archive (manifest.json + layer tars) or an
 * OCI image layout archive (oci-layout, index.json, blobs/sha256/...).
 *
 * The archive is not trusted: no entry may land outside the image directory,
 * device nodes are skipped, setuid/setgid bits are stripped, hard links stay
 * inside the image, and size and entry counts are capped. An import is
 * atomic: it appears complete under its name or not at all.
 *
 * `host` is the built-in image (the host's /usr, /bin, /lib*), always allowed;
 * every other image must be named in SKILLS_ALLOWED_SANDBOX_IMAGES.
 */
#ifndef SKILLD_IMAGE_H
#define SKILLD_IMAGE_H

#include <jansson.h>
#include <stdint.h>

#include "skilld/config.h"
#include "skilld/error.h"

#define SKD_IMAGE_HOST "host"
#define SKD_IMAGE_NAME_MAX 255 /* the engines' bound on a repository name */
#define SKD_IMAGE_TAG_MAX 128
#define SKD_IMAGE_DIGEST_MAX 71 /* "sha256:" and 64 hex digits */
#define SKD_IMAGE_DEFAULT_TAG "latest"

/* A parsed image reference in the engines' grammar (docker's
 * distribution/reference, which podman shares):
 *   [domain[:port]/]path[/path...][:tag][@sha256:hex]
 * e.g. "busybox", "ns/name:tag", "registry.example:5000/ns/name:tag",
 * "name@sha256:<64 hex>". The domain is the first component when it holds
 * '.' or ':' or is "localhost" and more components follow. */
typedef struct skd_image_ref {
    char name[SKD_IMAGE_NAME_MAX + 1];     /* repository, with domain and path */
    char tag[SKD_IMAGE_TAG_MAX + 1];       /* "latest" when neither tag nor digest */
    char digest[SKD_IMAGE_DIGEST_MAX + 1]; /* "sha256:..." or "" */
    int has_tag;                           /* a tag was written */
    int has_domain;                        /* name starts with a registry domain */
    /* Where the native store keeps it: images/<dir>/<version>/. dir is name
     * with '/' as '+' (a character no name holds); version is the digest
     * when there is one (':' cannot be in a tag), else the tag. */
    char dir[SKD_IMAGE_NAME_MAX + 1];
    char version[SKD_IMAGE_TAG_MAX + 1];
} skd_image_ref;

/* Parse ref into out. Path components are [a-z0-9]+ joined by '.', '_',
 * "__" or runs of '-'; domain components [A-Za-z0-9-] not starting or
 * ending with '-', the port decimal; a tag is 1..128 of [A-Za-z0-9._-]
 * not starting with '.' or '-'; a digest is sha256 with 64 lowercase hex
 * digits. "host" is the built-in image and is refused. Returns 0 or
 * SKD_EINVAL (err says which part is wrong). */
int skd_image_parse_ref(const char *ref, skd_image_ref *out, skd_err *err);

/* Caps on one import. Zero fields take the defaults below. */
typedef struct skd_image_limits {
    int64_t max_bytes;   /* bytes of file data written, over all layers */
    int64_t max_entries; /* archive entries read, over all layers */
} skd_image_limits;

#define SKD_IMAGE_DEFAULT_MAX_BYTES (4LL << 30)
#define SKD_IMAGE_DEFAULT_MAX_ENTRIES 1000000LL

/* Import the archive at tar_path as image ref under data_dir (created when
 * missing). The format is detected: OCI layout (oci-layout + index.json),
 * docker save (manifest.json), else a plain rootfs tarball; the outer file
 * and the layers may be gzip/zstd/xz/bzip2-compressed. lim may be NULL.
 * Refuses with SKD_EEXISTS when ref is already imported (remove it first).
 * On success *manifest (when manifest is not NULL) receives a new reference
 * to the written manifest (caller json_decref). Returns 0 or SKD_E*. */
int skd_image_import(const char *data_dir, const char *ref, const char *tar_path,
                     const skd_image_limits *lim, json_t **manifest, skd_err *err);

/* The imported images under data_dir as a new JSON array of manifests,
 * sorted by name then tag (caller json_decref). An image whose manifest
 * cannot be read is listed with an "error" member. A missing images
 * directory is an empty list. Returns 0 or SKD_E*. */
int skd_image_list(const char *data_dir, json_t **out, skd_err *err);

/* Remove imported image ref. SKD_ENOENT when it is not there. The image
 * disappears atomically (renamed away, then deleted). */
int skd_image_remove(const char *data_dir, const char *ref, skd_err *err);

/* 1 when image reference ref is allowed by allow_list, else 0. The list
 * is comma-separated (blanks around entries ignored) in the same grammar:
 * "name" allows every tag and digest of name, "name:tag" that tag (a
 * reference without tag or digest means ":latest"), "name@sha256:..." that
 * digest, and "*" every image. Names match exactly as written (the engines'
 * short-name expansion is not applied: "busybox" does not allow
 * "docker.io/library/busybox"). "host" is always allowed; a reference that
 * does not parse never is. */
int skd_image_allowed(const char *allow_list, const char *ref);

/* Resolve the image a sandbox run asked for. image NULL, "" or "host" gives
 * *rootfs = NULL (the provider builds the host root itself). Otherwise the
 * image must be allowed by SKILLS_ALLOWED_SANDBOX_IMAGES (SKD_EFORBIDDEN)
 * and imported under DATA_DIR (SKD_ENOENT); *rootfs receives a new absolute
 * path of its rootfs directory (caller frees with free()). */
int skd_image_resolve(const skd_config *cfg, const char *image, char **rootfs, skd_err *err);

/* The same with DATA_DIR and the allow-list given (data_dir NULL: "."). */
int skd_image_rootfs(const char *data_dir, const char *allow_list, const char *image, char **rootfs,
                     skd_err *err);

/* Extract the tar archive (plain or gzip) of len bytes at data under
 * rootfd (borrowed directory fd) with the image importer's rules: no
 * absolute names, no "..", no link out, no device nodes; at most max_bytes
 * of content and max_entries entries (SKD_ETOOBIG past them). SKD_EINVAL
 * when data is not a tar archive. On error the tree is in an unspecified
 * state and must be removed. */
int skd_image_extract_tar(int rootfd, const void *data, size_t len, int64_t max_bytes,
                          int64_t max_entries, skd_err *err);

/* Delete name (a file, or a directory tree, never following symlinks)
 * relative to dirfd. A missing name is success. Returns 0 or -errno. */
int skd_image_rm_tree_at(int dirfd, const char *name);

/* The same for an absolute or relative path (its last component deleted
 * from its parent's descriptor). Best effort: a path too long or a parent
 * that cannot be opened leaves it. */
void skd_image_rm_tree_path(const char *path);

#endif
