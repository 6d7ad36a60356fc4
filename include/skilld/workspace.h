/*
 * Per-key workspaces. The workspace of key id K is
 * $DATA_DIR/workspaces/<hex SHA-256 of K>/, created 0700 on first use and
 * held open as a directory fd. Every client path is relative to it and is
 * resolved with openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS) from that
 * fd, so no "..", absolute path or symlink can leave it, whatever races
 * happen. Special files are refused without blocking.
 */
#ifndef SKILLD_WORKSPACE_H
#define SKILLD_WORKSPACE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/stat.h>

#include "skilld/error.h"

typedef struct skd_workspace skd_workspace;

/* Longest client path accepted, in bytes. */
#define SKD_WS_PATH_MAX 1024

/* Open (creating when missing) the workspace of key_id under data_dir.
 * Caller closes with skd_workspace_close. */
int skd_workspace_open(const char *data_dir, const char *key_id, skd_workspace **out, skd_err *err);
void skd_workspace_close(skd_workspace *ws); /* NULL ok */

/* The directory fd (borrowed) and absolute path (borrowed). */
int skd_workspace_fd(const skd_workspace *ws);
const char *skd_workspace_path(const skd_workspace *ws);

/* Check a client path: non-empty, relative, no NUL, no ".." component, at
 * most SKD_WS_PATH_MAX bytes. "." and "" are accepted only when allow_root.
 * Returns 0 or SKD_EPATH with a message. */
int skd_workspace_check_path(const char *path, int allow_root, skd_err *err);

/* The same for len bytes that may contain NUL (a JSON string can carry
 * \u0000): a NUL anywhere in the first len bytes is refused. Also refuses
 * control characters (0x01-0x1f, 0x7f), which no sensible name holds. */
int skd_workspace_check_pathn(const char *path, size_t len, int allow_root, skd_err *err);

/* The same for a path a client gives, which also may not use the reserved
 * SKD_WORKSPACE_TMP_PREFIX in any component (SKD_EPATH). */
int skd_workspace_check_client_pathn(const char *path, size_t len, int allow_root, skd_err *err);

/* 1 when path names the workspace itself ("", ".", "./", "./." ...). */
int skd_workspace_path_is_root(const char *path);

/* Open path beneath the workspace with openat2. flags are open(2) flags
 * (O_CLOEXEC and O_NOFOLLOW for the last component are added). Returns an fd
 * or a negative SKD_E* code (SKD_EPATH for escapes, SKD_ENOENT, ...).
 * Only regular files and directories are opened: a symlink as the last
 * component, a FIFO, socket or device is refused with SKD_EFORBIDDEN
 * without blocking and (barring a race) without opening it; a regular file
 * with more than one hard link is refused too, because another name of it
 * may lie outside the workspace. O_NONBLOCK is used for the open and
 * cleared afterwards unless the caller asked for it. */
int skd_workspace_openat(skd_workspace *ws, const char *path, int flags, mode_t mode, skd_err *err);
/* skd_workspace_openat, with *st filled from the open descriptor's fstat
 * (the checks' own, so the caller needs no second one). */
int skd_workspace_openat_stat(skd_workspace *ws, const char *path, int flags, mode_t mode,
                              struct stat *st, skd_err *err);

/* Longest single name (one path component), in bytes. */
#define SKD_WS_NAME_MAX 255

/* Open the directory that holds the last component of path (a checked,
 * non-root path; trailing slashes are ignored) and copy that component into
 * name. The component is never "." or "..". When mkdirs is non-zero,
 * missing parent directories are created with mode 0700, each one beneath
 * the workspace. Returns a directory fd (caller closes) or a negative
 * SKD_E*. The fd may be passed to skd_workspace_openat_in. */
int skd_workspace_open_parent(skd_workspace *ws, const char *path, int mkdirs,
                              char name[SKD_WS_NAME_MAX + 1], skd_err *err);
/* skd_workspace_open_parent with mkdirs, creating at most *budget missing
 * directories (each one taken from it); past it SKD_EQUOTA, before the
 * directory over budget is made. The caller holds the workspace lock and
 * measured the workspace (skd_workspace_usage_limit) to set the budget. */
int skd_workspace_open_parent_within(skd_workspace *ws, const char *path, uint64_t *budget,
                                     char name[SKD_WS_NAME_MAX + 1], skd_err *err);

/* skd_workspace_openat, resolved beneath dirfd instead of the workspace
 * root; dirfd must be a directory of this workspace (from
 * skd_workspace_open_parent or skd_workspace_openat). Same checks. */
int skd_workspace_openat_in(skd_workspace *ws, int dirfd, const char *path, int flags, mode_t mode,
                            skd_err *err);

/* What the directory dirfd (borrowed; skd_workspace_fd for the whole
 * workspace) holds below it: the bytes of its regular files, and its
 * entries (files, directories, symlinks and the rest, each one), symlinks
 * not followed. Names starting SKD_WORKSPACE_TMP_PREFIX (temporary files of
 * writes in progress or interrupted) never count. SKILLS_WORKSPACE_MAX_ENTRIES bounds entries: a
 * directory's own blocks are not in bytes, so without the bound a tenant
 * could fill the disk with empty directories inside any byte quota. */
typedef struct skd_ws_usage {
    uint64_t bytes, entries;
    uint64_t swept; /* temporary files removed (skd_workspace_usage_sweep) */
} skd_ws_usage;

/* What one new entry takes on disk beyond its bytes (a directory's block),
 * counted against SKILLS_DATA_RESERVE_BYTES. */
#define SKD_WS_ENTRY_BYTES 4096u

/* Measure dirfd into u; the walk stops once more than max_entries were
 * seen (entries is then max_entries + 1, bytes a
 * partial sum), so its cost is bounded whatever the workspace holds. */
int skd_workspace_usage_limit(int dirfd, uint64_t max_entries, skd_ws_usage *u, skd_err *err);

/* Temporary files of atomic writes are named SKD_WORKSPACE_TMP_PREFIX and
 * random hex; clients may not use the prefix for their own names. Every
 * writer that makes one (file_write, the commit of a sandbox's writes)
 * holds the workspace lock until it is renamed or removed, so one found
 * under the lock is a crashed writer's. */
#define SKD_WORKSPACE_TMP_PREFIX ".skd-tmp-"
/* The longest a write keeps its temporary file (a file_write of
 * SKILLS_MAX_FILE_BYTES, a commit of a workspace quota's bytes, each with
 * its fsync), with a wide margin: one this old is a crashed writer's even
 * where the lock cannot be taken. */
#define SKD_WORKSPACE_TMP_MAX_AGE_S 60

/* skd_workspace_usage_limit that also removes the temporary files it
 * meets, of any age: call it holding the workspace lock (file_write does,
 * when it measures the workspace before a write). u->swept counts them. */
int skd_workspace_usage_sweep(int dirfd, uint64_t max_entries, skd_ws_usage *u, skd_err *err);

/* Remove the temporary files (SKD_WORKSPACE_TMP_PREFIX*) that writes
 * interrupted by a crash left in every workspace under data_dir (at
 * start): all of them in a workspace whose lock is free, else those older
 * than SKD_WORKSPACE_TMP_MAX_AGE_S (a live replica sharing DATA_DIR may
 * be writing the younger ones). Returns the number removed, or a negative
 * SKD_E* when data_dir/workspaces cannot be read (missing is 0). */
int skd_workspace_sweep_tmp(const char *data_dir, skd_err *err);

/* SKD_EQUOTA when writing more bytes into ws would leave its filesystem
 * fewer than reserve bytes free (the store's reserve,
 * SKILLS_DATA_RESERVE_BYTES); else 0. */
int skd_workspace_reserve_check(skd_workspace *ws, uint64_t more, uint64_t reserve, skd_err *err);

/* Serialise writers of one workspace (flock on the directory fd). */
int skd_workspace_lock(skd_workspace *ws, skd_err *err);
void skd_workspace_unlock(skd_workspace *ws);

#endif
