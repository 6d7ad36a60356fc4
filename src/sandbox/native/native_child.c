/*
 * The native sandbox child: the code that runs between clone3 and execve.
 *
 * The rule flips here (STYLE.md 4): any failure ends the child at once with
 * _exit, after writing "native sandbox: <step>: <reason>" to the status
 * pipe, so a half-built sandbox never runs a command.
 *
 * RAW SYSTEM CALLS ONLY (STYLE.md 14). Between clone3 and execve this code
 * calls no libc function that can take a lock or allocate: no malloc, no
 * stdio, no setresuid/setresgid/setgroups wrappers (glibc broadcasts those
 * to every thread it remembers and waits on futexes of threads that do not
 * exist in the child), no sigaction/setrlimit/mount wrappers either. Every
 * kernel call is syscall(SYS_...); the rest is memory reads and simple
 * loops (strlen, memcpy, strchr, strcmp). Every path and string was prepared by
 * the parent (native.c) before clone3. The process that clones (the
 * spawner, spawner.c) is single-threaded as well, so even a slip here
 * could not meet a lock held by another thread.
 *
 * Order: join the run's cgroups (v1; on v2 the child is born in them) ->
 * wait for the parent to write the id maps -> become root of the new
 * user namespace -> build the new root on a tmpfs (read-only binds of the image, minimal /etc,
 * fresh /proc, minimal /dev, tmpfs /tmp and /dev/shm, the idmapped workspace) -> pivot_root -> root
 * read-only -> hostname, loopback -> rlimits -> new cgroup namespace -> only fds 0, 1, 2 -> drop
 * every capability and become uid 1000
 * -> no_new_privs, parent-death signal -> seccomp -> execve.
 * A pre-made sandbox stops after the new cgroup namespace, with its /tmp
 * and /dev/shm mounted and its capability bounding set emptied, and waits
 * for its run (warm_receive: other /tmp sizes, the workspace), then goes on
 * with the fds.
 */
#include "sandbox/native/native.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/mount.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "skilld/sandbox.h"

/* Where keep_own_fds moves a child's descriptors: above what it inherits
 * as a rule, below the descriptor limit always (see own_top). */
#define HIGH_FD 200
/* The first descriptor after stdin, stdout, stderr and the status pipe. */
#define FIRST_FREE_FD 4

static int status_fd = -1;

static long sys_write(int fd, const void *b, size_t n)
{
    return syscall(SYS_write, fd, b, n);
}

static void put(char *buf, size_t cap, size_t *len, const char *s)
{
    while (*s && *len + 1 < cap)
        buf[(*len)++] = *s++;
}

/* Report the failing step and end the child. */
__attribute__((noreturn)) static void die(const char *step, const char *arg)
{
    int e = errno;
    char msg[400];
    size_t n = 0;
    const char *why = strerrordesc_np(e);
    put(msg, sizeof(msg), &n, "native sandbox: ");
    put(msg, sizeof(msg), &n, step);
    if (arg) {
        put(msg, sizeof(msg), &n, " ");
        put(msg, sizeof(msg), &n, arg);
    }
    put(msg, sizeof(msg), &n, ": ");
    put(msg, sizeof(msg), &n, why ? why : "unknown error");
    if (status_fd >= 0 && sys_write(status_fd, msg, n) < 0) {
        /* nothing more can be done */
    }
    syscall(SYS_exit_group, 127);
    __builtin_unreachable();
}

/* Thin raw-syscall helpers; each returns what the kernel returned (-1 and
 * errno on failure, as syscall(2) reports). */
static long sys_mkdir(const char *p, mode_t m)
{
    return syscall(SYS_mkdirat, AT_FDCWD, p, m);
}
static long sys_open(const char *p, int flags, mode_t m)
{
    return syscall(SYS_openat, AT_FDCWD, p, flags, m);
}
static long sys_close(int fd)
{
    return syscall(SYS_close, fd);
}
static long sys_mount(const char *src, const char *dst, const char *type, unsigned long flags,
                      const void *data)
{
    return syscall(SYS_mount, src, dst, type, flags, data);
}
static long sys_umount(const char *dst, int flags)
{
    return syscall(SYS_umount2, dst, flags);
}
static long sys_chdir(const char *p)
{
    return syscall(SYS_chdir, p);
}
static long sys_prctl(int op, unsigned long a)
{
    return syscall(SYS_prctl, op, a, 0UL, 0UL, 0UL);
}

static int sys_mount_setattr(const char *path, unsigned flags, unsigned long long set)
{
    struct mount_attr a;
    memset(&a, 0, sizeof(a));
    a.attr_set = set;
    return (int)syscall(SYS_mount_setattr, AT_FDCWD, path, flags, &a, sizeof(a));
}

/* The kernel's struct sigaction for rt_sigaction (not glibc's). */
struct ksigaction {
    void *handler;
    unsigned long flags;
    void *restorer;
    unsigned long mask;
};

static void reset_signals(void)
{
    unsigned long none = 0;
    syscall(SYS_rt_sigprocmask, SIG_SETMASK, &none, NULL, sizeof(none));
    struct ksigaction sa = {.handler = SIG_DFL};
    for (int s = 1; s <= 64; s++) /* SIGKILL/SIGSTOP fail: fine */
        syscall(SYS_rt_sigaction, s, &sa, NULL, sizeof(sa.mask));
}

static void write_text(const char *path, const char *text)
{
    int fd = (int)sys_open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0)
        die("create", path);
    size_t len = strlen(text);
    while (len) {
        long n = sys_write(fd, text, len);
        if (n <= 0)
            die("write", path);
        text += n;
        len -= (size_t)n;
    }
    sys_close(fd);
}

static void bind_ro(const struct mnt_entry *m)
{
    if (m->kind == MNT_BIND_DIR) {
        if (sys_mkdir(m->dst, 0755) != 0 && errno != EEXIST)
            die("mkdir", m->dst);
    } else {
        int fd = (int)sys_open(m->dst, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0)
            die("create", m->dst);
        sys_close(fd);
    }
    if (sys_mount(m->src, m->dst, NULL, MS_BIND | MS_REC, NULL) != 0)
        die("bind mount", m->src);
    unsigned long long set = MOUNT_ATTR_NOSUID;
    if (!m->writable)
        set |= MOUNT_ATTR_RDONLY;
    if (!m->devices)
        set |= MOUNT_ATTR_NODEV;
    else
        set |= MOUNT_ATTR_NOEXEC;
    if (sys_mount_setattr(m->dst, AT_RECURSIVE, set) != 0)
        die("restrict mount", m->dst);
}

static void build_entries(const struct skd__native_child *c)
{
    for (size_t i = 0; i < c->nents; i++) {
        const struct mnt_entry *m = &c->ents[i];
        switch (m->kind) {
        case MNT_DIR:
            if (sys_mkdir(m->dst, 0755) != 0 && errno != EEXIST)
                die("mkdir", m->dst);
            break;
        case MNT_SYMLINK:
            if (syscall(SYS_symlinkat, m->src, AT_FDCWD, m->dst) != 0)
                die("symlink", m->dst);
            break;
        case MNT_WRITE_FILE:
            write_text(m->dst, m->src);
            break;
        case MNT_BIND_DIR:
        case MNT_BIND_FILE:
            bind_ro(m);
            break;
        }
    }
}

static void mount_tmpfs(const char *dir, const char *opts, unsigned long flags)
{
    if (sys_mkdir(dir, 0755) != 0 && errno != EEXIST)
        die("mkdir", dir);
    if (sys_mount("tmpfs", dir, "tmpfs", flags, opts) != 0)
        die("mount tmpfs on", dir);
}

static void build_root(const struct skd__native_child *c)
{
    if (sys_mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
        die("make mounts private", NULL);
    if (sys_mount("tmpfs", c->stage, "tmpfs", MS_NOSUID | MS_NODEV, c->stage_opts) != 0)
        die("mount the root tmpfs on", c->stage);
    /* An imported image is attached first (it was opened by the parent:
     * this process may not traverse DATA_DIR), its top-level directories
     * are bound from it, and it is detached again afterwards. */
    if (c->img_fd >= 0) {
        if (sys_mkdir(c->img_dir, 0700) != 0)
            die("mkdir", c->img_dir);
        if (syscall(SYS_move_mount, c->img_fd, "", AT_FDCWD, c->img_dir, MOVE_MOUNT_F_EMPTY_PATH) !=
            0)
            die("attach the image on", c->img_dir);
    }
    /* /dev first: its device binds are entries too. */
    mount_tmpfs(c->dev_dir, "size=64k,nr_inodes=64,mode=0755", MS_NOSUID | MS_NOEXEC);
    build_entries(c);
    if (c->img_fd >= 0 && (sys_umount(c->img_dir, MNT_DETACH) != 0 ||
                           syscall(SYS_unlinkat, AT_FDCWD, c->img_dir, AT_REMOVEDIR) != 0))
        die("detach the image from", c->img_dir);
    if (sys_mkdir(c->proc_dir, 0555) != 0 && errno != EEXIST)
        die("mkdir", c->proc_dir);
    if (sys_mount("proc", c->proc_dir, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0)
        die("mount", c->proc_dir);
    /* A pre-made sandbox's are made with the sizes its run is expected to
     * have; warm_receive makes them afresh for other sizes. */
    mount_tmpfs(c->shm_dir, c->shm_opts, MS_NOSUID | MS_NODEV | MS_NOEXEC);
    mount_tmpfs(c->tmp_dir, c->tmp_opts, MS_NOSUID | MS_NODEV);
    if (sys_mkdir(c->ws_dir, 0755) != 0 && errno != EEXIST)
        die("mkdir", c->ws_dir);
    if (c->ws_fd >= 0 &&
        syscall(SYS_move_mount, c->ws_fd, "", AT_FDCWD, c->ws_dir, MOVE_MOUNT_F_EMPTY_PATH) != 0)
        die("mount the workspace on", c->ws_dir);
    if (c->skill_fd >= 0 &&
        (sys_mkdir(c->skill_dir, 0755) != 0 || syscall(SYS_move_mount, c->skill_fd, "", AT_FDCWD,
                                                       c->skill_dir, MOVE_MOUNT_F_EMPTY_PATH) != 0))
        die("mount the skill folder on", c->skill_dir);
    if (sys_chdir(c->stage) != 0)
        die("chdir", c->stage);
    if (syscall(SYS_pivot_root, ".", ".") != 0)
        die("pivot_root", c->stage);
    if (sys_umount(".", MNT_DETACH) != 0)
        die("detach the old root", NULL);
    if (sys_chdir("/") != 0)
        die("chdir", "/");
    if (sys_mount_setattr("/dev", 0, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC))
        die("make /dev read-only", NULL);
    if (sys_mount_setattr("/", 0, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV))
        die("make the root read-only", NULL);
}

static void loopback_up(void)
{
    int s = (int)syscall(SYS_socket, AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct ifreq ifr;
    memset(&ifr, 0, sizeof(ifr));
    memcpy(ifr.ifr_name, "lo", 3);
    if (s < 0 || syscall(SYS_ioctl, s, SIOCGIFFLAGS, &ifr) != 0)
        die("network namespace: loopback", NULL);
    ifr.ifr_flags |= IFF_UP;
    if (syscall(SYS_ioctl, s, SIOCSIFFLAGS, &ifr) != 0)
        die("network namespace: loopback up", NULL);
    sys_close(s);
}

/* Soft and hard limit v, or the hard limit this process has when that is
 * lower: raising it would need CAP_SYS_RESOURCE in the first user
 * namespace, and a lower one holds the sandbox tighter (a server started
 * under `ulimit -Hn 256` runs sandboxes with 256 descriptors, not none). */
static void set_rlimit(int res, rlim_t v, const char *name)
{
    struct rlimit rl;
    if (syscall(SYS_prlimit64, 0, res, NULL, &rl) != 0)
        die("getrlimit", name);
    if (rl.rlim_max < v)
        v = rl.rlim_max;
    rl.rlim_cur = rl.rlim_max = v;
    if (syscall(SYS_prlimit64, 0, res, &rl, NULL) != 0)
        die("setrlimit", name);
}

/* stdin/stdout/stderr from the pipes, the status pipe at fd 3 (close on
 * exec), nothing else. */
static void arrange_fds(const struct skd__native_child *c)
{
    /* Copies out of 0-3 first (a pipe may sit there), then into them; the
     * limit may be as low as the server's hard limit (set_rlimit). */
    int in = (int)syscall(SYS_fcntl, c->in_fd, F_DUPFD_CLOEXEC, FIRST_FREE_FD);
    int out = (int)syscall(SYS_fcntl, c->out_fd, F_DUPFD_CLOEXEC, FIRST_FREE_FD);
    int err = (int)syscall(SYS_fcntl, c->err_fd, F_DUPFD_CLOEXEC, FIRST_FREE_FD);
    int st = (int)syscall(SYS_fcntl, status_fd, F_DUPFD_CLOEXEC, FIRST_FREE_FD);
    if (in < 0 || out < 0 || err < 0 || st < 0)
        die("duplicate descriptors", NULL);
    status_fd = st;
    if (syscall(SYS_dup3, in, 0, 0) != 0 || syscall(SYS_dup3, out, 1, 0) != 1 ||
        syscall(SYS_dup3, err, 2, 0) != 2)
        die("set up stdio", NULL);
    if (syscall(SYS_dup3, st, 3, O_CLOEXEC) != 3)
        die("set up the status pipe", NULL);
    status_fd = 3;
    if (syscall(SYS_close_range, 4U, ~0U, 0U) != 0)
        die("close inherited descriptors", NULL);
}

/* The bounding set only limits what an execve may grant, so a pre-made
 * sandbox empties it before it waits (65 system calls off the run's path)
 * and keeps the effective capabilities its set-up after the run needs. */
static int bset_dropped;

static void drop_bounding_set(void)
{
    for (int cap = 0; cap < 64; cap++)
        if (sys_prctl(PR_CAPBSET_DROP, (unsigned long)cap) != 0 && errno != EINVAL)
            die("drop the capability bounding set", NULL);
    if (syscall(SYS_prctl, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0UL, 0UL, 0UL) != 0)
        die("clear ambient capabilities", NULL);
    bset_dropped = 1;
}

static void drop_privileges(const struct skd__native_child *c)
{
    if (!bset_dropped)
        drop_bounding_set();
    /* Rootless: setgroups is denied in this user namespace (the parent wrote
     * "deny" before the gid map) and the only mapped id is already ours. */
    gid_t g = SKD_NATIVE_UID;
    if (!c->rootless && syscall(SYS_setgroups, 1, &g) != 0)
        die("setgroups", NULL);
    if (syscall(SYS_setresgid, SKD_NATIVE_UID, SKD_NATIVE_UID, SKD_NATIVE_UID) != 0)
        die("setresgid", NULL);
    if (syscall(SYS_setresuid, SKD_NATIVE_UID, SKD_NATIVE_UID, SKD_NATIVE_UID) != 0)
        die("setresuid", NULL);
    struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct d[2];
    memset(d, 0, sizeof(d));
    if (syscall(SYS_capset, &h, d) != 0)
        die("clear capabilities", NULL);
    if (syscall(SYS_capget, &h, d) != 0 || d[0].effective || d[0].permitted || d[0].inheritable ||
        d[1].effective || d[1].permitted || d[1].inheritable)
        die("verify that no capability is left", NULL);
    if (sys_prctl(PR_SET_NO_NEW_PRIVS, 1) != 0)
        die("no_new_privs", NULL);
    /* Any credential change clears the parent-death signal: set it last. */
    if (sys_prctl(PR_SET_PDEATHSIG, SIGKILL) != 0)
        die("parent-death signal", NULL);
}

/* execve argv[0], searching path when it has no '/'. Returns on failure. */
static void exec_command(const struct skd__native_child *c)
{
    const char *cmd = c->argv[0];
    if (strchr(cmd, '/')) {
        syscall(SYS_execve, cmd, c->argv, c->envp);
        return;
    }
    char full[4096];
    int saved = ENOENT;
    for (const char *p = c->path; p && *p;) {
        const char *e = strchr(p, ':');
        size_t dl = e ? (size_t)(e - p) : strlen(p);
        size_t cl = strlen(cmd);
        if (dl && dl + 1 + cl < sizeof(full)) {
            memcpy(full, p, dl);
            full[dl] = '/';
            memcpy(full + dl + 1, cmd, cl + 1);
            syscall(SYS_execve, full, c->argv, c->envp);
            if (errno != ENOENT && errno != ENOTDIR)
                saved = errno;
        }
        p = e ? e + 1 : NULL;
    }
    errno = saved;
}

__attribute__((noreturn)) static void exec_failed(const struct skd__native_child *c);

/* ---- a pre-made sandbox ---- */

/* Preallocated (this process is a copy of the spawner; these pages are its
 * own): the run's message and the vectors that point into it. */
static char warm_buf[sizeof(struct skd__warm_msg) + SKD__WARM_MSG_MAX];
static char *warm_argv[SKD_SANDBOX_MAX_ARGS + 1];
static char *warm_envp[SKD_SANDBOX_MAX_ARGS + 1];

/* Keep only the descriptors this child uses (it may wait long, and must not
 * hold what the spawner had open when it was cloned: other runs' workspace
 * and mount descriptors). Each is moved above every inherited one, then
 * everything else is closed. */
static void keep_own_fds(struct skd__native_child *c)
{
    int *own[8 + 4];
    int n = 0;
    own[n++] = &c->in_fd, own[n++] = &c->out_fd, own[n++] = &c->err_fd;
    own[n++] = &c->sync_fd, own[n++] = &c->ctl_fd, own[n++] = &status_fd;
    for (int i = 0; i < c->ncg; i++)
        own[n++] = &c->cg_fds[i];
    /* HIGH_FD, or lower when the limit leaves no room there for n more
     * (a server under a low `ulimit -n`); never below an own descriptor.
     * Anything inherited above the moved ones is closed all the same. */
    struct rlimit rl;
    int top = HIGH_FD;
    if (syscall(SYS_prlimit64, 0, RLIMIT_NOFILE, NULL, &rl) == 0 &&
        rl.rlim_cur < (rlim_t)HIGH_FD + (rlim_t)n + 1)
        top = rl.rlim_cur > (rlim_t)n + FIRST_FREE_FD ? (int)rl.rlim_cur - n - 1 : FIRST_FREE_FD;
    for (int i = 0; i < n; i++)
        if (*own[i] >= top)
            top = *own[i] + 1;
    int lo = -1, prev = -1;
    for (int i = 0; i < n; i++) {
        /* Above the last one moved, not just above top: a gap closed below
         * is free again, and the next copy would land in it, below prev,
         * where the next gap's close would take it. */
        int fd = (int)syscall(SYS_fcntl, *own[i], F_DUPFD_CLOEXEC, lo < 0 ? top : prev + 1);
        if (fd < 0)
            die("keep descriptors", NULL);
        if (lo < 0)
            lo = fd;
        else if (fd > prev + 1 &&
                 syscall(SYS_close_range, (unsigned)prev + 1, (unsigned)fd - 1, 0U))
            die("close inherited descriptors", NULL);
        *own[i] = prev = fd;
    }
    if (syscall(SYS_close_range, 0U, (unsigned)lo - 1, 0U) != 0 ||
        syscall(SYS_close_range, (unsigned)prev + 1, ~0U, 0U) != 0)
        die("close inherited descriptors", NULL);
}

void skd__native_keep_own_fds(struct skd__native_child *c)
{
    status_fd = c->status_fd;
    keep_own_fds(c);
    c->status_fd = status_fd;
}

/* Next NUL-terminated string of the message at *p (bounded by end). */
static char *warm_str(char **p, char *end)
{
    char *s = *p;
    while (*p < end && **p)
        (*p)++;
    if (*p >= end)
        die("the run's message is malformed", NULL);
    (*p)++;
    return s;
}

/* Wait for the run, then mount what is its own (/dev/shm and /tmp with its
 * sizes, its workspace) and fill c with its command. EOF: discarded. */
static void warm_receive(struct skd__native_child *c)
{
    union {
        struct cmsghdr h;
        char b[CMSG_SPACE(sizeof(int))];
    } cm;
    struct iovec iov = {warm_buf, sizeof(warm_buf)};
    struct msghdr mh;
    memset(&mh, 0, sizeof(mh));
    memset(&cm, 0, sizeof(cm));
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = cm.b;
    mh.msg_controllen = sizeof(cm.b);
    long n;
    do
        n = syscall(SYS_recvmsg, c->ctl_fd, &mh, MSG_CMSG_CLOEXEC);
    while (n < 0 && errno == EINTR);
    if (n <= 0)
        syscall(SYS_exit_group, 0); /* the spawner let this sandbox go */
    struct skd__warm_msg hd;
    if ((size_t)n < sizeof(hd) || (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)))
        die("the run's message is malformed", NULL);
    memcpy(&hd, warm_buf, sizeof(hd));
    if (hd.magic != SKD__WARM_MAGIC || hd.len != (size_t)n - sizeof(hd) || hd.argc < 1 ||
        hd.argc > SKD_SANDBOX_MAX_ARGS || hd.envc > SKD_SANDBOX_MAX_ARGS)
        die("the run's message is malformed", NULL);
    int ws = -1;
    struct cmsghdr *h = CMSG_FIRSTHDR(&mh);
    if (hd.has_ws) {
        if (!h || h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS ||
            h->cmsg_len != CMSG_LEN(sizeof(int)))
            die("the run's workspace mount is missing", NULL);
        memcpy(&ws, CMSG_DATA(h), sizeof(int));
    } else if (h) {
        die("the run's message is malformed", NULL);
    }
    char *p = warm_buf + sizeof(hd), *end = warm_buf + n;
    const char *tmp_opts = warm_str(&p, end), *shm_opts = warm_str(&p, end);
    c->cwd = warm_str(&p, end);
    c->path = warm_str(&p, end);
    for (unsigned i = 0; i < hd.argc; i++)
        warm_argv[i] = warm_str(&p, end);
    warm_argv[hd.argc] = NULL;
    for (unsigned i = 0; i < hd.envc; i++)
        warm_envp[i] = warm_str(&p, end);
    warm_envp[hd.envc] = NULL;
    if (!warm_argv[0][0])
        die("the run's message is malformed", NULL);
    c->argv = warm_argv;
    c->envp = warm_envp;
    c->fsize = hd.fsize;
    /* /tmp and /dev/shm were mounted (empty, unused) with the sizes this
     * sandbox was made for; other sizes get fresh ones. / and /dev are
     * read-only already; mounting on their directories is still allowed,
     * and these mounts stay writable as in a cold start. */
    if (strcmp(shm_opts, c->shm_opts) != 0 &&
        (sys_umount("/dev/shm", MNT_DETACH) != 0 ||
         sys_mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, shm_opts) != 0))
        die("mount tmpfs on", "/dev/shm");
    if (strcmp(tmp_opts, c->tmp_opts) != 0 &&
        (sys_umount("/tmp", MNT_DETACH) != 0 ||
         sys_mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, tmp_opts) != 0))
        die("mount tmpfs on", "/tmp");
    if (ws >= 0) {
        if (syscall(SYS_move_mount, ws, "", AT_FDCWD, "/workspace", MOVE_MOUNT_F_EMPTY_PATH) != 0)
            die("mount the workspace on", "/workspace");
        sys_close(ws);
    }
    sys_close(c->ctl_fd);
}

/* A live sandbox's init: no command of its own. It drops every privilege
 * as a command would, lets go of every descriptor (the status pipe's EOF
 * tells the spawner it is ready), and waits. Processes of the sandbox
 * cannot signal it (pid 1 of their namespace, no handler), ptrace it
 * (seccomp) or read its memory (not dumpable); the spawner kills it. */
__attribute__((noreturn)) static void live_init(const struct skd__native_child *c)
{
    set_rlimit(RLIMIT_FSIZE, (rlim_t)c->fsize, "RLIMIT_FSIZE");
    drop_privileges(c);
    if (sys_prctl(PR_SET_DUMPABLE, 0) != 0)
        die("not dumpable", NULL);
    if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, c->seccomp) != 0)
        die("seccomp filter", NULL);
    if (syscall(SYS_close_range, 0U, ~0U, 0U) != 0)
        die("close inherited descriptors", NULL);
    /* Orphans of its namespace come to it (an exec's command whose relay
     * was killed): reap them. SIGCHLD is blocked, so that it stays pending
     * for the wait below instead of being dropped as ignored. */
    unsigned long chld = 1UL << (SIGCHLD - 1);
    if (syscall(SYS_rt_sigprocmask, SIG_BLOCK, &chld, NULL, sizeof(chld)) != 0)
        syscall(SYS_exit_group, 127);
    for (;;) {
        while (syscall(SYS_wait4, -1, NULL, __WALL | WNOHANG, NULL) > 0)
            ;
        syscall(SYS_rt_sigtimedwait, &chld, NULL, NULL, sizeof(chld));
    }
}

/* The command's relay (the process the spawner watches): it waits for
 * the command, the init of a pid namespace of its own, and ends as the
 * command ended, so that the spawner reads the command's status. Killing
 * it kills the command (its parent-death signal), and with it everything
 * the command started. It holds no descriptor and no capability but
 * CAP_KILL in the sandbox's user namespace: the parent-death signal is
 * sent with the dying relay's credentials, and the command runs as
 * another user. */
__attribute__((noreturn)) static void relay(long child)
{
    struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct d[2];
    memset(d, 0, sizeof(d));
    d[0].effective = d[0].permitted = 1u << CAP_KILL;
    if (syscall(SYS_close_range, 0U, ~0U, 0U) != 0 || syscall(SYS_capset, &h, d) != 0 ||
        sys_prctl(PR_SET_DUMPABLE, 0) != 0) {
        syscall(SYS_kill, child, SIGKILL);
        syscall(SYS_exit_group, 127);
    }
    int st = 0;
    long w;
    do
        w = syscall(SYS_wait4, child, &st, __WALL, NULL);
    while (w < 0 && errno == EINTR);
    if (w < 0)
        syscall(SYS_exit_group, 127);
    if (WIFEXITED(st))
        syscall(SYS_exit_group, WEXITSTATUS(st));
    int sig = WIFSIGNALED(st) ? WTERMSIG(st) : SIGKILL;
    struct ksigaction sa = {.handler = SIG_DFL};
    syscall(SYS_rt_sigaction, sig, &sa, NULL, sizeof(sa.mask));
    syscall(SYS_kill, syscall(SYS_getpid), sig);
    syscall(SYS_exit_group, 128 + sig);
    __builtin_unreachable();
}

/* The stack of an exec's command until its execve. The command shares the
 * relay's memory (CLONE_VM | CLONE_VFORK, as posix_spawn does) instead of
 * getting a copy of it: a copy of the page tables, torn down again by the
 * execve a moment later, is the largest cost of starting a process on a
 * guest whose page-table updates trap to the hypervisor. The relay is
 * suspended until the command has called execve or died, so nothing else
 * runs on this memory meanwhile; the command uses raw system calls only, and
 * everything it changes of itself (descriptors, credentials, rlimits,
 * seccomp, directory) belongs to its own process, not to the memory. */
static char enter_stack[64 * 1024] __attribute__((aligned(64)));
/* The relay's stack (enter_relay). */
static char relay_stack[64 * 1024] __attribute__((aligned(64)));

/* The command of an exec, in a pid namespace of its own: limits,
 * descriptors, the capability drop, no_new_privs, seccomp, execve. */
static int enter_command(void *arg)
{
    const struct skd__native_child *c = arg;
    if (sys_prctl(PR_SET_PDEATHSIG, SIGKILL) != 0)
        die("parent-death signal", NULL);
    set_rlimit(RLIMIT_NOFILE, 1024, "RLIMIT_NOFILE");
    set_rlimit(RLIMIT_CORE, 0, "RLIMIT_CORE");
    set_rlimit(RLIMIT_FSIZE, (rlim_t)c->fsize, "RLIMIT_FSIZE");
    arrange_fds(c);
    drop_privileges(c);
    if (sys_chdir(c->cwd) != 0)
        die("working directory", c->cwd);
    if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, c->seccomp) != 0)
        die("seccomp filter", NULL);
    exec_command(c);
    exec_failed(c);
}

/* The relay of an exec (see relay() for its part): enters a pid namespace
 * of its own under the sandbox's and starts the command in it. Runs on
 * relay_stack, in the memory of the process that cloned it, which exits at
 * once; its own copy of the child's description is taken first. */
static int enter_relay(void *arg)
{
    struct skd__native_child local = *(const struct skd__native_child *)arg;
    struct skd__native_child *c = &local;
    sys_close(c->pid_pipe);
    if (sys_prctl(PR_SET_PDEATHSIG, SIGKILL) != 0)
        die("parent-death signal", NULL);
    /* The command in a pid namespace of its own under the sandbox's: a
     * timeout or a kill of it ends everything it started, as in a one-shot
     * run. */
    if (syscall(SYS_unshare, CLONE_NEWPID) != 0)
        die("new pid namespace", NULL);
    long pid = clone(enter_command, enter_stack + sizeof(enter_stack),
                     CLONE_VM | CLONE_VFORK | SIGCHLD, c);
    if (pid < 0)
        die("start the command in the live sandbox", NULL);
    relay(pid);
}

void skd__native_enter_main(const struct skd__native_child *cc)
{
    struct skd__native_child local = *cc;
    struct skd__native_child *c = &local;
    status_fd = c->status_fd;
    reset_signals();
    if (sys_prctl(PR_SET_PDEATHSIG, SIGKILL) != 0)
        die("parent-death signal", NULL);
    for (int i = 0; i < c->ncg; i++) {
        if (sys_write(c->cg_fds[i], "0", 1) != 1)
            die("join the live sandbox's cgroup", NULL);
        sys_close(c->cg_fds[i]);
    }
    /* All of the init's namespaces in one call, by its pidfd: the kernel
     * enters the user namespace first (it owns the others, and entering it
     * gives this process the capabilities to enter them), and enters all or
     * none. No descriptor per namespace is kept for the sandbox's life. */
    if (syscall(SYS_setns, c->ns_pidfd,
                CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC |
                    CLONE_NEWUTS | CLONE_NEWCGROUP) != 0)
        die("enter the live sandbox's namespaces", NULL);
    sys_close(c->ns_pidfd);
    /* Root of the sandbox's user namespace, not the host's ids. */
    if (!c->rootless &&
        (syscall(SYS_setresgid, 0, 0, 0) != 0 || syscall(SYS_setgroups, 0, NULL) != 0 ||
         syscall(SYS_setresuid, 0, 0, 0) != 0))
        die("become root of the user namespace", NULL);
    /* The relay, in the sandbox's pid namespace, with the spawner as its
     * parent (this process only reports its pid and exits). It shares this
     * process's memory (CLONE_VM, on a stack of its own) instead of copying
     * it: this process only writes the pid and exits, touching nothing the
     * relay reads. */
    long pid = clone(enter_relay, relay_stack + sizeof(relay_stack), CLONE_VM | CLONE_PARENT, c);
    if (pid < 0)
        die("start the command in the live sandbox", NULL);
    int p = (int)pid;
    if (sys_write(c->pid_pipe, &p, sizeof(p)) != (long)sizeof(p))
        die("report the command's pid", NULL);
    syscall(SYS_exit_group, 0);
    __builtin_unreachable();
}

void skd__native_child_main(const struct skd__native_child *cc)
{
    char go;
    struct skd__native_child local = *cc; /* on this child's stack: the fds move */
    struct skd__native_child *c = &local;
    status_fd = c->status_fd;
    reset_signals();
    if (c->warm)
        keep_own_fds(c);
    if (sys_prctl(PR_SET_PDEATHSIG, SIGKILL) != 0)
        die("parent-death signal", NULL);
    /* If the spawner died between clone3 and the line above, the sync read
     * below sees EOF and the child ends (getppid is 0 in a new pid
     * namespace, so it cannot tell). */
    /* cgroup v1: join the run's cgroups before anything else (v2: born there). */
    for (int i = 0; i < c->ncg; i++) {
        if (sys_write(c->cg_fds[i], "0", 1) != 1)
            die("join the run's cgroup", NULL);
        sys_close(c->cg_fds[i]);
    }
    if (syscall(SYS_read, c->sync_fd, &go, 1) != 1 || go != 'g')
        syscall(SYS_exit_group, 127); /* the parent gave up; it reports why */
    /* Root of the new user namespace for the set-up. Rootless: inside 0 is
     * not mapped; the capabilities this process holds in its own new
     * namespace are enough for the mounts. */
    if (!c->rootless &&
        (syscall(SYS_setresgid, 0, 0, 0) != 0 || syscall(SYS_setgroups, 0, NULL) != 0 ||
         syscall(SYS_setresuid, 0, 0, 0) != 0))
        die("become root of the user namespace", NULL);
    if (sys_prctl(PR_SET_PDEATHSIG, SIGKILL) != 0)
        die("parent-death signal", NULL);
    /* Pre-made: the namespaces clone3 left out (native.c, WARM_CLONE_FLAGS),
     * made here as root of the new user namespace, which owns them. */
    if (c->warm &&
        syscall(SYS_unshare, CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWNET) != 0)
        die("new namespaces", NULL);
    build_root(c);
    if (syscall(SYS_sethostname, "sandbox", 7) != 0)
        die("hostname", NULL);
    loopback_up();
    set_rlimit(RLIMIT_NOFILE, 1024, "RLIMIT_NOFILE");
    set_rlimit(RLIMIT_CORE, 0, "RLIMIT_CORE");
    sys_close(c->sync_fd);
    if (syscall(SYS_unshare, CLONE_NEWCGROUP) != 0)
        die("cgroup namespace", NULL);
    if (c->live)
        live_init(c);
    if (c->warm) {
        drop_bounding_set();
        warm_receive(c); /* blocks until the run arrives */
    }
    set_rlimit(RLIMIT_FSIZE, (rlim_t)c->fsize, "RLIMIT_FSIZE");
    arrange_fds(c);
    drop_privileges(c);
    if (sys_chdir(c->cwd) != 0)
        die("working directory", c->cwd);
    if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, c->seccomp) != 0)
        die("seccomp filter", NULL);
    exec_command(c);
    exec_failed(c);
}

/* Not a sandbox failure: the command is missing or not executable. Say so
 * on stderr, as a shell would, and exit 127 / 126. */
__attribute__((noreturn)) static void exec_failed(const struct skd__native_child *c)
{
    int e = errno;
    const char *why = strerrordesc_np(e);
    char msg[512];
    size_t n = 0;
    put(msg, sizeof(msg), &n, "skilld: ");
    put(msg, sizeof(msg), &n, c->argv[0]);
    put(msg, sizeof(msg), &n, ": ");
    put(msg, sizeof(msg), &n, why ? why : "cannot execute");
    put(msg, sizeof(msg), &n, "\n");
    if (sys_write(2, msg, n) < 0) {
        /* nothing more can be done */
    }
    syscall(SYS_exit_group, e == ENOENT ? 127 : 126);
    __builtin_unreachable();
}
