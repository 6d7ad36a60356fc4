/*
 * Pause, resume and fork of live sandboxes, the server's half (DESIGN.md,
 * "Live sandboxes"; docs/sandbox.md, "Pause, resume, fork").
 */
#include "sandbox/live_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- pause, resume, fork ----
 * The files are the spawner's to save and restore (native_snap.c); here
 * is the record's state, the caps and who may do what when. A record that
 * is being paused or resumed (moving) or forked (forks) is not deleted,
 * reaped, paused or resumed meanwhile: those calls are SKD_EBUSY, and a
 * key's revocation waits for them. */

/* key's paused sandboxes here (but skip), their number in *n and their
 * saved bytes in *bytes added. */
static void count_paused_locked(skd_runner *r, const char *key, const struct skd__live_rec *skip,
                                int *n, int64_t *bytes)
{
    for (struct skd__live_rec *l = r->lives; l; l = l->next)
        if (l != skip && strcmp(l->key, key) == 0 && (l->paused || l->moving == MOVE_PAUSE)) {
            (*n)++;
            *bytes += l->saved_bytes;
        }
}

/* key's paused sandboxes that other holders keep (the hook: other
 * replicas, or none), asked without any lock of the runner's held. Not 0
 * when the hook cannot tell (the pause is refused: fail closed). */
static int count_paused_elsewhere(skd_runner *r, const char *key, int *n, int64_t *bytes,
                                  skd_err *err)
{
    *n = 0;
    *bytes = 0;
    pthread_mutex_lock(&r->mu);
    skd_live_paused_fn fn = r->live_paused_fn;
    void *arg = r->live_paused_arg;
    pthread_mutex_unlock(&r->mu);
    return fn ? fn(arg, key, n, bytes, err) : 0;
}

/* l ended under a save: unlinked and ended (its row too); live_mu is
 * let go meanwhile. */
static void end_locked(skd_runner *r, struct skd__live_rec *l)
{
    skd__live_unlink_locked(r, l);
    pthread_mutex_unlock(&r->live_mu);
    skd__live_end_rec(r, l, NULL);
    pthread_mutex_lock(&r->live_mu);
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
    int n = 0;
    /* Held (moving: nothing else touches it) while the store is asked. */
    l->moving = MOVE_PAUSE;
    pthread_mutex_unlock(&r->live_mu);
    int rc = count_paused_elsewhere(r, l->key, &n, &bytes, err);
    pthread_mutex_lock(&r->live_mu);
    count_paused_locked(r, l->key, l, &n, &bytes);
    int64_t left = r->live_paused_bytes - bytes;
    if (rc == 0 && n >= r->live_max_paused_key)
        rc = skd_err_set(err, SKD_EBUSY,
                         "this key holds %d paused sandboxes over every replica, its cap "
                         "(SKILLS_SANDBOX_MAX_PAUSED_PER_KEY); delete or resume one first",
                         n);
    else if (rc == 0 && left <= 0)
        rc = skd_err_set(err, SKD_EQUOTA,
                         "the saved files of this key's paused sandboxes hold %lld bytes, "
                         "its quota (SKILLS_SANDBOX_PAUSED_MAX_BYTES); delete or resume one "
                         "first",
                         (long long)bytes);
    if (rc) {
        l->moving = 0;
        return rc;
    }
    pthread_mutex_unlock(&r->live_mu);
    int64_t saved = 0;
    rc = skd__spawner_live_save(r->spawner, l->id, l->gen, l->id, SKD__SNAP_END, left, &saved, err);
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
        skd__live_egress_end_run(r, l->key, l->id, eg, NULL);
        pthread_mutex_lock(&r->live_mu);
    }
    l->moving = 0;
    if (rc == 0) {
        l->paused = 1;
        l->saved_bytes = saved;
        skd__live_procs_detach_locked(l); /* their processes are gone */
    } else if (rc == SKD_ENOENT ||
               (rc == SKD_ESANDBOX && skd__spawner_client_gen(r->spawner) != l->gen)) {
        /* It ended under the pause (its spawner died): the record goes. */
        end_locked(r, l);
        skd_err_clear(err);
        rc = skd_err_set(err, SKD_ENOENT, "no such sandbox (it has ended)");
    }
    return rc;
}

/* The reaper: l's idle timeout is over and it pauses instead of ending.
 * 0 when it is paused or gone; else it is to be ended (caps or quota). */
int skd__live_idle_pause_locked(skd_runner *r, struct skd__live_rec *l)
{
    skd_err e = {0};
    char id[SKD_UUID_LEN + 1];
    memcpy(id, l->id, sizeof(id));
    int rc = pause_locked(r, l, &e);
    if (rc == 0) {
        skd_info("live sandbox %s paused: idle", id);
    } else if (rc == SKD_ESTORE) {
        /* The paused cap cannot be checked now: it runs on, and the
         * reaper tries again in a few seconds (l is still there: a
         * refused pause let nothing else touch it). */
        skd_warn("live sandbox %s: idle, not paused yet (%s): retried in 5 s", id, skd_err_msg(&e));
        l->used = skd_mono_ms() - l->idle + 5000;
        return 0;
    } else if (rc != SKD_ENOENT) {
        skd_warn("live sandbox %s: idle, not paused (%s): it ends", id, skd_err_msg(&e));
    }
    return rc == SKD_ENOENT ? 0 : rc;
}

int skd_live_pause(skd_runner *r, const char *key, const char *id, int *changed, json_t **out,
                   skd_err *err)
{
    *out = NULL;
    *changed = 0;
    key = key ? key : "";
    pthread_mutex_lock(&r->live_mu);
    struct skd__live_rec *l = skd__live_find_locked(r, key, id);
    int rc = 0;
    if (!l)
        rc = skd_err_set(err, SKD_ENOENT, "no such sandbox");
    else if (!l->paused && (rc = pause_locked(r, l, err)) == 0)
        *changed = 1;
    if (rc == 0 && !(*out = skd__live_rec_json(l, skd_mono_ms())))
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
    struct skd__live_rec *l = skd__live_find_locked(r, key, id);
    if (!l)
        rc = skd_err_set(err, SKD_ENOENT, "no such sandbox");
    else if (l->moving || (l->paused && l->forks))
        rc = skd_err_set(err, SKD_EBUSY,
                         "a pause, resume or fork of sandbox %s is under way; try again when "
                         "it is done",
                         id);
    else if (l->paused && skd__live_count_key_locked(r, key) >= r->live_max_key)
        rc = skd_err_set(err, SKD_EBUSY,
                         "this key runs %d live sandboxes, its cap "
                         "(SKILLS_SANDBOX_MAX_LIVE_PER_KEY); delete or pause one first",
                         r->live_max_key);
    else if (l->paused && skd__live_count_key_locked(r, NULL) >= r->live_max)
        rc = skd_err_set(err, SKD_EBUSY,
                         "the server runs %d live sandboxes, its cap (SKILLS_SANDBOX_MAX_LIVE); "
                         "try later",
                         r->live_max);
    if (rc == 0 && l->paused) {
        l->moving = MOVE_RESUME;
        pthread_mutex_unlock(&r->live_mu);
        rc = skd__live_make(r, l, l->ws, 1, err); /* no other call touches l while it moves */
        pthread_mutex_lock(&r->live_mu);
        l->moving = 0;
        if (rc == 0) {
            l->paused = 0;
            l->saved_bytes = 0;
            l->created = l->used = skd_mono_ms(); /* a new lifetime from now */
            l->created_unix = skd__live_unix_ms();
            *changed = 1;
        } else if (rc == SKD_ELOST) {
            /* Its saved files are gone (removed by hand, or a replica
             * whose DATA_DIR is not the one it was paused under): so is
             * it. */
            skd__live_unlink_locked(r, l);
            pthread_mutex_unlock(&r->live_mu);
            skd__live_end_rec(r, l, NULL);
            skd_err_clear(err);
            return skd_err_set(err, SKD_ELOST,
                               "sandbox %s was lost: its saved files are not under this "
                               "server's DATA_DIR/snapshots/paused (replicas must share "
                               "DATA_DIR); create a new one",
                               id);
        }
    }
    if (rc == 0 && !(*out = skd__live_rec_json(l, skd_mono_ms())))
        rc = skd_err_set(err, SKD_ENOMEM, "out of memory");
    pthread_mutex_unlock(&r->live_mu);
    return rc;
}

int skd_live_fork(skd_runner *r, const char *key, const char *id, const char *new_id, json_t **out,
                  skd_err *err)
{
    *out = NULL;
    key = key ? key : "";
    int rc = 0;
    struct skd__live_rec *n = calloc(1, sizeof(*n));
    if (n && new_id && strlen(new_id) == SKD_UUID_LEN)
        memcpy(n->id, new_id, SKD_UUID_LEN + 1);
    else if (!n || skd_uuid(n->id)) {
        free(n);
        return skd_err_set(err, SKD_ENOMEM, "no memory or randomness for a sandbox id");
    }
    pthread_mutex_lock(&r->live_mu);
    struct skd__live_rec *l = skd__live_find_locked(r, key, id);
    if (!l)
        rc = skd_err_set(err, SKD_ENOENT, "no such sandbox");
    else if (l->moving)
        rc = skd_err_set(err, SKD_EBUSY,
                         "a pause or resume of sandbox %s is under way; try again when it is "
                         "done",
                         id);
    else if (r->live_stop)
        rc = skd_err_set(err, SKD_ESANDBOX, "the sandbox runner is shutting down");
    else if (skd__live_count_key_locked(r, key) >= r->live_max_key)
        rc = skd_err_set(err, SKD_EBUSY,
                         "this key runs %d live sandboxes, its cap "
                         "(SKILLS_SANDBOX_MAX_LIVE_PER_KEY); delete or pause one first",
                         r->live_max_key);
    else if (skd__live_count_key_locked(r, NULL) >= r->live_max)
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
        skd__live_rec_free(n);
        return rc;
    }
    n->cfg = l->cfg;
    n->has_ws = l->has_ws;
    n->idle = l->idle;
    n->lifetime = l->lifetime;
    n->on_idle_pause = l->on_idle_pause;
    n->created = n->used = skd_mono_ms();
    n->created_unix = skd__live_unix_ms();
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
        rc = skd__live_make(r, n, n->ws, 1, err);
    if (rc) {
        skd_err e2 = {0};
        skd__spawner_live_delete(r->spawner, n->id, 0, &e2); /* its snapshot, if any */
    }
    pthread_mutex_lock(&r->live_mu);
    if ((l = skd__live_find_locked(r, key, id)) != NULL)
        l->forks--;
    if (l && rc == SKD_ENOENT && !from_saved && !l->paused && !l->moving && !l->forks) {
        /* The source ended under the save (it could not be thawed, or
         * its container was gone): its record goes, as on a pause's. */
        end_locked(r, l);
    }
    skd__live_unlink_locked(r, n);
    if (rc == 0 && !r->live_stop) {
        n->making = 0;
        n->used = skd_mono_ms();
        n->next = r->lives;
        r->lives = n;
        r->nlive++;
        *out = skd__live_rec_json(n, n->used);
    }
    pthread_mutex_unlock(&r->live_mu);
    if (rc == 0 && !*out) {
        rc = skd_err_set(err, SKD_ESANDBOX, "the sandbox runner is shutting down");
        skd__live_end_rec(r, n, NULL);
        return rc;
    }
    if (rc)
        skd__live_rec_free(n);
    return rc;
}

/* ms since the epoch of "YYYY-MM-DDTHH:MM:SS.mmmZ" (skd__live_iso_time),
 * or -1. */
static int64_t iso_ms(const char *t)
{
    struct tm tm;
    int ms = 0, n = 0;
    memset(&tm, 0, sizeof(tm));
    if (!t ||
        sscanf(t, "%4d-%2d-%2dT%2d:%2d:%2d.%3dZ%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
               &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &ms, &n) != 7 ||
        t[n] != '\0')
        return -1;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    time_t s = timegm(&tm);
    return s < 0 ? -1 : (int64_t)s * 1000 + ms;
}

int skd_live_adopt(skd_runner *r, const char *key, const json_t *sandbox, const char *workspace,
                   skd_err *err)
{
    key = key ? key : "";
    const char *id = json_string_value(json_object_get(sandbox, "id"));
    const char *image = json_string_value(json_object_get(sandbox, "image"));
    const char *on_idle = json_string_value(json_object_get(sandbox, "onIdle"));
    json_int_t idle = json_integer_value(json_object_get(sandbox, "idleTimeoutMs"));
    json_int_t life = json_integer_value(json_object_get(sandbox, "lifetimeMs"));
    json_int_t saved = json_integer_value(json_object_get(sandbox, "savedBytes"));
    int64_t created = iso_ms(json_string_value(json_object_get(sandbox, "createdAt")));
    if (!id || strlen(id) != SKD_UUID_LEN || !image || !*image || idle <= 0 || life <= 0 ||
        created < 0)
        return skd_err_set(err, SKD_EINVAL, "a paused sandbox's record is incomplete");
    struct skd__live_rec *l = calloc(1, sizeof(*l));
    if (!l)
        return skd_err_set(err, SKD_ENOMEM, "out of memory");
    int rc = 0;
    l->cfg = r->defaults;
    memcpy(l->id, id, SKD_UUID_LEN + 1);
    l->key = strdup(key);
    l->image = strdup(image);
    l->has_ws = json_is_true(json_object_get(sandbox, "workspace")) && workspace;
    l->ws = l->has_ws ? strdup(workspace) : NULL;
    l->idle = idle;
    l->lifetime = life;
    l->on_idle_pause = on_idle && strcmp(on_idle, "pause") == 0;
    l->paused = 1;
    l->saved_bytes = saved > 0 ? saved : 0;
    l->created_unix = created;
    l->created = l->used = skd_mono_ms() - (skd__live_unix_ms() - created);
    if (!l->key || !l->image || (l->has_ws && !l->ws))
        rc = skd_err_set(err, SKD_ENOMEM, "out of memory");
    else if ((rc = skd_sandbox_config_from_json(&l->cfg, json_object_get(sandbox, "limits"),
                                                err)) == 0 &&
             (rc = skd_sandbox_config_check(&l->cfg, &r->ceilings, err)) == 0) {
        l->cfg.workspace_quota = r->defaults.workspace_quota;
        l->cfg.data_reserve = r->defaults.data_reserve;
        if (l->idle > r->live_idle || l->lifetime > r->live_lifetime)
            rc = skd_err_set(err, SKD_EINVAL,
                             "the paused sandbox's idleTimeoutMs or lifetimeMs is above this "
                             "replica's ceilings (SKILLS_SANDBOX_IDLE_TIMEOUT_MS, "
                             "SKILLS_SANDBOX_LIFETIME_MS)");
    }
    if (rc) {
        skd__live_rec_free(l);
        return rc;
    }
    pthread_mutex_lock(&r->live_mu);
    if (r->live_stop) {
        rc = skd_err_set(err, SKD_ESANDBOX, "the sandbox runner is shutting down");
    } else if (!skd__live_find_locked(r, key, id)) {
        if ((rc = skd__live_reaper_start_locked(r, err)) == 0) {
            l->next = r->lives;
            r->lives = l;
            r->nlive++;
            l = NULL;
        }
    }
    pthread_mutex_unlock(&r->live_mu);
    skd__live_rec_free(l); /* NULL, or not needed */
    return rc;
}

int skd_live_forget(skd_runner *r, const char *key, const char *id)
{
    pthread_mutex_lock(&r->live_mu);
    struct skd__live_rec *l = skd__live_find_locked(r, key ? key : "", id);
    if (l && (!l->paused || l->moving || l->forks))
        l = NULL;
    if (l)
        skd__live_unlink_locked(r, l);
    pthread_mutex_unlock(&r->live_mu);
    if (!l)
        return SKD_ENOENT;
    skd__interp_forget(r, id);
    skd__live_rec_free(l);
    return 0;
}

/* ---- saved files whose sandbox ended (the engine's sweep) ---- */

json_t *skd_live_saved_list(skd_runner *r, int *others, char *other, size_t cap, skd_err *err)
{
    char *ids = NULL;
    if (skd__spawner_snap_list(r->spawner, &ids, others, other, cap, err) != 0)
        return NULL;
    json_t *arr = json_array();
    for (char *p = ids, *nl; arr && (nl = strchr(p, '\n')) != NULL; p = nl + 1) {
        *nl = '\0';
        if (json_array_append_new(arr, json_string(p)) != 0) {
            json_decref(arr);
            arr = NULL;
        }
    }
    free(ids);
    if (!arr)
        skd_err_set(err, SKD_ENOMEM, "out of memory");
    return arr;
}

int skd_live_saved_drop(skd_runner *r, const char *id, skd_err *err)
{
    int held = 0;
    pthread_mutex_lock(&r->live_mu);
    for (struct skd__live_rec *l = r->lives; l && !held; l = l->next)
        held = strcmp(l->id, id) == 0;
    pthread_mutex_unlock(&r->live_mu);
    if (held)
        return skd_err_set(err, SKD_EBUSY, "live sandbox %s is held here", id);
    /* The delete of a sandbox this spawner does not run: its saved files
     * only (gen 0: they outlive the spawner that made them). */
    return skd__spawner_live_delete(r->spawner, id, 0, err);
}
