/*
 * Metering seen from the engine (DESIGN.md, "Metering"): the per-key CPU
 * budget checked before a sandboxed call, and the usage an actor may read.
 * What a call used is gathered by its handlers into the skd_usage the
 * engine passes in skd_ctx (the run's cgroup counters, the proxy's bytes,
 * the bytes written into the workspace) and written with its audit row, so
 * the sums below hold over every replica of one store.
 */
#include "engine/engine_int.h"
#include "skilld/log.h"
#include "skilld/tenancy.h"
#include "skilld/util.h"

#include <stdlib.h>
#include <string.h>

#define DAY_MS (24LL * 3600 * 1000)

json_t *skd__usage_budget_check(skd_engine *e, const char *key_id)
{
    int64_t budget_s = skd_config_int(e->cfg, "SKILLS_KEY_CPU_SECONDS_PER_DAY");
    if (budget_s <= 0 || !e->store)
        return NULL;
    /* The UTC day: what this key's calls used since 00:00 UTC. */
    int64_t now = skd_wall_ms();
    int64_t day = now - now % DAY_MS;
    int64_t used_us = 0;
    skd_err err = {0};
    if (skd_store_usage_cpu(e->store, key_id, day, &used_us, &err) != 0)
        return skd_result_error(err.code ? err.code : SKD_ESTORE,
                                "the CPU budget of this key cannot be checked: %s",
                                skd_err_msg(&err));
    if (used_us < budget_s * 1000000)
        return NULL;
    return skd_result_error(SKD_EQUOTA,
                            "this key used %.1f s of sandbox CPU today (UTC), its budget is "
                            "SKILLS_KEY_CPU_SECONDS_PER_DAY=%lld; sandboxed calls are refused "
                            "until 00:00 UTC",
                            (double)used_us / 1e6, (long long)budget_s);
}

int skd_engine_key_label_visible(const skd_actor *who, const char *key)
{
    if (!who->key_id || (who->scopes & SKD_SCOPE_ADMIN))
        return 1;
    return key && strcmp(key, who->key_id) == 0;
}

json_t *skd_engine_usage(skd_engine *e, const skd_actor *who, const char *of_key, int64_t since_ms,
                         int64_t until_ms, int64_t bucket_ms, skd_err *err)
{
    int admin = !who->key_id || (who->scopes & SKD_SCOPE_ADMIN);
    if (who->key_id && !(who->scopes & SKD_SCOPE_READ)) {
        skd_err_set(err, SKD_EFORBIDDEN, "this API key lacks the skills:read scope");
        return NULL;
    }
    if (!e->store) {
        skd_err_set(err, SKD_EINTERNAL, "this engine was opened for sandbox runs only");
        return NULL;
    }
    if (until_ms <= since_ms) {
        skd_err_set(err, SKD_EINVAL, "until must be later than since");
        return NULL;
    }
    const char *key = of_key;
    if (!admin) {
        if (of_key && strcmp(of_key, who->key_id) != 0) {
            skd_err_set(err, SKD_EFORBIDDEN, "another key's usage is for skills:admin to read");
            return NULL;
        }
        key = who->key_id; /* a tenant sees itself only */
    }
    json_t *rows = skd_store_usage(e->store, key, since_ms, until_ms, err);
    if (!rows)
        return NULL;
    json_t *out = json_pack("{s:I, s:I, s:o}", "since", (json_int_t)since_ms, "until",
                            (json_int_t)until_ms, "usage", rows);
    if (out && bucket_ms > 0) {
        json_t *series = skd_store_usage_series(e->store, key, since_ms, until_ms, bucket_ms, err);
        if (!series) {
            json_decref(out);
            return NULL;
        }
        json_object_set_new(out, "bucketMs", json_integer(bucket_ms));
        json_object_set_new(out, "series", series);
    }
    if (!out)
        skd_err_set(err, SKD_ENOMEM, "out of memory");
    return out;
}

/* skd_live_egress_fn: a live sandbox ended with egress records no call took
 * (idle, lifetime, revocation, server stop, or a delete through the C API):
 * they become an audit row of their own, skill "sandbox_end", for the
 * sandbox's key, so its bytes are metered and its substitutions recorded as
 * an exec's would be. */
static void live_egress(void *arg, const char *key_id, const char *sandbox_id, const json_t *egress)
{
    skd_engine *e = arg;
    char id[37], digest[SKD_SHA256_HEX_LEN + 1] = "";
    json_t *input = json_pack("{s:s}", "sandboxId", sandbox_id);
    char *in = input ? json_dumps(input, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    char *text = json_dumps(egress, JSON_COMPACT);
    json_decref(input);
    if (in)
        skd_sha256_hex(in, strlen(in), digest);
    skd_usage u = {.egress_bytes = skd_sandbox_egress_bytes(egress)};
    skd_audit a = {
        .id = id,
        .key_id = key_id,
        .skill = "sandbox_end",
        .version = "1.0.0",
        .status = "success",
        .created_ms = skd_wall_ms(),
        .input_digest = digest,
        .egress = text,
        .egress_bytes = u.egress_bytes,
    };
    skd_err err = {0};
    if (!text || skd_uuid7(id))
        skd_warn("live sandbox %s: its egress record is lost (out of memory or randomness)",
                 sandbox_id);
    else if (skd_store_audit_add(e->store, &a, &err))
        skd_warn("live sandbox %s: egress row not written: %s", sandbox_id, skd_err_msg(&err));
    skd__exec_stats_add_usage(e->stats, key_id, "sandbox_end", 1, &u);
    free(in);
    free(text);
}

void skd__engine_usage_attach(skd_engine *e, skd_runner *r)
{
    if (e->store && r)
        skd_runner_set_live_egress(r, live_egress, e);
}
