/*
 * The engine: the one path every call takes, whatever transport it came
 * from (DESIGN.md, "The path of one call"): look the skill up as the caller
 * sees it, check scope and enabled state, validate the input against the
 * skill's schema, open the caller's workspace, run the handler, write the
 * audit row. Transports only translate to and from skd_call. Listing,
 * metric labels, keys and the audit of command-line runs go through here
 * too (include/skilld/tenancy.h), so scopes and tenancy are applied in one
 * place.
 */
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

struct skd_engine {
    json_t *synced; /* custom_sync.c: the stored skills this process last loaded */
    const skd_config *cfg;
    skd_store *store;
    skd_registry *reg;
    pthread_mutex_t runner_mu; /* guards the lazy start of runner */
    skd_runner *runner;        /* NULL until the first sandbox run */
    int one_call;              /* SKD_ENGINE_NO_SKILLS: no run touches the store */
};

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
    e->reg = skd_registry_new();
    if (!e->reg) {
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
    if ((rc = skd__builtins_register(e->reg, err)) != 0)
        goto out;
    if ((rc = skd__custom_load(e, err)) != 0) /* src/lib/custom.c */
        goto out;
    /* Skills registered through another replica (src/lib/custom_sync.c). */
    skd__custom_sync_init(e);
    skd_store_watch_skills(e->store, skd__custom_sync, e);
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
    skd_store_close(e->store); /* first: its replica thread uses the registry */
    skd_registry_free(e->reg);
    json_decref(e->synced);
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

json_t **skd__engine_synced(skd_engine *e)
{
    return &e->synced;
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
    pthread_mutex_unlock(&e->runner_mu);
    skd_runner_free(old);
}

skd_runner *skd_engine_runner(skd_engine *e, skd_err *err)
{
    pthread_mutex_lock(&e->runner_mu);
    if (!e->runner)
        skd_runner_new(e->cfg, NULL, &e->runner, err);
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

static json_t *run_handler(skd_engine *e, const skd_call *c, skd_skill *s, const json_t *input,
                           const char *exec_id)
{
    skd_err err = {0};
    skd_workspace *ws = NULL;
    if (skd_workspace_open(skd_config_str(e->cfg, "DATA_DIR"), c->key_id, &ws, &err))
        return skd_result_from_err(&err);
    skd_ctx ctx = {
        .key_id = c->key_id,
        .scopes = c->scopes,
        .engine = e,
        .ws = ws,
        .cancel = c->cancel,
        .progress = c->progress,
        .progress_arg = c->progress_arg,
        .execution_id = exec_id,
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
                  const json_t *result, const char *exec_id, int64_t started)
{
    char digest[SKD_SHA256_HEX_LEN + 1];
    input_digest(input, digest);
    int ok = skd_result_success(result);
    /* networkEnabled runs: the destinations go into the row too. */
    const json_t *eg = json_is_object(result) ? json_object_get(result, "egress") : NULL;
    char *egress = json_is_array(eg) ? json_dumps(eg, JSON_COMPACT) : NULL;
    skd_audit a = {
        .id = exec_id,
        .key_id = c->key_id,
        .skill = s ? skd_skill_name(s) : c->skill,
        .version = s ? skd_skill_version(s) : (c->version ? c->version : ""),
        .status = ok ? "success" : "error",
        .error_code = ok ? NULL : skd_result_code(result),
        .duration_ms = skd_mono_ms() - started,
        .created_ms = skd_wall_ms(),
        .input_digest = digest,
        .egress = egress,
    };
    skd_err err = {0};
    if (skd_store_audit_add(e->store, &a, &err))
        skd_warn("audit row for %s not written: %s", exec_id, skd_err_msg(&err));
    free(egress);
}

/* A sandbox run is a row in the store's run table for its length (its
 * replica, its lease; src/store/runs.c): the per-key and cluster caps hold
 * over every replica, and a cancel through another replica reaches it. */
static json_t *run_recorded(skd_engine *e, const skd_call *c, skd_skill *s, const json_t *input,
                            const char *exec_id)
{
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
        result = run_handler(e, &cc, s, input, exec_id);
        const char *state = skd_result_success(result)     ? "done"
                            : skd_cancel_is_set(cc.cancel) ? "cancelled"
                                                           : "error";
        skd_store_run_end(e->store, exec_id, state);
    }
    skd_cancel_free(own);
    return result;
}

int skd_engine_skill_is_quick(skd_engine *e, const char *skill, const char *key_id)
{
    /* file_list is not: a recursive listing may stat 10,000 entries */
    static const char *const quick[] = {"file_read"};
    if (!e->store || !skill)
        return 0;
    skd_skill *s = skd_registry_lookup(e->reg, skill, key_id, NULL);
    int yes = 0;
    /* the built-in itself: global, direct, no manifest (a custom skill of
     * the same name has one) */
    if (s && !skd_skill_owner(s) && !skd_skill_manifest(s) && skd_skill_mode(s) == SKD_MODE_DIRECT)
        for (size_t i = 0; i < sizeof(quick) / sizeof(quick[0]); i++)
            yes |= strcmp(skd_skill_name(s), quick[i]) == 0;
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
    json_t *result = prepare(e, c, input, &s);
    if (!result && s && skd_skill_mode(s) == SKD_MODE_SANDBOX)
        result = run_recorded(e, c, s, input, id);
    else if (!result && s)
        result = run_handler(e, c, s, input, id);
    else if (!result) /* prepare could not even build its refusal */
        result = skd_result_error(SKD_ENOMEM, "out of memory");
    if (result)
        audit(e, c, s, input, result, id, started);
    skd_debug("execution %s key=%s skill=%s success=%d", id, c->key_id, c->skill,
              skd_result_success(result));
    skd_skill_unref(s);
    json_decref(empty);
    return result;
}

/* ---- listing, metrics, keys, audit (include/skilld/tenancy.h) ---------- */

static int is_operator(const skd_actor *who)
{
    return !who->key_id;
}

static int has_scope(const skd_actor *who, unsigned scope)
{
    return is_operator(who) || (who->scopes & scope) == scope;
}

static int need_scope(const skd_actor *who, unsigned scope, skd_err *err)
{
    if (has_scope(who, scope))
        return 0;
    return skd_err_set(err, SKD_EFORBIDDEN, "this API key lacks the %s scope",
                       scope & SKD_SCOPE_ADMIN     ? "skills:admin"
                       : scope & SKD_SCOPE_EXECUTE ? "skills:execute"
                                                   : "skills:read");
}

static int need_store(skd_engine *e, skd_err *err)
{
    if (e->store)
        return 0;
    return skd_err_set(err, SKD_EINTERNAL, "this engine was opened for sandbox runs only");
}

skd_skill **skd_engine_visible_skills(skd_engine *e, const skd_actor *who, size_t *count)
{
    return skd_registry_list(e->reg, who->key_id, 1, 0, count);
}

skd_skill *skd_engine_find_skill(skd_engine *e, const skd_actor *who, const char *ref, skd_err *err)
{
    return skd_registry_lookup(e->reg, ref, who->key_id, err);
}

json_t *skd_engine_list_skills(skd_engine *e, const skd_actor *who, skd_err *err)
{
    if (need_scope(who, SKD_SCOPE_READ, err))
        return NULL;
    size_t n = 0;
    skd_skill **list = skd_engine_visible_skills(e, who, &n);
    json_t *arr = json_array();
    for (size_t i = 0; arr && i < n; i++)
        json_array_append_new(arr, skd_skill_to_json(list[i]));
    skd_skill_list_free(list, n);
    if (!arr)
        skd_err_set(err, SKD_ENOMEM, "out of memory");
    return arr;
}

json_t *skd_engine_get_skill(skd_engine *e, const skd_actor *who, const char *ref, skd_err *err)
{
    if (need_scope(who, SKD_SCOPE_READ, err))
        return NULL;
    skd_skill *s = skd_engine_find_skill(e, who, ref, err);
    if (!s)
        return NULL;
    json_t *j = skd_skill_to_json(s);
    skd_skill_unref(s);
    if (!j)
        skd_err_set(err, SKD_ENOMEM, "out of memory");
    return j;
}

json_t *skd_engine_list_executions(skd_engine *e, const skd_actor *who, const char *of_key,
                                   int limit, skd_err *err)
{
    if (need_scope(who, SKD_SCOPE_READ, err) || need_store(e, err))
        return NULL;
    if (limit < 1 || limit > 500) {
        skd_err_set(err, SKD_EINVAL, "limit must be an integer from 1 to 500");
        return NULL;
    }
    const char *key = who->key_id;
    if (of_key && (!key || strcmp(of_key, key) != 0)) {
        if (need_scope(who, SKD_SCOPE_ADMIN, err))
            return NULL; /* another key's rows are the admin's to read */
        key = of_key;
    }
    if (!key) {
        skd_err_set(err, SKD_EINVAL, "name the key whose executions to list");
        return NULL;
    }
    return skd_store_audit_list(e->store, key, limit, err);
}

json_t *skd_engine_get_execution(skd_engine *e, const skd_actor *who, const char *id, skd_err *err)
{
    if (need_scope(who, SKD_SCOPE_READ, err) || need_store(e, err))
        return NULL;
    if (!who->key_id) {
        skd_err_set(err, SKD_EINVAL, "name the key whose execution to read");
        return NULL;
    }
    /* The store looks the row up for this key only: another key's id is
     * indistinguishable from one that does not exist. */
    return skd_store_audit_get(e->store, who->key_id, id, err);
}

int skd_engine_metric_label_visible(skd_engine *e, const skd_actor *who, const char *skill)
{
    if (has_scope(who, SKD_SCOPE_ADMIN))
        return 1;
    if (!skill || !skd_skill_name_valid(skill))
        return 0;
    skd_skill *s = skd_registry_lookup(e->reg, skill, who->key_id, NULL);
    int ok = s != NULL;
    skd_skill_unref(s);
    return ok;
}

json_t *skd_engine_list_runs(skd_engine *e, const skd_actor *who, const char *state, skd_err *err)
{
    if (need_scope(who, SKD_SCOPE_READ, err) || need_store(e, err))
        return NULL;
    return skd_store_run_list(e->store, has_scope(who, SKD_SCOPE_ADMIN) ? NULL : who->key_id, state,
                              500, err);
}

int skd_engine_cancel_run(skd_engine *e, const skd_actor *who, const char *id, skd_err *err)
{
    int rc = need_scope(who, SKD_SCOPE_EXECUTE, err);
    if (rc || (rc = need_store(e, err)))
        return rc;
    return skd_store_run_cancel(e->store, who->key_id, id, err);
}

int skd_engine_health(skd_engine *e, const char **backend, skd_err *err)
{
    int rc = need_store(e, err);
    *backend = skd_store_backend(e->store);
    if (rc)
        return rc;
    if (skd_store_draining(e->store))
        return skd_err_set(err, SKD_EBUSY, "this replica is stopping; calls in flight finish");
    return skd_store_ping(e->store, err);
}

int skd_engine_authenticate(skd_engine *e, const char *secret, skd_key_info *info, skd_err *err)
{
    int rc = need_store(e, err);
    if (rc)
        return rc;
    if (strlen(secret) > 256)
        return skd_err_set(err, SKD_EUNAUTH, "the API key is not valid");
    return skd_store_key_auth(e->store, secret, info, err);
}

int skd_engine_key_get(skd_engine *e, const char *id, skd_key_info *info, skd_err *err)
{
    int rc = need_store(e, err);
    if (rc)
        return rc;
    return skd_store_key_get(e->store, id, info, err);
}

json_t *skd_engine_list_keys(skd_engine *e, const skd_actor *who, skd_err *err)
{
    if (need_scope(who, SKD_SCOPE_ADMIN, err) || need_store(e, err))
        return NULL;
    return skd_store_key_list(e->store, err);
}

int skd_engine_create_key(skd_engine *e, const skd_actor *who, const char *name, unsigned scopes,
                          char **secret, skd_key_info *info, skd_err *err)
{
    int rc = need_scope(who, SKD_SCOPE_ADMIN, err);
    if (rc || (rc = need_store(e, err)) != 0)
        return rc;
    return skd_store_key_create(e->store, name, scopes, secret, info, err);
}

int skd_engine_revoke_key(skd_engine *e, const skd_actor *who, const char *id, skd_err *err)
{
    int rc = need_scope(who, SKD_SCOPE_ADMIN, err);
    if (rc || (rc = need_store(e, err)) != 0)
        return rc;
    return skd_store_key_revoke(e->store, id, err);
}

int skd_engine_audit_run(skd_engine *e, const char *key_id, const json_t *input, int success,
                         const char *error_code, int64_t duration_ms, char exec_id[37],
                         skd_err *err)
{
    char id[SKD_UUID_LEN + 1], digest[SKD_SHA256_HEX_LEN + 1];
    int rc = need_store(e, err);
    if (rc)
        return rc;
    if (skd_uuid7(id))
        return skd_err_set(err, SKD_EINTERNAL, "no randomness for an execution id");
    if (exec_id)
        memcpy(exec_id, id, sizeof(id));
    input_digest(input, digest);
    skd_audit a = {
        .id = id,
        .key_id = key_id,
        .skill = "exec",
        .version = "cli",
        .status = success ? "success" : "error",
        .error_code = success ? NULL : error_code,
        .duration_ms = duration_ms,
        .created_ms = skd_wall_ms(),
        .input_digest = digest,
    };
    return skd_store_audit_add(e->store, &a, err);
}
