/*
 * Usage read back from the audit (DESIGN.md, "Metering"): every audit row
 * carries what its call used (sandbox runs, their CPU time and memory peak,
 * egress and workspace bytes), so sums over the rows are the same on every
 * replica of one store. Readers flush this process's queued rows first, as
 * the other audit readers do.
 *
 * Trust: key ids and times are bound as parameters, never spliced.
 */
#include "store/store_internal.h"

#include <string.h>

/* ?3 '' is every key. The key's name is the api_keys row's ('' for a key
 * that is gone, or an identity that is not an API key). */
static skd__sql q_usage =
    SKD__SQL("SELECT e.key_id, COALESCE(k.name, ''), COUNT(*), COALESCE(SUM(e.sandbox_runs), 0),"
             " COALESCE(SUM(e.cpu_us), 0), COALESCE(MAX(e.mem_peak_bytes), 0),"
             " COALESCE(SUM(e.egress_bytes), 0), COALESCE(SUM(e.workspace_bytes), 0)"
             " FROM executions e LEFT JOIN api_keys k ON k.id = e.key_id"
             " WHERE e.created_ms >= ?1 AND e.created_ms < ?2 AND (?3 = '' OR e.key_id = ?3)"
             " GROUP BY e.key_id, k.name ORDER BY e.key_id");
static skd__sql q_series =
    SKD__SQL("SELECT e.key_id, (e.created_ms - ?1) / ?4, COUNT(*), COALESCE(SUM(e.cpu_us), 0)"
             " FROM executions e"
             " WHERE e.created_ms >= ?1 AND e.created_ms < ?2 AND (?3 = '' OR e.key_id = ?3)"
             " GROUP BY e.key_id, (e.created_ms - ?1) / ?4 ORDER BY 2, e.key_id");
static skd__sql q_cpu = SKD__SQL("SELECT COALESCE(SUM(cpu_us), 0) FROM executions"
                                 " WHERE key_id = ?1 AND created_ms >= ?2");

static const char *col(skd__q *q, int i)
{
    const char *s = skd__q_col(q, i);
    return s ? s : "";
}

static json_t *usage_row(skd__q *q)
{
    int64_t cpu_us = skd__q_col_int(q, 4);
    return json_pack("{s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "keyId", col(q, 0), "keyName",
                     col(q, 1), "executions", (json_int_t)skd__q_col_int(q, 2), "sandboxRuns",
                     (json_int_t)skd__q_col_int(q, 3), "sandboxCpuMs", (json_int_t)(cpu_us / 1000),
                     "sandboxCpuUs", (json_int_t)cpu_us, "sandboxMemoryPeakBytes",
                     (json_int_t)skd__q_col_int(q, 5), "egressBytes",
                     (json_int_t)skd__q_col_int(q, 6), "workspaceBytes",
                     (json_int_t)skd__q_col_int(q, 7));
}

json_t *skd_store_usage(skd_store *st, const char *key_id, int64_t since_ms, int64_t until_ms,
                        skd_err *err)
{
    skd__conn *c = NULL;
    skd__q q = {0};
    json_t *arr = NULL;
    int rc;
    if ((rc = skd_store_audit_flush(st, err)) ||
        (rc = skd__list_start(st, &q_usage, &c, &q, &arr, err)))
        goto out;
    skd__q_int(&q, 1, since_ms);
    skd__q_int(&q, 2, until_ms);
    skd__q_text(&q, 3, key_id ? key_id : "");
    while ((rc = skd__q_step(&q, err)) == 1) {
        json_t *row = usage_row(&q);
        if (!row || json_array_append_new(arr, row)) {
            rc = skd_err_set(err, SKD_ENOMEM, "out of memory");
            break;
        }
    }
out:
    return skd__list_end(st, c, &q, arr, rc);
}

json_t *skd_store_usage_series(skd_store *st, const char *key_id, int64_t since_ms,
                               int64_t until_ms, int64_t bucket_ms, skd_err *err)
{
    skd__conn *c = NULL;
    skd__q q = {0};
    json_t *arr = NULL;
    int rc;
    if (bucket_ms < 1)
        bucket_ms = 1;
    if ((rc = skd_store_audit_flush(st, err)) ||
        (rc = skd__list_start(st, &q_series, &c, &q, &arr, err)))
        goto out;
    skd__q_int(&q, 1, since_ms);
    skd__q_int(&q, 2, until_ms);
    skd__q_text(&q, 3, key_id ? key_id : "");
    skd__q_int(&q, 4, bucket_ms);
    while ((rc = skd__q_step(&q, err)) == 1) {
        json_t *row = json_pack("{s:s, s:I, s:I, s:I}", "keyId", col(&q, 0), "t",
                                (json_int_t)(since_ms + skd__q_col_int(&q, 1) * bucket_ms),
                                "executions", (json_int_t)skd__q_col_int(&q, 2), "sandboxCpuMs",
                                (json_int_t)(skd__q_col_int(&q, 3) / 1000));
        if (!row || json_array_append_new(arr, row)) {
            rc = skd_err_set(err, SKD_ENOMEM, "out of memory");
            break;
        }
    }
out:
    return skd__list_end(st, c, &q, arr, rc);
}

int skd_store_usage_cpu(skd_store *st, const char *key_id, int64_t since_ms, int64_t *cpu_us,
                        skd_err *err)
{
    skd__conn *c = NULL;
    skd__q q = {0};
    int rc;
    *cpu_us = 0;
    if ((rc = skd_store_audit_flush(st, err)) || (rc = skd__conn_get(st, &c, err)) ||
        (rc = skd__q_start(c, &q_cpu, &q, err)))
        goto out;
    skd__q_text(&q, 1, key_id);
    skd__q_int(&q, 2, since_ms);
    rc = skd__q_step(&q, err);
    if (rc == 1) {
        *cpu_us = skd__q_col_int(&q, 0);
        rc = 0;
    } else if (rc == 0) {
        rc = skd_err_set(err, SKD_ESTORE, "store: the usage sum returned no row");
    }
out:
    skd__q_end(&q);
    skd__conn_put(st, c);
    return rc;
}
