/*
 * The sandbox runner (see include/skilld/sandbox.h): submission, the queue,
 * the caps on concurrent runs, kill, and the public run/start calls. The
 * one supervisor thread that starts queued runs and watches running ones
 * lives in supervisor.c; both share struct skd_runner (runner_int.h).
 *
 * Trust: the spec comes from a skill handler that already validated its
 * input against a schema, but every field is checked again here (sizes,
 * counts, NUL bytes); the provider sees only the copies made here.
 */
#include "sandbox/runner_int.h"
#include "sandbox/env.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <sys/eventfd.h>
#include <unistd.h>

static char *dup_or_null(const char *s, int *bad)
{
    if (!s)
        return NULL;
    char *d = strdup(s);
    if (!d)
        *bad = 1;
    return d;
}

static void free_vec(char **v)
{
    if (!v)
        return;
    for (char **p = v; *p; p++)
        free(*p);
    free(v);
}

/* Copy a NULL-terminated string vector of at most max entries. */
static int copy_vec(const char *const *src, size_t max, char ***out, skd_err *err)
{
    size_t n = 0;
    while (src[n]) {
        if (++n > max)
            return skd_err_set(err, SKD_EINVAL, "too many arguments or variables (max %zu)", max);
    }
    char **v = calloc(n + 1, sizeof(*v));
    if (!v)
        return skd_err_set(err, SKD_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        if (!(v[i] = strdup(src[i]))) {
            free_vec(v);
            return skd_err_set(err, SKD_ENOMEM, "out of memory");
        }
    }
    *out = v;
    return 0;
}

void skd__run_free(struct run *run)
{
    if (!run)
        return;
    free_vec(run->argv);
    free_vec(run->envp);
    free(run->key);
    free(run->image);
    free(run->rootfs);
    free(run->workspace);
    free(run->skill_dir);
    free(run->egress_allow);
    free(run->egress_deny);
    skd_secrets_free(run->secrets, run->nsecrets);
    free(run->ca_pem);
    free(run->live);
    free(run->cwd);
    free(run->in);
    skd_buf_free(&run->out.buf);
    skd_buf_free(&run->err.buf);
    free(run);
}

static int check_env(char **envp, skd_err *err)
{
    for (char **p = envp; *p; p++) {
        const char *eq = strchr(*p, '=');
        if (!eq || eq == *p)
            return skd_err_set(err, SKD_EINVAL, "environment entry '%.40s' is not NAME=value", *p);
    }
    return 0;
}

static int is_container_runtime(const char *rt)
{
    return rt && (strcmp(rt, "docker") == 0 || strcmp(rt, "podman") == 0);
}
/* networkEnabled: the proxy variables replace any the caller set, so every
 * tool inside goes through the egress proxy and nothing bypasses it. */
static int add_proxy_env(struct run *run, skd_err *err)
{
    size_t n = 0, k = 0, extra = 0;
    while (run->envp[n])
        n++;
    while (skd__sandbox_env_proxy[extra])
        extra++;
    char **v = calloc(n + extra + 2, sizeof(*v));
    if (!v)
        return skd_err_set(err, SKD_ENOMEM, "out of memory");
    static const char node_opt[] = "NODE_OPTIONS=";
    const size_t nlen = sizeof(node_opt) - 1;
    char *node_caller = NULL; /* the caller's NODE_OPTIONS entry, or NULL */
    for (size_t i = 0; i < n; i++) {
        if (skd__sandbox_env_is_proxy(run->envp[i]))
            free(run->envp[i]);
        else if (strncmp(run->envp[i], node_opt, nlen) == 0 && !node_caller)
            node_caller = run->envp[i];
        else
            v[k++] = run->envp[i];
    }
    free(run->envp);
    run->envp = v;
    for (size_t i = 0; i < extra; i++)
        if (!(v[k++] = strdup(skd__sandbox_env_proxy[i]))) {
            free(node_caller);
            return skd_err_set(err, SKD_ENOMEM, "out of memory");
        }
    /* node's fetch through the proxy: the preload first, then whatever
     * options the caller gave node. */
    const char *rest = node_caller ? node_caller + nlen : "";
    size_t len = nlen + strlen(SKD__SANDBOX_NODE_OPTION) + 1 + strlen(rest) + 1;
    if ((v[k] = malloc(len)) != NULL)
        snprintf(v[k], len, "%s%s%s%s", node_opt, SKD__SANDBOX_NODE_OPTION, *rest ? " " : "", rest);
    free(node_caller);
    return v[k] ? 0 : skd_err_set(err, SKD_ENOMEM, "out of memory");
}

void skd_runner_set_secrets(skd_runner *r, skd_sandbox_secrets_fn fn, void *arg)
{
    pthread_mutex_lock(&r->mu);
    r->secrets_fn = fn;
    r->secrets_arg = arg;
    pthread_mutex_unlock(&r->mu);
}

void skd_runner_set_live_egress(skd_runner *r, skd_live_egress_fn fn, void *arg)
{
    pthread_mutex_lock(&r->mu);
    r->live_egress_fn = fn;
    r->live_egress_arg = arg;
    pthread_mutex_unlock(&r->mu);
}

void skd_runner_set_live_events(skd_runner *r, skd_live_event_fn fn, void *arg)
{
    pthread_mutex_lock(&r->mu);
    r->live_event_fn = fn;
    r->live_event_arg = arg;
    pthread_mutex_unlock(&r->mu);
}

void skd_runner_set_live_paused(skd_runner *r, skd_live_paused_fn fn, void *arg)
{
    pthread_mutex_lock(&r->mu);
    r->live_paused_fn = fn;
    r->live_paused_arg = arg;
    pthread_mutex_unlock(&r->mu);
}

/* Put entries (NAME=value, n of them, stolen) into run's environment in
 * place of any entry of the same names. */
static int put_env(struct run *run, char **add, size_t nadd, skd_err *err)
{
    size_t n = 0, k = 0;
    while (run->envp[n])
        n++;
    char **v = calloc(n + nadd + 1, sizeof(*v));
    if (!v) {
        for (size_t j = 0; j < nadd; j++)
            free(add[j]);
        return skd_err_set(err, SKD_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        size_t len = strcspn(run->envp[i], "=");
        int same = 0;
        for (size_t j = 0; j < nadd && !same; j++)
            same = strncmp(add[j], run->envp[i], len) == 0 && add[j][len] == '=';
        if (same)
            free(run->envp[i]);
        else
            v[k++] = run->envp[i];
    }
    for (size_t j = 0; j < nadd; j++)
        v[k++] = add[j];
    free(run->envp);
    run->envp = v;
    return 0;
}

/* networkEnabled with a key: the key's secrets for the egress proxy, and
 * NAME=placeholder for each in place of any entry of that name; with any,
 * the egress CA for the sandbox's trust bundle and the TRUST rows naming
 * it (native: a file of the root; docker/podman: a read-only bind). */
int skd__runner_secrets(skd_runner *r, const char *key, skd_secret **out, size_t *n, skd_err *err)
{
    *out = NULL;
    *n = 0;
    pthread_mutex_lock(&r->mu);
    skd_sandbox_secrets_fn fn = r->secrets_fn;
    void *arg = r->secrets_arg;
    pthread_mutex_unlock(&r->mu);
    if (!fn || !key || !key[0])
        return 0;
    return fn(arg, key, out, n, err);
}

/* An exec into a live sandbox gets the placeholders of the secrets its
 * sandbox's proxy holds (those of its creation), so that the two agree. */
static int add_secrets(skd_runner *r, struct run *run, skd_err *err)
{
    int rc = run->live
                 ? skd__live_secrets(r, run->key, run->live, &run->secrets, &run->nsecrets, err)
                 : skd__runner_secrets(r, run->key, &run->secrets, &run->nsecrets, err);
    if (rc)
        return rc;
    if (!run->nsecrets)
        return 0;
    char *add[SKD_EGRESS_MAX_SECRETS + 8];
    size_t nadd = 0;
    for (size_t j = 0; j < run->nsecrets && j < SKD_EGRESS_MAX_SECRETS; j++) {
        size_t len = strlen(run->secrets[j].name) + strlen(run->secrets[j].placeholder) + 2;
        if (!(add[nadd] = malloc(len)))
            goto nomem;
        snprintf(add[nadd++], len, "%s=%s", run->secrets[j].name, run->secrets[j].placeholder);
    }
    skd_egress *e = skd__runner_egress(r, err);
    if (!e || (rc = skd__egress_ca_pem(e, &run->ca_pem, err)) != 0) {
        for (size_t j = 0; j < nadd; j++)
            free(add[j]);
        return e ? rc : SKD_ESANDBOX;
    }
    for (size_t j = 0; skd__sandbox_env_trust[j]; j++)
        if (!(add[nadd++] = strdup(skd__sandbox_env_trust[j]))) {
            nadd--;
            goto nomem;
        }
    return put_env(run, add, nadd, err);
nomem:
    for (size_t j = 0; j < nadd; j++)
        free(add[j]);
    return skd_err_set(err, SKD_ENOMEM, "out of memory");
}

/* Build a run from spec for runtime rt: copies, validation, the
 * ceilings, image resolution. */
static int run_new(skd_runner *r, const skd_sandbox_spec *spec, const char *rt, struct run **out,
                   skd_err *err)
{
    int rc, bad = 0;
    struct run *run = calloc(1, sizeof(*run));
    if (!run)
        return skd_err_set(err, SKD_ENOMEM, "out of memory");
    run->pidfd = run->in_fd = run->status_fd = run->timer_fd = -1;
    run->out.fd = run->err.fd = -1;
    if (!spec->argv || !spec->argv[0] || !spec->argv[0][0]) {
        rc = skd_err_set(err, SKD_EINVAL, "no command to run");
        goto fail;
    }
    if ((rc = copy_vec(spec->argv, SKD_SANDBOX_MAX_ARGS, &run->argv, err)) ||
        (rc = copy_vec(spec->env ? spec->env : skd__sandbox_env_base, SKD_SANDBOX_MAX_ARGS,
                       &run->envp, err)) ||
        (rc = check_env(run->envp, err)))
        goto fail;
    run->cfg = spec->config ? *spec->config : r->defaults;
    /* The operator's, whatever the caller's copy says. */
    run->cfg.workspace_quota = r->defaults.workspace_quota;
    run->cfg.data_reserve = r->defaults.data_reserve;
    if ((rc = skd_sandbox_config_check(&run->cfg, &r->ceilings, err)) != 0)
        goto fail;
    /* networkEnabled (allowed by the ceilings above): the only way out is
     * the egress proxy, and every tool inside is told so. */
    if (run->cfg.network_enabled && (rc = add_proxy_env(run, err)))
        goto fail;
    if (spec->stdin_len > SKD_SANDBOX_MAX_STDIN) {
        rc = skd_err_set(err, SKD_ETOOBIG, "stdin is larger than %u bytes", SKD_SANDBOX_MAX_STDIN);
        goto fail;
    }
    if (spec->stdin_len && spec->stdin_data) {
        if (!(run->in = malloc(spec->stdin_len)))
            bad = 1;
        else
            memcpy(run->in, spec->stdin_data, spec->stdin_len);
        run->in_len = spec->stdin_len;
    }
    run->key = dup_or_null(spec->key_id ? spec->key_id : "", &bad);
    run->image = dup_or_null(spec->image && *spec->image ? spec->image : "host", &bad);
    run->workspace = dup_or_null(spec->workspace, &bad);
    run->skill_dir = dup_or_null(spec->skill_dir, &bad);
    run->egress_allow = dup_or_null(spec->egress_allow, &bad);
    run->egress_deny = dup_or_null(spec->egress_deny, &bad);
    run->live = dup_or_null(spec->live_id, &bad);
    run->background = spec->live_id && spec->background;
    run->on_output = spec->on_output;
    run->output_arg = spec->output_arg;
    run->on_stdin = run->background ? spec->on_stdin : NULL;
    run->cwd = dup_or_null(spec->cwd ? spec->cwd : spec->workspace ? "/workspace" : "/tmp", &bad);
    if (bad) {
        rc = skd_err_set(err, SKD_ENOMEM, "out of memory");
        goto fail;
    }
    if (run->cfg.network_enabled && (rc = add_secrets(r, run, err)))
        goto fail;
    if (run->cwd[0] != '/') {
        rc = skd_err_set(err, SKD_EINVAL, "working directory must be absolute");
        goto fail;
    }
    rc = skd_sandbox_image_rootfs(r->data_dir, r->allowed, run->image, &run->rootfs, err);
    /* docker and podman run the image from their own store (skilld image
     * import loads it there too); the allow-list still applies. "auto" is
     * resolved in the spawner: should it pick native, native refuses an
     * image without a rootfs (not imported) itself. */
    if (rc == SKD_ENOENT && (is_container_runtime(rt) || strcmp(rt, "auto") == 0)) {
        skd_err_clear(err);
        rc = 0;
    }
    if (rc)
        goto fail;
    if (skd_uuid(run->id)) {
        rc = skd_err_set(err, SKD_EINTERNAL, "no randomness for a run id");
        goto fail;
    }
    skd_buf_init(&run->out.buf, (size_t)run->cfg.output_limit);
    skd_buf_init(&run->err.buf, (size_t)run->cfg.output_limit);
    run->req = (skd__sandbox_req){
        .id = run->id,
        .image = run->image,
        .rootfs = run->rootfs,
        .argv = run->argv,
        .envp = run->envp,
        .workspace = run->workspace,
        .cwd = run->cwd,
        .cfg = &run->cfg,
        .data_dir = r->data_dir,
        .skill_dir = run->skill_dir,
        .workspace_fd = -1,
        .skill_fd = -1,
        .ca_pem = run->ca_pem,
        .live = run->live,
    };
    *out = run;
    return 0;
fail:
    skd__run_free(run);
    return rc;
}

int skd_sandbox_start(skd_runner *r, const skd_sandbox_spec *spec, skd_sandbox_done_fn done,
                      void *arg, char id_out[SKD_UUID_LEN + 1], skd_err *err)
{
    struct run *run = NULL;
    /* Every provider runs in the spawner process; the name (or "auto") is
     * resolved there. */
    const char *rt = spec->runtime && *spec->runtime ? spec->runtime : r->runtime;
    if (strcmp(rt, "native") != 0 && strcmp(rt, "docker") != 0 && strcmp(rt, "podman") != 0 &&
        strcmp(rt, "auto") != 0)
        return skd_err_set(err, SKD_ESANDBOX,
                           "unknown sandbox runtime '%.32s' (native, docker, podman or auto)", rt);
    int rc = run_new(r, spec, rt, &run, err);
    if (rc)
        return rc;
    run->prov = &skd__provider_remote;
    run->req.spawner = r->spawner;
    run->req.provider = rt;
    if ((rc = run->prov->prepare(&run->req, &run->pstate, err)) != 0) {
        skd__run_free(run);
        return rc;
    }
    skd_strlcpy(run->runtime_name, run->prov->runtime(run->pstate), sizeof(run->runtime_name));
    run->done = done;
    run->done_arg = arg;
    run->submitted = skd_mono_ms();
    if (id_out)
        memcpy(id_out, run->id, sizeof(run->id));
    pthread_mutex_lock(&r->mu);
    if (r->stopping || r->queued >= r->max_queued) {
        int stopping = r->stopping;
        pthread_mutex_unlock(&r->mu);
        run->prov->cleanup(run->pstate, &run->oc);
        skd__run_free(run);
        if (stopping)
            return skd_err_set(err, SKD_ESANDBOX, "the sandbox runner is shutting down");
        return skd_err_set(err, SKD_EBUSY, "too many sandbox runs are waiting (%d); try later",
                           r->max_queued);
    }
    if (r->tail)
        r->tail->next = run;
    else
        r->head = run;
    r->tail = run;
    r->queued++;
    pthread_mutex_unlock(&r->mu);
    skd__runner_wake(r);
    return 0;
}

/* Blocking run. */
#define RELAY_MAX (1u << 20)

struct chunk {
    struct chunk *next;
    int stream;
    size_t len;
    char data[];
};

struct waiter {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done;
    skd_sandbox_result *res;
    struct chunk *head, *tail; /* output for the caller (output_on_caller) */
    size_t queued;
};

/* On the supervisor thread: queue the chunk for the waiting thread. */
static void relay_output(void *arg, int stream, const char *data, size_t len)
{
    struct waiter *w = arg;
    pthread_mutex_lock(&w->mu);
    struct chunk *c = w->queued + len <= RELAY_MAX ? malloc(sizeof(*c) + len) : NULL;
    if (c) {
        c->next = NULL;
        c->stream = stream;
        c->len = len;
        memcpy(c->data, data, len);
        if (w->tail)
            w->tail->next = c;
        else
            w->head = c;
        w->tail = c;
        w->queued += len;
        pthread_cond_signal(&w->cv);
    }
    pthread_mutex_unlock(&w->mu);
}

/* On the waiting thread, w->mu held: hand the queued chunks to fn. */
static void flush_output(struct waiter *w, const skd_sandbox_spec *spec)
{
    while (w->head) {
        struct chunk *c = w->head;
        w->head = NULL;
        w->tail = NULL;
        w->queued = 0;
        pthread_mutex_unlock(&w->mu);
        while (c) {
            struct chunk *next = c->next;
            if (spec)
                spec->on_output(spec->output_arg, c->stream, c->data, c->len);
            free(c);
            c = next;
        }
        pthread_mutex_lock(&w->mu);
    }
}

static void waiter_done(void *arg, skd_sandbox_result *res)
{
    struct waiter *w = arg;
    pthread_mutex_lock(&w->mu);
    *w->res = *res;
    w->done = 1;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

struct cancel_hook {
    skd_runner *r;
    char id[SKD_UUID_LEN + 1];
};

static void cancel_run(void *arg)
{
    struct cancel_hook *h = arg;
    skd_runner_kill(h->r, h->id);
}

int skd_sandbox_run(skd_runner *r, const skd_sandbox_spec *spec, skd_sandbox_result *res,
                    skd_err *err)
{
    struct waiter w = {.res = res};
    struct cancel_hook hook = {.r = r};
    pthread_condattr_t ca;
    memset(res, 0, sizeof(*res));
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&w.cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&w.mu, NULL);
    int64_t t0 = skd_mono_ms();
    skd_sandbox_spec relayed;
    int relay = spec->on_output && spec->output_on_caller;
    if (relay) {
        relayed = *spec;
        relayed.on_output = relay_output;
        relayed.output_arg = &w;
    }
    int rc = skd_sandbox_start(r, relay ? &relayed : spec, waiter_done, &w, hook.id, err);
    if (rc == 0) {
        if (spec->cancel)
            skd_cancel_set_hook(spec->cancel, cancel_run, &hook);
        pthread_mutex_lock(&w.mu);
        while (!w.done || w.head) {
            if (w.head) {
                flush_output(&w, spec);
                continue;
            }
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            ts.tv_sec += 1;
            if (pthread_cond_timedwait(&w.cv, &w.mu, &ts) == ETIMEDOUT && spec->tick && !w.done) {
                pthread_mutex_unlock(&w.mu);
                spec->tick(spec->tick_arg, skd_mono_ms() - t0);
                pthread_mutex_lock(&w.mu);
            }
        }
        pthread_mutex_unlock(&w.mu);
        if (spec->cancel)
            skd_cancel_set_hook(spec->cancel, NULL, NULL);
    }
    pthread_mutex_lock(&w.mu);
    flush_output(&w, NULL); /* a start that failed after a chunk: free it */
    pthread_mutex_unlock(&w.mu);
    pthread_cond_destroy(&w.cv);
    pthread_mutex_destroy(&w.mu);
    return rc;
}

/* Find an active run by id; caller holds r->mu. */
static struct run *find_locked(skd_runner *r, const char *id)
{
    if (!id)
        return NULL;
    for (struct run *run = r->head; run; run = run->next)
        if (strcmp(run->id, id) == 0)
            return run;
    return NULL;
}

int skd_runner_kill(skd_runner *r, const char *id)
{
    pthread_mutex_lock(&r->mu);
    struct run *run = find_locked(r, id);
    if (run)
        run->kill_req = 1;
    pthread_mutex_unlock(&r->mu);
    if (!run)
        return SKD_ENOENT;
    skd__runner_wake(r);
    return 0;
}

int skd_runner_kill_all(skd_runner *r)
{
    int n = 0;
    pthread_mutex_lock(&r->mu);
    for (struct run *run = r->head; run; run = run->next, n++)
        run->kill_req = 1;
    pthread_mutex_unlock(&r->mu);
    skd__runner_wake(r);
    return n;
}

int skd_runner_is_running(skd_runner *r, const char *id)
{
    pthread_mutex_lock(&r->mu);
    int yes = find_locked(r, id) != NULL;
    pthread_mutex_unlock(&r->mu);
    return yes;
}

int skd_runner_running_count(skd_runner *r)
{
    pthread_mutex_lock(&r->mu);
    int n = r->running;
    pthread_mutex_unlock(&r->mu);
    return n;
}

int skd_runner_queued_count(skd_runner *r)
{
    pthread_mutex_lock(&r->mu);
    int n = r->queued;
    pthread_mutex_unlock(&r->mu);
    return n;
}

static int cap_setting(int opt, const skd_config *cfg, const char *name, int def)
{
    if (opt > 0)
        return opt;
    int64_t v = cfg ? skd_config_int(cfg, name) : 0;
    return v > 0 ? (int)v : def;
}

/* What the spawner is told at start: the operator's settings, which no
 * later request can change. */
static int spawner_conf(skd_runner *r, const skd_config *cfg, const skd_runner_opts *opts,
                        skd_err *err)
{
    skd__spawner_conf *k = &r->spawner_conf;
    memset(k, 0, sizeof(*k));
    if (skd_strlcpy(k->data_dir, r->data_dir, sizeof(k->data_dir)) < 0 ||
        skd_strlcpy(k->allowed_images, r->allowed, sizeof(k->allowed_images)) < 0 ||
        skd_strlcpy(k->runtime, r->runtime, sizeof(k->runtime)) < 0)
        return skd_err_set(err, SKD_EINVAL,
                           "DATA_DIR, the image allow-list or the runtime is "
                           "too long for the sandbox spawner");
    k->owner_uid = opts->owner_uid_set ? opts->owner_uid : (unsigned)geteuid();
    k->owner_gid = opts->owner_uid_set ? opts->owner_gid : (unsigned)getegid();
    /* The ceilings, checked again there: the last line. */
    k->ceil = r->ceilings;
    k->workspace_quota = r->defaults.workspace_quota;
    k->data_reserve = r->defaults.data_reserve;
    k->defaults = r->defaults;
    k->warm = opts->one_run ? 1 : 2;
    k->workspace_max_entries = cfg ? skd_config_int(cfg, "SKILLS_WORKSPACE_MAX_ENTRIES") : 0;
    k->root_layer_max =
        cfg ? skd_config_int(cfg, "SKILLS_SANDBOX_ROOT_LAYER_MAX_BYTES") : 256LL * 1024 * 1024;
    return 0;
}

int skd_runner_new(const skd_config *cfg, const skd_runner_opts *opts, skd_runner **out,
                   skd_err *err)
{
    skd_runner_opts none = {0};
    int bad = 0, rc;
    if (!opts)
        opts = &none;
    *out = NULL;
    skd_runner *r = calloc(1, sizeof(*r));
    if (!r)
        return skd_err_set(err, SKD_ENOMEM, "out of memory");
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->spawner_cv, NULL);
    r->epfd = r->evfd = -1;
    r->cfg = cfg;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (cores < 1)
        cores = 1;
    r->max_conc =
        cap_setting(opts->max_concurrent, cfg, "SKILLS_SANDBOX_MAX_CONCURRENT", (int)(4 * cores));
    r->max_key = cap_setting(opts->max_per_key, cfg, "SKILLS_SANDBOX_MAX_PER_KEY",
                             r->max_conc / 2 > 0 ? r->max_conc / 2 : 1);
    r->max_queued = opts->max_queued > 0    ? opts->max_queued
                    : 16 * r->max_conc > 64 ? 16 * r->max_conc
                                            : 64;
    r->runtime = dup_or_null(opts->runtime ? opts->runtime
                             : cfg         ? skd_config_str(cfg, "SKILLS_SANDBOX_RUNTIME")
                                           : "native",
                             &bad);
    r->data_dir = dup_or_null(opts->data_dir ? opts->data_dir
                              : cfg          ? skd_config_str(cfg, "DATA_DIR")
                                             : "./var",
                              &bad);
    r->allowed = dup_or_null(opts->allowed_images ? opts->allowed_images
                             : cfg ? skd_config_str(cfg, "SKILLS_ALLOWED_SANDBOX_IMAGES")
                                   : "",
                             &bad);
    skd_sandbox_config_defaults(&r->defaults, cfg);
    skd_sandbox_ceilings_from_config(&r->ceilings, cfg);
    skd__live_init(r, cfg);
    skd__interp_init(r, cfg);
    if (bad) {
        rc = skd_err_set(err, SKD_ENOMEM, "out of memory");
        goto fail;
    }
    if ((rc = spawner_conf(r, cfg, opts, err)) != 0 || (rc = skd__supervisor_start(r, err)) != 0)
        goto fail;
    *out = r;
    return 0;
fail:
    skd_runner_free(r);
    return rc;
}

void skd_runner_stop(skd_runner *r)
{
    if (!r || !r->thread_started)
        return;
    skd__live_stop(r);
    pthread_mutex_lock(&r->mu);
    r->stopping = 1;
    for (struct run *run = r->head; run; run = run->next)
        run->kill_req = 1;
    pthread_mutex_unlock(&r->mu);
    skd__runner_wake(r);
    pthread_join(r->thread, NULL);
    r->thread_started = 0;
}

void skd_runner_free(skd_runner *r)
{
    if (!r)
        return;
    skd_runner_stop(r);
    skd__spawner_client_free(r->spawner); /* waits for the spawner's exit */
    r->spawner = NULL;
    if (r->epfd >= 0)
        close(r->epfd);
    if (r->evfd >= 0)
        close(r->evfd);
    skd__egress_free(r->egress); /* after the supervisor: every run is detached */
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->spawner_cv);
    skd__live_free(r);
    skd__interp_free(r);
    free(r->runtime);
    free(r->data_dir);
    free(r->allowed);
    free(r);
}

skd_egress *skd__runner_egress(skd_runner *r, skd_err *err)
{
    pthread_mutex_lock(&r->mu);
    int rc = 0;
    if (!r->egress && !r->cfg)
        rc = skd_err_set(err, SKD_ESANDBOX, "the egress proxy needs a configuration");
    else if (!r->egress)
        rc = skd__egress_new(r->cfg, &r->egress, err);
    skd_egress *e = rc ? NULL : r->egress;
    pthread_mutex_unlock(&r->mu);
    return e;
}

void skd__runner_wake(skd_runner *r)
{
    uint64_t one = 1;
    if (r->evfd >= 0 && write(r->evfd, &one, sizeof(one)) < 0 && errno != EAGAIN)
        skd_warn("sandbox runner: wake-up failed: %s", strerror(errno));
}

long skd_runner_spawner_pid(skd_runner *r)
{
    return r ? skd__spawner_client_pid(r->spawner, 0) : -1;
}
