/*
 * The spawner (spawner.c) and its client (spawner_client.c): internals
 * shared by the two halves. The protocol is in spawner_proto.h.
 */
#ifndef SKILLD_SANDBOX_SPAWNER_H
#define SKILLD_SANDBOX_SPAWNER_H

#include <limits.h>
#include <sys/types.h>

#include "sandbox/provider.h"

/* What the spawner is told once, by the process that forks it, before
 * anything hostile was read: the operator's settings. Self-contained (no
 * pointers), so it survives the fork as it is. */
typedef struct skd__spawner_conf {
    char data_dir[PATH_MAX];
    char allowed_images[4096];
    char runtime[16];
    unsigned owner_uid, owner_gid; /* who owns the workspaces (the server's user) */
    /* The ceilings: no request may go above them. */
    skd_sandbox_ceilings ceil;
    /* The workspace quota overlay (src/sandbox/ws_quota.c): bytes a
     * workspace may hold after a run (0: no overlay), and the bytes of
     * DATA_DIR's filesystem a commit leaves free. */
    long long workspace_quota, data_reserve;
    long long workspace_max_entries; /* SKILLS_WORKSPACE_MAX_ENTRIES (0: the default) */
    long long root_layer_max;        /* SKILLS_SANDBOX_ROOT_LAYER_MAX_BYTES: a live sandbox's */
    char snap_dir[PATH_MAX];         /* paused live sandboxes' files (the zygote sets it), or "" */
    /* A run's defaults (the operator's): pre-made sandboxes are made with
     * this /tmp size and these limits (native.c), never a tenant's. */
    skd_sandbox_config defaults;
    /* Pre-made native sandboxes (native.c): 0 none, 1 one at start only
     * (skilld exec), 2 two kept waiting, one made after each run (a server). */
    int warm;
} skd__spawner_conf;

/* Fork the zygote (which forks the first spawner at the server's first
 * request). Returns 0 with the control socket and the zygote's pid, or -1
 * with errno. */
/* The spawner's loop (spawner.c) on socket sock, in a process of its own:
 * it never returns. */
__attribute__((noreturn)) void skd__spawner_main(const skd__spawner_conf *conf, int sock);
int skd__zygote_fork(const skd__spawner_conf *conf, int *ctrl_out, pid_t *pid_out);
/* Fork a spawner without a zygote, for a caller with one run and the
 * native provider (skilld exec): nothing to fork again should it die (the
 * run fails), and no container to clean up after it. Returns 0 with the
 * spawner's socket and pid, or -1 with errno. */
int skd__spawner_fork(const skd__spawner_conf *conf, int *sock_out, pid_t *pid_out);

/* Checks of what the server sends (spawner_check.c). valid_uuid: 1 when s
 * is a lower-case UUID. fd_dir_path: *path (caller frees) is a path that
 * names exactly the directory fd, or SKD_EINVAL. valid_pem: 1 when s is one
 * PEM certificate and nothing else, at most 8 KiB. */
int skd__spawner_valid_uuid(const char *s);
int skd__spawner_fd_dir_path(int fd, char **path, skd_err *err);
int skd__spawner_valid_pem(const char *s);

#endif
