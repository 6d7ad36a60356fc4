/*
 * The docker and podman providers' `create` command line (docker.c runs
 * it): every limit of the run as the engine's flags, OmniRoute's and the
 * ones it lacks (--memory-swap = --memory, ulimits, --init, --pull never,
 * labels), then the image and the command. A limit the engine would take
 * differently than asked is refused here, before anything runs.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sandbox/container/docker_int.h"
#include "sandbox/env.h"
#include "skilld/image.h"

void skd__ctr_argv_add(skd__ctr_argv *a, const char *s)
{
    if (a->oom)
        return;
    if (a->n + 2 > a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 64;
        char **v = realloc(a->v, cap * sizeof(*v));
        if (!v) {
            a->oom = 1;
            return;
        }
        a->v = v;
        a->cap = cap;
    }
    if (!(a->v[a->n] = strdup(s))) {
        a->oom = 1;
        return;
    }
    a->v[++a->n] = NULL;
}

void skd__ctr_argv_addf(skd__ctr_argv *a, const char *fmt, ...)
{
    char buf[4096];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof(buf)) {
        a->oom = 1;
        return;
    }
    skd__ctr_argv_add(a, buf);
}

void skd__ctr_argv_free(skd__ctr_argv *a)
{
    for (size_t i = 0; i < a->n; i++)
        free(a->v[i]);
    free(a->v);
    a->v = NULL;
    a->n = a->cap = 0;
}

/* networkEnabled: the container's command first waits (at most ~10 s) until
 * the egress proxy listens on its loopback (127.0.0.1:3128 in LISTEN state
 * in /proc/net/tcp), because the socket can only be placed once the
 * container, and so its network namespace, exists. Needs sh in the image. */
static const char wait_for_proxy[] =
    "w() { while read -r _ a _ st _; do [ \"$a\" = 0100007F:0C38 ] && [ \"$st\" = 0A ] && "
    "return 0; done </proc/net/tcp; return 1; }; n=0; until w; do n=$((n+1)); "
    "if [ $n -gt 500 ]; then echo 'skilld: the egress proxy did not come up' >&2; exit 125; fi; "
    "sleep 0.02 2>/dev/null || :; done; exec \"$@\"";

int skd__ctr_create_argv(ctr_state *s, const skd__sandbox_req *req, skd__ctr_argv *a, skd_err *err)
{
    const skd_sandbox_config *c = req->cfg;
    if (c->memory_limit <= 0 || c->pids_limit <= 0 || c->cpu_limit <= 0 || c->tmp_size <= 0)
        return skd_err_set(err, SKD_ESANDBOX, "%s needs positive memory, pids, cpu and tmp limits",
                           s->eng.name);
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    double cpus = (double)c->cpu_limit / 100.0;
    if (ncpu > 0 && cpus > (double)ncpu)
        cpus = (double)ncpu; /* the same effective limit; engines refuse more than exist */
    int podman = strcmp(s->eng.name, "podman") == 0;

    skd__ctr_argv_add(a, "create");
    skd__ctr_argv_add(a, s->live ? "--rm" : "-i");
    skd__ctr_argv_addf(a, "--name=%s", s->name);
    skd__ctr_argv_add(a, "--label=skilld=1");
    skd__ctr_argv_addf(a, "--label=skilld.run=%s", req->id);
    skd__ctr_argv_addf(a, "--label=skilld.owner=%s", skd__ctr_owner());
    skd__ctr_argv_addf(a, "--cpus=%.2f", cpus);
    if (s->cg_parent) {
        char parent[128];
        if (skd__ctr_cg_make(s->id, c->memory_limit << 20, parent, sizeof(parent), err) != 0)
            return SKD_ESANDBOX;
        skd__ctr_argv_addf(a, "--cgroup-parent=%s", parent);
        /* conmon stays in skilld's cgroup: not charged to the sandbox's
         * memory, and not holding the run's cgroup after the run. */
        skd__ctr_argv_add(a, "--cgroups=no-conmon");
    } else {
        skd__ctr_argv_addf(a, "--memory=%lldm", (long long)c->memory_limit);
        skd__ctr_argv_addf(a, "--memory-swap=%lldm", (long long)c->memory_limit);
    }
    skd__ctr_argv_addf(a, "--pids-limit=%lld", (long long)c->pids_limit);
    /* Always no network of the engine's: with networkEnabled the egress
     * proxy's socket is placed on the container's loopback at spawn. */
    skd__ctr_argv_add(a, "--network=none");
    skd__ctr_argv_add(a, "--cap-drop=ALL");
    skd__ctr_argv_add(a, "--security-opt=no-new-privileges");
    if (c->read_only)
        skd__ctr_argv_add(a, "--read-only");
    skd__ctr_argv_addf(a, "--tmpfs=/tmp:rw,noexec,nosuid,nodev,size=%lld", (long long)c->tmp_size);
    skd__ctr_argv_addf(a, "--user=%d:%d", SKD__CTR_UID, SKD__CTR_UID);
    skd__ctr_argv_addf(a, "--ulimit=nofile=%d:%d", NOFILE_LIMIT, NOFILE_LIMIT);
    skd__ctr_argv_addf(a, "--ulimit=nproc=%d:%d", NPROC_LIMIT, NPROC_LIMIT);
    if (c->file_size_limit > 0)
        skd__ctr_argv_addf(a, "--ulimit=fsize=%lld:%lld", (long long)c->file_size_limit,
                           (long long)c->file_size_limit);
    skd__ctr_argv_add(a, "--init");
    skd__ctr_argv_add(a, "--pull=never");
    skd__ctr_argv_add(a, "--log-driver=none"); /* output goes to the attached client only */
    if (req->workspace) /* the quota overlay's merged view when there is one */
        skd__ctr_argv_addf(a, "--volume=%s:/workspace:%s",
                           s->wsq ? skd__wsq_merged(s->wsq) : req->workspace,
                           c->workspace_read_only ? "ro" : "rw");
    if (c->network_enabled && s->rundir[0]) { /* what the native root holds (rundir_egress_files) */
        skd__ctr_argv_addf(a, "--volume=%s/%s:%s:ro", s->rundir, SKD__CTR_NODE_PRELOAD,
                           SKD__SANDBOX_NODE_PRELOAD);
        if (s->trust)
            skd__ctr_argv_addf(a, "--volume=%s/%s:%s:ro", s->rundir, SKD__CTR_TRUST_BUNDLE,
                               SKD__SANDBOX_TRUST_BUNDLE);
    }
    if (s->live)
        skd__ctr_argv_addf(a, "--volume=%s/%s:%s:ro", s->rundir, SKD__CTR_LIVE_HOLD,
                           SKD__CTR_LIVE_HOLD_AT);
    if (s->live)
        skd__ctr_argv_addf(a, "--volume=%s/%s:%s:ro", s->rundir, SKD__CTR_LIVE_ENDED,
                           SKD__CTR_LIVE_ENDED_AT);
    skd__ctr_argv_addf(a, "--workdir=%s",
                       req->cwd ? req->cwd : (req->workspace ? "/workspace" : "/tmp"));
    for (size_t i = 0; req->envp && req->envp[i]; i++) {
        if (!strchr(req->envp[i], '=') || req->envp[i][0] == '=')
            return skd_err_set(err, SKD_EINVAL, "bad environment entry");
        skd__ctr_argv_addf(a, "--env=%s", req->envp[i]);
    }
    /* Podman stores imported images as localhost/<name>; a reference with
     * no registry domain gets that prefix, so that no short-name search of
     * registries is ever attempted. Docker's store keys the same reference
     * as docker.io/<name>, which is what it resolves "name" and "ns/name"
     * to, so docker gets it as written. */
    skd_image_ref ref;
    if (skd_image_parse_ref(req->image, &ref, err) != 0)
        return SKD_EINVAL;
    if (podman && !ref.has_domain)
        skd__ctr_argv_addf(a, "localhost/%s", req->image);
    else
        skd__ctr_argv_add(a, req->image);
    if (s->live) { /* the init: its execs come once the proxy is placed */
        skd__ctr_argv_add(a, "sh");
        skd__ctr_argv_add(a, "-c");
        skd__ctr_argv_add(a, "read _ <" SKD__CTR_LIVE_HOLD_AT);
        return a->oom ? skd_err_set(err, SKD_ENOMEM, "out of memory") : 0;
    }
    if (c->network_enabled) { /* wait for the proxy, then exec the command */
        skd__ctr_argv_add(a, "sh");
        skd__ctr_argv_add(a, "-c");
        skd__ctr_argv_add(a, wait_for_proxy);
        skd__ctr_argv_add(a, "sh");
    }
    for (size_t i = 0; req->argv[i]; i++)
        skd__ctr_argv_add(a, req->argv[i]);
    return a->oom ? skd_err_set(err, SKD_ENOMEM, "out of memory") : 0;
}
