/*
 * Live sandboxes of the native provider: what native_live.c (the sandbox,
 * its root layer, pause and fork) and native_live_exec.c (an exec in it)
 * share. Spawner-only, one thread.
 */
#ifndef SKD_NATIVE_LIVE_INT_H
#define SKD_NATIVE_LIVE_INT_H

#include "sandbox/native/native_int.h"

#include <sys/wait.h>

#ifndef P_PIDFD
#define P_PIDFD 3
#endif

struct lexec;

struct live {
    struct live *next;
    char id[SKD_UUID_LEN + 1];
    skd_sandbox_config cfg;
    skd__sandbox_req req; /* borrowed by s: its strings are below */
    char *image, *rootfs, *cwd;
    char *argv[2], *envp[1];
    struct nstate *s;    /* the init's: cgroup, pidfd, mount namespace */
    struct lexec *execs; /* prepared in it and not yet cleaned up */
    int egress_fd;       /* networkEnabled: its proxy socket until the spawner takes it */
    int layer_fd;        /* the root layer's tmpfs (detached), for a pause or fork; or -1 */
    int refs;            /* 1 while it lives, +1 per exec prepared in it */
    int gone;            /* deleted: no new exec; freed when the last exec is cleaned up */
};

struct lexec {
    struct lexec *next; /* in l->execs */
    const skd__sandbox_req *req;
    struct live *l;
    struct skd__native_child child;
    int pidfd;
    long long oom_before;
};

/* The live sandbox id (not deleted), or NULL. */
struct live *skd__live_find(const char *id);
/* Drop a reference to l; the last one ends and frees it. */
void skd__live_unref(struct live *l);
/* Reap the relays of l's execs that have exited (killed with the sandbox):
 * their runs then report SIGKILL (spawner.c finds them reaped). */
void skd__live_reap_execs(struct live *l);
/* Commit what l wrote to its workspace since the last commit
 * (skd__wsq_commit_live; nothing without the quota overlay): after each
 * exec, into that exec's outcome, and before a pause, a fork and its end
 * (out NULL: a refusal is logged). */
void skd__native_live_commit(struct live *l, skd__outcome *out);

#endif
