/*
 * Live sandboxes on the docker and podman runtimes (container_live.c): a
 * container that stays up, an exec into it per command. Spawner-only, one
 * thread; the spawner (spawner.c) routes a live create, exec, delete and
 * shutdown here when the sandbox is a container's.
 */
#ifndef SKILLD_SANDBOX_CONTAINER_LIVE_H
#define SKILLD_SANDBOX_CONTAINER_LIVE_H

#include <stddef.h>
#include <stdint.h>

#include "sandbox/provider.h"

/* Make live sandbox req->id as a started container of engine ("docker" or
 * "podman") with req's limits and image; with networkEnabled, its egress
 * proxy socket placed (skd__ctr_live_take_egress). restore: the name of a
 * snapshot (container_snap.c) whose /tmp it starts with, held to the new
 * /tmp's size by its tmpfs; NULL for none. Blocks for the engine's create
 * and start. 0, or SKD_ESANDBOX (the engine's message, or saved files that
 * do not fit), SKD_ELOST (the snapshot is gone), SKD_EINVAL, SKD_ENOMEM;
 * nothing is left on failure (the snapshot stays). */
int skd__ctr_live_create(const char *engine, const skd__sandbox_req *req, const char *restore,
                         skd_err *err);

/* Pause (SKD__SNAP_END: the container then ends as on delete) or the
 * first half of a fork: save the files of container live sandbox id (its
 * /tmp, frozen meanwhile: its root filesystem is read-only) as snapshot
 * dst, at most max bytes (*bytes: what was saved). 0, or SKD_ENOENT (no
 * such sandbox), SKD_ESANDBOX (a writable root, an engine's failure),
 * SKD_EQUOTA, SKD_EUNSUPPORTED; on failure it runs on. */
int skd__ctr_live_save(const char *id, const char *dst, int flags, int64_t max, int64_t *bytes,
                       skd_err *err);

/* 0 when snapshot name (if there is one) was saved on runtime ("auto" is
 * native for live sandboxes); else SKD_ESANDBOX naming the runtime it was
 * saved on. */
int skd__ctr_snap_origin_check(const char *name, const char *runtime, skd_err *err);

/* The provider of an exec into live sandbox id (its engine's), or NULL
 * when id is not a container live sandbox of this spawner. */
const skd__provider *skd__ctr_live_provider(const char *id);

/* Its egress proxy socket (the caller owns it), once; -1 when none. */
int skd__ctr_live_take_egress(const char *id);

/* End live sandbox id: `rm -f` of its container (its execs' clients then
 * end). 0, or -1 when there is no such sandbox. */
int skd__ctr_live_delete(const char *id);

/* End every one (the spawner's shutdown). */
void skd__ctr_live_drop_all(void);

size_t skd__ctr_live_count(void);

#endif
