/*
 * The workspace quota inside the sandbox (src/sandbox/ws_quota.c): a run
 * with a writable workspace sees an overlay whose lower layer is the
 * workspace and whose upper layer lives on a tmpfs capped near the quota.
 * After the run the upper layer is committed to the workspace when the run
 * was not killed and the result fits the quota and the DATA_DIR reserve;
 * otherwise nothing of it is kept. Needs CAP_SYS_ADMIN in the initial user
 * namespace (the spawner); providers call it from prepare and cleanup.
 */
#ifndef SKILLD_SANDBOX_WS_QUOTA_H
#define SKILLD_SANDBOX_WS_QUOTA_H

#include <stdint.h>

#include "skilld/error.h"

/* Where the per-run tmpfs and overlay are mounted:
 * SKD__WSQ_DIR/<owner>/<run id>, or .../<owner>/warm-N for a pre-made
 * sandbox's run (skd__wsq_stage). */
#define SKD__WSQ_DIR "/run/skilld-wsq"

typedef struct skd__wsq skd__wsq;

/* Mount the tmpfs (quota bytes plus room for metadata) and the overlay of
 * workspace for the run named id. ws_fd (borrowed, or -1) is a directory descriptor
 * of exactly that workspace (the spawner's): the overlay's lower layer and
 * the commit then use it, not whatever the path names later. *out is
 * freed with skd__wsq_free. Returns 0 or SKD_ESANDBOX naming the step
 * (fail closed: the run must not go on). */
int skd__wsq_prepare(const char *workspace, int ws_fd, const char *id, int64_t quota,
                     skd__wsq **out, skd_err *err);

/* The same with the lower layer seen through an idmapped mount (idmap_fd:
 * a user namespace, borrowed) and the upper layer's root owned by
 * upper_uid:upper_gid: the native sandbox, whose user is a host id that
 * owns nothing on disk (overlayfs itself cannot be idmapped; its layers
 * can). */
int skd__wsq_prepare_idmapped(const char *workspace, int ws_fd, const char *id, int64_t quota,
                              int idmap_fd, unsigned upper_uid, unsigned upper_gid, skd__wsq **out,
                              skd_err *err);

/* A pre-made sandbox's share of skd__wsq_prepare_idmapped, done while it
 * waits for a run: the directory SKD__WSQ_DIR/<owner>/<name>, its tmpfs of
 * quota bytes (plus room for metadata) and the overlay's directories, upper/ owned by
 * upper_uid:upper_gid. Nothing of a workspace is in it. */
int skd__wsq_stage(const char *name, int64_t quota, unsigned upper_uid, unsigned upper_gid,
                   skd__wsq **out, skd_err *err);

/* skd__wsq_prepare_idmapped on a stage (taken over, NULL ok): when it was
 * made for this quota, only the workspace's part is done (upper/'s mode,
 * the idmapped lower layer, the overlay); otherwise the stage is freed and
 * everything is made afresh. The stage is used for this run only. */
int skd__wsq_prepare_staged(skd__wsq *stage, const char *workspace, int ws_fd, const char *id,
                            int64_t quota, int idmap_fd, unsigned upper_uid, unsigned upper_gid,
                            skd__wsq **out, skd_err *err);

/* The merged directory the sandbox gets as /workspace. Borrowed. */
const char *skd__wsq_merged(const skd__wsq *q);

/* After the sandbox is gone: unmount the overlay and, when keep is 1,
 * commit its changes to the workspace under the workspace lock if the
 * workspace then holds at most quota bytes and DATA_DIR's filesystem keeps
 * reserve bytes free. Returns 0 (committed; *bytes the workspace holds
 * now), SKD_EQUOTA (nothing kept; err says why), SKD_ECANCELLED (keep 0:
 * nothing kept) or SKD_EIO. Names starting ".skd-tmp-" are never
 * committed (the prefix is the workspace layer's). */
int skd__wsq_commit(skd__wsq *q, int keep, int64_t reserve, uint64_t *bytes, skd_err *err);

/* The sandbox's init was seen to exit, so its pid namespace and every task
 * in it are gone: the commit reads the upper layer with the overlay still
 * mounted, and the overlay is unmounted with the rest afterwards
 * (skd__wsq_free, after the outcome was sent). An unmount before the
 * commit cost 0.1-0.5 ms on the run's path, lazy or not, and could not
 * have found a sandbox task: the sandbox's mount of the overlay is a copy
 * in its own namespace, which went with its last task. Nothing reads or
 * writes through the overlay any more, so the commit's changes to the
 * workspace (its lower layer) are never seen through it. NULL ok. */
void skd__wsq_sandbox_gone(skd__wsq *q);

struct skd__outcome;
/* skd__wsq_commit for a provider's cleanup: the result goes into the
 * outcome's ws_* fields (and the log when it is an I/O failure). */
void skd__wsq_commit_outcome(skd__wsq *q, int keep, int64_t reserve, struct skd__outcome *o);

/* A live sandbox's commit (native_live.c: after each exec, before a pause
 * or fork, at its end): the overlay stays mounted and in use, so the upper
 * layer is read in place and kept; only its entries changed (inode or
 * ctime) since an earlier commit applied them are applied, under the same rules and
 * code as skd__wsq_commit (all or nothing; a refused commit is tried again
 * whole at the next one). The result goes into o's ws_* fields. */
void skd__wsq_commit_live(skd__wsq *q, int64_t reserve, struct skd__outcome *o);

/* What a live sandbox's commits applied (ws_quota_seen.c): inode -> the
 * change time it had then. */
#include <sys/types.h>
#include <time.h>
typedef struct skd__wsq_seen skd__wsq_seen;
/* 1 when ino is recorded with exactly ctime (unchanged since it was
 * applied); t NULL ok. */
int skd__wsq_seen_same(const skd__wsq_seen *t, ino_t ino, const struct timespec *ctime);
/* Record ino with ctime (*tp made on first use). 0 or -1 (out of memory:
 * the entry is then applied again next time, which is safe). */
int skd__wsq_seen_put(skd__wsq_seen **tp, ino_t ino, const struct timespec *ctime);
void skd__wsq_seen_free(skd__wsq_seen *t);

/* SKILLS_WORKSPACE_MAX_ENTRIES for every later commit (default 100000):
 * files, directories and links the workspace may hold after a run. */
void skd__wsq_set_max_entries(long long n);

/* Unmount whatever is left and remove the run's directory. NULL ok. */
void skd__wsq_free(skd__wsq *q);

/* Unmount and remove every SKD__WSQ_DIR/<owner>/<id> of an owner that is gone
 * (called once when the first quota overlay is made). Best effort. */
void skd__wsq_sweep(void);

/* 0 when quota overlays can be made here (tmpfs and overlay mounts with
 * CAP_SYS_ADMIN), else SKD_ESANDBOX with why. For doctor. */
int skd__wsq_probe(skd_err *err);

#endif
