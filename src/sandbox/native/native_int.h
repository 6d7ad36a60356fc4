/*
 * Internals of the native provider's parent side, shared by its files:
 * native.c (detect, prepare, spawn, kill, cleanup, deferred teardown),
 * native_idmap.c (the id maps and the idmapped workspace's user namespace),
 * native_root.c (the new root's entries and the detached mounts) and
 * native_warm.c (pre-made sandboxes). Everything here runs in the spawner's
 * one thread; nothing is locked. The child side is native_child.c, which
 * sees only struct skd__native_child (native.h).
 */
#ifndef SKILLD_SANDBOX_NATIVE_INT_H
#define SKILLD_SANDBOX_NATIVE_INT_H

#include <limits.h>
#include <sys/stat.h>

#include "sandbox/native/native.h"
#include "sandbox/ws_quota.h"

#define MAX_ENTS 128

/* What the native provider knows of this process, set once (init_once in
 * native.c) and reset by skd__native_forget. */
struct skd__native_globals {
    char stage[PATH_MAX];          /* empty host directory the child mounts its root on */
    int idmap_fd;                  /* user namespace: on-disk owner <-> sandbox user */
    unsigned owner_uid, owner_gid; /* who owns the workspaces on disk */
    int rootless;                  /* no root: unprivileged user namespace only */
    struct stat own_mntns;         /* this process's mount namespace (st_dev, st_ino) */
    int no_ns_ioctl;               /* PIDFD_GET_MNT_NAMESPACE is not known (before 6.11) */
    /* The workspace quota of the last run that had one: a pre-made
     * sandbox's quota tmpfs is made for it (skd__wsq_stage; another quota
     * starts afresh). */
    int64_t last_quota;
    char why[SKD_ERR_MSG_MAX];
};
extern struct skd__native_globals skd__nat;

/* One sandbox of the native provider, from prepare to cleanup. */
struct nstate {
    const skd__sandbox_req *req;
    skd__cgroup *cg;
    int pidfd;
    struct mnt_entry ents[MAX_ENTS];
    size_t nents;
    char *paths[8]; /* proc, dev, tmp, shm, workspace, image dir, skill */
    char tmp_opts[64], shm_opts[64];
    struct skd__native_child child;
    skd__wsq *wsq; /* the workspace quota overlay, or NULL (src/sandbox/ws_quota.c) */
    /* A pre-made sandbox: its control socket and the parent's pipe ends,
     * held from its start until its run's spawn hands them out. */
    int warm, handed, ctl;
    skd__spawned ends;
    skd__wsq *stage; /* pre-made: its run's quota tmpfs, made ahead, or NULL */
    pid_t pid;       /* in this process's pid namespace, while pidfd is unreaped */
    int mntns;       /* the sandbox's mount namespace, held (skd__native_hold_mntns), or -1 */
};

/* ---- native.c ---- */
/* The provider's detect: 0 when native sandboxes can be made here. */
int skd__native_detect(skd_err *err);
/* A new state for req (borrowed; it must outlive the state), every
 * descriptor -1; NULL when out of memory. */
struct nstate *skd__native_state_new(const skd__sandbox_req *req);
/* Pipes, clone3, id maps, release: a started child (cold: its run's; warm:
 * one that builds the root and waits on its control socket). */
int skd__native_start_child(struct nstate *s, skd__spawned *out, skd_err *err);
/* Hold the sandbox's mount namespace from outside (best effort). */
void skd__native_hold_mntns(struct nstate *s);
/* Close every descriptor of sp and set it to -1. */
void skd__native_close_ends(skd__spawned *sp);
/* The provider's cleanup: out (may be NULL) gets the OOM verdict. */
void skd__native_cleanup(void *state, skd__outcome *out);

/* ---- native_idmap.c ---- */
/* Write map to /proc/<pid>/<file>; 0, or -1 with errno. */
int skd__native_write_map(pid_t pid, const char *file, const char *map);
/* The idmapped workspace's user namespace (owner -> sandbox user), as a
 * descriptor, or -1 with errno. */
int skd__native_make_idmap_userns(void);
/* Rootless: 0 when an unprivileged user namespace can be made. */
int skd__native_probe_userns(void);

/* ---- native_root.c ---- */
/* Lay out the new root's entries and fill s->child for the request. */
int skd__native_fill_child(struct nstate *s, skd_err *err);
/* The detached mounts of the run (workspace, skill folder, image). */
int skd__native_open_mounts(struct nstate *s, skd_err *err);
/* The run's /tmp and /dev/shm mount options from its limits. */
void skd__native_set_opts(struct nstate *s);
/* The PATH in envp, or the default one. Borrowed. */
const char *skd__native_env_path(char *const *envp);

/* ---- native_warm.c ---- */
/* 1 when a pre-made sandbox waits and can serve req. */
int skd__native_warm_fits(const skd__sandbox_req *req);
/* The oldest waiting pre-made sandbox still alive, or NULL. */
struct nstate *skd__native_warm_take(void);
/* Hand the run to its pre-made sandbox and out the descriptors. */
int skd__native_warm_spawn(struct nstate *s, skd__spawned *out, skd_err *err);
/* Forget the waiting ones and the defaults (inherited from a parent). */
void skd__native_warm_forget(void);

#endif
