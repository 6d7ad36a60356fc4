/*
 * Saved files of paused live sandboxes (native_snap.c): the snapshot
 * store under DATA_DIR/snapshots/<instance>/ and the copy that fills it.
 * Runs in the spawner (and the zygote, for the instance directory).
 */
#ifndef SKILLD_SANDBOX_NATIVE_SNAP_H
#define SKILLD_SANDBOX_NATIVE_SNAP_H

#include <stddef.h>
#include <stdint.h>

#include "skilld/error.h"

/* This server's snapshot directory (the zygote made it), or NULL/"" for
 * none: pause, resume and fork are then SKD_EUNSUPPORTED. */
void skd__snap_set_dir(const char *dir);
int skd__snap_enabled(void);

/* This server's snapshot directory: the zygote names it,
 * <data_dir>/snapshots/<random> (dir "" when it cannot), without making
 * it. A spawner's set_dir removes the directories of servers that are
 * gone (their <name>.lock is free); its first save makes the directory and
 * holds the lock. Once that spawner is gone, the zygote holds it
 * (instance_hold: the lock fd, or -1 when it is not there or held still).
 * instance_end removes the directory and the lock file, and closes
 * lock_fd (-1: none). */
void skd__snap_instance_name(const char *data_dir, char *dir, size_t cap);
int skd__snap_instance_hold(const char *dir);
void skd__snap_instance_end(const char *dir, int lock_fd);

/* Open snapshot name (a UUID, or one with a suffix) of this instance, or
 * without create a published one (skd__snap_publish), as a directory fd (caller closes), making it
 * first with create. A negative SKD_E* on failure (SKD_ENOENT: no such snapshot). */
int skd__snap_open(const char *name, int create, skd_err *err);
/* Remove snapshot name (this instance's and a published one) and
 * everything in it. 0, or SKD_ENOENT. */
int skd__snap_drop(const char *name);
/* The names under DATA_DIR/snapshots/paused: the sandbox ids (lower-case
 * UUIDs), each followed by '\n', into ids (cap bytes; the names past it
 * are left for the next listing) and their number in *n; *others counts
 * the other names, the first of them into other (ocap bytes). 0 (none
 * when there is no such directory), SKD_EUNSUPPORTED (no snapshot
 * directory) or SKD_ESANDBOX. */
int skd__snap_list_paused(char *ids, size_t cap, int *n, int *others, char *other, size_t ocap,
                          skd_err *err);
/* The spawner's answer to SKD__REQ_SNAP_LIST (spawner_proto.h) for
 * handle, built into o (initialised here; the caller sends and frees it):
 * REP_OK with that listing, or REP_ERROR. */
struct skd__spawn_out;
void skd__snap_list_message(struct skd__spawn_out *o, uint64_t handle);
/* Rename snapshot from to to (an old to is removed first). */
int skd__snap_rename(const char *from, const char *to, skd_err *err);
/* Move this instance's snapshot from to DATA_DIR/snapshots/paused/to,
 * where it outlives this server (an old one is removed first); open and
 * drop find it there too. */
int skd__snap_publish(const char *from, const char *to, skd_err *err);

/* Copy the tree under directory src into directory dst (both borrowed),
 * at the top only the names that start with prefix (NULL: all), in a
 * child process. Symbolic links are copied, never followed. fsid: 0, or
 * the host id to create files as (dst is on a sandbox's own tmpfs, whose
 * user namespace maps it); owners are those of src either way. *bytes
 * (may be NULL) grows by what was copied; past max, SKD_EQUOTA. */
int skd__snap_copy(int src, int dst, const char *prefix, int64_t max, unsigned fsid, int64_t *bytes,
                   skd_err *err);
/* The cap of a copy back into a sandbox's own tmpfs (a resume's, a
 * fork's): none of the copy's own, as the tmpfs holds it to its size. The
 * copy's count (512 bytes an entry, a link's target) is above what tmpfs
 * charges, so a snapshot saved near the size would not fit the count. */
#define SKD__SNAP_INTO_TMPFS INT64_MAX
/* skd__snap_copy for a pause's copy, which outlives its server: every file
 * and directory it writes, and dst, are synced to disk before it returns
 * (only what it wrote: an fsync each, not the whole filesystem). */
int skd__snap_copy_synced(int src, int dst, const char *prefix, int64_t max, int64_t *bytes,
                          skd_err *err);

#endif
