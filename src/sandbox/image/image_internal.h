/*
 * Library-internal interface between image.c (formats, naming, the image
 * store) and image_layer.c (applying one layer tarball to a root filesystem
 * directory without letting any entry escape it).
 */
#ifndef SKILLD_SANDBOX_IMAGE_INTERNAL_H
#define SKILLD_SANDBOX_IMAGE_INTERNAL_H

#include <archive.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "skilld/error.h"

/* Paths written by the layer being applied (for opaque whiteouts). */
typedef struct skd__pathset {
    char **slot;
    size_t cap; /* power of two, 0 when empty */
    size_t n;
} skd__pathset;

/* State of one import across its layers. The caller fills rootfd, the
 * limits and whiteouts, zeroes the rest, and calls skd__layer_ctx_free. */
typedef struct skd__layer_ctx {
    int rootfd;        /* borrowed O_PATH fd of the rootfs directory */
    int whiteouts;     /* 1: honour .wh.* entries (layered formats) */
    int64_t max_bytes; /* caps over the whole import */
    int64_t max_entries;
    int64_t bytes; /* running totals */
    int64_t entries;
    int64_t files;   /* non-directory entries written */
    int64_t skipped; /* device nodes, fifos, sockets not created */
    skd__pathset written;
    int cache_fd; /* owned; -1: parent-directory cache is empty */
    char cache_path[PATH_MAX];
} skd__layer_ctx;

/* Prepare c around rootfd (borrowed) with caps. */
void skd__layer_ctx_init(skd__layer_ctx *c, int rootfd, int64_t max_bytes, int64_t max_entries,
                         int whiteouts);
/* Release what c owns (not rootfd). */
void skd__layer_ctx_free(skd__layer_ctx *c);

/* Apply every entry of the tar archive a (opened by the caller, positioned
 * before its first header) to c->rootfd. Returns 0 or SKD_E* with err set;
 * on error the rootfs is in an unspecified state and must be discarded. */
int skd__layer_apply(skd__layer_ctx *c, struct archive *a, skd_err *err);

/* Normalise a tar member name: drop "./" and empty components and a
 * trailing '/'. Absolute names and ".." components are refused (-1). The
 * root itself gives "". out has cap bytes. */
int skd__image_norm_path(const char *in, char *out, size_t cap);

/* Delete name (a file, or a directory tree, never following symlinks)
 * relative to dirfd. A missing name is success. Returns 0 or -errno. */
int skd__rm_tree_at(int dirfd, const char *name);

/* The same for an absolute or relative path (its last component deleted
 * from its parent's descriptor). Best effort: a path too long or a parent
 * that cannot be opened leaves it. */
void skd__rm_tree_path(const char *path);

#endif
