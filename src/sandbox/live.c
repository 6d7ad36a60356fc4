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
#include <unistd.h>

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
    /* networkEnabled: its egress proxy while it runs (a pause ends it, a
     * resume places a new one), and the key's
     * secrets it was made or resumed with (its execs' placeholders). */
    skd_egress_run *egress;
    skd_secret *secrets;
    size_t nsecrets;
    /* Pause, resume, fork (the section at the end). */
    char *ws;            /* the workspace's path, for a resume, or NULL */
    int on_idle_pause;   /* its idle timeout pauses it instead of ending it */
    int paused;          /* its files are saved; it has no process */
    int moving;          /* MOVE_PAUSE or MOVE_RESUME under way, or 0 */
    int forks;           /* forks of it under way */
    int64_t saved_bytes; /* paused: what its saved files hold */
};

enum { MOVE_PAUSE = 1, MOVE_RESUME };

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
    skd_secrets_free(l->secrets, l->nsecrets);
    free(l->key);
    free(l->image);
    free(l->ws);
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
    const char *state = l->paused ? (l->moving == MOVE_RESUME ? "resuming" : "paused")
                                  : (l->moving == MOVE_PAUSE ? "pausing" : "running");
    /* Paused, it does not expire: it waits for a resume or a delete. */
    json_t *o = json_pack(
        "{s:s, s:s, s:s, s:o, s:o, s:o, s:o, s:I, s:I, s:b, s:s}", "id", l->id, "state", state,
        "image", l->image, "createdAt", iso_time(l->created_unix), "expiresAt",
        l->paused ? json_null() : iso_time(l->created_unix + (end - l->created)), "idleExpiresAt",
        l->paused ? json_null() : iso_time(l->created_unix + (idle_end - l->created)), "limits",
        limits ? limits : json_object(), "idleTimeoutMs", (json_int_t)l->idle, "lifetimeMs",
        (json_int_t)l->lifetime, "workspace", l->has_ws, "onIdle",
        l->on_idle_pause ? "pause" : "delete");
    if (o && l->paused)
        json_object_set_new(o, "savedBytes", json_integer((json_int_t)l->saved_bytes));
    return o;
}

/* The record of id owned by key; caller holds live_mu. */
static struct skd__live_rec *find_locked(skd_runner *r, const char *key, const char *id)
{
    for (struct skd__live_rec *l = r->lives; l; l = l->next)
        if (!l->making && strcmp(l->id, id) == 0 && strcmp(l->key, key) == 0)
            return l;
    return NULL;
}

/* 1 with err set when l is paused (or being paused or resumed): an exec
 * is refused, never resumes it behind the caller's back. Under live_mu. */
static int paused_locked(const struct skd__live_rec *l, skd_err *err)
{
    if (!l->paused && l->moving != MOVE_PAUSE)
        return 0;
    skd_err_set(err, SKD_EPAUSED,
                "sandbox %s is %s; resume it first (POST /v1/sandboxes/%s/resume, or the "
                "sandbox_resume skill); its files are kept, its processes are not",
                l->id, l->moving == MOVE_PAUSE ? "being paused" : "paused", l->id);
    return 1;
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

/* Running (and being made) sandboxes of key, or of every key with key
 * NULL: the live caps count these; paused ones have a cap of their own. */
static int count_key_locked(skd_runner *r, const char *key)
{
    int n = 0;
    for (struct skd__live_rec *l = r->lives; l; l = l->next)
        n += !l->paused && (!key || strcmp(l->key, key) == 0);
    return n;
}

/* Egress records (src/net/egress.h) of sandbox id: each names it. a, or
 * NULL when a is empty (decref'd) or NULL. */
static json_t *egress_named(json_t *a, const char *id)
{
    size_t i;
    json_t *d;
    json_array_foreach (a, i, d)
        json_object_set_new(d, "sandboxId", json_string(id));
    if (a && json_array_size(a) == 0) {
        json_decref(a);
        a = NULL;
    }
    return a;
}

/* An exec just ended in l: its connections were closed as its processes
 * ended, and the proxy records each when it sees the close. Wait (at most
 * SETTLE_MS, live_mu released meanwhile) until no more connections are
 * open than were when the exec began, so that the records taken next hold
 * the exec's own. Caller holds live_mu; l may be unlinked when it returns
 * (then its proxy is not looked at again). */
#define SETTLE_MS 100
static void egress_settle_locked(skd_runner *r, struct skd__live_rec *l, int conns0)
{
    int64_t end = skd_mono_ms() + SETTLE_MS;
    char id[SKD_UUID_LEN + 1];
    memcpy(id, l->id, sizeof(id));
    while (l && l->egress && skd__egress_open_conns(l->egress) > conns0 && skd_mono_ms() < end) {
        pthread_mutex_unlock(&r->live_mu);
        struct timespec ts = {0, 2 * 1000000L};
        nanosleep(&ts, NULL);
        pthread_mutex_lock(&r->live_mu);
        struct skd__live_rec *x = r->lives;
        while (x && (x != l || strcmp(x->id, id) != 0))
            x = x->next;
        l = x; /* still linked, so its proxy is still attached */
    }
}

/* Stop serving l's egress proxy (its socket and connections closed). What
 * it did since the last exec took its records goes to *out when asked for
 * (a new array, or NULL), else to the runner's live egress hook (an end
 * no call asked for: idle, lifetime, revocation, server stop), so no byte
 * goes unmetered. */
static void egress_end_run(skd_runner *r, const char *key, const char *id, skd_egress_run *eg,
                           json_t **out)
{
    if (out)
        *out = NULL;
    if (!eg)
        return;
    json_t *a = egress_named(skd__egress_detach(r->egress, eg), id);
    pthread_mutex_lock(&r->mu);
    skd_live_egress_fn fn = r->live_egress_fn;
    void *arg = r->live_egress_arg;
    pthread_mutex_unlock(&r->mu);
    if (out)
        *out = a;
    else if (a && fn)
        fn(arg, key, id, a);
    if (!out)
        json_decref(a);
}

static void egress_end(skd_runner *r, struct skd__live_rec *l, json_t **out)
{
    skd_egress_run *eg = l->egress;
    l->egress = NULL;
    egress_end_run(r, l->key, l->id, eg, out);
}

/* End a record already unlinked: the spawner kills its processes and
 * removes its cgroup. A spawner that died took it with it. egress: as for
 * egress_end. */
static void end_rec(skd_runner *r, struct skd__live_rec *l, json_t **egress)
{
    pthread_mutex_lock(&r->live_mu);
    procs_detach_locked(l);
    pthread_mutex_unlock(&r->live_mu);
    skd_err e = {0};
    /* A paused one's saved files outlive the spawner that made them. */
    int rc = skd__spawner_live_delete(r->spawner, l->id, l->paused ? 0 : l->gen, &e);
    if (rc != 0 && rc != SKD_ENOENT && rc != SKD_ESANDBOX)
        skd_warn("live sandbox %s: delete: %s", l->id, skd_err_msg(&e));
    egress_end(r, l, egress);
    skd__interp_forget(r, l->id);
    rec_free(l);
}

/* ---- the reaper ---- */

static int idle_pause_locked(skd_runner *r, struct skd__live_rec *l);

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
            int expired =
                !l->making && !l->paused && !l->moving && !l->forks &&
                (now >= l->created + l->lifetime || (!l->busy && now >= l->used + l->idle));
            if (!expired) {
                l = l->next;
                continue;
            }
            if (l->on_idle_pause && now < l->created + l->lifetime &&
                idle_pause_locked(r, l) == 0) {
                l = r->lives; /* the lock was let go meanwhile */
                continue;
            }
            unlink_locked(r, l);
            pthread_mutex_unlock(&r->live_mu);
            skd_info("live sandbox %s ended: %s", l->id,
                     now >= l->created + l->lifetime ? "lifetime over" : "idle");
            end_rec(r, l, NULL);
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
    r->live_max_paused_key =
        cfg ? (int)skd_config_int(cfg, "SKILLS_SANDBOX_MAX_PAUSED_PER_KEY") : 4;
    r->live_paused_bytes = cfg ? skd_config_int(cfg, "SKILLS_SANDBOX_PAUSED_MAX_BYTES") : 1 << 30;
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
        pthread_mutex_unlock(&r->live_mu);
        egress_end(r, l, NULL);
        rec_free(l);
        pthread_mutex_lock(&r->live_mu);
    }
    pthread_mutex_unlock(&r->live_mu);
}

void skd__live_free(skd_runner *r)
{
    pthread_mutex_destroy(&r->live_mu);
    pthread_cond_destroy(&r->live_cv);
}

/* ---- the API (include/skilld/sandbox.h) ---- */

/* Have the spawner make l (restore: again from its snapshot, a resume
 * or a fork's copy). With networkEnabled (the ceilings allowed it):
 * the key's secrets and, with any, the egress CA for its trust bundle, as
 * a one-shot run gets them (runner.c); then the proxy socket the spawner
 * placed on its loopback is served for its whole life. Fail closed: a
 * sandbox whose proxy cannot be served is ended. */
static int make(skd_runner *r, struct skd__live_rec *l, const char *workspace, int restore,
                skd_err *err)
{
    char *ca_pem = NULL;
    int rc, egress_fd = -1;
    skd_egress *e = NULL;
    skd_secrets_free(l->secrets, l->nsecrets); /* a resume reads them again */
    l->secrets = NULL;
    l->nsecrets = 0;
    if (l->cfg.network_enabled) {
        if (!(e = skd__runner_egress(r, err)))
            return SKD_ESANDBOX;
        if ((rc = skd__runner_secrets(r, l->key, &l->secrets, &l->nsecrets, err)) != 0)
            return rc;
        if (l->nsecrets && (rc = skd__egress_ca_pem(e, &ca_pem, err)) != 0)
            return rc;
    }
    rc = skd__spawner_live_create(r->spawner, l->id, l->image, &l->cfg, workspace, ca_pem, restore,
                                  &l->gen, &egress_fd, err);
    free(ca_pem);
    if (rc == 0 && l->cfg.network_enabled) {
        rc = egress_fd < 0 ? skd_err_set(err, SKD_ESANDBOX,
                                         "live sandbox: networkEnabled, but no egress proxy "
                                         "socket was placed")
                           : skd__runner_egress_attach(r, l->key, NULL, NULL, l->secrets,
                                                       l->nsecrets, egress_fd, &l->egress, err);
        egress_fd = -1; /* stolen */
        if (rc) {
            skd_err e2 = {0};
            skd__spawner_live_delete(r->spawner, l->id, l->gen, &e2);
        }
    }
    if (egress_fd >= 0)
        close(egress_fd); /* placed, but not asked for */
    return rc;
}

int skd__live_secrets(skd_runner *r, const char *key, const char *id, skd_secret **out, size_t *n,
                      skd_err *err)
{
    *out = NULL;
    *n = 0;
    int rc = 0;
    pthread_mutex_lock(&r->live_mu);
    struct skd__live_rec *l = find_locked(r, key ? key : "", id);
    if (l && l->nsecrets) {
        if (skd_secrets_copy(l->secrets, l->nsecrets, out) != 0)
            rc = skd_err_set(err, SKD_ENOMEM, "out of memory");
        else
            *n = l->nsecrets;
    }
    pthread_mutex_unlock(&r->live_mu);
    return rc;
}

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
    l->ws = o->workspace ? strdup(o->workspace) : NULL;
    l->on_idle_pause = o->on_idle_pause;
    if (!l->key || !l->image || (o->workspace && !l->ws)) {
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
        else if (count_key_locked(r, NULL) >= r->live_max)
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
    rc = make(r, l, o->workspace, 0, err);
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
        end_rec(r, l, NULL);
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

int skd_live_delete_egress(skd_runner *r, const char *key, const char *id, json_t **egress,
                           skd_err *err)
{
    if (egress)
        *egress = NULL; /* NULL: egress_end hands them to the hook */
    pthread_mutex_lock(&r->live_mu);
    struct skd__live_rec *l = find_locked(r, key ? key : "", id);
    int moving = l && (l->moving || l->forks);
    if (l && !moving)
        unlink_locked(r, l);
    pthread_mutex_unlock(&r->live_mu);
    if (!l)
        return skd_err_set(err, SKD_ENOENT, "no such sandbox");
    if (moving)
        return skd_err_set(err, SKD_EBUSY,
                           "a pause, resume or fork of sandbox %s is under way; delete it when "
                           "that is done",
                           id);
    end_rec(r, l, egress);
    return 0;
}

int skd_live_delete(skd_runner *r, const char *key, const char *id, skd_err *err)
{
    return skd_live_delete_egress(r, key, id, NULL, err); /* the records: to the hook */
}

int skd_live_delete_key(skd_runner *r, const char *key)
{
    int n = 0;
    for (;;) {
        pthread_mutex_lock(&r->live_mu);
        struct skd__live_rec *l = r->lives;
        int waiting = 0;
        while (l && (l->making || l->moving || l->forks || strcmp(l->key, key) != 0)) {
            waiting |= strcmp(l->key, key) == 0 && (l->moving || l->forks);
            l = l->next;
        }
        if (l)
            unlink_locked(r, l);
        pthread_mutex_unlock(&r->live_mu);
        if (!l && waiting) { /* a pause, resume or fork ends soon */
            struct timespec ts = {0, 20 * 1000000L};
            nanosleep(&ts, NULL);
            continue;
        }
        if (!l)
            return n;
        end_rec(r, l, NULL);
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
    int paused = l && paused_locked(l, err);
    if (l && !paused) {
        cfg = l->cfg;
        l->busy++;
        l->used = skd_mono_ms();
    }
    int has_ws = l && l->has_ws;
    int conns0 = l ? skd__egress_open_conns(l->egress) : 0;
    pthread_mutex_unlock(&r->live_mu);
    if (paused)
        return SKD_EPAUSED;
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
    if (rc == 0 && !gone && (l = find_locked(r, key, id)) != NULL && l->egress)
        egress_settle_locked(r, l, conns0);
    int paused_meanwhile = 0;
    if ((l = find_locked(r, key, id)) != NULL) {
        l->busy--;
        l->used = skd_mono_ms();
        /* Paused under it: the processes are gone, the sandbox is not. */
        if (gone && (l->paused || l->moving == MOVE_PAUSE) && rc == SKD_ENOENT) {
            gone = 0;
            skd_err_clear(err);
            paused_meanwhile = paused_locked(l, err);
        } else if (gone && (l->paused || l->moving)) {
            gone = 0;
        } else if (gone) {
            unlink_locked(r, l);
        } else if (rc == 0 && l->egress && !res->egress) {
            /* networkEnabled: what the sandbox's proxy did since the last
             * exec took it (this exec's connections, and its background
             * processes'), for this call's record and metering. Under
             * live_mu: l's proxy is detached only under it (unlinked or
             * paused). */
            res->egress = egress_named(skd__egress_take(l->egress), l->id);
        }
    } else if (rc == 0 && !res->exited) {
        res->killed = 1; /* its sandbox ended under it */
    }
    pthread_mutex_unlock(&r->live_mu);
    if (paused_meanwhile)
        return SKD_EPAUSED;
    if (gone && l)
        end_rec(r, l, NULL);
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
    if (l && paused_locked(l, err)) {
        pthread_mutex_unlock(&r->live_mu);
        proc_free(p);
        return SKD_EPAUSED;
    }
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

/* ---- pause, resume, fork ----
 * The files are the spawner's to save and restore (native_snap.c); here
 * is the record's state, the caps and who may do what when. A record that
 * is being paused or resumed (moving) or forked (forks) is not deleted,
 * reaped, paused or resumed meanwhile: those calls are SKD_EBUSY, and a
 * key's revocation waits for them. */

static int count_paused_locked(skd_runner *r, const char *key, int64_t *bytes)
{
    int n = 0;
    *bytes = 0;
    for (struct skd__live_rec *l = r->lives; l; l = l->next)
        if (strcmp(l->key, key) == 0 && (l->paused || l->moving == MOVE_PAUSE)) {
            n++;
            *bytes += l->saved_bytes;
        }
    return n;
}

/* Pause l (running, not moving); caller holds live_mu, which is let go
 * while the spawner saves the files and held again on return. */
static int pause_locked(skd_runner *r, struct skd__live_rec *l, skd_err *err)
{
    int64_t bytes = 0;
    if (l->moving || l->forks)
        return skd_err_set(err, SKD_EBUSY,
                           "a pause, resume or fork of sandbox %s is under way; try again when "
                           "it is done",
                           l->id);
    int n = count_paused_locked(r, l->key, &bytes);
    if (n >= r->live_max_paused_key)
        return skd_err_set(err, SKD_EBUSY,
                           "this key holds %d paused sandboxes, its cap "
                           "(SKILLS_SANDBOX_MAX_PAUSED_PER_KEY); delete or resume one first",
                           n);
    int64_t left = r->live_paused_bytes - bytes;
    if (left <= 0)
        return skd_err_set(err, SKD_EQUOTA,
                           "the saved files of this key's paused sandboxes hold %lld bytes, "
                           "its quota (SKILLS_SANDBOX_PAUSED_MAX_BYTES); delete or resume one "
                           "first",
                           (long long)bytes);
    l->moving = MOVE_PAUSE;
    pthread_mutex_unlock(&r->live_mu);
    int64_t saved = 0;
    int rc =
        skd__spawner_live_save(r->spawner, l->id, l->gen, l->id, SKD__SNAP_END, left, &saved, err);
    if (rc == SKD_EQUOTA) {
        skd_err_clear(err);
        rc = skd_err_set(err, SKD_EQUOTA,
                         "the sandbox's files would take this key's paused sandboxes past "
                         "%lld bytes (SKILLS_SANDBOX_PAUSED_MAX_BYTES); it runs on",
                         (long long)r->live_paused_bytes);
    }
    pthread_mutex_lock(&r->live_mu);
    if (rc == 0 && l->egress) {
        /* Its network namespace is gone: so is its proxy. Taken under
         * live_mu (execs read l->egress under it), detached without it;
         * l stays linked meanwhile, as it is moving. */
        skd_egress_run *eg = l->egress;
        l->egress = NULL;
        pthread_mutex_unlock(&r->live_mu);
        egress_end_run(r, l->key, l->id, eg, NULL);
        pthread_mutex_lock(&r->live_mu);
    }
    l->moving = 0;
    if (rc == 0) {
        l->paused = 1;
        l->saved_bytes = saved;
        procs_detach_locked(l); /* their processes are gone */
    } else if (rc == SKD_ENOENT ||
               (rc == SKD_ESANDBOX && skd__spawner_client_gen(r->spawner) != l->gen)) {
        /* It ended under the pause (its spawner died): the record goes. */
        unlink_locked(r, l);
        pthread_mutex_unlock(&r->live_mu);
        end_rec(r, l, NULL);
        pthread_mutex_lock(&r->live_mu);
        skd_err_clear(err);
        rc = skd_err_set(err, SKD_ENOENT, "no such sandbox (it has ended)");
    }
    return rc;
}

/* The reaper: l's idle timeout is over and it pauses instead of ending.
 * 0 when it is paused or gone; else it is to be ended (caps or quota). */
static int idle_pause_locked(skd_runner *r, struct skd__live_rec *l)
{
    skd_err e = {0};
    char id[SKD_UUID_LEN + 1];
    memcpy(id, l->id, sizeof(id));
    int rc = pause_locked(r, l, &e);
    if (rc == 0)
        skd_info("live sandbox %s paused: idle", id);
    else if (rc != SKD_ENOENT)
        skd_warn("live sandbox %s: idle, not paused (%s): it ends", id, skd_err_msg(&e));
    return rc == SKD_ENOENT ? 0 : rc;
}

int skd_live_pause(skd_runner *r, const char *key, const char *id, int *changed, json_t **out,
                   skd_err *err)
{
    *out = NULL;
    *changed = 0;
    key = key ? key : "";
    pthread_mutex_lock(&r->live_mu);
    struct skd__live_rec *l = find_locked(r, key, id);
    int rc = 0;
    if (!l)
        rc = skd_err_set(err, SKD_ENOENT, "no such sandbox");
    else if (!l->paused && (rc = pause_locked(r, l, err)) == 0)
        *changed = 1;
    if (rc == 0 && !(*out = rec_json(l, skd_mono_ms())))
        rc = skd_err_set(err, SKD_ENOMEM, "out of memory");
    pthread_mutex_unlock(&r->live_mu);
    return rc;
}

int skd_live_resume(skd_runner *r, const char *key, const char *id, int *changed, json_t **out,
                    skd_err *err)
{
    *out = NULL;
    *changed = 0;
    key = key ? key : "";
    int rc = 0;
    pthread_mutex_lock(&r->live_mu);
    struct skd__live_rec *l = find_locked(r, key, id);
    if (!l)
        rc = skd_err_set(err, SKD_ENOENT, "no such sandbox");
    else if (l->moving || (l->paused && l->forks))
        rc = skd_err_set(err, SKD_EBUSY,
                         "a pause, resume or fork of sandbox %s is under way; try again when "
                         "it is done",
                         id);
    else if (l->paused && count_key_locked(r, key) >= r->live_max_key)
        rc = skd_err_set(err, SKD_EBUSY,
                         "this key runs %d live sandboxes, its cap "
                         "(SKILLS_SANDBOX_MAX_LIVE_PER_KEY); delete or pause one first",
                         r->live_max_key);
    else if (l->paused && count_key_locked(r, NULL) >= r->live_max)
        rc = skd_err_set(err, SKD_EBUSY,
                         "the server runs %d live sandboxes, its cap (SKILLS_SANDBOX_MAX_LIVE); "
                         "try later",
                         r->live_max);
    if (rc == 0 && l->paused) {
        l->moving = MOVE_RESUME;
        pthread_mutex_unlock(&r->live_mu);
        rc = make(r, l, l->ws, 1, err); /* no other call touches l while it moves */
        pthread_mutex_lock(&r->live_mu);
        l->moving = 0;
        if (rc == 0) {
            l->paused = 0;
            l->saved_bytes = 0;
            l->created = l->used = skd_mono_ms(); /* a new lifetime from now */
            l->created_unix = unix_ms();
            *changed = 1;
        }
    }
    if (rc == 0 && !(*out = rec_json(l, skd_mono_ms())))
        rc = skd_err_set(err, SKD_ENOMEM, "out of memory");
    pthread_mutex_unlock(&r->live_mu);
    return rc;
}

int skd_live_fork(skd_runner *r, const char *key, const char *id, json_t **out, skd_err *err)
{
    *out = NULL;
    key = key ? key : "";
    int rc = 0;
    struct skd__live_rec *n = calloc(1, sizeof(*n));
    if (!n || skd_uuid(n->id)) {
        free(n);
        return skd_err_set(err, SKD_ENOMEM, "no memory or randomness for a sandbox id");
    }
    pthread_mutex_lock(&r->live_mu);
    struct skd__live_rec *l = find_locked(r, key, id);
    if (!l)
        rc = skd_err_set(err, SKD_ENOENT, "no such sandbox");
    else if (l->moving)
        rc = skd_err_set(err, SKD_EBUSY,
                         "a pause or resume of sandbox %s is under way; try again when it is "
                         "done",
                         id);
    else if (r->live_stop)
        rc = skd_err_set(err, SKD_ESANDBOX, "the sandbox runner is shutting down");
    else if (count_key_locked(r, key) >= r->live_max_key)
        rc = skd_err_set(err, SKD_EBUSY,
                         "this key runs %d live sandboxes, its cap "
                         "(SKILLS_SANDBOX_MAX_LIVE_PER_KEY); delete or pause one first",
                         r->live_max_key);
    else if (count_key_locked(r, NULL) >= r->live_max)
        rc = skd_err_set(err, SKD_EBUSY,
                         "the server runs %d live sandboxes, its cap (SKILLS_SANDBOX_MAX_LIVE); "
                         "try later",
                         r->live_max);
    if (rc == 0) {
        n->key = strdup(l->key);
        n->image = strdup(l->image);
        n->ws = l->ws ? strdup(l->ws) : NULL;
        if (!n->key || !n->image || (l->ws && !n->ws))
            rc = skd_err_set(err, SKD_ENOMEM, "out of memory");
    }
    if (rc) {
        pthread_mutex_unlock(&r->live_mu);
        rec_free(n);
        return rc;
    }
    n->cfg = l->cfg;
    n->has_ws = l->has_ws;
    n->idle = l->idle;
    n->lifetime = l->lifetime;
    n->on_idle_pause = l->on_idle_pause;
    n->created = n->used = skd_mono_ms();
    n->created_unix = unix_ms();
    n->making = 1; /* counted against the caps while it is made */
    n->next = r->lives;
    r->lives = n;
    r->nlive++;
    l->forks++;
    int from_saved = l->paused;
    unsigned src_gen = l->paused ? 0 : l->gen;
    pthread_mutex_unlock(&r->live_mu);
    int64_t bytes = 0;
    rc = skd__spawner_live_save(r->spawner, id, src_gen, n->id,
                                from_saved ? SKD__SNAP_FROM_SAVED : 0, 0, &bytes, err);
    if (rc == 0)
        rc = make(r, n, n->ws, 1, err);
    if (rc) {
        skd_err e2 = {0};
        skd__spawner_live_delete(r->spawner, n->id, 0, &e2); /* its snapshot, if any */
    }
    pthread_mutex_lock(&r->live_mu);
    if ((l = find_locked(r, key, id)) != NULL)
        l->forks--;
    unlink_locked(r, n);
    if (rc == 0 && !r->live_stop) {
        n->making = 0;
        n->used = skd_mono_ms();
        n->next = r->lives;
        r->lives = n;
        r->nlive++;
        *out = rec_json(n, n->used);
    }
    pthread_mutex_unlock(&r->live_mu);
    if (rc == 0 && !*out) {
        rc = skd_err_set(err, SKD_ESANDBOX, "the sandbox runner is shutting down");
        end_rec(r, n, NULL);
        return rc;
    }
    if (rc)
        rec_free(n);
    return rc;
}

/* ---- for interpreter contexts (interp.c) ---- */

int skd__live_hold(skd_runner *r, const char *key, const char *id, skd_sandbox_config *cfg,
                   int *has_ws, skd_err *err)
{
    pthread_mutex_lock(&r->live_mu);
    struct skd__live_rec *l = find_locked(r, key ? key : "", id);
    int paused = l && paused_locked(l, err);
    if (l && !paused) {
        *cfg = l->cfg;
        *has_ws = l->has_ws;
        l->busy++;
        l->used = skd_mono_ms();
    }
    pthread_mutex_unlock(&r->live_mu);
    if (paused)
        return SKD_EPAUSED;
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
