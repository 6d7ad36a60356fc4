/*
 * Live sandboxes, the server's half (DESIGN.md, "Live sandboxes"): the
 * resource. Each record holds the id, the owner key, the limits, when it
 * was made, when it was last used and when it must end; the processes are
 * the spawner's (src/sandbox/native/native_live.c). A key sees only its
 * own: every lookup matches the id and the owner together, so another
 * key's sandbox is SKD_ENOENT, exactly as one that does not exist.
 *
 * Caps: SKILLS_SANDBOX_MAX_LIVE_PER_KEY per key and SKILLS_SANDBOX_MAX_LIVE
 * in all (SKD_EBUSY past either). A reaper thread ends a sandbox that had
 * no exec and no running foreground exec for its idle timeout, and one
 * whose lifetime is over. Server shutdown and a killed server leave
 * nothing: the spawner ends every live sandbox when the server goes.
 *
 * Locking: r->live_mu guards the list. No spawner call is made under it
 * (a create or a delete waits for the spawner).
 */
#include "sandbox/runner_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* How many background processes a sandbox keeps (running or ended, whose
 * output may still be read); the oldest ended one makes room. */
#define MAX_PROCS 16

/* A background process. Freed by whoever is last: its completion or its
 * sandbox's end (detached). Under live_mu. */
struct live_proc {
    struct live_proc *next;
    skd_runner *r;
    char id[SKD_UUID_LEN + 1]; /* the run's id: the processId */
    char *command;
    skd_buf out, err; /* kept output, capped at the sandbox's outputLimit */
    uint64_t out_total, err_total;
    int running, detached;
    int exited, exit_code, signal, killed, oom_killed;
    int64_t started_unix, duration_ms;
};

struct skd__live_rec {
    struct skd__live_rec *next;
    char id[SKD_UUID_LEN + 1];
    char *key;
    char *image;
    skd_sandbox_config cfg;
    int has_ws;
    unsigned gen;           /* the spawner that holds it */
    int64_t created_unix;   /* ms since the epoch */
    int64_t created, used;  /* monotonic ms */
    int64_t idle, lifetime; /* ms */
    int busy;               /* foreground execs running */
    int making;             /* the spawner is making it: counted, not yet usable */
    struct live_proc *procs;
    int nprocs;
};

static void proc_free(struct live_proc *p)
{
    if (!p)
        return;
    free(p->command);
    skd_buf_free(&p->out);
    skd_buf_free(&p->err);
    free(p);
}

/* Let go of l's processes; caller holds live_mu. A running one is freed by
 * its completion, which comes once the sandbox's end has killed it. */
static void procs_detach_locked(struct skd__live_rec *l)
{
    while (l->procs) {
        struct live_proc *p = l->procs;
        l->procs = p->next;
        if (p->running)
            p->detached = 1;
        else
            proc_free(p);
    }
    l->nprocs = 0;
}

static void rec_free(struct skd__live_rec *l)
{
    if (!l)
        return;
    free(l->key);
    free(l->image);
    free(l);
}

static int64_t unix_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static json_t *iso_time(int64_t ms)
{
    char buf[40];
    struct tm tm;
    time_t t = (time_t)(ms / 1000);
    gmtime_r(&t, &tm);
    size_t n = strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf + n, sizeof(buf) - n, ".%03dZ", (int)(ms % 1000));
    return json_string(buf);
}

static json_t *rec_json(const struct skd__live_rec *l, int64_t now)
{
    int64_t idle_end = l->busy ? now + l->idle : l->used + l->idle;
    int64_t life_end = l->created + l->lifetime;
    int64_t end = idle_end < life_end ? idle_end : life_end;
    json_t *limits = skd_sandbox_config_to_json(&l->cfg);
    return json_pack("{s:s, s:s, s:s, s:o, s:o, s:o, s:o, s:I, s:I, s:b}", "id", l->id, "state",
                     "running", "image", l->image, "createdAt", iso_time(l->created_unix),
                     "expiresAt", iso_time(l->created_unix + (end - l->created)), "idleExpiresAt",
                     iso_time(l->created_unix + (idle_end - l->created)), "limits",
                     limits ? limits : json_object(), "idleTimeoutMs", (json_int_t)l->idle,
                     "lifetimeMs", (json_int_t)l->lifetime, "workspace", l->has_ws);
}

/* The record of id owned by key; caller holds live_mu. */
static struct skd__live_rec *find_locked(skd_runner *r, const char *key, const char *id)
{
    for (struct skd__live_rec *l = r->lives; l; l = l->next)
        if (!l->making && strcmp(l->id, id) == 0 && strcmp(l->key, key) == 0)
            return l;
    return NULL;
}

static void unlink_locked(skd_runner *r, struct skd__live_rec *l)
{
    for (struct skd__live_rec **pp = &r->lives; *pp; pp = &(*pp)->next)
        if (*pp == l) {
            *pp = l->next;
            r->nlive--;
            return;
        }
}

static int count_key_locked(skd_runner *r, const char *key)
{
    int n = 0;
    for (struct skd__live_rec *l = r->lives; l; l = l->next)
        n += strcmp(l->key, key) == 0;
    return n;
}

/* End a record already unlinked: the spawner kills its processes and
 * removes its cgroup. A spawner that died took it with it. */
static void end_rec(skd_runner *r, struct skd__live_rec *l)
{
    pthread_mutex_lock(&r->live_mu);
    procs_detach_locked(l);
    pthread_mutex_unlock(&r->live_mu);
    skd_err e = {0};
    int rc = skd__spawner_live_delete(r->spawner, l->id, l->gen, &e);
    if (rc != 0 && rc != SKD_ENOENT && rc != SKD_ESANDBOX)
        skd_warn("live sandbox %s: delete: %s", l->id, skd_err_msg(&e));
    skd__interp_forget(r, l->id);
    rec_free(l);
}

/* ---- the reaper ---- */

static void *reaper_main(void *arg)
{
    skd_runner *r = arg;
    pthread_mutex_lock(&r->live_mu);
    while (!r->live_stop) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += 200 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&r->live_cv, &r->live_mu, &ts);
        int64_t now = skd_mono_ms();
        struct skd__live_rec *l = r->lives;
        while (l && !r->live_stop) {
            int expired = !l->making && (now >= l->created + l->lifetime ||
                                         (!l->busy && now >= l->used + l->idle));
            if (!expired) {
                l = l->next;
                continue;
            }
            unlink_locked(r, l);
            pthread_mutex_unlock(&r->live_mu);
            skd_info("live sandbox %s ended: %s", l->id,
                     now >= l->created + l->lifetime ? "lifetime over" : "idle");
            end_rec(r, l);
            pthread_mutex_lock(&r->live_mu);
            l = r->lives; /* the list may have changed meanwhile */
        }
    }
    pthread_mutex_unlock(&r->live_mu);
    return NULL;
}

/* Start the reaper on first use; caller holds live_mu. */
static int reaper_start_locked(skd_runner *r, skd_err *err)
{
    if (r->live_thread_started)
        return 0;
    if (pthread_create(&r->live_thread, NULL, reaper_main, r) != 0)
        return skd_err_set(err, SKD_ESANDBOX, "cannot start the live sandbox reaper");
    r->live_thread_started = 1;
    return 0;
}

void skd__live_init(skd_runner *r, const skd_config *cfg)
{
    pthread_condattr_t ca;
    pthread_mutex_init(&r->live_mu, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&r->live_cv, &ca);
    pthread_condattr_destroy(&ca);
    r->live_max = cfg ? (int)skd_config_int(cfg, "SKILLS_SANDBOX_MAX_LIVE") : 64;
    r->live_max_key = cfg ? (int)skd_config_int(cfg, "SKILLS_SANDBOX_MAX_LIVE_PER_KEY") : 4;
    r->live_idle = cfg ? skd_config_int(cfg, "SKILLS_SANDBOX_IDLE_TIMEOUT_MS") : 600000;
    r->live_lifetime = cfg ? skd_config_int(cfg, "SKILLS_SANDBOX_LIFETIME_MS") : 3600000;
}

void skd__live_stop(skd_runner *r)
{
    pthread_mutex_lock(&r->live_mu);
    r->live_stop = 1;
    pthread_cond_broadcast(&r->live_cv);
    int started = r->live_thread_started;
    r->live_thread_started = 0;
    pthread_mutex_unlock(&r->live_mu);
    if (started)
        pthread_join(r->live_thread, NULL);
    /* The spawner ends them all when it goes (the runner closes it next). */
    pthread_mutex_lock(&r->live_mu);
    while (r->lives) {
        struct skd__live_rec *l = r->lives;
        unlink_locked(r, l);
        procs_detach_locked(l);
        rec_free(l);
    }
    pthread_mutex_unlock(&r->live_mu);
}

void skd__live_free(skd_runner *r)
{
    pthread_mutex_destroy(&r->live_mu);
    pthread_cond_destroy(&r->live_cv);
}

/* ---- the API (include/skilld/sandbox.h) ---- */

int skd_live_create(skd_runner *r, const char *key, const skd_live_opts *o, json_t **out,
                    skd_err *err)
{
    *out = NULL;
    key = key ? key : "";
    int rc;
    struct skd__live_rec *l = calloc(1, sizeof(*l));
    if (!l)
        return skd_err_set(err, SKD_ENOMEM, "out of memory");
    l->cfg = o->config ? *o->config : r->defaults;
    l->cfg.workspace_quota = r->defaults.workspace_quota;
    l->cfg.data_reserve = r->defaults.data_reserve;
    /* The quota overlay commits a run's writes when it ends; a live
     * sandbox does not end with a call, so with the quota on its workspace
     * is read-only (the spawner holds to that as well). */
    if (l->cfg.workspace_quota > 0 && o->workspace)
        l->cfg.workspace_read_only = 1;
    l->idle = o->idle_timeout_ms > 0 ? o->idle_timeout_ms : r->live_idle;
    l->lifetime = o->lifetime_ms > 0 ? o->lifetime_ms : r->live_lifetime;
    l->key = strdup(key);
    l->image = strdup(o->image && *o->image ? o->image : "host");
    l->has_ws = o->workspace != NULL;
    if (!l->key || !l->image) {
        rc = skd_err_set(err, SKD_ENOMEM, "out of memory");
        goto fail;
    }
    if (l->idle > r->live_idle) {
        rc = skd_err_set(err, SKD_EINVAL,
                         "idleTimeoutMs %lld is above the operator's ceiling "
                         "SKILLS_SANDBOX_IDLE_TIMEOUT_MS=%lld",
                         (long long)l->idle, (long long)r->live_idle);
        goto fail;
    }
    if (l->lifetime > r->live_lifetime) {
        rc = skd_err_set(err, SKD_EINVAL,
                         "lifetimeMs %lld is above the operator's ceiling "
                         "SKILLS_SANDBOX_LIFETIME_MS=%lld",
                         (long long)l->lifetime, (long long)r->live_lifetime);
        goto fail;
    }
    if ((rc = skd_sandbox_config_check(&l->cfg, &r->ceilings, err)) != 0)
        goto fail;
    if (l->cfg.network_enabled) {
        rc = skd_err_set(err, SKD_EINVAL, "networkEnabled: not supported for live sandboxes yet");
        goto fail;
    }
    const char *rt = r->runtime;
    if (strcmp(rt, "native") != 0 && strcmp(rt, "auto") != 0) {
        rc = skd_err_set(err, SKD_ESANDBOX,
                         "live sandboxes are not supported on the %s runtime (native only)", rt);
        goto fail;
    }
    if (skd_uuid(l->id)) {
        rc = skd_err_set(err, SKD_EINTERNAL, "no randomness for a sandbox id");
        goto fail;
    }
    /* Hold the slot while the spawner makes it: the caps count it. */
    pthread_mutex_lock(&r->live_mu);
    if ((rc = reaper_start_locked(r, err)) == 0) {
        if (r->live_stop)
            rc = skd_err_set(err, SKD_ESANDBOX, "the sandbox runner is shutting down");
        else if (count_key_locked(r, key) >= r->live_max_key)
            rc = skd_err_set(err, SKD_EBUSY,
                             "this key holds %d live sandboxes, its cap "
                             "(SKILLS_SANDBOX_MAX_LIVE_PER_KEY); delete one first",
                             r->live_max_key);
        else if (r->nlive >= r->live_max)
            rc = skd_err_set(err, SKD_EBUSY,
                             "the server holds %d live sandboxes, its cap "
                             "(SKILLS_SANDBOX_MAX_LIVE); try later",
                             r->live_max);
    }
    if (rc == 0) {
        l->created = l->used = skd_mono_ms();
        l->created_unix = unix_ms();
        l->making = 1;
        l->next = r->lives;
        r->lives = l;
        r->nlive++;
    }
    pthread_mutex_unlock(&r->live_mu);
    if (rc)
        goto fail;
    rc = skd__spawner_live_create(r->spawner, l->id, l->image, &l->cfg, o->workspace, &l->gen, err);
    pthread_mutex_lock(&r->live_mu);
    unlink_locked(r, l);
    if (rc == 0 && !r->live_stop) {
        l->making = 0;
        l->used = skd_mono_ms();
        l->next = r->lives;
        r->lives = l;
        r->nlive++;
        *out = rec_json(l, l->used);
    }
    pthread_mutex_unlock(&r->live_mu);
    if (rc == 0 && !*out) {
        if (!r->live_stop)
            rc = skd_err_set(err, SKD_ENOMEM, "out of memory");
        else
            rc = skd_err_set(err, SKD_ESANDBOX, "the sandbox runner is shutting down");
        end_rec(r, l);
        return rc;
    }
    if (rc)
        goto fail;
    return 0;
fail:
    rec_free(l);
    return rc;
}

json_t *skd_live_list(skd_runner *r, const char *key)
{
    json_t *arr = json_array();
    key = key ? key : "";
    int64_t now = skd_mono_ms();
    pthread_mutex_lock(&r->live_mu);
    for (struct skd__live_rec *l = r->lives; l && arr; l = l->next)
        if (strcmp(l->key, key) == 0 && !l->making)
            json_array_append_new(arr, rec_json(l, now));
    pthread_mutex_unlock(&r->live_mu);
    return arr;
}

int skd_live_get(skd_runner *r, const char *key, const char *id, json_t **out, skd_err *err)
{
    *out = NULL;
    pthread_mutex_lock(&r->live_mu);
    struct skd__live_rec *l = find_locked(r, key ? key : "", id);
    if (l)
        *out = rec_json(l, skd_mono_ms());
    pthread_mutex_unlock(&r->live_mu);
    if (!l)
        return skd_err_set(err, SKD_ENOENT, "no such sandbox");
    return *out ? 0 : skd_err_set(err, SKD_ENOMEM, "out of memory");
}

int skd_live_delete(skd_runner *r, const char *key, const char *id, skd_err *err)
{
    pthread_mutex_lock(&r->live_mu);
    struct skd__live_rec *l = find_locked(r, key ? key : "", id);
    if (l)
        unlink_locked(r, l);
    pthread_mutex_unlock(&r->live_mu);
    if (!l)
        return skd_err_set(err, SKD_ENOENT, "no such sandbox");
    end_rec(r, l);
    return 0;
}

int skd_live_delete_key(skd_runner *r, const char *key)
{
    int n = 0;
    for (;;) {
        pthread_mutex_lock(&r->live_mu);
        struct skd__live_rec *l = r->lives;
        while (l && (l->making || strcmp(l->key, key) != 0))
            l = l->next;
        if (l)
            unlink_locked(r, l);
        pthread_mutex_unlock(&r->live_mu);
        if (!l)
            return n;
        end_rec(r, l);
        n++;
    }
}

int skd_live_exec(skd_runner *r, const char *key, const char *id, const skd_live_exec_opts *o,
                  skd_sandbox_result *res, skd_err *err)
{
    key = key ? key : "";
    skd_sandbox_config cfg;
    pthread_mutex_lock(&r->live_mu);
    struct skd__live_rec *l = find_locked(r, key, id);
    if (l) {
        cfg = l->cfg;
        l->busy++;
        l->used = skd_mono_ms();
    }
    int has_ws = l && l->has_ws;
    pthread_mutex_unlock(&r->live_mu);
    if (!l)
        return skd_err_set(err, SKD_ENOENT, "no such sandbox");
    if (o->timeout_ms > 0)
        cfg.timeout_ms = o->timeout_ms;
    skd_sandbox_spec spec = *o->spec;
    spec.config = &cfg;
    spec.workspace = NULL; /* mounted when the sandbox was made */
    spec.image = NULL;
    spec.live_id = id;
    spec.key_id = key;
    if (!spec.cwd)
        spec.cwd = has_ws ? "/workspace" : "/tmp";
    int rc = skd_sandbox_run(r, &spec, res, err);
    /* The spawner no longer has it (it was deleted meanwhile, or its
     * spawner died and took it along): the record goes too. */
    int gone = rc == SKD_ENOENT || (rc == 0 && res->error == SKD_ENOENT);
    pthread_mutex_lock(&r->live_mu);
    if ((l = find_locked(r, key, id)) != NULL) {
        l->busy--;
        l->used = skd_mono_ms();
        if (gone)
            unlink_locked(r, l);
    } else if (rc == 0 && !res->exited) {
        res->killed = 1; /* its sandbox ended under it */
    }
    pthread_mutex_unlock(&r->live_mu);
    if (gone && l)
        end_rec(r, l);
    if (rc == SKD_ENOENT) {
        skd_err_clear(err);
        rc = skd_err_set(err, SKD_ENOENT, "no such sandbox (it has ended)");
    }
    return rc;
}

/* ---- background processes ---- */

static void bg_output(void *arg, int stream, const char *data, size_t len)
{
    struct live_proc *p = arg;
    pthread_mutex_lock(&p->r->live_mu);
    skd_buf *b = stream == 1 ? &p->out : &p->err;
    uint64_t *total = stream == 1 ? &p->out_total : &p->err_total;
    size_t room = b->max - b->len;
    if (room)
        skd_buf_append(b, data, len < room ? len : room);
    *total += len;
    pthread_mutex_unlock(&p->r->live_mu);
}

static void bg_done(void *arg, skd_sandbox_result *res)
{
    struct live_proc *p = arg;
    skd_runner *r = p->r;
    pthread_mutex_lock(&r->live_mu);
    p->running = 0;
    p->exited = res->exited;
    p->exit_code = res->exit_code;
    p->signal = res->signal;
    p->killed = res->killed;
    p->oom_killed = res->oom_killed;
    p->duration_ms = res->duration_ms;
    if (p->detached)
        proc_free(p);
    pthread_mutex_unlock(&r->live_mu);
    skd_sandbox_result_free(res);
}

/* Make room for one more process in l; caller holds live_mu. */
static int proc_room_locked(struct skd__live_rec *l)
{
    if (l->nprocs < MAX_PROCS)
        return 1;
    struct live_proc **oldest = NULL;
    for (struct live_proc **pp = &l->procs; *pp; pp = &(*pp)->next)
        if (!(*pp)->running)
            oldest = pp; /* the list is newest first */
    if (!oldest)
        return 0;
    struct live_proc *p = *oldest;
    *oldest = p->next;
    proc_free(p);
    l->nprocs--;
    return 1;
}

int skd_live_exec_background(skd_runner *r, const char *key, const char *id,
                             const skd_live_exec_opts *o, char process_id[SKD_UUID_LEN + 1],
                             skd_err *err)
{
    key = key ? key : "";
    skd_sandbox_config cfg;
    struct live_proc *p = calloc(1, sizeof(*p));
    if (!p || !(p->command = strdup(o->spec->argv[0]))) {
        free(p);
        return skd_err_set(err, SKD_ENOMEM, "out of memory");
    }
    p->r = r;
    p->running = 1;
    p->started_unix = unix_ms();
    pthread_mutex_lock(&r->live_mu);
    struct skd__live_rec *l = find_locked(r, key, id);
    int room = l && proc_room_locked(l);
    int has_ws = l && l->has_ws;
    if (l) {
        cfg = l->cfg;
        l->used = skd_mono_ms();
    }
    pthread_mutex_unlock(&r->live_mu);
    if (!l || !room) {
        proc_free(p);
        return l ? skd_err_set(err, SKD_EBUSY,
                               "the sandbox runs %d background processes, its cap; kill one "
                               "first",
                               MAX_PROCS)
                 : skd_err_set(err, SKD_ENOENT, "no such sandbox");
    }
    skd_buf_init(&p->out, (size_t)cfg.output_limit);
    skd_buf_init(&p->err, (size_t)cfg.output_limit);
    skd_sandbox_spec spec = *o->spec;
    spec.config = &cfg;
    spec.workspace = NULL;
    spec.image = NULL;
    spec.live_id = id;
    spec.key_id = key;
    spec.background = 1;
    spec.cancel = NULL; /* it outlives the call */
    spec.tick = NULL;
    spec.on_output = bg_output;
    spec.output_arg = p;
    if (!spec.cwd)
        spec.cwd = has_ws ? "/workspace" : "/tmp";
    int rc = skd_sandbox_start(r, &spec, bg_done, p, p->id, err);
    if (rc) {
        proc_free(p);
        return rc;
    }
    memcpy(process_id, p->id, sizeof(p->id));
    pthread_mutex_lock(&r->live_mu);
    if ((l = find_locked(r, key, id)) != NULL && proc_room_locked(l)) {
        p->next = l->procs;
        l->procs = p;
        l->nprocs++;
        p = NULL;
    } else {
        p->detached = 1; /* the sandbox ended meanwhile: so does the process */
    }
    pthread_mutex_unlock(&r->live_mu);
    if (p)
        skd_runner_kill(r, process_id);
    return 0;
}

static json_t *proc_json(const struct live_proc *p, int with_output, uint64_t out_off,
                         uint64_t err_off)
{
    json_t *o = json_pack("{s:s, s:s, s:b, s:o}", "processId", p->id, "command", p->command,
                          "running", p->running, "startedAt", iso_time(p->started_unix));
    if (!o)
        return NULL;
    if (!p->running) {
        json_object_set_new(o, "exitCode", p->exited ? json_integer(p->exit_code) : json_null());
        json_object_set_new(o, "signal", p->signal ? json_integer(p->signal) : json_null());
        json_object_set_new(o, "killed", json_boolean(p->killed));
        json_object_set_new(o, "oomKilled", json_boolean(p->oom_killed));
        json_object_set_new(o, "durationMs", json_integer(p->duration_ms));
    }
    if (with_output) {
        size_t so = out_off < p->out.len ? (size_t)out_off : p->out.len;
        size_t se = err_off < p->err.len ? (size_t)err_off : p->err.len;
        json_object_set_new(
            o, "stdout", skd__lossy_string(p->out.data ? p->out.data + so : NULL, p->out.len - so));
        json_object_set_new(
            o, "stderr", skd__lossy_string(p->err.data ? p->err.data + se : NULL, p->err.len - se));
        json_object_set_new(o, "stdoutOffset", json_integer((json_int_t)p->out.len));
        json_object_set_new(o, "stderrOffset", json_integer((json_int_t)p->err.len));
        json_object_set_new(o, "truncated",
                            json_boolean(p->out_total > p->out.len || p->err_total > p->err.len));
    }
    return o;
}

int skd_live_processes(skd_runner *r, const char *key, const char *id, const char *process_id,
                       int64_t out_off, int64_t err_off, json_t **out, skd_err *err)
{
    *out = NULL;
    pthread_mutex_lock(&r->live_mu);
    struct skd__live_rec *l = find_locked(r, key ? key : "", id);
    struct live_proc *p = NULL;
    if (l && process_id) {
        for (p = l->procs; p && strcmp(p->id, process_id) != 0; p = p->next)
            ;
        if (p)
            *out = proc_json(p, 1, (uint64_t)out_off, (uint64_t)err_off);
    } else if (l) {
        *out = json_array();
        for (p = l->procs; p && *out; p = p->next)
            json_array_append_new(*out, proc_json(p, 0, 0, 0));
    }
    pthread_mutex_unlock(&r->live_mu);
    if (!l || (process_id && !p))
        return skd_err_set(err, SKD_ENOENT, l ? "no such process" : "no such sandbox");
    return *out ? 0 : skd_err_set(err, SKD_ENOMEM, "out of memory");
}

int skd_live_kill(skd_runner *r, const char *key, const char *id, const char *process_id,
                  skd_err *err)
{
    pthread_mutex_lock(&r->live_mu);
    struct skd__live_rec *l = find_locked(r, key ? key : "", id);
    struct live_proc *p = l ? l->procs : NULL;
    while (p && strcmp(p->id, process_id) != 0)
        p = p->next;
    int running = p && p->running;
    pthread_mutex_unlock(&r->live_mu);
    if (!p)
        return skd_err_set(err, SKD_ENOENT, l ? "no such process" : "no such sandbox");
    if (running)
        skd_runner_kill(r, process_id);
    return 0;
}

/* ---- for interpreter contexts (interp.c) ---- */

int skd__live_hold(skd_runner *r, const char *key, const char *id, skd_sandbox_config *cfg,
                   int *has_ws, skd_err *err)
{
    pthread_mutex_lock(&r->live_mu);
    struct skd__live_rec *l = find_locked(r, key ? key : "", id);
    if (l) {
        *cfg = l->cfg;
        *has_ws = l->has_ws;
        l->busy++;
        l->used = skd_mono_ms();
    }
    pthread_mutex_unlock(&r->live_mu);
    return l ? 0 : skd_err_set(err, SKD_ENOENT, "no such sandbox");
}

void skd__live_release(skd_runner *r, const char *key, const char *id)
{
    pthread_mutex_lock(&r->live_mu);
    struct skd__live_rec *l = find_locked(r, key ? key : "", id);
    if (l && l->busy > 0) {
        l->busy--;
        l->used = skd_mono_ms();
    }
    pthread_mutex_unlock(&r->live_mu);
}
