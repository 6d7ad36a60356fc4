/*
 * Internals of the native provider (native.c and its parts native_root.c,
 * native_idmap.c, native_warm.c, sharing native_int.h: provider ops and the
 * parent side of a spawn; native_child.c: the child between clone3 and
 * execve; native_cgroup.c and native_cgroup_run.c: cgroup v2 and v1 limits; native_seccomp.c: the
 * filter).
 *
 * Identities. Inside the sandbox the command runs as uid/gid 1000 with no
 * capabilities. The user namespace maps only two ids:
 *   inside 0    -> host SKD_NATIVE_HOST_BASE        (used during setup only)
 *   inside 1000 -> host SKD_NATIVE_HOST_BASE + 1000 (the command)
 * Host root is never mapped. The host ids are in a range no account uses
 * (above the usual /etc/subuid ranges). The workspace (owned by host root,
 * mode 0700) is bind-mounted through an idmapped mount that shows its
 * owner (on disk uid/gid 0) as the sandbox user and stores the sandbox
 * user's new files as uid/gid 0 on disk, so the server reads and writes them
 * as before; the mount is nosuid and nodev, and DATA_DIR is 0700, so a
 * set-uid bit the sandbox sets on its files is inert.
 */
#ifndef SKILLD_SANDBOX_NATIVE_H
#define SKILLD_SANDBOX_NATIVE_H

#include <linux/filter.h>
#include <sys/types.h>

#include "sandbox/provider.h"

#define SKD_NATIVE_UID 1000
#define SKD_NATIVE_HOST_BASE 0x70000000u

/* ---- cgroups (native_cgroup.c: the tree; native_cgroup_run.c: a run's) ---- */
typedef struct skd__cgroup skd__cgroup;

/* Which cgroup version and controllers are usable; 0 or SKD_ESANDBOX. */
int skd__cgroup_detect(skd_err *err);
/* One-line description for doctor and errors ("v1 (memory pids cpu
 * freezer)", "v2 at /sys/fs/cgroup/..."). Static storage. */
const char *skd__cgroup_describe(void);
/* Create the run's cgroup and write every limit of cfg. Fail closed. */
int skd__cgroup_create(const char *id, const skd_sandbox_config *cfg, skd__cgroup **out,
                       skd_err *err);
/* The same in two steps: the directory alone (no limit written yet: a
 * pre-made sandbox's cgroup, made before its run is known; it may get the
 * defaults by skd__cgroup_write_ahead), then the run's limits. A cgroup is never used for two runs.
 */
int skd__cgroup_create_bare(const char *id, skd__cgroup **out, skd_err *err);
int skd__cgroup_apply(skd__cgroup *cg, const skd_sandbox_config *cfg, skd_err *err);
/* Open a bare cgroup's limit files ahead (a pre-made sandbox's, while it
 * waits), so that skd__cgroup_apply only writes them: on the run's path a
 * write, not a path lookup in the cgroup filesystem. Best effort: a file
 * that cannot be opened is opened by apply, as without this. */
void skd__cgroup_open_limits(skd__cgroup *cg);
/* Write cfg's limits to a bare cgroup ahead, through the descriptors
 * skd__cgroup_open_limits opened (a pre-made sandbox's, with the
 * operator's default limits, never a tenant's). skd__cgroup_apply then
 * writes only the values that differ. Best effort: a limit that could not
 * be written ahead is written by apply, as without this. */
void skd__cgroup_write_ahead(skd__cgroup *cg, const skd_sandbox_config *cfg);
/* cgroup v2: a directory fd of the run's cgroup for clone3's
 * CLONE_INTO_CGROUP (no migration afterwards); -1 on v1. Borrowed. */
int skd__cgroup_clone_fd(const skd__cgroup *cg);
/* cgroup v1: open the run's "tasks" file of every controller (write-only,
 * close-on-exec) into fds[0..cap), for the child to join by writing "0"
 * (itself, one thread) before it does anything else. Moving one's own
 * thread skips the global threadgroup lock and so the RCU grace period that
 * moving another process waits for. The files are opened here, by root, so
 * the kernel's check (the opener's credentials) passes for the child.
 * Returns how many (0 on v2: CLONE_INTO_CGROUP is used) or SKD_ESANDBOX. */
int skd__cgroup_join_fds(const skd__cgroup *cg, int *fds, int cap, skd_err *err);
/* SIGKILL every process in the cgroup (cgroup.kill, or each listed
 * process; the run's pid namespace, whose init the caller killed first,
 * takes the rest). Never blocks for long. */
void skd__cgroup_kill(skd__cgroup *cg);
/* 1 when the kernel OOM-killed a process of this cgroup. */
int skd__cgroup_oom_killed(skd__cgroup *cg);
/* What the cgroup's processes used, from its own counters: CPU time in
 * microseconds (v2 cpu.stat usage_usec; v1 cpuacct.usage) and the memory
 * high-water mark in bytes (v2 memory.peak; v1 memory.max_usage_in_bytes);
 * each -1 when the kernel does not keep it here. */
void skd__cgroup_usage(skd__cgroup *cg, int64_t *cpu_us, int64_t *mem_peak);
/* How many times the kernel OOM-killed a process of this cgroup so far
 * (a live sandbox's exec compares it before and after). */
long long skd__cgroup_oom_count(skd__cgroup *cg);
/* Remove the cgroup (killing leftovers) and free. NULL ok. */
void skd__cgroup_destroy(skd__cgroup *cg);
/* Freeze (on) or thaw every task of cg (v2 cgroup.freeze, v1 freezer).
 * Freezing waits until the tasks are frozen, 2 s at most. 0, or -1 when
 * it cannot (no freezer) or they did not freeze in time. */
int skd__cgroup_freeze(skd__cgroup *cg, int on);
/* Drop what this process found out about cgroups (a freshly forked
 * spawner starts over). */
void skd__cgroup_forget(void);
/* Remove every cgroup this process made (its "skilld/<pid>", the
 * "skilld-server" leaf it moved into, the controllers it enabled) once its
 * sandboxes are gone; also registered with atexit by the first detect. */
void skd__cgroup_release(void);
/* Delegation (cgroup_delegate.c). 1 when systemd delegated the cgroup v2
 * at path (our cgroup "self" under the mount) with memory, pids and cpu; 0
 * when it did not and may give us a scope that is (why: a session scope, a
 * unit without Delegate=, a missing controller); -2 when it did not and
 * cannot (why: no manager answers, a user in a system unit); -1 without
 * systemd (the caller tries the cgroup as it is). */
int skd__cgroup_delegated(const char *path, const char *self, char *why, size_t cap);
/* Ask systemd for a transient scope with Delegate=yes holding this process
 * and wait until we are in it. 0 or SKD_ESANDBOX naming reason and the fix. */
int skd__cgroup_delegate(const char *reason, skd_err *err);
/* The controllers of memory, pids, cpu missing from path's
 * cgroup.controllers into out ("" when none); -1 when unreadable. */
int skd__cgroup_missing_controllers(const char *path, char *out, size_t cap);
/* How many processes in the cgroup at dir are not skilld's (not of this
 * process's executable file), their names and pids into names ("comm (pid
 * N), ..."); -1 when dir's cgroup.procs cannot be read. */
int skd__cgroup_foreign_procs(const char *dir, char *names, size_t cap);
/* This process's cgroup path for cgroup v1 controller ctl, or v2 when ctl
 * is NULL ("" for the root), from text (the content of /proc/self/cgroup,
 * borrowed) or, with skd__cgroup_self, read now. 0, or -1 when there is no
 * such line or it does not fit in cap bytes. */
int skd__cgroup_parse_self(const char *text, const char *ctl, char *out, size_t cap);
int skd__cgroup_self(const char *ctl, char *out, size_t cap);
/* What to tell an operator whose cgroup cannot be delegated. Static. */
const char *skd__cgroup_delegate_fix(void);

/* ---- seccomp (native_seccomp.c) ---- */
/* The filter program, built once with libseccomp. Borrowed, lives for the
 * process. */
int skd__seccomp_program(const struct sock_fprog **out, skd_err *err);

/* ---- the child (native_child.c) ---- */
enum mnt_kind { MNT_BIND_DIR, MNT_BIND_FILE, MNT_SYMLINK, MNT_WRITE_FILE, MNT_DIR };

/* One entry of the new root, with paths already absolute under the staging
 * directory (the child formats nothing). */
struct mnt_entry {
    enum mnt_kind kind;
    char *dst;    /* path under the staging root */
    char *src;    /* bind source, symlink target, or file content */
    int writable; /* bind stays writable (device nodes) */
    int devices;  /* bind keeps device access (no nodev) */
};

/* Everything the child needs, prepared by the parent before clone3. */
struct skd__native_child {
    const char *stage;      /* staging mount point (an empty host dir) */
    const char *stage_opts; /* tmpfs options of the new root */
    struct mnt_entry *ents;
    size_t nents;
    const char *proc_dir, *dev_dir, *tmp_dir, *shm_dir, *ws_dir;
    const char *tmp_opts, *shm_opts;
    int ws_fd;             /* detached idmapped workspace mount or -1 */
    int img_fd;            /* detached read-only image root or -1 */
    const char *img_dir;   /* where img_fd is attached while binding */
    int skill_fd;          /* detached read-only skill folder mount or -1 */
    const char *skill_dir; /* where skill_fd is attached (/skill) */
    const char *cwd;
    char *const *argv;
    char *const *envp;
    const char *path;         /* the PATH to search (from envp) */
    unsigned long long fsize; /* RLIMIT_FSIZE */
    const struct sock_fprog *seccomp;
    int sync_fd;   /* read end: "g" after the id maps */
    int cg_fds[8]; /* cgroup v1: the run's "tasks" files, written "0" first */
    int ncg;
    int status_fd; /* write end: failing step */
    int in_fd, out_fd, err_fd;
    int rootless; /* 1: no inside-root, no setgroups (unprivileged user namespace) */
    /* A pre-made sandbox (native_warm.c): the root is
     * built and pivoted before any run is known, /tmp and /dev/shm are
     * mounted with tmp_opts and shm_opts (the sizes of the spawner's last
     * run; a run with other sizes gets fresh ones), the capability bounding
     * set is emptied, the workspace is left out, and the child then waits
     * on ctl_fd for the one run it serves. */
    int warm;
    int ctl_fd;
    /* A live sandbox's init (native_live.c): after the set-up it drops
     * every privilege as a command would, closes every descriptor (the
     * status pipe's EOF says it is ready) and only waits, holding the
     * namespaces, until it is killed. */
    int live;
    /* An exec into a live sandbox (skd__native_enter_main): the pidfd of
     * its init, whose namespaces one setns enters (the user namespace
     * first, by the kernel), and the pipe on which the entering process
     * writes the relay's pid before it exits. */
    int ns_pidfd;
    int pid_pipe;
};

/* What the spawner sends a pre-made sandbox when its run arrives (one
 * SOCK_SEQPACKET message, the workspace mount as SCM_RIGHTS when has_ws),
 * followed by NUL-terminated strings: tmp options, /dev/shm options, cwd,
 * PATH, argc arguments, envc environment entries. */
#define SKD__WARM_MAGIC 0x4d524157u /* "WARM" */
#define SKD__WARM_MSG_MAX (128u * 1024u)
struct skd__warm_msg {
    unsigned magic, argc, envc, has_ws;
    unsigned long long fsize;
    unsigned len; /* bytes of strings after the header */
};

/* Identities of the native provider in this process (native.c): who owns
 * the workspaces on disk (the unprivileged server user, whose files the
 * idmapped mount shows as the sandbox user), and whether this process runs
 * rootless (no idmapped mounts; the sandbox user maps to our own uid).
 * Set once by the spawner before the first run; defaults: owner 0, root. */
void skd__native_set_owner(unsigned uid, unsigned gid);
/* Forget every state inherited from the process that forked the spawner. */
void skd__native_forget(void);
/* 1 when this process runs the native provider rootless. */
int skd__native_rootless(void);

/* Build the sandbox and exec the command; never returns. With c->warm the
 * child builds the run-independent part, then waits for its run on
 * c->ctl_fd (and exits quietly on EOF: the sandbox was discarded). */
void skd__native_child_main(const struct skd__native_child *c) __attribute__((noreturn));
/* Enter a live sandbox (the namespaces of c->ns_pidfd's process, its cgroup by c->cg_fds on v1 or
 * by clone3 on v2), start a relay in its pid namespace with the spawner as its parent
 * (CLONE_PARENT), write the relay's pid (as the spawner sees it) to c->pid_pipe and exit. The relay
 * starts the command as the init of a pid namespace of its own and ends as the command ends;
 * killing it kills the command and all it started. The command gets the same limits, capability
 * drop, no_new_privs, seccomp filter and uid as a one-shot run. Never returns. */
void skd__native_enter_main(const struct skd__native_child *c) __attribute__((noreturn));
/* What a pre-made sandbox does first: move the descriptors of c (its
 * pipes, sockets, status pipe and cgroup files) above every inherited one
 * and close all others (ends the process on failure). For tests. */
void skd__native_keep_own_fds(struct skd__native_child *c);

/* Pre-made sandboxes of this process (native_warm.c). Fill makes one when fewer
 * than depth (at most 2) are waiting and this process can (root, native
 * usable), first tearing down the runs still owed it: 1 when it made one,
 * 0 when none was wanted, -1 when making it failed. Drop kills every
 * waiting one and removes its cgroup. */
int skd__native_warm_fill(int depth);
/* A run's defaults, the operator's (the spawner's configuration): pre-made
 * sandboxes get /tmp and /dev/shm of this size and these limits written
 * to their cgroup ahead; a run that asks for others gets those instead. */
void skd__native_set_defaults(const skd_sandbox_config *defaults);
void skd__native_warm_drop(void);
/* on: cleanup leaves the unmounting and removal of a committed quota
 * overlay, the run's mount namespace and its cgroup to skd__native_flush,
 * which the spawner calls once the run's outcome is sent (nothing of the
 * run is used after its commit). flush_one tears down one run's and
 * returns 1, or returns 0 when none is left. */
void skd__native_defer_teardown(int on);
void skd__native_flush(void);
int skd__native_flush_one(void);

/* Live sandboxes of this process (native_live.c). Create starts one for
 * req (borrowed; req->id names it, req->argv is not used) with a writable
 * root layer of root_layer_max bytes (0, or rootless: the root stays
 * read-only) and waits until its init is ready: 0, SKD_EEXISTS, or SKD_ESANDBOX naming the step.
 * Delete kills every process of it and removes its cgroup: 0 or
 * SKD_ENOENT. drop_all ends every one (the spawner's exit). An exec into
 * one is a run of skd__provider_native_live, whose req->live names it. */
/* restore: NULL, or the snapshot (native_snap.h) to start from: its root
 * layer and /tmp are copied in (the caller removes it after). */
int skd__native_live_create(const skd__sandbox_req *req, int64_t root_layer_max,
                            const char *restore, skd_err *err);
/* Save live sandbox id's root layer and /tmp as snapshot dst, with the
 * sandbox frozen while they are copied; then SKD__SNAP_END ends it (every
 * process, its cgroup) or else it runs on. SKD__SNAP_FROM_SAVED: copy
 * snapshot id instead. *bytes: what the snapshot holds. SKD_EQUOTA past
 * max bytes (nothing saved, the sandbox runs on); SKD_ENOENT for no such
 * sandbox or snapshot. */
int skd__native_live_save(const char *id, const char *dst, int flags, int64_t max, int64_t *bytes,
                          skd_err *err);
int skd__native_live_delete(const char *id);
/* Commit what live sandbox id's processes wrote to its workspace so far,
 * as an exec's end does; *out gets the workspace fields (none without a
 * quota overlay). -1: no such native live sandbox. */
int skd__native_live_commit_id(const char *id, skd__outcome *out);
/* The egress proxy's listening socket a live sandbox made with
 * networkEnabled got on its loopback (the caller owns it from now on), or
 * -1: none, or taken already. */
int skd__native_live_take_egress(const char *id);
void skd__native_live_drop_all(void);
size_t skd__native_live_count(void);
extern const skd__provider skd__provider_native_live;
size_t skd__native_deferred(void); /* runs whose teardown is owed */

#endif
