/*
 * What the engine's files share: the engine itself and its execution
 * counters. Nothing outside src/engine/ includes this.
 */
#ifndef SKILLD_ENGINE_INT_H
#define SKILLD_ENGINE_INT_H

#include "skilld/oauth.h"
#include "skilld/sandbox.h"
#include "skilld/skilld.h"
#include "skilld/store.h"
#include "skilld/tenancy.h"

#include <pthread.h>

typedef struct skd__exec_stats skd__exec_stats;

struct skd_engine {
    skd_skills *skills; /* src/skills/: custom skills and bundles */
    const skd_config *cfg;
    skd_store *store;
    skd_registry *reg;
    pthread_mutex_t runner_mu;  /* guards the lazy start of runner */
    skd_runner *runner;         /* NULL until the first sandbox run */
    skd__exec_stats *stats;     /* exec_stats.c: executions by skill */
    int one_call;               /* SKD_ENGINE_NO_SKILLS: no run touches the store */
    pthread_mutex_t secrets_mu; /* guards the first read of secrets_key */
    unsigned char secrets_key[32];
    int secrets_key_ok;
    skd_oauth *oauth; /* oauth.c: NULL when SKILLD_OAUTH_ISSUER is not set */
    /* live_tick.c: the periodic work over the runner's live sandboxes,
     * under tick_mu (a runner being replaced may tick once more). */
    pthread_mutex_t tick_mu;
    int64_t next_revoked_ms, next_sweep_ms; /* skd_mono_ms */
    int revoked_failing, sweep_failing;     /* the store's errors: logged once a streak */
    int others_logged;                      /* the names that are not ids: logged once */
};

/* Let r hand e the egress records of live sandboxes that ended with no
 * call to take them (usage.c); nothing without a store. */
void skd__engine_usage_attach(skd_engine *e, skd_runner *r);
/* Let r tell e when a live sandbox ended or the reaper paused it, for its
 * row in the store (replica.c); nothing without a store. */
void skd__engine_live_attach(skd_engine *e, skd_runner *r);
/* A call c of skill s (input: validated) for a live sandbox that another
 * replica holds: the answer of the holder, forwarded there (a new result,
 * with exec_id set to the holder's execution id), or the error that says
 * why it cannot be (sandbox_lost, replica_unavailable). NULL when the call
 * is to run here. */
json_t *skd__engine_forward(skd_engine *e, const skd_call *c, const skd_skill *s,
                            const json_t *input, char exec_id[37]);
/* Remove key_id's paused sandboxes that no replica holds (their rows and
 * saved files), taking each over first (its key was revoked). How many. */
int skd__engine_live_drop_unheld(skd_engine *e, const char *key_id);
/* End key_id's live sandboxes that r holds, running and paused, as its
 * revocation does, and log how many (live_tick.c: revoked through another
 * replica). How many. */
int skd__engine_live_end_key(skd_runner *r, const char *key_id);
/* Have r's reaper run e's periodic live work (live_tick.c): the keys
 * revoked through another replica, the saved files of ended sandboxes. */
void skd__engine_live_tick_attach(skd_engine *e, skd_runner *r);
/* Let r ask e for a run's secrets (secrets.c); nothing without a store. */
void skd__engine_secrets_attach(skd_engine *e, skd_runner *r);
/* skd_sandbox_secrets_fn with arg the engine: key_id's secrets, opened. */
int skd__engine_secrets_open(void *arg, const char *key_id, skd_secret **out, size_t *n,
                             skd_err *err);

/* Execution counters by skill (exec_stats.c). new: NULL when out of
 * memory; free: NULL ok. add counts one call of skill ("name" or
 * "name@x.y.z", counted under name; a name the registry would refuse
 * counts under "other"). */
skd__exec_stats *skd__exec_stats_new(size_t max_keys);
void skd__exec_stats_free(skd__exec_stats *st);
void skd__exec_stats_add(skd__exec_stats *st, const char *skill, int success, int64_t duration_ms);
/* Count one call of skill by key_id and what it used (u NULL: nothing
 * metered) under the per-key labels: the first max_keys keys (of new) have
 * their own, later ones are summed under "_other". */
void skd__exec_stats_add_usage(skd__exec_stats *st, const char *key_id, const char *skill,
                               int success, const skd_usage *u);

/* The CPU budget (usage.c): NULL when key_id may start a sandboxed call
 * now, else the refusal (a new result object: quota_exceeded with the
 * reason, or the store's error: a budget that cannot be checked refuses). */
json_t *skd__usage_budget_check(skd_engine *e, const char *key_id);

#endif
