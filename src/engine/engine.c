/*
 * The engine: the one path every call takes, whatever transport it came
 * from (MCP, A2A, REST, stdio, skilld run and exec; DESIGN.md, "The path of
 * one call"): look the skill up as the caller sees it, check scope and
 * enabled state, validate the input against the skill's schema, open the
 * caller's workspace, run the handler (a sandbox skill as a row of the run
 * table; a key past its CPU budget is refused first), count the execution
 * and what it used (metering: usage.c), write the audit row. Transports only
 * translate to and from skd_call. The engine reaches the built-ins through
 * their list and custom skills through the skd_skills object; they reach it
 * only through the skd_ctx it passes. Listing, keys and metric labels are
 * decided in tenancy.c.
 */
#include "engine/engine_int.h"
#include "skilld/custom.h"
#include "skilld/sandbox.h"
#include "skilld/skilld.h"
#include "skilld/store.h"
#include "skilld/tenancy.h"
#include "skilld/workspace.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* skilld exec leaves a WAL up to this size for the next process (about a
 * dozen runs' audit rows); the one that finds it larger checkpoints it. */
#define SKD_EXEC_KEEP_WAL_BYTES (256 * 1024)

static int mkdir_p(const char *path, skd_err *err)
{
    char buf[PATH_MAX];
    if (skd_strlcpy(buf, path, sizeof(buf)))
        return skd_err_set(err, SKD_ECONFIG, "DATA_DIR is too long");
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0700) != 0 && errno != EEXIST)
            return skd_err_set(err, SKD_EIO, "cannot create %s: %s", buf, strerror(errno));
        *p = '/';
    }
    if (mkdir(buf, 0700) != 0 && errno != EEXIST)
        return skd_err_set(err, SKD_EIO, "cannot create %s: %s", buf, strerror(errno));
    return 0;
}

int skd_engine_open(const skd_config *cfg, skd_engine **out, skd_err *err)
{
    return skd_engine_open_flags(cfg, 0, out, err);
}

int skd_engine_open_flags(const skd_config *cfg, unsigned flags, skd_engine **out, skd_err *err)
{
    *out = NULL;
    const char *dir = skd_config_str(cfg, "DATA_DIR");
    char dbpath[PATH_MAX];
    int rc = mkdir_p(dir, err);
    if (rc)
        return rc;
    if (snprintf(dbpath, sizeof(dbpath), "%s/skilld.db", dir) >= (int)sizeof(dbpath))
        return skd_err_set(err, SKD_ECONFIG, "DATA_DIR is too long");
    skd_engine *e = calloc(1, sizeof(*e));
    if (!e)
        return skd_err_set(err, SKD_ENOMEM, "out of memory");
    e->cfg = cfg;
    pthread_mutex_init(&e->runner_mu, NULL);
    pthread_mutex_init(&e->secrets_mu, NULL);
    pthread_mutex_init(&e->tick_mu, NULL);
    e->reg = skd_registry_new();
    e->stats = skd__exec_stats_new((size_t)skd_config_int(cfg, "SKILLD_METRICS_MAX_KEYS"));
    if (!e->reg || !e->stats) {
        rc = skd_err_set(err, SKD_ENOMEM, "out of memory");
        goto out;
    }
    if (flags & SKD_ENGINE_SANDBOX_ONLY) { /* no store, no skills: a runner only */
        *out = e;
        return 0;
    }
    const char *where = skd_config_str(cfg, "SKILLD_STORE");
    if (*where && !skd_store_is_url(where)) {
        rc = skd_err_set(err, SKD_ECONFIG,
                         "SKILLD_STORE must be a postgresql:// URL (or empty for SQLite in "
                         "DATA_DIR)");
        goto out;
    }
    skd_store_opts so = {
        .pool_size = (int)skd_config_int(cfg, "SKILLD_STORE_POOL"),
        .busy_timeout_ms = (int)skd_config_int(cfg, "SKILLD_STORE_TIMEOUT_MS"),
        .statement_timeout_ms = (int)skd_config_int(cfg, "SKILLD_STORE_TIMEOUT_MS"),
        .audit_flush_ms = (int)skd_config_int(cfg, "SKILLD_AUDIT_FLUSH_MS"),
        .audit_sync = skd_config_bool(cfg, "SKILLD_AUDIT_SYNC"),
    };
    /* skilld exec writes one row, right after its run: at once, while the
     * spawner tears the run down, not from a writer thread at close. */
    e->one_call = (flags & SKD_ENGINE_NO_SKILLS) != 0;
    if (e->one_call) {
        /* A small WAL is left for the next process rather than
         * checkpointed (two fdatasyncs, the files deleted and made again
         * per call), unless the operator asked for durable rows. */
        if (!so.audit_sync)
            so.keep_wal_bytes = SKD_EXEC_KEEP_WAL_BYTES;
        so.audit_sync = 1;
    }
    if ((rc = skd_store_open_opts(*where ? where : dbpath, &so, &e->store, err)) != 0)
        goto out;
    if (flags & SKD_ENGINE_NO_SKILLS) { /* skilld exec: the store for its audit row */
        *out = e;
        return 0;
    }
    if (!(e->skills = skd__skills_new(cfg, e->store, e->reg))) {
        rc = skd_err_set(err, SKD_ENOMEM, "out of memory");
        goto out;
    }
    if ((rc = skd__builtins_register(e->reg, err)) != 0)
        goto out;
    if ((rc = skd_oauth_new(cfg, &e->oauth, err)) != 0) /* oauth.c */
        goto out;
    if ((rc = skd__custom_load(e->skills, err)) != 0) /* src/skills/custom.c */
        goto out;
    /* Skills registered through another replica (src/skills/custom_sync.c). */
    skd__custom_sync_init(e->skills);
    skd_store_watch_skills(e->store, skd__custom_sync, e->skills);
    /* Temporary files of writes a crash interrupted (src/workspace). */
    skd_err serr = {0};
    int swept = skd_workspace_sweep_tmp(dir, &serr);
    if (swept > 0)
        skd_info("removed %d temporary file(s) of interrupted writes from the workspaces", swept);
    else if (swept < 0)
        skd_warn("workspaces not swept for temporary files: %s", skd_err_msg(&serr));
    *out = e;
    return 0;
out:
    skd_engine_close(e);
    return rc;
}

void skd_engine_close(skd_engine *e)
{
    if (!e)
        return;
    /* No run of a one-call engine uses the store: closing it (the WAL's
     * checkpoint) overlaps the spawner's exit, which skd_runner_free waits
     * for. Otherwise runs in flight may still write to the store. */
    if (e->one_call) {
        skd_store_close(e->store);
        e->store = NULL;
    }
    skd_runner_free(e->runner);
    pthread_mutex_destroy(&e->runner_mu);
    pthread_mutex_destroy(&e->secrets_mu);
    pthread_mutex_destroy(&e->tick_mu);
    explicit_bzero(e->secrets_key, sizeof(e->secrets_key));
    skd_store_close(e->store); /* first: its replica thread uses the registry */
    skd_registry_free(e->reg);
    skd__skills_free(e->skills);
    skd__exec_stats_free(e->stats);
    skd_oauth_free(e->oauth);
    free(e);
}

const skd_config *skd_engine_config(skd_engine *e)
{
    return e->cfg;
}

skd_registry *skd_engine_registry(skd_engine *e)
{
    return e->reg;
}

skd_skills *skd_engine_skills(skd_engine *e)
{
    return e->skills;
}

skd_store *skd_engine_store(skd_engine *e)
{
    return e->store;
}

void skd_engine_adopt_runner(skd_engine *e, struct skd_runner *r)
{
    pthread_mutex_lock(&e->runner_mu);
    skd_runner *old = e->runner;
    e->runner = r;
    skd__engine_secrets_attach(e, r);
    skd__engine_usage_attach(e, r);
    skd__engine_live_attach(e, r);
    pthread_mutex_unlock(&e->runner_mu);
    skd_runner_free(old);
}

skd_runner *skd_engine_runner(skd_engine *e, skd_err *err)
{
    pthread_mutex_lock(&e->runner_mu);
    if (!e->runner && skd_runner_new(e->cfg, NULL, &e->runner, err) == 0) {
        skd__engine_secrets_attach(e, e->runner);
        skd__engine_usage_attach(e, e->runner);
        skd__engine_live_attach(e, e->runner);
    }
    skd_runner *r = e->runner;
    pthread_mutex_unlock(&e->runner_mu);
    return r;
}

/* Resolve, check and validate; on success *skill holds a reference. */
static json_t *prepare(skd_engine *e, const skd_call *c, const json_t *input, skd_skill **skill)
{
    skd_err err = {0};
    char ref[160];
    *skill = NULL;
    if (!c->skill || !*c->skill)
        return skd_result_error(SKD_EINVAL, "no skill named in the call");
    int n = c->version && *c->version && !strchr(c->skill, '@')
                ? snprintf(ref, sizeof(ref), "%s@%s", c->skill, c->version)
                : snprintf(ref, sizeof(ref), "%s", c->skill);
    if (n < 0 || (size_t)n >= sizeof(ref)) /* cut, it would name another skill */
        return skd_result_error(SKD_EINVAL, "\"%.64s...\" is not a skill name or name@x.y.z",
                                c->skill);
    if (!(c->scopes & SKD_SCOPE_EXECUTE))
        return skd_result_error(SKD_EFORBIDDEN, "this API key lacks the skills:execute scope");
    skd_skill *s = skd_registry_lookup(e->reg, ref, c->key_id, &err);
    if (!s)
        return skd_result_from_err(&err);
    if (!skd_skill_enabled(s)) {
        skd_skill_unref(s);
        return skd_result_error(SKD_EDISABLED, "skill %s is disabled", ref);
    }
    if (!json_is_object(input)) {
        skd_skill_unref(s);
        return skd_result_error(SKD_EINVAL, "input must be a JSON object");
    }
    if (skd_schema_validate(skd_skill_input_schema(s), input, &err)) {
        skd_skill_unref(s);
        return skd_result_from_err(&err);
    }
    *skill = s;
    return NULL;
}

/* skd_ctx.runner: how a handler reaches the engine's runner. */
static skd_runner *ctx_runner(const skd_ctx *ctx, skd_err *err)
{
    return skd_engine_runner(ctx->engine, err);
}

static json_t *run_handler(skd_engine *e, const skd_call *c, skd_skill *s, const json_t *input,
                           const char *exec_id, skd_usage *usage)
{
    skd_err err = {0};
    skd_workspace *ws = NULL;
    if (skd_workspace_open(skd_config_str(e->cfg, "DATA_DIR"), c->key_id, &ws, &err))
        return skd_result_from_err(&err);
    skd_ctx ctx = {
        .key_id = c->key_id,
        .scopes = c->scopes,
        .cfg = e->cfg,
        .store = e->store,
        .skills = e->skills,
        .runner = ctx_runner,
        .engine = e,
        .ws = ws,
        .cancel = c->cancel,
        .progress = c->progress,
        .progress_arg = c->progress_arg,
        .output = c->output,
        .output_arg = c->output_arg,
        .execution_id = exec_id,
        .usage = usage,
    };
    json_t *result = skd_skill_invoke(s, &ctx, input);
    skd_workspace_close(ws);
    if (!result || !json_is_boolean(json_object_get(result, "success"))) {
        skd_error("skill %s returned no result object", skd_skill_name(s));
        json_decref(result);
        return skd_result_error(SKD_EINTERNAL, "skill %s returned no result", skd_skill_name(s));
    }
    return result;
}

/* SHA-256 (hex) of input's canonical JSON; "" when it cannot be dumped. */
static void input_digest(const json_t *input, char digest[SKD_SHA256_HEX_LEN + 1])
{
    digest[0] = '\0';
    char *dump = json_dumps(input, JSON_COMPACT | JSON_SORT_KEYS);
    if (dump) {
        skd_sha256_hex(dump, strlen(dump), digest);
        free(dump);
    }
}

static void audit(skd_engine *e, const skd_call *c, const skd_skill *s, const json_t *input,
                  const json_t *result, const char *exec_id, int64_t started, const skd_usage *u)
{
    char digest[SKD_SHA256_HEX_LEN + 1];
    input_digest(input, digest);
    int ok = skd_result_success(result);
    /* networkEnabled runs: the destinations go into the row too. */
    const json_t *eg = json_is_object(result) ? json_object_get(result, "egress") : NULL;
    char *egress = json_is_array(eg) ? json_dumps(eg, JSON_COMPACT) : NULL;
    /* A failed call's message, cut at 300 bytes on a UTF-8 boundary. */
    char emsg[301] = "";
    const char *m = ok ? NULL
                       : json_string_value(json_object_get(
                             json_object_get((json_t *)result, "error"), "message"));
    if (m) {
        size_t n = strlen(m) > 300 ? 300 : strlen(m);
        while (n > 0 && n < strlen(m) && ((unsigned char)m[n] & 0xC0) == 0x80)
            n--;
        memcpy(emsg, m, n);
        emsg[n] = '\0';
    }
    skd_audit a = {
        .id = exec_id,
        .key_id = c->key_id,
        .skill = s ? skd_skill_name(s) : c->skill,
        .version = s ? skd_skill_version(s) : (c->version ? c->version : ""),
        .status = ok ? "success" : "error",
        .error_code = ok ? NULL : skd_result_code(result),
        .error_message = m ? emsg : NULL,
        .duration_ms = skd_mono_ms() - started,
        .created_ms = skd_wall_ms(),
        .input_digest = digest,
        .egress = egress,
        .sandbox_runs = u->sandbox_runs,
        .cpu_us = u->cpu_us,
        .mem_peak_bytes = u->mem_peak_bytes,
        .egress_bytes = u->egress_bytes,
        .workspace_bytes = u->workspace_bytes,
    };
    skd_err err = {0};
    if (skd_store_audit_add(e->store, &a, &err))
        skd_warn("audit row for %s not written: %s", exec_id, skd_err_msg(&err));
    free(egress);
}

/* A sandbox run is a row in the store's run table for its length (its
 * replica, its lease; src/store/runs.c): the per-key and cluster caps hold
 * over every replica, and a cancel through another replica reaches it. A
 * one-call engine (skilld exec: the operator's one command, in a process
 * of its own) writes no run row, so that its run costs the store nothing
 * but its audit row; its runner is stopped as soon as the run is over, so
 * the spawner tears down while that row is written. */
static json_t *run_recorded(skd_engine *e, const skd_call *c, skd_skill *s, const json_t *input,
                            const char *exec_id, skd_usage *usage)
{
    json_t *refused = skd__usage_budget_check(e, c->key_id);
    if (refused)
        return refused;
    if (e->one_call) {
        json_t *result = run_handler(e, c, s, input, exec_id, usage);
        pthread_mutex_lock(&e->runner_mu);
        if (e->runner)
            skd_runner_stop(e->runner);
        pthread_mutex_unlock(&e->runner_mu);
        return result;
    }
    skd_call cc = *c;
    skd_cancel *own = NULL;
    if (!cc.cancel && !(cc.cancel = own = skd_cancel_new()))
        return skd_result_error(SKD_ENOMEM, "out of memory");
    skd_run_req rq = {
        .id = exec_id,
        .key_id = c->key_id,
        .skill = skd_skill_name(s),
        .cancel = cc.cancel,
        .per_key = (int)skd_config_int(e->cfg, "SKILLS_SANDBOX_MAX_PER_KEY"),
        .total = (int)skd_config_int(e->cfg, "SKILLD_CLUSTER_MAX_RUNS"),
        .wait_ms = (int)skd_config_int(e->cfg, "SKILLD_RUN_QUEUE_MS"),
    };
    skd_err err = {0};
    json_t *result = NULL;
    if (skd_store_run_begin(e->store, &rq, &err) != 0) {
        result = skd_result_from_err(&err);
    } else {
        result = run_handler(e, &cc, s, input, exec_id, usage);
        const char *state = skd_result_success(result)     ? "done"
                            : skd_cancel_is_set(cc.cancel) ? "cancelled"
                                                           : "error";
        skd_store_run_end(e->store, exec_id, state);
    }
    skd_cancel_free(own);
    return result;
}

/* A call a transport tracks as a task of its own (A2A: c->task_id) is a
 * row of kind "task" for its length, whatever the skill's mode: a cancel
 * of that task through another replica reaches this one. 1 when recorded;
 * a store that refuses costs the task its cross-replica cancel, not the
 * call. */
static int task_begin(skd_engine *e, const skd_call *c)
{
    if (!c->task_id || !c->cancel) /* a task without a token could not be cancelled */
        return 0;
    skd_run_req rq = {
        .id = c->task_id,
        .key_id = c->key_id,
        .skill = c->skill,
        .cancel = c->cancel,
        .kind = "task",
    };
    skd_err err = {0};
    if (skd_store_run_begin(e->store, &rq, &err) == 0)
        return 1;
    skd_warn("task %s not in the run table: %s", c->task_id, skd_err_msg(&err));
    return 0;
}

int skd_engine_skill_is_quick(skd_engine *e, const char *skill, const char *key_id)
{
    if (!e->store || !skill)
        return 0;
    /* A property of the skill (skd_skill_def.quick), as the caller sees
     * it: a key's own skill of the same name is not the built-in. */
    skd_skill *s = skd_registry_lookup(e->reg, skill, key_id, NULL);
    int yes = s && skd_skill_quick(s) && skd_skill_mode(s) == SKD_MODE_DIRECT;
    skd_skill_unref(s);
    return yes;
}

json_t *skd_engine_execute(skd_engine *e, const skd_call *c, char exec_id[37])
{
    char id[SKD_UUID_LEN + 1];
    int64_t started = skd_mono_ms();
    json_t *empty = NULL;
    const json_t *input = c->input;
    skd_skill *s = NULL;
    if (skd_uuid7(id))
        return skd_result_error(SKD_EINTERNAL, "no randomness for an execution id");
    if (exec_id)
        memcpy(exec_id, id, sizeof(id));
    if (!e->store)
        return skd_result_error(SKD_EINTERNAL, "this engine was opened for sandbox runs only");
    if (!input)
        input = empty = json_object();
    if (!c->key_id || !*c->key_id) {
        json_decref(empty);
        return skd_result_error(SKD_EUNAUTH, "the call carries no API key id");
    }
    skd_usage usage = {0};
    json_t *result = prepare(e, c, input, &s);
    /* Its live sandbox is another replica's: that one runs it, meters it
     * and writes its audit row. */
    json_t *fwd = !result && s ? skd__engine_forward(e, c, s, input, exec_id) : NULL;
    if (fwd) {
        skd_skill_unref(s);
        json_decref(empty);
        return fwd;
    }
    int task = task_begin(e, c);
    if (!result && s && skd_skill_mode(s) == SKD_MODE_SANDBOX)
        result = run_recorded(e, c, s, input, id, &usage);
    else if (!result && s)
        result = run_handler(e, c, s, input, id, &usage);
    else if (!result) /* prepare could not even build its refusal */
        result = skd_result_error(SKD_ENOMEM, "out of memory");
    if (task)
        skd_store_run_end(e->store, c->task_id,
                          skd_cancel_is_set(c->cancel) ? "cancelled" : "done");
    int ok = skd_result_success(result);
    skd__exec_stats_add(e->stats, c->skill, ok, skd_mono_ms() - started);
    skd__exec_stats_add_usage(e->stats, c->key_id, c->skill, ok, &usage);
    if (result)
        audit(e, c, s, input, result, id, started, &usage);
    skd_debug("execution %s key=%s skill=%s success=%d", id, c->key_id, c->skill, ok);
    skd_skill_unref(s);
    json_decref(empty);
    return result;
}
