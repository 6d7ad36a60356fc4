/*
 * Pre-made sandboxes: up to WARM_MAX native sandboxes whose root is built
 * and pivoted before any run is known (native_child.c, warm_receive), each
 * waiting on its control socket for the one run it serves. Only runs that
 * need nothing placed before the root is built can take one (warm_fits);
 * every other run starts cold. A pre-made sandbox gets the operator's
 * defaults, never a tenant's values, so nothing of one tenant's runs shapes
 * the next sandbox.
 */
#include "sandbox/native/native_int.h"
#include "skilld/log.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* The pre-made sandboxes waiting for a run, oldest first (the oldest has
 * had the most time to finish its set-up). */
#define WARM_MAX 2
static struct nstate *warm[WARM_MAX];
static int nwarm;
/* A run's defaults (the operator's): a pre-made sandbox's /tmp and /dev/shm
 * are mounted with this size and these limits are written to its cgroup
 * ahead. A run with other values gets fresh mounts (native_child.c,
 * warm_receive) and its own limits written at prepare. */
static int64_t def_tmp_size;
static skd_sandbox_config def_limits;

void skd__native_set_defaults(const skd_sandbox_config *defaults)
{
    def_limits = *defaults;
    def_tmp_size = defaults->tmp_size;
}

void skd__native_warm_forget(void)
{
    nwarm = 0;
    def_tmp_size = 0;
    memset(&def_limits, 0, sizeof(def_limits));
}

/* A run a pre-made sandbox can serve: the host image, no skill folder, no
 * network (those need mounts or a socket placed before the root is
 * built), not rootless. Everything else starts cold, as before. */
int skd__native_warm_fits(const skd__sandbox_req *req)
{
    if (nwarm == 0 || skd__nat.rootless || req->rootfs || req->skill_dir ||
        req->cfg->network_enabled || (req->image && *req->image && strcmp(req->image, "host") != 0))
        return 0;
    /* Its message must fit the child's buffer (skd__native_warm_spawn; the two size
     * options are under 64 bytes each); larger ones start cold. */
    size_t len = strlen(req->cwd) + strlen(skd__native_env_path(req->envp)) + 2 * 64 + 4;
    for (char *const *a = req->argv; *a; a++)
        len += strlen(*a) + 1;
    for (char *const *e = req->envp; *e; e++)
        len += strlen(*e) + 1;
    return len <= SKD__WARM_MSG_MAX;
}

/* Take the oldest waiting sandbox that is still there (one dies if its
 * set-up failed), or NULL: the oldest has had the most time to finish its
 * set-up. */
struct nstate *skd__native_warm_take(void)
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
        skd__native_cleanup(w, NULL);
    }
    return NULL;
}

static char *put_str(char *p, const char *str)
{
    size_t n = strlen(str) + 1;
    memcpy(p, str, n);
    return p + n;
}

/* Send the run to its pre-made sandbox and hand out the descriptors it
 * was started with. The run's limits are on its cgroup already (prepare). */
int skd__native_warm_spawn(struct nstate *s, skd__spawned *out, skd_err *err)
{
    const skd__sandbox_req *q = s->req;
    size_t len = 0, argc = 0, envc = 0;
    const char *head[] = {s->tmp_opts, s->shm_opts, q->cwd, skd__native_env_path(q->envp)};
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
    skd__native_hold_mntns(s);
    if (out->pidfd < 0) {
        skd__native_close_ends(out);
        return skd_err_set(err, SKD_ESANDBOX, "native sandbox: pidfd: %s", strerror(errno));
    }
    return 0;
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
    if (nwarm >= depth || skd__native_detect(&err) != 0 || skd__nat.rootless)
        return 0;
    skd__native_flush(); /* as for a cold spawn: it copies the mounts */
    struct nstate *s = skd__native_state_new(&req);
    char name[32];
    snprintf(name, sizeof(name), "warm-%u", ++seq);
    skd__spawned sp = SKD__SPAWNED_NONE;
    if (!s)
        return -1;
    s->warm = s->child.warm = 1;
    cfg.tmp_size = def_tmp_size > 0 ? def_tmp_size : 1 << 20;
    if (skd__native_fill_child(s, &err) || skd__cgroup_create_bare(name, &s->cg, &err) ||
        skd__native_start_child(s, &sp, &err)) {
        skd_debug("native sandbox: no pre-made sandbox: %s", skd_err_msg(&err));
        skd__native_cleanup(s, NULL);
        return -1;
    }
    close(sp.pidfd); /* s->pidfd is the provider's own copy */
    sp.pidfd = -1;
    s->ends = sp;
    skd__cgroup_open_limits(s->cg);
    if (def_limits.memory_limit > 0 && def_limits.pids_limit > 0 && def_limits.cpu_limit > 0)
        skd__cgroup_write_ahead(s->cg, &def_limits);
    if (skd__nat.last_quota > 0 &&
        skd__wsq_stage(name, skd__nat.last_quota, SKD_NATIVE_HOST_BASE + SKD_NATIVE_UID,
                       SKD_NATIVE_HOST_BASE + SKD_NATIVE_UID, &s->stage, &err))
        skd_debug("native sandbox: no quota tmpfs made ahead: %s", skd_err_msg(&err));
    warm[nwarm++] = s;
    return 1;
}

void skd__native_warm_drop(void)
{
    while (nwarm > 0)
        skd__native_cleanup(warm[--nwarm], NULL);
}
