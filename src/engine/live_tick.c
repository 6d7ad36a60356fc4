/*
 * The periodic work over this replica's live sandboxes, run by its
 * runner's reaper (skd_runner_set_live_tick: every SKD_LIVE_TICK_MS, with
 * no lock of the runner's held).
 *
 * Revocation across replicas. A key revoked through one replica ends its
 * sandboxes there at once (tenancy.c); the others find theirs here: every
 * REVOKED_EVERY_MS one query asks the store for the revoked keys of the
 * sandboxes this replica holds (its rows, running, or paused with their
 * lease), and each is ended as a local revocation ends it
 * (skd__engine_live_end_key: the same delete, so the sandbox_end row,
 * metering, egress records and the removal of a paused one's files are
 * the same). A store that does not answer ends nothing: the error is
 * logged once for the streak and the query is asked again next time.
 * The same tick asks (one more query) for the revoked keys of paused rows
 * that no replica holds, on any replica: their holder released them or
 * died after the revocation, or the revoking replica's removal failed.
 * Each is removed as a revocation removes them
 * (skd__engine_live_drop_unheld: claimed, then deleted; a replica that
 * claims one first wins it, and ends it in its own tick). Without this the
 * sweep below would keep them: their rows say paused.
 *
 * Saved files whose sandbox ended. A pause publishes its files into
 * DATA_DIR/snapshots/paused/<id> before its row says paused, and a resume
 * sets its row running before it takes them back: a server killed between
 * the two leaves files that no paused row names. Its row, running, is
 * marked lost when its lease runs out (or when the server starts again).
 * So at the first tick and every SWEEP_EVERY_MS the sweep lists
 * paused/ (through the spawner: the directory is root's) and removes
 * <id> when its row is gone or ended (any state but running and paused):
 * an ended row never runs again, and ids are random, so nothing can come
 * back for those files. A running row keeps them (a pause or a resume may
 * be under way, on any replica sharing DATA_DIR), and so does a paused
 * one. A name that is no sandbox id is left alone (logged once). A store
 * error keeps every file and the sweep is tried again SWEEP_RETRY_MS
 * later. Replicas sharing DATA_DIR share the store: a DATA_DIR shared
 * with a server of another store would lose that server's paused files.
 */
#include "engine/engine_int.h"
#include "skilld/log.h"
#include "skilld/util.h"

#include <string.h>

#define REVOKED_EVERY_MS 2000
/* Orphans are rare (a kill -9 in a window of milliseconds) and cost only
 * disk: once a minute is plenty, and a listing costs the spawner a
 * readdir. */
#define SWEEP_EVERY_MS 60000
#define SWEEP_RETRY_MS 5000

int skd__engine_live_end_key(skd_runner *r, const char *key_id)
{
    int n = skd_live_delete_key(r, key_id);
    if (n > 0)
        skd_info("key %s revoked: %d live sandbox(es) ended", key_id, n);
    return n;
}

static void end_revoked(skd_engine *e, skd_runner *r)
{
    skd_err err = {0};
    json_t *keys = skd_store_live_revoked_here(e->store, &err);
    json_t *unheld = keys ? skd_store_live_revoked_unheld(e->store, &err) : NULL;
    if (!unheld) {
        json_decref(keys);
        if (!e->revoked_failing++)
            skd_warn("live sandboxes: the store cannot say whether their keys were revoked (%s); "
                     "nothing is ended for it, and it is asked again every %d ms",
                     skd_err_msg(&err), REVOKED_EVERY_MS);
        return;
    }
    if (e->revoked_failing)
        skd_info("live sandboxes: the store answers again on revoked keys");
    e->revoked_failing = 0;
    size_t i;
    json_t *k;
    json_array_foreach (keys, i, k)
        skd__engine_live_end_key(r, json_string_value(k));
    json_array_foreach (unheld, i, k) {
        int n = skd__engine_live_drop_unheld(e, json_string_value(k));
        if (n > 0)
            skd_info("key %s revoked: %d paused sandbox(es) no replica held removed",
                     json_string_value(k), n);
    }
    json_decref(keys);
    json_decref(unheld);
}

/* Remove paused/<id> when its row is gone or ended. 0, or not 0 when the
 * store did not answer (nothing more is removed this time). */
static int sweep_one(skd_engine *e, skd_runner *r, const char *id, skd_err *err)
{
    char state[16] = "";
    int rc = skd_store_live_state(e->store, id, state, sizeof(state), err);
    if (rc && rc != SKD_ENOENT)
        return rc;
    if (rc == 0 && (strcmp(state, "running") == 0 || strcmp(state, "paused") == 0))
        return 0;
    skd_err derr = {0};
    int d = skd_live_saved_drop(r, id, &derr);
    if (d == 0)
        skd_info("live sandbox %s: its saved files are removed: its row %s%s", id,
                 rc ? "is gone" : "says ", rc ? "" : state);
    else if (d != SKD_ENOENT)
        skd_warn("live sandbox %s: its saved files (its row %s%s) are not removed: %s", id,
                 rc ? "is gone" : "says ", rc ? "" : state, skd_err_msg(&derr));
    return 0;
}

/* 0, or not 0 when it is to be tried again soon. */
static int sweep_saved(skd_engine *e, skd_runner *r)
{
    skd_err err = {0};
    char other[256];
    int others = 0, rc = 0;
    json_t *ids = skd_live_saved_list(r, &others, other, sizeof(other), &err);
    if (!ids && err.code == SKD_EUNSUPPORTED)
        return 0; /* no snapshot directory: nothing is ever saved */
    if (others && !e->others_logged) {
        e->others_logged = 1;
        skd_warn("%s/snapshots/paused holds %d name(s) that are not sandbox ids (\"%s\"...): "
                 "left alone; remove them by hand",
                 skd_config_str(e->cfg, "DATA_DIR"), others, other);
    }
    size_t i;
    json_t *v;
    json_array_foreach (ids, i, v)
        if ((rc = sweep_one(e, r, json_string_value(v), &err)) != 0)
            break;
    json_decref(ids);
    if (!ids || rc) {
        if (!e->sweep_failing++)
            skd_warn("saved files of ended live sandboxes: not swept (%s); tried again every %d ms",
                     skd_err_msg(&err), SWEEP_RETRY_MS);
        return -1;
    }
    if (e->sweep_failing)
        skd_info("saved files of ended live sandboxes: swept again");
    e->sweep_failing = 0;
    return 0;
}

/* skd_live_tick_fn. */
static void live_tick(void *arg, skd_runner *r)
{
    skd_engine *e = arg;
    if (pthread_mutex_trylock(&e->tick_mu) != 0)
        return; /* the runner's successor is at it */
    int64_t now = skd_mono_ms();
    if (now >= e->next_revoked_ms) {
        end_revoked(e, r);
        e->next_revoked_ms = skd_mono_ms() + REVOKED_EVERY_MS;
    }
    if (now >= e->next_sweep_ms)
        e->next_sweep_ms =
            skd_mono_ms() + (sweep_saved(e, r) == 0 ? SWEEP_EVERY_MS : SWEEP_RETRY_MS);
    pthread_mutex_unlock(&e->tick_mu);
}

void skd__engine_live_tick_attach(skd_engine *e, skd_runner *r)
{
    skd_err err = {0};
    if (skd_runner_set_live_tick(r, live_tick, e, &err) != 0)
        skd_warn("live sandboxes: %s: keys revoked through other replicas and saved files of "
                 "ended sandboxes are not looked for",
                 skd_err_msg(&err));
}
