/*
 * The server's handle on its spawner (spawner_client.c). One per runner.
 */
#ifndef SKILLD_SANDBOX_SPAWNER_CLIENT_H
#define SKILLD_SANDBOX_SPAWNER_CLIENT_H

#include "sandbox/spawner/spawner.h"

/* Fork the zygote and get the first spawner from it. Call from a thread
 * that lives as long as the client (the parent-death signal follows the
 * forking thread). Caller frees with skd__spawner_client_free. */
int skd__spawner_client_new(const skd__spawner_conf *conf, skd__spawner_client **out, skd_err *err);
/* The current spawner's pid (zygote 0) or the zygote's (1), -1 if none. */
long skd__spawner_client_pid(skd__spawner_client *c, int zygote);
/* Close the sockets (the spawner kills and cleans up every run) and reap
 * the zygote. NULL ok. */
void skd__spawner_client_free(skd__spawner_client *c);
/* Close both sockets, which starts the spawner's and the zygote's exit
 * without waiting for it (skd__spawner_client_free waits). */
void skd__spawner_client_close(skd__spawner_client *c);
/* After skd__spawner_client_close: wait (at most 5 s, then kill) for the
 * zygote, which waits for its spawner's cleanup, and reap it. Call it from
 * the forking thread before that thread ends: the zygote's parent-death
 * signal follows the thread, and would cut the spawner's cleanup short
 * (its runs' cgroups and its own left behind). NULL ok; once. */
void skd__spawner_client_reap(skd__spawner_client *c);

/* Live sandboxes (spawner.c, native_live.c). Create makes one named id
 * (a UUID) with cfg's limits and workspace (a host directory, or NULL) at
 * /workspace, ca_pem (or NULL) added to its trust bundle, and sets *gen
 * to the spawner that holds it and *egress_fd to the egress proxy's
 * listening socket on its loopback (cfg->network_enabled; the caller owns
 * it) or -1: 0 or an SKD_E* with the spawner's message. Delete ends it: 0, SKD_ENOENT when the
 * spawner has none of that id, SKD_ESANDBOX when the spawner of gen is
 * gone (and the sandbox with it). gen: the current spawner's. */
int skd__spawner_live_create(skd__spawner_client *c, const char *id, const char *image,
                             const skd_sandbox_config *cfg, const char *workspace,
                             const char *ca_pem, int restore, unsigned *gen, int *egress_fd,
                             skd_err *err);
int skd__spawner_live_delete(skd__spawner_client *c, const char *id, unsigned gen, skd_err *err);
/* Commit what live sandbox id's processes wrote to its workspace so far
 * (an interpreter call's writes; an exec's end commits its own). out gets
 * the workspace fields: ws_checked 0 when it has no quota overlay. */
int skd__spawner_live_commit(skd__spawner_client *c, const char *id, unsigned gen,
                             skd__outcome *out, skd_err *err);
/* Pause, resume, fork (native_snap.c). Create with restore makes live
 * sandbox id again from its snapshot, which then goes (a resume, or a
 * fork's copy). Save keeps live sandbox id's files
 * (or with SKD__SNAP_FROM_SAVED its snapshot's) as snapshot dst, and with
 * SKD__SNAP_END ends it; *bytes is what was kept; SKD_EQUOTA past max.
 * Delete removes a snapshot of its id as well. gen 0: any spawner (a
 * snapshot outlives the spawner that made it). */
int skd__spawner_live_save(skd__spawner_client *c, const char *id, unsigned gen, const char *dst,
                           int flags, int64_t max, int64_t *bytes, skd_err *err);
/* The sandbox ids under DATA_DIR/snapshots/paused: *ids a new string
 * (caller frees), each id followed by '\n'; *others how many other names
 * there are, other (cap bytes) the first of them. 0 or an SKD_E*. */
int skd__spawner_snap_list(skd__spawner_client *c, char **ids, int *others, char *other, size_t cap,
                           skd_err *err);
unsigned skd__spawner_client_gen(skd__spawner_client *c);

#endif
