/*
 * The native provider: a sandbox made of Linux namespaces, cgroups,
 * seccomp and rlimits, with no daemon (DESIGN.md, "Sandbox providers").
 * This file is the parent side: detect, prepare (limits, image, workspace
 * mount, the new root's entries), spawn (pipes, clone3, id maps, cgroup,
 * release the child), kill and cleanup. The child side is native_child.c.
 *
 * Trust: the request was validated by the runner; image roots come from
 * skd_sandbox_image_rootfs. Fail closed: every step that cannot be done
 * refuses the run with SKD_ESANDBOX naming the step.
 */
#include "sandbox/native.h"
#include "net/egress.h"
#include "skilld/log.h"
#include "sandbox/ws_quota.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/mount.h>
#include <linux/sched.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#endif
#endif

#ifndef P_PIDFD
#define P_PIDFD 3
#endif

#define NS_FLAGS                                                                                   \
    (CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWNET)
#define WARM_CLONE_FLAGS (CLONE_NEWUSER | CLONE_NEWPID)
#define MAX_ENTS 128

static const char *const stage_candidates[] = {"/run/skilld-sandbox-root",
                                               "/tmp/.skilld-sandbox-root"};

static struct {
    char stage[PATH_MAX];          /* empty host directory the child mounts its root on */
    int idmap_fd;                  /* user namespace: on-disk owner <-> sandbox user */
    unsigned owner_uid, owner_gid; /* who owns the workspaces on disk */
    int rootless;                  /* no root: unprivileged user namespace only */
    struct stat own_mntns;         /* this process's mount namespace (st_dev, st_ino) */
    int no_ns_ioctl;               /* PIDFD_GET_MNT_NAMESPACE is not known (before 6.11) */
    char why[SKD_ERR_MSG_MAX];
} N = {.idmap_fd = -1};
static pthread_once_t once = PTHREAD_ONCE_INIT;
struct nstate;
/* The pre-made sandboxes waiting for a run, oldest first (the oldest has
 * had the most time to finish its set-up). */
#define WARM_MAX 2
static struct nstate *warm[WARM_MAX];
static int nwarm;
/* The spawner's deferred teardown, done after the outcome was sent
 * (skd__native_flush): quota overlays already committed, whose unmounting
 * and removal (each rmdir of a mount point waits for an RCU grace period)
 * is all that is left of them, the quota tmpfs made ahead for a pre-made
 * sandbox whose run did not use it, the mount namespaces of reaped runs
 * (hold_mntns), and the cgroups of reaped runs (their OOM state read;
 * removing them may wait for dying tasks). */
static int defer_on;
static struct {
    skd__wsq *wsq, *stage;
    skd__cgroup *cg;
    int mntns;
} deferred[64];
/* The workspace quota of the last run that had one: a pre-made sandbox's
 * quota tmpfs is made for it (skd__wsq_stage; another quota starts afresh). */
static int64_t last_quota;
/* A run's defaults (the operator's): a pre-made sandbox's /tmp and /dev/shm
 * are mounted with this size and these limits are written to its cgroup
 * ahead. A run with other values gets fresh mounts (native_child.c,
 * warm_receive) and its own limits written at prepare. Never a tenant's
 * values, so nothing of one tenant's runs shapes the next sandbox. */
static int64_t def_tmp_size;
static skd_sandbox_config def_limits;

void skd__native_set_defaults(const skd_sandbox_config *defaults)
{
    def_limits = *defaults;
    def_tmp_size = defaults->tmp_size;
}
static size_t ndeferred;

void skd__native_defer_teardown(int on)
{
    defer_on = on;
}

size_t skd__native_deferred(void)
{
    return ndeferred;
}

/* Oldest first: what waits longest goes first. */
int skd__native_flush_one(void)
{
    if (ndeferred == 0)
        return 0;
    __typeof__(deferred[0]) d = deferred[0];
    ndeferred--;
    memmove(&deferred[0], &deferred[1], ndeferred * sizeof(deferred[0]));
    /* First: its tmpfs pages are charged to the cgroup below. (No sandbox
     * is cloned while runs are owed, see native_spawn and warm_fill, so
     * this is the last reference.) */
    if (d.mntns >= 0)
        close(d.mntns);
    skd__cgroup_destroy(d.cg);
    skd__wsq_free(d.wsq);
    skd__wsq_free(d.stage);
    return 1;
}

void skd__native_flush(void)
{
    while (skd__native_flush_one())
        ;
}

void skd__native_set_owner(unsigned uid, unsigned gid)
{
    N.owner_uid = uid;
    N.owner_gid = gid;
}

void skd__native_forget(void)
{
    /* Descriptors made by the process that forked the spawner are closed
     * in it: start over. */
    memset(&N, 0, sizeof(N));
    N.idmap_fd = -1;
    once = (pthread_once_t)PTHREAD_ONCE_INIT;
    nwarm = 0; /* the parent's (if any) are not ours to use */
    ndeferred = 0;
    defer_on = 0;
    last_quota = 0;
    def_tmp_size = 0;
    memset(&def_limits, 0, sizeof(def_limits));
    skd__cgroup_forget();
}

int skd__native_rootless(void)
{
    return geteuid() != 0;
}

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
    int mntns;       /* the sandbox's mount namespace, held (hold_mntns), or -1 */
};

static int write_map(pid_t pid, const char *file, const char *map)
{
    char p[64];
    snprintf(p, sizeof(p), "/proc/%d/%s", (int)pid, file);
    int fd = open(p, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = write(fd, map, strlen(map));
    int saved = errno;
    close(fd);
    errno = saved;
    return n == (ssize_t)strlen(map) ? 0 : -1;
}

/* The child of make_idmap_userns: it shares our memory (CLONE_VM), so only
 * raw system calls (STYLE.md 14): wait for the pipe to close, and exit. */
struct idmap_child {
    int rd, wr;
};

static int idmap_child_main(void *arg)
{
    const struct idmap_child *c = arg;
    char b;
    syscall(SYS_close, c->wr);
    syscall(SYS_read, c->rd, &b, 1);
    syscall(SYS_exit, 0);
    return 0;
}

/* 1 under valgrind (its documented client request, where its header was
 * there at build time; the test ring installs it). */
static int under_valgrind(void)
{
#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
    return RUNNING_ON_VALGRIND != 0;
#endif
#endif
    return 0;
}

/* A user namespace whose only mapping is the workspaces' on-disk owner (the
 * server's user) -> the sandbox user's host id, for the idmapped workspace
 * mount. Made once by a short-lived child that waits on a pipe while its
 * namespace is opened. The child shares our memory (CLONE_VM) instead of
 * copying it: a copy of the address space (the whole CLI's, for skilld
 * exec) and its teardown at the child's exit were most of what this took. */
static int make_idmap_userns(void)
{
    static char stack[16384] __attribute__((aligned(16)));
    int p[2], fd = -1;
    char map[64];
    if (pipe2(p, O_CLOEXEC) != 0)
        return -1;
    struct idmap_child c = {p[0], p[1]};
    /* Born with every signal blocked (as posix_spawn does): a handler of
     * ours run by the child would run on memory we share. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pid_t pid;
    if (under_valgrind()) {
        /* valgrind ends the whole process at a clone with CLONE_VM that
         * is neither a thread nor a vfork: a copy, as before. */
        pid = (pid_t)syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0);
        if (pid == 0)
            idmap_child_main(&c);
    } else {
        pid =
            clone(idmap_child_main, stack + sizeof(stack), CLONE_VM | CLONE_NEWUSER | SIGCHLD, &c);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    close(p[0]);
    if (pid < 0) {
        close(p[1]);
        return -1;
    }
    char gmap[64];
    snprintf(map, sizeof(map), "%u %u 1\n", N.owner_uid, SKD_NATIVE_HOST_BASE + SKD_NATIVE_UID);
    snprintf(gmap, sizeof(gmap), "%u %u 1\n", N.owner_gid, SKD_NATIVE_HOST_BASE + SKD_NATIVE_UID);
    if (write_map(pid, "uid_map", map) == 0 && write_map(pid, "gid_map", gmap) == 0) {
        char ns[64];
        snprintf(ns, sizeof(ns), "/proc/%d/ns/user", (int)pid);
        fd = open(ns, O_RDONLY | O_CLOEXEC);
    }
    int saved = errno;
    close(p[1]);
    /* Reaped before we return: the child runs on the static stack. */
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
        ;
    errno = saved;
    return fd;
}

/* Rootless: a user namespace may be made at all (probed with a child that
 * exits at once). */
static int probe_userns(void)
{
    pid_t pid = (pid_t)syscall(SYS_clone, CLONE_NEWUSER | CLONE_NEWNS | SIGCHLD, 0, 0, 0, 0);
    if (pid == 0)
        _exit(0);
    if (pid < 0)
        return -1;
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

static void init_once(void)
{
    uid_t me = geteuid();
    if (stat("/proc/self/ns/mnt", &N.own_mntns) != 0)
        memset(&N.own_mntns, 0, sizeof(N.own_mntns));
    N.rootless = me != 0;
    char own[64];
    snprintf(own, sizeof(own), "/tmp/.skilld-sandbox-root-%u", (unsigned)me);
    const char *cands[3] = {stage_candidates[0], stage_candidates[1], own};
    for (size_t i = N.rootless ? 2 : 0; i < 3; i++) {
        struct stat st;
        if ((mkdir(cands[i], 0755) == 0 || errno == EEXIST) && lstat(cands[i], &st) == 0 &&
            S_ISDIR(st.st_mode) && st.st_uid == me) {
            skd_strlcpy(N.stage, cands[i], sizeof(N.stage));
            break;
        }
    }
    if (!N.stage[0]) {
        snprintf(N.why, sizeof(N.why), "no staging directory (%s): %s", cands[N.rootless ? 2 : 0],
                 strerror(errno));
        return;
    }
    if (N.rootless) {
        if (probe_userns() != 0)
            snprintf(N.why, sizeof(N.why),
                     "rootless: unprivileged user namespaces are not available: %s (set "
                     "kernel.unprivileged_userns_clone=1 and user.max_user_namespaces > 0, or "
                     "start skilld as root)",
                     strerror(errno));
        else
            N.idmap_fd = -2; /* usable; no idmapped mounts in this mode */
        return;
    }
    N.idmap_fd = make_idmap_userns();
    if (N.idmap_fd < 0)
        snprintf(N.why, sizeof(N.why),
                 "user namespaces: %s (is kernel.unprivileged_userns_clone "
                 "or user.max_user_namespaces 0?)",
                 strerror(errno));
}

static int native_detect(skd_err *err)
{
    const struct sock_fprog *prog;
    pthread_once(&once, init_once);
    if (N.idmap_fd == -1)
        return skd_err_set(err, SKD_ESANDBOX, "native sandbox: %s", N.why);
    int rc = skd__cgroup_detect(err);
    if (rc)
        return rc;
    return skd__seccomp_program(&prog, err);
}

/* ---- the entries of the new root ---- */

static int add_ent(struct nstate *s, enum mnt_kind kind, const char *rel, const char *src, int dev)
{
    if (s->nents >= MAX_ENTS)
        return -1;
    struct mnt_entry *m = &s->ents[s->nents];
    size_t need = strlen(N.stage) + strlen(rel) + 2;
    m->dst = malloc(need);
    m->src = strdup(src ? src : "");
    if (!m->dst || !m->src) {
        free(m->dst);
        free(m->src);
        return -1;
    }
    snprintf(m->dst, need, "%s/%s", N.stage, rel);
    m->kind = kind;
    m->devices = dev;
    m->writable = dev;
    s->nents++;
    return 0;
}

static const char etc_passwd[] = "root:x:0:0:root:/root:/bin/sh\n"
                                 "sandbox:x:1000:1000:sandbox:/workspace:/bin/sh\n"
                                 "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n";
static const char etc_group[] = "root:x:0:\nsandbox:x:1000:\nnogroup:x:65534:\n";
static const char etc_hosts[] = "127.0.0.1\tlocalhost sandbox\n::1\tlocalhost ip6-localhost\n";
static const char etc_nsswitch[] = "passwd: files\ngroup: files\nhosts: files dns\n";

/* Minimal /etc for the host image (and for images without one). */
static int add_etc(struct nstate *s)
{
    static const char *const binds[] = {"ssl", "alternatives", "ca-certificates"};
    int rc = add_ent(s, MNT_DIR, "etc", NULL, 0);
    rc |= add_ent(s, MNT_WRITE_FILE, "etc/passwd", etc_passwd, 0);
    rc |= add_ent(s, MNT_WRITE_FILE, "etc/group", etc_group, 0);
    rc |= add_ent(s, MNT_WRITE_FILE, "etc/hosts", etc_hosts, 0);
    rc |= add_ent(s, MNT_WRITE_FILE, "etc/hostname", "sandbox\n", 0);
    rc |= add_ent(s, MNT_WRITE_FILE, "etc/resolv.conf", "", 0);
    rc |= add_ent(s, MNT_WRITE_FILE, "etc/nsswitch.conf", etc_nsswitch, 0);
    if (access("/etc/ld.so.cache", R_OK) == 0)
        rc |= add_ent(s, MNT_BIND_FILE, "etc/ld.so.cache", "/etc/ld.so.cache", 0);
    for (size_t i = 0; i < sizeof(binds) / sizeof(binds[0]); i++) {
        char src[64], rel[64];
        struct stat st;
        snprintf(src, sizeof(src), "/etc/%s", binds[i]);
        snprintf(rel, sizeof(rel), "etc/%s", binds[i]);
        if (stat(src, &st) == 0 && S_ISDIR(st.st_mode))
            rc |= add_ent(s, MNT_BIND_DIR, rel, src, 0);
    }
    return rc;
}

/* Top-level entries of the host image: /usr and the /bin, /lib* links. */
static int add_host_root(struct nstate *s)
{
    static const char *const names[] = {"usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32"};
    int rc = 0;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        char src[64], target[PATH_MAX];
        struct stat st;
        snprintf(src, sizeof(src), "/%s", names[i]);
        if (lstat(src, &st) != 0)
            continue;
        if (S_ISLNK(st.st_mode)) {
            ssize_t n = readlink(src, target, sizeof(target) - 1);
            if (n <= 0)
                return -1;
            target[n] = '\0';
            rc |= add_ent(s, MNT_SYMLINK, names[i], target, 0);
        } else if (S_ISDIR(st.st_mode)) {
            rc |= add_ent(s, MNT_BIND_DIR, names[i], src, 0);
        }
    }
    return rc ? rc : add_etc(s);
}

static int skip_image_entry(const char *n)
{
    static const char *const skip[] = {".",         "..",  "proc",          "dev",  "tmp",
                                       "workspace", "sys", ".skilld-image", "skill"};
    for (size_t i = 0; i < sizeof(skip) / sizeof(skip[0]); i++)
        if (strcmp(n, skip[i]) == 0)
            return 1;
    return 0;
}

/* Top-level entries of an imported image, bound from where the child
 * attaches it (<stage>/.skilld-image). */
static int add_image_root(struct nstate *s, const char *rootfs)
{
    DIR *d = opendir(rootfs);
    struct dirent *de;
    int rc = 0, has_etc = 0;
    if (!d)
        return -1;
    while (rc == 0 && (de = readdir(d)) != NULL) {
        char src[PATH_MAX], target[PATH_MAX];
        struct stat st;
        if (skip_image_entry(de->d_name) ||
            fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
            continue;
        /* Rootless: no detached mounts; bind straight from the image dir. */
        if ((N.rootless ? snprintf(src, sizeof(src), "%s/%s", rootfs, de->d_name)
                        : snprintf(src, sizeof(src), "%s/.skilld-image/%s", N.stage, de->d_name)) >=
            (int)sizeof(src))
            rc = -1;
        else if (S_ISLNK(st.st_mode)) {
            ssize_t n = readlinkat(dirfd(d), de->d_name, target, sizeof(target) - 1);
            if (n <= 0)
                rc = -1;
            else {
                target[n] = '\0';
                rc = add_ent(s, MNT_SYMLINK, de->d_name, target, 0);
            }
        } else if (S_ISDIR(st.st_mode)) {
            has_etc |= strcmp(de->d_name, "etc") == 0;
            rc = add_ent(s, MNT_BIND_DIR, de->d_name, src, 0);
        } else if (S_ISREG(st.st_mode)) {
            rc = add_ent(s, MNT_BIND_FILE, de->d_name, src, 0);
        }
    }
    closedir(d);
    return rc ? rc : has_etc ? 0 : add_etc(s);
}

static int add_dev(struct nstate *s)
{
    static const char *const nodes[] = {"null", "zero", "full", "random", "urandom"};
    int rc = 0;
    for (size_t i = 0; i < sizeof(nodes) / sizeof(nodes[0]); i++) {
        char src[32], rel[32];
        snprintf(src, sizeof(src), "/dev/%s", nodes[i]);
        snprintf(rel, sizeof(rel), "dev/%s", nodes[i]);
        rc |= add_ent(s, MNT_BIND_FILE, rel, src, 1);
    }
    rc |= add_ent(s, MNT_SYMLINK, "dev/fd", "/proc/self/fd", 0);
    rc |= add_ent(s, MNT_SYMLINK, "dev/stdin", "/proc/self/fd/0", 0);
    rc |= add_ent(s, MNT_SYMLINK, "dev/stdout", "/proc/self/fd/1", 0);
    rc |= add_ent(s, MNT_SYMLINK, "dev/stderr", "/proc/self/fd/2", 0);
    return rc;
}

static char *stage_path(const char *rel)
{
    size_t n = strlen(N.stage) + strlen(rel) + 2;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/%s", N.stage, rel);
    return p;
}

static void native_cleanup(void *state, skd__outcome *out);

/* ---- prepare ---- */

/* Detached mounts opened here, while this process can still see the host:
 * the idmapped workspace and the read-only image root. */
static int open_mounts(struct nstate *s, skd_err *err)
{
    const skd__sandbox_req *q = s->req;
    struct mount_attr a;
    if (N.rootless) /* open_tree needs CAP_SYS_ADMIN: the child binds by path */
        return 0;
    if (q->workspace && q->cfg->workspace_quota > 0 && !q->cfg->workspace_read_only) {
        /* Writes go to the quota overlay, committed after the run; a
         * pre-made sandbox brings its tmpfs (taken over, even on failure). */
        skd__wsq *stage = s->stage;
        s->stage = NULL;
        last_quota = q->cfg->workspace_quota;
        int rc = skd__wsq_prepare_staged(stage, q->workspace, q->workspace_fd, q->id,
                                         q->cfg->workspace_quota, N.idmap_fd,
                                         SKD_NATIVE_HOST_BASE + SKD_NATIVE_UID,
                                         SKD_NATIVE_HOST_BASE + SKD_NATIVE_UID, &s->wsq, err);
        if (rc)
            return rc;
        s->child.ws_fd = (int)syscall(SYS_open_tree, AT_FDCWD, skd__wsq_merged(s->wsq),
                                      OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_SYMLINK_NOFOLLOW);
    } else if (q->workspace) {
        /* The spawner hands the directory over as a descriptor: clone
         * exactly that directory, not whatever its path names now. */
        s->child.ws_fd =
            q->workspace_fd >= 0
                ? (int)syscall(SYS_open_tree, q->workspace_fd, "",
                               OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH)
                : (int)syscall(SYS_open_tree, AT_FDCWD, q->workspace,
                               OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_SYMLINK_NOFOLLOW);
    }
    if (q->workspace) {
        /* The overlay's lower layer is idmapped already (overlayfs itself
         * cannot be); the plain workspace is idmapped here. */
        memset(&a, 0, sizeof(a));
        a.attr_set = (s->wsq ? 0 : MOUNT_ATTR_IDMAP) | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
                     (q->cfg->workspace_read_only ? MOUNT_ATTR_RDONLY : 0);
        a.userns_fd = s->wsq ? 0 : (unsigned)N.idmap_fd;
        if (s->child.ws_fd < 0 ||
            syscall(SYS_mount_setattr, s->child.ws_fd, "", AT_EMPTY_PATH, &a, sizeof(a)) != 0)
            return skd_err_set(err, SKD_ESANDBOX,
                               "native sandbox: idmapped workspace mount of %s: %s", q->workspace,
                               strerror(errno));
    }
    if (q->skill_dir) { /* Agent Skills folder: read-only, owned by the sandbox user */
        s->child.skill_fd = q->skill_fd >= 0
                                ? (int)syscall(SYS_open_tree, q->skill_fd, "",
                                               OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH)
                                : (int)syscall(SYS_open_tree, AT_FDCWD, q->skill_dir,
                                               OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
        memset(&a, 0, sizeof(a));
        a.attr_set = MOUNT_ATTR_IDMAP | MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
        a.userns_fd = (unsigned)N.idmap_fd;
        if (s->child.skill_fd < 0 ||
            syscall(SYS_mount_setattr, s->child.skill_fd, "", AT_EMPTY_PATH, &a, sizeof(a)) != 0)
            return skd_err_set(err, SKD_ESANDBOX, "native sandbox: skill folder mount of %s: %s",
                               q->skill_dir, strerror(errno));
    }
    if (q->rootfs) {
        s->child.img_fd =
            (int)syscall(SYS_open_tree, AT_FDCWD, q->rootfs,
                         OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE | AT_SYMLINK_NOFOLLOW);
        memset(&a, 0, sizeof(a));
        a.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
        if (s->child.img_fd < 0 || syscall(SYS_mount_setattr, s->child.img_fd, "",
                                           AT_EMPTY_PATH | AT_RECURSIVE, &a, sizeof(a)) != 0)
            return skd_err_set(err, SKD_ESANDBOX, "native sandbox: image mount of %s: %s",
                               q->rootfs, strerror(errno));
    }
    return 0;
}

static const char *env_path(char *const *envp)
{
    for (char *const *e = envp; *e; e++)
        if (strncmp(*e, "PATH=", 5) == 0)
            return *e + 5;
    return "/usr/local/bin:/usr/bin:/bin";
}

/* The run's /tmp and /dev/shm sizes. */
static void set_opts(struct nstate *s)
{
    long long t = (long long)s->req->cfg->tmp_size;
    snprintf(s->tmp_opts, sizeof(s->tmp_opts), "size=%lld,mode=1777", t);
    snprintf(s->shm_opts, sizeof(s->shm_opts), "size=%lld,mode=1777",
             t < (64 << 20) ? t : (64 << 20));
}

static int fill_child(struct nstate *s, skd_err *err)
{
    static const char *const rels[] = {"proc",      "dev",           "tmp",  "dev/shm",
                                       "workspace", ".skilld-image", "skill"};
    const skd__sandbox_req *q = s->req;
    struct skd__native_child *c = &s->child;
    int rc = q->rootfs ? add_image_root(s, q->rootfs) : add_host_root(s);
    if (rc == 0)
        rc = add_dev(s);
    /* Rootless: the workspace (files owned by our uid, shown as the sandbox
     * user by the id map) and the skill folder are plain binds made by the
     * child, as no detached mount can be opened here. */
    /* (Not /proc/self/fd/N: a descriptor opened in the spawner's mount
     * namespace names a mount the child's new namespace does not own, and
     * a bind of it fails with EINVAL. The path was checked by the spawner
     * to name the very directory of the descriptor, and rootless the server
     * and the spawner are the same user: no boundary to cross.) */
    if (rc == 0 && N.rootless && q->workspace) {
        rc = add_ent(s, MNT_BIND_DIR, "workspace", q->workspace, 0);
        if (rc == 0)
            s->ents[s->nents - 1].writable = !q->cfg->workspace_read_only;
    }
    if (rc == 0 && N.rootless && q->skill_dir)
        rc = add_ent(s, MNT_BIND_DIR, "skill", q->skill_dir, 0);
    for (size_t i = 0; i < sizeof(rels) / sizeof(rels[0]) && rc == 0; i++)
        if (!(s->paths[i] = stage_path(rels[i])))
            rc = -1;
    if (rc)
        return skd_err_set(err, SKD_ESANDBOX, "native sandbox: cannot lay out the root of %s",
                           q->image);
    set_opts(s);
    c->stage = N.stage;
    c->stage_opts = "size=1m,nr_inodes=4096,mode=0755";
    c->ents = s->ents;
    c->nents = s->nents;
    c->proc_dir = s->paths[0];
    c->dev_dir = s->paths[1];
    c->tmp_dir = s->paths[2];
    c->shm_dir = s->paths[3];
    c->ws_dir = s->paths[4];
    c->img_dir = s->paths[5];
    c->skill_dir = s->paths[6];
    c->tmp_opts = s->tmp_opts;
    c->shm_opts = s->shm_opts;
    c->cwd = q->cwd;
    c->argv = q->argv;
    c->envp = q->envp;
    c->path = env_path(q->envp);
    c->fsize = (unsigned long long)q->cfg->file_size_limit;
    c->rootless = N.rootless;
    return skd__seccomp_program(&c->seccomp, err);
}

static struct nstate *nstate_new(const skd__sandbox_req *req)
{
    struct nstate *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    s->req = req;
    s->pidfd = s->ctl = s->mntns = -1;
    s->child.ws_fd = s->child.img_fd = s->child.skill_fd = s->child.ctl_fd = -1;
    s->ends = (skd__spawned){-1, -1, -1, -1, -1, -1};
    return s;
}

/* A run a pre-made sandbox can serve: the host image, no skill folder, no
 * network (those need mounts or a socket placed before the root is
 * built), not rootless. Everything else starts cold, as before. */
static int warm_fits(const skd__sandbox_req *req)
{
    if (nwarm == 0 || N.rootless || req->rootfs || req->skill_dir || req->cfg->network_enabled ||
        (req->image && *req->image && strcmp(req->image, "host") != 0))
        return 0;
    /* Its message must fit the child's buffer (warm_spawn; the two size
     * options are under 64 bytes each); larger ones start cold. */
    size_t len = strlen(req->cwd) + strlen(env_path(req->envp)) + 2 * 64 + 4;
    for (char *const *a = req->argv; *a; a++)
        len += strlen(*a) + 1;
    for (char *const *e = req->envp; *e; e++)
        len += strlen(*e) + 1;
    return len <= SKD__WARM_MSG_MAX;
}

/* Take the oldest waiting sandbox that is still there (one dies if its
 * set-up failed), or NULL: the oldest has had the most time to finish its
 * set-up. */
static struct nstate *warm_take(void)
{
    while (nwarm > 0) {
        struct nstate *w = warm[0];
        memmove(warm, warm + 1, (size_t)(--nwarm) * sizeof(warm[0]));
        struct pollfd p = {.fd = w->pidfd, .events = POLLIN};
        if (poll(&p, 1, 0) == 0)
            return w;
        char why[256] = "";
        ssize_t n = read(w->ends.status_fd, why, sizeof(why) - 1);
        why[n > 0 ? n : 0] = '\0';
        skd_warn("native sandbox: a pre-made sandbox died before its run (%s)", why);
        native_cleanup(w, NULL);
    }
    return NULL;
}

static int native_prepare(const skd__sandbox_req *req, void **state, skd_err *err)
{
    *state = NULL;
    int rc = native_detect(err);
    if (rc)
        return rc;
    /* Fail closed: the quota overlay needs mounts only root can make. */
    if (N.rootless && req->workspace && req->cfg->workspace_quota > 0 &&
        !req->cfg->workspace_read_only)
        return skd_err_set(err, SKD_ESANDBOX,
                           "native sandbox: the workspace quota cannot be held inside a rootless "
                           "sandbox (SKILLS_SANDBOX_WORKSPACE_QUOTA=overlay needs root); run "
                           "with workspaceReadOnly or set SKILLS_SANDBOX_WORKSPACE_QUOTA=off");
    /* An image without a root filesystem here was not imported ("auto"
     * may have sent one meant for an engine's store): never the host's. */
    if (!req->rootfs && req->image && *req->image && strcmp(req->image, "host") != 0)
        return skd_err_set(err, SKD_ENOENT,
                           "image %.200s is not imported for the native sandbox; run skilld "
                           "image import",
                           req->image);
    struct nstate *w = warm_fits(req) ? warm_take() : NULL; /* each is used once */
    if (w) {
        w->req = req;
        set_opts(w);
        if ((rc = open_mounts(w, err)) || (rc = skd__cgroup_apply(w->cg, req->cfg, err))) {
            native_cleanup(w, NULL);
            return rc;
        }
        *state = w;
        return 0;
    }
    struct nstate *s = nstate_new(req);
    if (!s)
        return skd_err_set(err, SKD_ENOMEM, "out of memory");
    if ((rc = fill_child(s, err)) || (rc = open_mounts(s, err)) ||
        (rc = skd__cgroup_create(req->id, req->cfg, &s->cg, err))) {
        native_cleanup(s, NULL);
        return rc;
    }
    *state = s;
    return 0;
}

/* ---- spawn ---- */

static void close_pair(int p[2])
{
    for (int i = 0; i < 2; i++)
        if (p[i] >= 0)
            close(p[i]);
    p[0] = p[1] = -1;
}

/* The parent's half of the start-up: the id maps, then "g" (the child
 * builds its root and goes on to exec). The cgroup needs no step here: on
 * v2 the child is born in it (CLONE_INTO_CGROUP); on v1 the child's first
 * act is to write itself into the "tasks" files opened for it
 * (skd__cgroup_join_fds), which does not wait for an RCU grace period as
 * moving another process does, and it dies if that fails. */
static int release_child(pid_t pid, int sync_fd, skd_err *err)
{
    char map[96], gmap[96];
    if (N.rootless) {
        /* One line, our own ids, and setgroups denied first: all an
         * unprivileged parent may write. */
        snprintf(map, sizeof(map), "%u %u 1\n", SKD_NATIVE_UID, (unsigned)geteuid());
        snprintf(gmap, sizeof(gmap), "%u %u 1\n", SKD_NATIVE_UID, (unsigned)getegid());
        if (write_map(pid, "setgroups", "deny") != 0)
            return skd_err_set(err, SKD_ESANDBOX, "native sandbox: deny setgroups: %s",
                               strerror(errno));
    } else {
        snprintf(map, sizeof(map), "0 %u 1\n%u %u 1\n", SKD_NATIVE_HOST_BASE, SKD_NATIVE_UID,
                 SKD_NATIVE_HOST_BASE + SKD_NATIVE_UID);
        memcpy(gmap, map, sizeof(map));
    }
    if (write_map(pid, "uid_map", map) != 0 || write_map(pid, "gid_map", gmap) != 0)
        return skd_err_set(err, SKD_ESANDBOX, "native sandbox: write the id maps: %s",
                           strerror(errno));
    if (write(sync_fd, "g", 1) != 1)
        return skd_err_set(err, SKD_ESANDBOX, "native sandbox: release the child: %s",
                           strerror(errno));
    return 0;
}

static void close_join_fds(struct skd__native_child *c)
{
    while (c->ncg > 0)
        close(c->cg_fds[--c->ncg]);
}

/* The child's end of a pre-made sandbox's control socket. */
static void close_ctl_child(struct nstate *s)
{
    if (s->warm && s->child.ctl_fd >= 0)
        close(s->child.ctl_fd);
    s->child.ctl_fd = -1;
}

static void close_spawned_ends(skd__spawned *sp)
{
    int *fds[] = {&sp->pidfd,     &sp->stdin_fd,  &sp->stdout_fd,
                  &sp->stderr_fd, &sp->status_fd, &sp->egress_fd};
    for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
        if (*fds[i] >= 0) {
            close(*fds[i]);
            *fds[i] = -1;
        }
}

/* Pipes, clone3, id maps, release: a started child (cold: its run's;
 * warm: one that builds the root and waits on its control socket). */
#ifndef PIDFD_GET_MNT_NAMESPACE
#define PIDFD_GET_MNT_NAMESPACE _IO(0xFF, 3) /* linux/pidfd.h, 6.11 */
#endif

/* Hold the sandbox's mount namespace from outside, so that its teardown
 * (every mount of its tree undone, the overlay and tmpfs superblocks
 * released: about half a millisecond) is not done by its init's exit, which
 * comes before that exit is seen, but by skd__native_flush after the
 * outcome was sent, or by cleanup. Its tasks are gone all the same (the
 * pid namespace ends with its init); what is held is mounts no task can
 * reach. Best effort: without it the kernel tears down as before. A
 * namespace that is still this process's (a pre-made sandbox that has not
 * made its own yet) is not held. */
static void hold_mntns(struct nstate *s)
{
    int fd = -1;
    if (!N.no_ns_ioctl) {
        fd = ioctl(s->pidfd, PIDFD_GET_MNT_NAMESPACE, 0);
        if (fd < 0 && (errno == ENOTTY || errno == EINVAL))
            N.no_ns_ioctl = 1;
    }
    if (fd < 0 && N.no_ns_ioctl && s->pid > 0) {
        char p[64];
        snprintf(p, sizeof(p), "/proc/%d/ns/mnt", (int)s->pid);
        fd = open(p, O_RDONLY | O_CLOEXEC);
    }
    struct stat st;
    if (fd >= 0 && (fstat(fd, &st) != 0 ||
                    (st.st_ino == N.own_mntns.st_ino && st.st_dev == N.own_mntns.st_dev))) {
        close(fd);
        fd = -1;
    }
    s->mntns = fd;
}

static int start_child(struct nstate *s, skd__spawned *out, skd_err *err)
{
    int in[2] = {-1, -1}, o[2] = {-1, -1}, e[2] = {-1, -1}, st[2] = {-1, -1}, sy[2] = {-1, -1};
    int pidfd = -1, rc = 0, egress_fd = -1;
    if (pipe2(in, O_CLOEXEC) || pipe2(o, O_CLOEXEC) || pipe2(e, O_CLOEXEC) ||
        pipe2(st, O_CLOEXEC) || pipe2(sy, O_CLOEXEC)) {
        rc = skd_err_set(err, SKD_ESANDBOX, "native sandbox: pipes: %s", strerror(errno));
        goto fail;
    }
    s->child.in_fd = in[0];
    s->child.out_fd = o[1];
    s->child.err_fd = e[1];
    s->child.status_fd = st[1];
    s->child.sync_fd = sy[0];
    int ncg = skd__cgroup_join_fds(
        s->cg, s->child.cg_fds, (int)(sizeof(s->child.cg_fds) / sizeof(s->child.cg_fds[0])), err);
    if (ncg < 0) {
        rc = ncg;
        goto fail;
    }
    s->child.ncg = ncg;
    if (s->warm) {
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
            rc = skd_err_set(err, SKD_ESANDBOX, "native sandbox: socketpair: %s", strerror(errno));
            goto fail;
        }
        s->ctl = sv[0];
        s->child.ctl_fd = sv[1];
    }
    struct clone_args ca;
    memset(&ca, 0, sizeof(ca));
    /* A pre-made sandbox makes its other namespaces itself (the network
     * namespace above all is slow to create), so the spawner's clone3 is
     * short; owned by its new user namespace all the same. */
    ca.flags = (s->warm ? WARM_CLONE_FLAGS : NS_FLAGS) | CLONE_PIDFD;
    ca.pidfd = (uint64_t)(uintptr_t)&pidfd;
    ca.exit_signal = SIGCHLD;
    if (skd__cgroup_clone_fd(s->cg) >= 0) {
        /* cgroup v2: born in its cgroup, no migration (and no RCU sync). */
        ca.flags |= CLONE_INTO_CGROUP;
        ca.cgroup = (uint64_t)skd__cgroup_clone_fd(s->cg);
    }
    pid_t pid = (pid_t)syscall(SYS_clone3, &ca, sizeof(ca));
    if (pid == 0)
        skd__native_child_main(&s->child);
    if (pid < 0) {
        rc = skd_err_set(err, SKD_ESANDBOX, "native sandbox: clone3: %s", strerror(errno));
        goto fail;
    }
    close(in[0]), close(o[1]), close(e[1]), close(st[1]), close(sy[0]);
    in[0] = o[1] = e[1] = st[1] = sy[0] = -1;
    close_join_fds(&s->child);
    close_ctl_child(s);
    /* networkEnabled: the egress proxy's socket goes on the sandbox's
     * loopback before the child is released, so it is there when the
     * command starts (src/net/egress_place.c). */
    if ((s->req->cfg->network_enabled && (rc = skd__egress_place(pidfd, &egress_fd, err)) != 0) ||
        (rc = release_child(pid, sy[1], err)) != 0) {
        if (egress_fd >= 0)
            close(egress_fd);
        syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
        siginfo_t si;
        waitid((idtype_t)P_PIDFD, (id_t)pidfd, &si, WEXITED);
        close(pidfd);
        goto fail;
    }
    close_pair(sy);
    s->pidfd = fcntl(pidfd, F_DUPFD_CLOEXEC, 3);
    s->pid = pid;
    if (!s->warm) /* its namespaces are its own from clone3 */
        hold_mntns(s);
    fcntl(in[1], F_SETFL, O_NONBLOCK);
    fcntl(o[0], F_SETFL, O_NONBLOCK);
    fcntl(e[0], F_SETFL, O_NONBLOCK);
    fcntl(st[0], F_SETFL, O_NONBLOCK);
    *out = (skd__spawned){.pidfd = pidfd,
                          .stdin_fd = in[1],
                          .stdout_fd = o[0],
                          .stderr_fd = e[0],
                          .status_fd = st[0],
                          .egress_fd = egress_fd};
    return 0;
fail:
    close_join_fds(&s->child);
    close_ctl_child(s);
    close_pair(in), close_pair(o), close_pair(e), close_pair(st), close_pair(sy);
    return rc;
}

static char *put_str(char *p, const char *str)
{
    size_t n = strlen(str) + 1;
    memcpy(p, str, n);
    return p + n;
}

/* Send the run to its pre-made sandbox and hand out the descriptors it
 * was started with. The run's limits are on its cgroup already (prepare). */
static int warm_spawn(struct nstate *s, skd__spawned *out, skd_err *err)
{
    const skd__sandbox_req *q = s->req;
    size_t len = 0, argc = 0, envc = 0;
    const char *head[] = {s->tmp_opts, s->shm_opts, q->cwd, env_path(q->envp)};
    for (size_t i = 0; i < 4; i++)
        len += strlen(head[i]) + 1;
    for (; q->argv[argc]; argc++)
        len += strlen(q->argv[argc]) + 1;
    for (; q->envp[envc]; envc++)
        len += strlen(q->envp[envc]) + 1;
    if (len > SKD__WARM_MSG_MAX)
        return skd_err_set(err, SKD_ETOOBIG,
                           "native sandbox: arguments and environment are larger "
                           "than %u bytes",
                           SKD__WARM_MSG_MAX);
    struct skd__warm_msg hd = {.magic = SKD__WARM_MAGIC,
                               .argc = (unsigned)argc,
                               .envc = (unsigned)envc,
                               .has_ws = s->child.ws_fd >= 0,
                               .fsize = (unsigned long long)q->cfg->file_size_limit,
                               .len = (unsigned)len};
    char *buf = malloc(sizeof(hd) + len), *p = buf + sizeof(hd);
    if (!buf)
        return skd_err_set(err, SKD_ENOMEM, "out of memory");
    memcpy(buf, &hd, sizeof(hd));
    for (size_t i = 0; i < 4; i++)
        p = put_str(p, head[i]);
    for (size_t i = 0; i < argc; i++)
        p = put_str(p, q->argv[i]);
    for (size_t i = 0; i < envc; i++)
        p = put_str(p, q->envp[i]);
    union {
        struct cmsghdr h;
        char b[CMSG_SPACE(sizeof(int))];
    } cm;
    struct iovec iov = {buf, sizeof(hd) + len};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
    memset(&cm, 0, sizeof(cm));
    if (hd.has_ws) {
        mh.msg_control = cm.b;
        mh.msg_controllen = sizeof(cm.b);
        struct cmsghdr *h = CMSG_FIRSTHDR(&mh);
        h->cmsg_level = SOL_SOCKET;
        h->cmsg_type = SCM_RIGHTS;
        h->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(h), &s->child.ws_fd, sizeof(int));
    }
    ssize_t n;
    do
        n = sendmsg(s->ctl, &mh, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    int saved = errno;
    free(buf);
    close(s->ctl);
    s->ctl = -1;
    if (n != (ssize_t)iov.iov_len)
        return skd_err_set(err, SKD_ESANDBOX, "native sandbox: hand the run to its sandbox: %s",
                           n < 0 ? strerror(saved) : "short write");
    *out = s->ends;
    out->pidfd = fcntl(s->pidfd, F_DUPFD_CLOEXEC, 3);
    s->ends = (skd__spawned){-1, -1, -1, -1, -1, -1};
    s->handed = 1;
    hold_mntns(s);
    if (out->pidfd < 0) {
        close_spawned_ends(out);
        return skd_err_set(err, SKD_ESANDBOX, "native sandbox: pidfd: %s", strerror(errno));
    }
    return 0;
}

static int native_spawn(void *state, skd__spawned *out, skd_err *err)
{
    struct nstate *s = state;
    if (s->warm)
        return warm_spawn(s, out, err);
    /* A new mount namespace copies the spawner's, with the overlays of
     * runs still owed a teardown, and the child holds their namespaces
     * until it closes what it inherited: let them go first. */
    skd__native_flush();
    return start_child(s, out, err);
}

/* ---- pre-made sandboxes ---- */

int skd__native_warm_fill(int depth)
{
    static unsigned seq;
    static skd_sandbox_config cfg = {.tmp_size = 1 << 20, .file_size_limit = 1};
    static char *const argv[] = {"true", NULL}, *const envp[] = {NULL};
    static const skd__sandbox_req req = {.image = "host",
                                         .argv = argv,
                                         .envp = envp,
                                         .cwd = "/",
                                         .cfg = &cfg,
                                         .workspace_fd = -1,
                                         .skill_fd = -1};
    skd_err err = {0};
    if (depth > WARM_MAX)
        depth = WARM_MAX;
    if (nwarm >= depth || native_detect(&err) != 0 || N.rootless)
        return 0;
    skd__native_flush(); /* as for a cold spawn: it copies the mounts */
    struct nstate *s = nstate_new(&req);
    char name[32];
    snprintf(name, sizeof(name), "warm-%u", ++seq);
    skd__spawned sp = {-1, -1, -1, -1, -1, -1};
    if (!s)
        return -1;
    s->warm = s->child.warm = 1;
    cfg.tmp_size = def_tmp_size > 0 ? def_tmp_size : 1 << 20;
    if (fill_child(s, &err) || skd__cgroup_create_bare(name, &s->cg, &err) ||
        start_child(s, &sp, &err)) {
        skd_debug("native sandbox: no pre-made sandbox: %s", skd_err_msg(&err));
        native_cleanup(s, NULL);
        return -1;
    }
    close(sp.pidfd); /* s->pidfd is the provider's own copy */
    sp.pidfd = -1;
    s->ends = sp;
    skd__cgroup_open_limits(s->cg);
    if (def_limits.memory_limit > 0 && def_limits.pids_limit > 0 && def_limits.cpu_limit > 0)
        skd__cgroup_write_ahead(s->cg, &def_limits);
    if (last_quota > 0 && skd__wsq_stage(name, last_quota, SKD_NATIVE_HOST_BASE + SKD_NATIVE_UID,
                                         SKD_NATIVE_HOST_BASE + SKD_NATIVE_UID, &s->stage, &err))
        skd_debug("native sandbox: no quota tmpfs made ahead: %s", skd_err_msg(&err));
    warm[nwarm++] = s;
    return 1;
}

void skd__native_warm_drop(void)
{
    while (nwarm > 0)
        native_cleanup(warm[--nwarm], NULL);
}

static void native_kill(void *state)
{
    struct nstate *s = state;
    if (s->pidfd >= 0)
        syscall(SYS_pidfd_send_signal, s->pidfd, SIGKILL, NULL, 0);
    skd__cgroup_kill(s->cg);
}

static void native_cleanup(void *state, skd__outcome *out)
{
    struct nstate *s = state;
    if (!s)
        return;
    if (s->warm && !s->handed && s->pidfd >= 0) {
        /* Made, never given a run (discarded, or its run ended before the
         * spawn): it waits on its socket; end it and reap it here, as no
         * one else will. */
        siginfo_t si;
        syscall(SYS_pidfd_send_signal, s->pidfd, SIGKILL, NULL, 0);
        waitid((idtype_t)P_PIDFD, (id_t)s->pidfd, &si, WEXITED);
    }
    if (s->ctl >= 0)
        close(s->ctl);
    close_spawned_ends(&s->ends);
    if (out && s->cg)
        out->oom_killed = skd__cgroup_oom_killed(s->cg);
    /* Deferred only once the sandbox's init has exited (its pidfd is
     * readable): every task of its pid namespace is gone with it, so the
     * commit below cannot race a writer; otherwise destroy kills what is
     * left first, as before. */
    struct pollfd gone = {.fd = s->pidfd, .events = POLLIN};
    int exited = s->pidfd >= 0 && poll(&gone, 1, 0) == 1 && (gone.revents & POLLIN);
    int defer = defer_on && out && ndeferred < sizeof(deferred) / sizeof(deferred[0]) &&
                (s->pidfd < 0 || exited);
    if (defer) {
        deferred[ndeferred].mntns = s->mntns;
        deferred[ndeferred].cg = s->cg;
        deferred[ndeferred].stage = s->stage; /* a run that did not take it */
    } else {
        if (s->mntns >= 0) /* before the cgroup's tasks are killed and it goes */
            close(s->mntns);
        skd__cgroup_destroy(s->cg);
        skd__wsq_free(s->stage);
    }
    s->mntns = -1;
    s->stage = NULL;
    if (s->child.ws_fd >= 0) /* before the commit: it holds the overlay */
        close(s->child.ws_fd);
    if (exited)
        skd__wsq_sandbox_gone(s->wsq);
    if (s->wsq && out) /* the sandbox is gone; a killed run keeps nothing */
        skd__wsq_commit_outcome(s->wsq, s->pidfd >= 0 && !out->killed && !out->oom_killed,
                                s->req->cfg->data_reserve, out);
    if (defer)
        deferred[ndeferred++].wsq = s->wsq; /* committed: only its mounts are left */
    else
        skd__wsq_free(s->wsq);
    if (s->pidfd >= 0)
        close(s->pidfd);
    if (s->child.img_fd >= 0)
        close(s->child.img_fd);
    if (s->child.skill_fd >= 0)
        close(s->child.skill_fd);
    for (size_t i = 0; i < s->nents; i++) {
        free(s->ents[i].dst);
        free(s->ents[i].src);
    }
    for (size_t i = 0; i < sizeof(s->paths) / sizeof(s->paths[0]); i++)
        free(s->paths[i]);
    free(s);
}

const skd__provider skd__provider_native = {
    .name = "native",
    .detect = native_detect,
    .prepare = native_prepare,
    .spawn = native_spawn,
    .kill = native_kill,
    .cleanup = native_cleanup,
};
