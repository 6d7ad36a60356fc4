/*
 * Pause, resume and fork of live sandboxes on the docker and podman
 * runtimes (docs/containers.md, "Pause, resume, fork"): the files of a
 * container live sandbox (container_live.c) saved into, and restored from,
 * the same snapshots as a native one's (native_snap.c, whose copy and byte
 * cap are used here as they are). Spawner-only, one thread; the spawner
 * runs as root.
 *
 * What is kept: /tmp. A container live sandbox's root filesystem is the
 * image, read-only (--read-only: a live sandbox's readOnly is always on),
 * so the sandbox writes only its /tmp (a tmpfs of the container's) and
 * its workspace (the server's, not in a snapshot, as for native). There is
 * no root layer of its own to save, and no storage driver to depend on:
 * the engine's overlay upper directory would hold only the engine's own
 * mount points. A container whose root is writable is refused (fail
 * closed: its writes would be lost). Memory and processes are not kept: a
 * resumed container starts afresh, with the files it had.
 *
 *   save     the container is frozen (`pause`: the engine's cgroup
 *            freezer), its /tmp is copied through /proc/<its init>/root/tmp
 *            into tmp/, then the origin file names the engine. It is thawed
 *            (`unpause`); a pause then ends it exactly as a delete does.
 *   restore  `create` and `start` as for a new sandbox, then tmp/ is copied
 *            into its /tmp. Owners, modes and times are kept: the sandbox
 *            user's files stay 65534's. A snapshot saved on another runtime
 *            (native, or the other engine) is refused with its name.
 *
 * Trust: the engine is trusted (as docker.c); the tree is the sandbox's,
 * walked by skd__snap_copy without following a link. /tmp is opened from
 * the init's root (a tmpfs mount point: the sandbox cannot swap it) and
 * the pid is checked against the init's pidfd after the open, so a
 * recycled pid is never read.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandbox/container/container_live.h"
#include "sandbox/container/docker_int.h"
#include "sandbox/native/native_snap.h"
#include "skilld/log.h"
#include "skilld/util.h"

#define ORIGIN "origin" /* beside tmp/: "<engine>\n" */

/* One engine command on s's container (pause, unpause); 0 when it did. */
static int engine_cmd(ctr_state *s, const char *verb, skd_err *err)
{
    skd__ctr_cmd *r = calloc(1, sizeof(*r));
    if (!r)
        return skd_err_set(err, SKD_ENOMEM, "out of memory");
    const char *args[] = {verb, s->name, NULL};
    int rc = skd__ctr_run(&s->eng, args, SHORT_TIMEOUT_MS, r, err);
    if (rc == 0 && r->status != 0)
        rc = skd_err_set(err, SKD_ESANDBOX, "%s %s: %s", s->eng.name, verb,
                         skd__ctr_errline(r->errout));
    free(r);
    return rc;
}

/* The container's /tmp (its init's), as a directory fd, or -1. */
static int open_ctr_tmp(long long pid, int pidfd)
{
    char p[64];
    snprintf(p, sizeof(p), "/proc/%lld/root", pid);
    int root = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    struct pollfd alive = {.fd = pidfd, .events = POLLIN};
    if (root >= 0 && poll(&alive, 1, 0) != 0) { /* it ended: pid may be another's now */
        close(root);
        errno = ESRCH;
        return -1;
    }
    if (root < 0)
        return -1;
    int fd = openat(root, "tmp", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    int e = errno;
    close(root);
    errno = e;
    return fd;
}

/* 1 when the container's init (pidfd) has exited. */
static int ctr_exited(int pidfd)
{
    struct pollfd p = {.fd = pidfd, .events = POLLIN};
    return poll(&p, 1, 0) != 0;
}

/* The container's /tmp and the origin into snap. SKD_ENOENT only when the
 * container has ended (its init's pidfd says so): any other failure to
 * open its /tmp (EMFILE, EACCES) is SKD_ESANDBOX and the sandbox runs on. */
static int save_files(ctr_state *s, long long pid, int pidfd, int snap, int sync, int64_t max,
                      int64_t *bytes, skd_err *err)
{
    int tmp = open_ctr_tmp(pid, pidfd), d = -1, rc;
    if (tmp < 0 && ctr_exited(pidfd))
        return skd_err_set(err, SKD_ENOENT, "no such live sandbox (its container has ended)");
    if (tmp < 0)
        return skd_err_set(err, SKD_ESANDBOX, "%s live sandbox: its /tmp could not be opened: %s",
                           s->eng.name, strerror(errno));
    if (mkdirat(snap, "tmp", 0700) != 0 ||
        (d = openat(snap, "tmp", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
        rc = skd_err_set(err, SKD_ESANDBOX, "snapshot: tmp: %s", strerror(errno));
    else if (sync) /* a pause's: on disk before it is published */
        rc = skd__snap_copy_synced(tmp, d, NULL, max, bytes, err);
    else
        rc = skd__snap_copy(tmp, d, NULL, max, 0, bytes, err);
    if (d >= 0)
        close(d);
    close(tmp);
    char origin[32];
    snprintf(origin, sizeof(origin), "%s\n", s->eng.name);
    if (rc == 0 && skd_write_small(snap, ORIGIN, O_CREAT | O_EXCL | O_NOFOLLOW, origin) != 0)
        rc = skd_err_set(err, SKD_ESANDBOX, "snapshot: origin: %s", strerror(errno));
    if (rc == 0 && sync) {
        int o = openat(snap, ORIGIN, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (o < 0 || fsync(o) != 0 || fsync(snap) != 0)
            rc = skd_err_set(err, SKD_ESANDBOX, "snapshot: sync: %s", strerror(errno));
        if (o >= 0)
            close(o);
    }
    return rc;
}

/* unpause, tried twice; 0 when it is thawed. */
static int thaw(ctr_state *s, const char *id, skd_err *err)
{
    if (engine_cmd(s, "unpause", err) == 0)
        return 0;
    skd_warn("live sandbox %s: could not thaw it (%s): trying again", id, skd_err_msg(err));
    skd_err_clear(err);
    return engine_cmd(s, "unpause", err);
}

int skd__ctr_live_save(const char *id, const char *dst, int flags, int64_t max, int64_t *bytes,
                       skd_err *err)
{
    char part[SKD_UUID_LEN + 8];
    long long pid = 0;
    int pidfd = -1, root_ro = 0, out = -1, rc;
    ctr_state *s = skd__ctr_live_state(id, &pid, &pidfd, &root_ro);
    *bytes = 0;
    if (!s)
        return skd_err_set(err, SKD_ENOENT, "no such live sandbox");
    if (!skd__snap_enabled())
        return skd_err_set(err, SKD_EUNSUPPORTED,
                           "pause, resume and fork need a server (no snapshot directory)");
    if (!root_ro)
        return skd_err_set(err, SKD_ESANDBOX,
                           "pause and fork keep a %s live sandbox's /tmp, and its root "
                           "filesystem is writable: its files there would be lost; delete it "
                           "instead",
                           s->eng.name);
    snprintf(part, sizeof(part), "%s.part", dst);
    skd__snap_drop(part);
    if ((out = skd__snap_open(part, 1, err)) < 0)
        return out;
    /* Frozen while it is copied: one moment's files, not a mix. Fail
     * closed: no freeze, no save (it runs on). */
    skd_err fe = {0};
    if (engine_cmd(s, "pause", &fe) != 0) {
        close(out);
        skd__snap_drop(part);
        rc = skd_err_set(err, SKD_ESANDBOX,
                         "could not freeze the sandbox for the copy (%s); nothing was saved and "
                         "it runs on",
                         skd_err_msg(&fe));
        skd_err_clear(&fe);
        return rc;
    }
    rc = save_files(s, pid, pidfd, out, (flags & SKD__SNAP_END) != 0, max, bytes, err);
    close(out);
    if (thaw(s, id, &fe) != 0 && !(rc == 0 && (flags & SKD__SNAP_END))) {
        /* Frozen for good, its execs would hang: it ends as on delete
         * (a saved pause ends it below anyway). */
        skd_warn("live sandbox %s: could not thaw it (%s): it ends", id, skd_err_msg(&fe));
        skd__ctr_live_delete(id);
        skd__snap_drop(part);
        skd_err_clear(err);
        rc = skd_err_set(err, SKD_ENOENT,
                         "could not thaw the sandbox after the copy (%s): it has ended",
                         skd_err_msg(&fe));
        skd_err_clear(&fe);
        return rc;
    }
    if (rc == 0 && (flags & SKD__SNAP_END))
        skd__ctr_live_delete(id); /* as a delete: rm -f, nothing left */
    if (rc == 0) /* a pause's outlives this server; a fork's copy is used at once */
        rc = (flags & SKD__SNAP_END) ? skd__snap_publish(part, dst, err)
                                     : skd__snap_rename(part, dst, err);
    if (rc)
        skd__snap_drop(part);
    return rc;
}

/* The engine snapshot snap was saved on, into engine: "native" when it
 * has no origin file (a native sandbox's). 0, or SKD_ESANDBOX. */
static int read_origin(int snap, char *engine, size_t cap)
{
    char buf[32];
    int rc = skd_read_small(snap, ORIGIN, O_NOFOLLOW, buf, sizeof(buf), NULL);
    if (rc == SKD_ENOENT) {
        skd_strlcpy(engine, "native", cap);
        return 0;
    }
    char *nl = rc == 0 ? strchr(buf, '\n') : NULL;
    if (!nl)
        return SKD_ESANDBOX;
    *nl = '\0';
    skd_strlcpy(engine, buf, cap);
    return 0;
}

int skd__ctr_snap_origin_check(const char *name, const char *runtime, skd_err *err)
{
    skd_err e = {0};
    char engine[32];
    int snap = skd__snap_open(name, 0, &e);
    if (snap < 0)
        return 0; /* no saved files: the create says the sandbox is lost */
    int rc = read_origin(snap, engine, sizeof(engine));
    close(snap);
    if (rc)
        return skd_err_set(err, SKD_ESANDBOX, "sandbox %s: its saved files have no usable origin",
                           name);
    const char *want = strcmp(runtime, "auto") == 0 ? "native" : runtime;
    if (strcmp(engine, want) != 0)
        return skd_err_set(err, SKD_ESANDBOX,
                           "sandbox %s was paused on the %.20s runtime and this server runs %s: "
                           "resume or fork it on a server whose SKILLS_SANDBOX_RUNTIME is %.20s, "
                           "or delete it",
                           name, engine, want, engine);
    return 0;
}

int skd__ctr_snap_restore_tmp(ctr_state *s, long long pid, int pidfd, int snap, int64_t max,
                              skd_err *err)
{
    char engine[32];
    if (read_origin(snap, engine, sizeof(engine)) != 0 || strcmp(engine, s->eng.name) != 0)
        return skd_err_set(err, SKD_ESANDBOX, "the saved files are not a %s live sandbox's",
                           s->eng.name);
    int src = openat(snap, "tmp", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (src < 0)
        return skd_err_set(err, SKD_ESANDBOX, "the saved files have no /tmp: %s", strerror(errno));
    int dst = open_ctr_tmp(pid, pidfd);
    int rc = dst < 0 ? skd_err_set(err, SKD_ESANDBOX, "%s live sandbox: the new /tmp: %s",
                                   s->eng.name, strerror(errno))
                     : skd__snap_copy(src, dst, NULL, max, 0, NULL, err);
    close(src);
    if (dst >= 0)
        close(dst);
    return rc;
}
