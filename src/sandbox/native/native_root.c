/*
 * The new root of a native sandbox, as the parent lays it out before
 * clone3: the entries the child binds, links and writes under the staging
 * directory (the host image's /usr and links, a minimal /etc, an imported
 * image's top level, /dev's nodes), and the detached mounts opened while
 * this process still sees the host (the idmapped workspace or its quota
 * overlay, the skill folder, the image root). The child formats nothing:
 * every path is absolute here.
 */
#include "sandbox/env.h"
#include "sandbox/native/native_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/mount.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static int add_ent(struct nstate *s, enum mnt_kind kind, const char *rel, const char *src, int dev)
{
    if (s->nents >= MAX_ENTS)
        return -1;
    struct mnt_entry *m = &s->ents[s->nents];
    size_t need = strlen(skd__nat.stage) + strlen(rel) + 2;
    m->dst = malloc(need);
    m->src = strdup(src ? src : "");
    if (!m->dst || !m->src) {
        free(m->dst);
        free(m->src);
        return -1;
    }
    snprintf(m->dst, need, "%s/%s", skd__nat.stage, rel);
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
    static const char *const skip[] = {".",
                                       "..",
                                       "proc",
                                       "dev",
                                       "tmp",
                                       "workspace",
                                       "sys",
                                       ".skilld-image",
                                       "skill",
                                       &SKD__SANDBOX_TRUST_BUNDLE[1],
                                       &SKD__SANDBOX_NODE_PRELOAD[1]};
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
        if ((skd__nat.rootless ? snprintf(src, sizeof(src), "%s/%s", rootfs, de->d_name)
                               : snprintf(src, sizeof(src), "%s/.skilld-image/%s", skd__nat.stage,
                                          de->d_name)) >= (int)sizeof(src))
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
    size_t n = strlen(skd__nat.stage) + strlen(rel) + 2;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/%s", skd__nat.stage, rel);
    return p;
}

void skd__native_cleanup(void *state, skd__outcome *out);

/* Detached mounts opened here, while this process can still see the host:
 * the idmapped workspace and the read-only image root. */
int skd__native_open_mounts(struct nstate *s, skd_err *err)
{
    const skd__sandbox_req *q = s->req;
    struct mount_attr a;
    if (skd__nat.rootless) /* open_tree needs CAP_SYS_ADMIN: the child binds by path */
        return 0;
    if (q->workspace && q->cfg->workspace_quota > 0 && !q->cfg->workspace_read_only) {
        /* Writes go to the quota overlay, committed after the run; a
         * pre-made sandbox brings its tmpfs (taken over, even on failure). */
        skd__wsq *stage = s->stage;
        s->stage = NULL;
        skd__nat.last_quota = q->cfg->workspace_quota;
        int rc = skd__wsq_prepare_staged(stage, q->workspace, q->workspace_fd, q->id,
                                         q->cfg->workspace_quota, skd__nat.idmap_fd,
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
        a.userns_fd = s->wsq ? 0 : (unsigned)skd__nat.idmap_fd;
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
        a.userns_fd = (unsigned)skd__nat.idmap_fd;
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

const char *skd__native_env_path(char *const *envp)
{
    for (char *const *e = envp; *e; e++)
        if (strncmp(*e, "PATH=", 5) == 0)
            return *e + 5;
    return "/usr/local/bin:/usr/bin:/bin";
}

/* The run's /tmp and /dev/shm sizes. */
void skd__native_set_opts(struct nstate *s)
{
    long long t = (long long)s->req->cfg->tmp_size;
    snprintf(s->tmp_opts, sizeof(s->tmp_opts), "size=%lld,mode=1777", t);
    snprintf(s->shm_opts, sizeof(s->shm_opts), "size=%lld,mode=1777",
             t < (64 << 20) ? t : (64 << 20));
}

/* The sandbox's trust bundle: the system's roots and the egress CA, in a
 * file of the root (written by the child into the root's tmpfs). */
static int add_trust_bundle(struct nstate *s, const char *ca_pem)
{
    char *text = skd__sandbox_trust_text(ca_pem);
    if (!text)
        return -1;
    int rc = add_ent(s, MNT_WRITE_FILE, &SKD__SANDBOX_TRUST_BUNDLE[1], text, 0);
    free(text);
    return rc;
}

int skd__native_fill_child(struct nstate *s, skd_err *err)
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
    if (rc == 0 && skd__nat.rootless && q->workspace) {
        rc = add_ent(s, MNT_BIND_DIR, "workspace", q->workspace, 0);
        if (rc == 0)
            s->ents[s->nents - 1].writable = !q->cfg->workspace_read_only;
    }
    if (rc == 0 && skd__nat.rootless && q->skill_dir)
        rc = add_ent(s, MNT_BIND_DIR, "skill", q->skill_dir, 0);
    if (rc == 0 && q->ca_pem)
        rc = add_trust_bundle(s, q->ca_pem);
    if (rc == 0 && q->cfg->network_enabled) /* NODE_OPTIONS requires it (sandbox/env.h) */
        rc =
            add_ent(s, MNT_WRITE_FILE, &SKD__SANDBOX_NODE_PRELOAD[1], skd__sandbox_node_preload, 0);
    for (size_t i = 0; i < sizeof(rels) / sizeof(rels[0]) && rc == 0; i++)
        if (!(s->paths[i] = stage_path(rels[i])))
            rc = -1;
    if (rc)
        return skd_err_set(err, SKD_ESANDBOX, "native sandbox: cannot lay out the root of %s",
                           q->image);
    skd__native_set_opts(s);
    c->stage = skd__nat.stage;
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
    c->path = skd__native_env_path(q->envp);
    c->fsize = (unsigned long long)q->cfg->file_size_limit;
    c->rootless = skd__nat.rootless;
    return skd__seccomp_program(&c->seccomp, err);
}
