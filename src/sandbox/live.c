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
 * whose lifetime is over, and runs the tick hook of whoever holds the
 * runner (skd_runner_set_live_tick) every SKD_LIVE_TICK_MS. Server
 * shutdown and a killed server leave nothing: the spawner ends every live
 * sandbox when the server goes.
 *
 * Background processes are in live_proc.c; pause, resume and fork in
 * live_snap.c; what the three share in live_int.h.
 *
 * Locking: r->live_mu guards the list. No spawner call is made under it
 * (a create or a delete waits for the spawner).
 */
#include "sandbox/live_int.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void skd__live_proc_free(struct live_proc *p)
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
void skd__live_procs_detach_locked(struct skd__live_rec *l)
{
    while (l->procs) {
        struct live_proc *p = l->procs;
        l->procs = p->next;
        if (p->running)
            p->detached = 1;
        else
            skd__live_proc_free(p);
    }
    l->nprocs = 0;
}

void skd__live_rec_free(struct skd__live_rec *l)
{
    if (!l)
        return;
    skd_secrets_free(l->secrets, l->nsecrets);
    free(l->key);
    free(l->image);
    free(l->ws);
    free(l);
}

int64_t skd__live_unix_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

json_t *skd__live_iso_time(int64_t ms)
{
    char buf[40];
    struct tm tm;
    time_t t = (time_t)(ms / 1000);
    gmtime_r(&t, &tm);
    size_t n = strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf + n, sizeof(buf) - n, ".%03dZ", (int)(ms % 1000));
    return json_string(buf);
}

json_t *skd__live_rec_json(const struct skd__live_rec *l, int64_t now)
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
        "image", l->image, "createdAt", skd__live_iso_time(l->created_unix), "expiresAt",
        l->paused ? json_null() : skd__live_iso_time(l->created_unix + (end - l->created)),
        "idleExpiresAt",
        l->paused ? json_null() : skd__live_iso_time(l->created_unix + (idle_end - l->created)),
        "limits", limits ? limits : json_object(), "idleTimeoutMs", (json_int_t)l->idle,
        "lifetimeMs", (json_int_t)l->lifetime, "workspace", l->has_ws, "onIdle",
        l->on_idle_pause ? "pause" : "delete");
    if (o && l->paused)
        json_object_set_new(o, "savedBytes", json_integer((json_int_t)l->saved_bytes));
    return o;
}

/* The record of id owned by key; caller holds live_mu. */
struct skd__live_rec *skd__live_find_locked(skd_runner *r, const char *key, const char *id)
{
    for (struct skd__live_rec *l = r->lives; l; l = l->next)
        if (!l->making && strcmp(l->id, id) == 0 && strcmp(l->key, key) == 0)
            return l;
    return NULL;
}

/* 1 with err set when l is paused (or being paused or resumed): an exec
 * is refused, never resumes it behind the caller's back. Under live_mu. */
int skd__live_paused_locked(const struct skd__live_rec *l, skd_err *err)
{
    if (!l->paused && l->moving != MOVE_PAUSE)
        return 0;
    skd_err_set(err, SKD_EPAUSED,
                "sandbox %s is %s; resume it first (POST /v1/sandboxes/%s/resume, or the "
                "sandbox_resume skill); its files are kept, its processes are not",
                l->id, l->moving == MOVE_PAUSE ? "being paused" : "paused", l->id);
    return 1;
}

void skd__live_unlink_locked(skd_runner *r, struct skd__live_rec *l)
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
int skd__live_count_key_locked(skd_runner *r, const char *key)
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
void skd__live_egress_end_run(skd_runner *r, const char *key, const char *id, skd_egress_run *eg,
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
    skd__live_egress_end_run(r, l->key, l->id, eg, out);
}

void skd__live_tell(skd_runner *r, const char *key, const char *id, int what, const json_t *sandbox)
{
    pthread_mutex_lock(&r->mu);
    skd_live_event_fn fn = r->live_event_fn;
    void *arg = r->live_event_arg;
    pthread_mutex_unlock(&r->mu);
    if (fn)
        fn(arg, key, id, what, sandbox);
}

/* End a record already unlinked: the spawner kills its processes and
 * removes its cgroup. A spawner that died took it with it. egress: as for
 * egress_end. */
void skd__live_end_rec(skd_runner *r, struct skd__live_rec *l, json_t **egress)
{
    pthread_mutex_lock(&r->live_mu);
    skd__live_procs_detach_locked(l);
    pthread_mutex_unlock(&r->live_mu);
    skd_err e = {0};
    /* Its row ends first: a paused one's row must not be claimed again
     * (a call that finds it held by nobody here) while its files go. */
    skd__live_tell(r, l->key, l->id, SKD_LIVE_ENDED, NULL);
    /* A paused one's saved files outlive the spawner that made them. */
    int rc = skd__spawner_live_delete(r->spawner, l->id, l->paused ? 0 : l->gen, &e);
    if (rc != 0 && rc != SKD_ENOENT && rc != SKD_ESANDBOX)
        skd_warn("live sandbox %s: delete: %s", l->id, skd_err_msg(&e));
    egress_end(r, l, egress);
    skd__interp_forget(r, l->id);
    skd__live_rec_free(l);
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
        if (r->live_tick_fn && now >= r->live_next_tick && !r->live_stop) {
            skd_live_tick_fn fn = r->live_tick_fn;
            void *targ = r->live_tick_arg;
            r->live_next_tick = now + SKD_LIVE_TICK_MS;
            pthread_mutex_unlock(&r->live_mu);
            fn(targ, r);
            pthread_mutex_lock(&r->live_mu);
            now = skd_mono_ms();
        }
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
                skd__live_idle_pause_locked(r, l) == 0) {
                json_t *sb = NULL;
                char *key = NULL, id[SKD_UUID_LEN + 1];
                memcpy(id, l->id, sizeof(id));
                /* Still there and paused (not ended under the pause). */
                for (struct skd__live_rec *p = r->lives; p; p = p->next)
                    if (p == l && l->paused) {
                        sb = skd__live_rec_json(l, now);
                        key = strdup(l->key);
                    }
                pthread_mutex_unlock(&r->live_mu);
                if (sb && key)
                    skd__live_tell(r, key, id, SKD_LIVE_PAUSED, sb);
                json_decref(sb);
                free(key);
                pthread_mutex_lock(&r->live_mu);
                l = r->lives; /* the lock was let go meanwhile */
                continue;
            }
            skd__live_unlink_locked(r, l);
            pthread_mutex_unlock(&r->live_mu);
            skd_info("live sandbox %s ended: %s", l->id,
                     now >= l->created + l->lifetime ? "lifetime over" : "idle");
            skd__live_end_rec(r, l, NULL);
            pthread_mutex_lock(&r->live_mu);
            l = r->lives; /* the list may have changed meanwhile */
        }
    }
    pthread_mutex_unlock(&r->live_mu);
    return NULL;
}

/* Start the reaper on first use; caller holds live_mu. */
int skd__live_reaper_start_locked(skd_runner *r, skd_err *err)
{
    if (r->live_thread_started)
        return 0;
    /* The reaper takes no signals (it may start before the server blocks
     * them: the server's SIGTERM must reach its own handling, not end the
     * process here). */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int prc = pthread_create(&r->live_thread, NULL, reaper_main, r);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (prc != 0)
        return skd_err_set(err, SKD_ESANDBOX, "cannot start the live sandbox reaper");
    r->live_thread_started = 1;
    return 0;
}

int skd_runner_set_live_tick(skd_runner *r, skd_live_tick_fn fn, void *arg, skd_err *err)
{
    pthread_mutex_lock(&r->live_mu);
    r->live_tick_fn = fn;
    r->live_tick_arg = arg;
    r->live_next_tick = 0;
    int rc = fn && !r->live_stop ? skd__live_reaper_start_locked(r, err) : 0;
    pthread_cond_broadcast(&r->live_cv);
    pthread_mutex_unlock(&r->live_mu);
    return rc;
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
    /* The spawner ends them all when it goes (the runner closes it next).
     * A paused one's saved files stay under DATA_DIR (native_snap.c): it
     * is let go, for this server's next life or another replica. */
    pthread_mutex_lock(&r->live_mu);
    while (r->lives) {
        struct skd__live_rec *l = r->lives;
        skd__live_unlink_locked(r, l);
        skd__live_procs_detach_locked(l);
        pthread_mutex_unlock(&r->live_mu);
        egress_end(r, l, NULL);
        if (!l->making)
            skd__live_tell(r, l->key, l->id, l->paused ? SKD_LIVE_RELEASED : SKD_LIVE_ENDED, NULL);
        skd__live_rec_free(l);
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
int skd__live_make(skd_runner *r, struct skd__live_rec *l, const char *workspace, int restore,
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
    struct skd__live_rec *l = skd__live_find_locked(r, key ? key : "", id);
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
    /* A container's live sandbox has no /workspace: a one-shot container
     * run lends the workspace to the container's uid for the run only,
     * and the server must reach it between calls (docs/containers.md). */
    skd_live_opts oc = *o;
    if (strcmp(r->runtime, "docker") == 0 || strcmp(r->runtime, "podman") == 0)
        oc.workspace = NULL;
    o = &oc;
    struct skd__live_rec *l = calloc(1, sizeof(*l));
    if (!l)
        return skd_err_set(err, SKD_ENOMEM, "out of memory");
    l->cfg = o->config ? *o->config : r->defaults;
    l->cfg.workspace_quota = r->defaults.workspace_quota;
    l->cfg.data_reserve = r->defaults.data_reserve;
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
    if (strcmp(rt, "native") != 0 && strcmp(rt, "auto") != 0 && strcmp(rt, "docker") != 0 &&
        strcmp(rt, "podman") != 0) {
        rc = skd_err_set(err, SKD_ESANDBOX, "live sandboxes are not supported on the %s runtime",
                         rt);
        goto fail;
    }
    /* The spawner checks its form as for every id it is given. */
    if (o->id && strlen(o->id) != SKD_UUID_LEN) {
        rc = skd_err_set(err, SKD_EINVAL, "live sandbox: \"%.40s\" is not a UUID", o->id);
        goto fail;
    }
    if (o->id)
        memcpy(l->id, o->id, SKD_UUID_LEN + 1);
    else if (skd_uuid(l->id)) {
        rc = skd_err_set(err, SKD_EINTERNAL, "no randomness for a sandbox id");
        goto fail;
    }
    /* Hold the slot while the spawner makes it: the caps count it. */
    pthread_mutex_lock(&r->live_mu);
    if ((rc = skd__live_reaper_start_locked(r, err)) == 0) {
        if (r->live_stop)
            rc = skd_err_set(err, SKD_ESANDBOX, "the sandbox runner is shutting down");
        else if (skd__live_count_key_locked(r, key) >= r->live_max_key)
            rc = skd_err_set(err, SKD_EBUSY,
                             "this key holds %d live sandboxes, its cap "
                             "(SKILLS_SANDBOX_MAX_LIVE_PER_KEY); delete one first",
                             r->live_max_key);
        else if (skd__live_count_key_locked(r, NULL) >= r->live_max)
            rc = skd_err_set(err, SKD_EBUSY,
                             "the server holds %d live sandboxes, its cap "
                             "(SKILLS_SANDBOX_MAX_LIVE); try later",
                             r->live_max);
    }
    if (rc == 0) {
        l->created = l->used = skd_mono_ms();
        l->created_unix = skd__live_unix_ms();
        l->making = 1;
        l->next = r->lives;
        r->lives = l;
        r->nlive++;
    }
    pthread_mutex_unlock(&r->live_mu);
    if (rc)
        goto fail;
    rc = skd__live_make(r, l, o->workspace, 0, err);
    pthread_mutex_lock(&r->live_mu);
    skd__live_unlink_locked(r, l);
    if (rc == 0 && !r->live_stop) {
        l->making = 0;
        l->used = skd_mono_ms();
        l->next = r->lives;
        r->lives = l;
        r->nlive++;
        *out = skd__live_rec_json(l, l->used);
    }
    pthread_mutex_unlock(&r->live_mu);
    if (rc == 0 && !*out) {
        if (!r->live_stop)
            rc = skd_err_set(err, SKD_ENOMEM, "out of memory");
        else
            rc = skd_err_set(err, SKD_ESANDBOX, "the sandbox runner is shutting down");
        skd__live_end_rec(r, l, NULL);
        return rc;
    }
    if (rc)
        goto fail;
    return 0;
fail:
    skd__live_rec_free(l);
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
            json_array_append_new(arr, skd__live_rec_json(l, now));
    pthread_mutex_unlock(&r->live_mu);
    return arr;
}

int skd_live_get(skd_runner *r, const char *key, const char *id, json_t **out, skd_err *err)
{
    *out = NULL;
    pthread_mutex_lock(&r->live_mu);
    struct skd__live_rec *l = skd__live_find_locked(r, key ? key : "", id);
    if (l)
        *out = skd__live_rec_json(l, skd_mono_ms());
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
    struct skd__live_rec *l = skd__live_find_locked(r, key ? key : "", id);
    int moving = l && (l->moving || l->forks);
    if (l && !moving)
        skd__live_unlink_locked(r, l);
    pthread_mutex_unlock(&r->live_mu);
    if (!l)
        return skd_err_set(err, SKD_ENOENT, "no such sandbox");
    if (moving)
        return skd_err_set(err, SKD_EBUSY,
                           "a pause, resume or fork of sandbox %s is under way; delete it when "
                           "that is done",
                           id);
    skd__live_end_rec(r, l, egress);
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
            skd__live_unlink_locked(r, l);
        pthread_mutex_unlock(&r->live_mu);
        if (!l && waiting) { /* a pause, resume or fork ends soon */
            struct timespec ts = {0, 20 * 1000000L};
            nanosleep(&ts, NULL);
            continue;
        }
        if (!l)
            return n;
        skd__live_end_rec(r, l, NULL);
        n++;
    }
}

int skd_live_exec(skd_runner *r, const char *key, const char *id, const skd_live_exec_opts *o,
                  skd_sandbox_result *res, skd_err *err)
{
    key = key ? key : "";
    skd_sandbox_config cfg;
    pthread_mutex_lock(&r->live_mu);
    struct skd__live_rec *l = skd__live_find_locked(r, key, id);
    int paused = l && skd__live_paused_locked(l, err);
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
    if (rc == 0 && !gone && (l = skd__live_find_locked(r, key, id)) != NULL && l->egress)
        egress_settle_locked(r, l, conns0);
    int paused_meanwhile = 0;
    if ((l = skd__live_find_locked(r, key, id)) != NULL) {
        l->busy--;
        l->used = skd_mono_ms();
        /* Paused under it: the processes are gone, the sandbox is not. */
        if (gone && (l->paused || l->moving == MOVE_PAUSE) && rc == SKD_ENOENT) {
            gone = 0;
            skd_err_clear(err);
            paused_meanwhile = skd__live_paused_locked(l, err);
        } else if (gone && (l->paused || l->moving)) {
            gone = 0;
        } else if (gone) {
            skd__live_unlink_locked(r, l);
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
        skd__live_end_rec(r, l, NULL);
    if (rc == SKD_ENOENT) {
        skd_err_clear(err);
        rc = skd_err_set(err, SKD_ENOENT, "no such sandbox (it has ended)");
    }
    return rc;
}

/* ---- for interpreter contexts (interp.c) ---- */

int skd__live_hold(skd_runner *r, const char *key, const char *id, skd_sandbox_config *cfg,
                   int *has_ws, unsigned *gen, skd_err *err)
{
    pthread_mutex_lock(&r->live_mu);
    struct skd__live_rec *l = skd__live_find_locked(r, key ? key : "", id);
    int paused = l && skd__live_paused_locked(l, err);
    if (l && !paused) {
        *cfg = l->cfg;
        *has_ws = l->has_ws;
        *gen = l->gen;
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
    struct skd__live_rec *l = skd__live_find_locked(r, key ? key : "", id);
    if (l && l->busy > 0) {
        l->busy--;
        l->used = skd_mono_ms();
    }
    pthread_mutex_unlock(&r->live_mu);
}
