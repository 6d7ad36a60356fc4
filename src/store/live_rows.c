/*
 * Live sandboxes as rows of the run table (kind 'live'; DESIGN.md, "Live
 * sandboxes"). The replica that holds a sandbox records it with
 * skd_store_run_begin (kind "live": the per-key cap counts the key's live
 * rows over every replica) and renews its lease with its runs'; a replica
 * that dies leaves its rows to be marked "lost" when their lease runs out,
 * as its runs are; a paused one's row stays paused, unheld, and any
 * replica may claim it (skd_store_live_claim, runs.c), since its files are
 * under the shared DATA_DIR. The row's detail (JSON text) holds what
 * another replica needs: the holder's internal URL, to forward the
 * sandbox's calls there, and the sandbox object, to list it and to take
 * a paused one over.
 */
#include "store/store_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static skd__sql q_set = SKD__SQL("UPDATE runs SET state=?2, detail=?3 WHERE id=?1 AND kind='live' "
                                 "AND state IN ('running','paused') AND replica=?4");
static skd__sql q_get =
    SKD__SQL2("SELECT replica, state, detail, lease_until_ms > " NOW_SQLITE
              " FROM runs WHERE id=?1 AND key_id=?2 AND kind='live'",
              "SELECT replica, state, detail, CASE WHEN lease_until_ms > " NOW_PG
              " THEN 1 ELSE 0 END FROM runs WHERE id=$1 AND key_id=$2 AND kind='live'");
static skd__sql q_list = SKD__SQL2("SELECT id, replica, detail, lease_until_ms > " NOW_SQLITE
                                   " FROM runs WHERE kind='live' AND key_id=?1 "
                                   "AND ((state='running' AND lease_until_ms > " NOW_SQLITE
                                   ") OR state='paused') ORDER BY started_ms, id",
                                   "SELECT id, replica, detail, CASE WHEN lease_until_ms > " NOW_PG
                                   " THEN 1 ELSE 0 END FROM runs WHERE kind='live' AND key_id=$1 "
                                   "AND ((state='running' AND lease_until_ms > " NOW_PG
                                   ") OR state='paused') ORDER BY started_ms, id");
/* The key's paused sandboxes that this replica does not hold now. */
static skd__sql q_paused = SKD__SQL2("SELECT detail FROM runs WHERE kind='live' AND "
                                     "state='paused' AND key_id=?1 AND NOT (replica=?2 AND "
                                     "lease_until_ms > " NOW_SQLITE ")",
                                     "SELECT detail FROM runs WHERE kind='live' AND "
                                     "state='paused' AND key_id=$1 AND NOT (replica=$2 AND "
                                     "lease_until_ms > " NOW_PG ")");

/* Revoked keys of the sandboxes this replica holds: the rows q_beat
 * renews (src/store/runs.c), whose key's row says revoked. */
static skd__sql q_revoked =
    SKD__SQL2("SELECT DISTINCT r.key_id FROM runs r JOIN api_keys k ON k.id = r.key_id WHERE "
              "r.kind='live' AND r.replica=?1 AND k.revoked<>0 AND (r.state='running' OR "
              "(r.state='paused' AND r.lease_until_ms > " NOW_SQLITE ")) ORDER BY r.key_id",
              "SELECT DISTINCT r.key_id FROM runs r JOIN api_keys k ON k.id = r.key_id WHERE "
              "r.kind='live' AND r.replica=$1 AND k.revoked<>0 AND (r.state='running' OR "
              "(r.state='paused' AND r.lease_until_ms > " NOW_PG ")) ORDER BY r.key_id");
/* Revoked keys of paused sandboxes that no replica holds (their lease is
 * out: released, or the holder died), over every replica. */
static skd__sql q_revoked_unheld =
    SKD__SQL2("SELECT DISTINCT r.key_id FROM runs r JOIN api_keys k ON k.id = r.key_id WHERE "
              "r.kind='live' AND r.state='paused' AND k.revoked<>0 AND "
              "r.lease_until_ms <= " NOW_SQLITE " ORDER BY r.key_id",
              "SELECT DISTINCT r.key_id FROM runs r JOIN api_keys k ON k.id = r.key_id WHERE "
              "r.kind='live' AND r.state='paused' AND k.revoked<>0 AND "
              "r.lease_until_ms <= " NOW_PG " ORDER BY r.key_id");
static skd__sql q_state = SKD__SQL("SELECT state FROM runs WHERE id=?1 AND kind='live'");

char *skd__live_detail(const char *url, const json_t *sandbox)
{
    json_t *d = json_pack("{s:s, s:O}", "url", url ? url : "", "sandbox", sandbox);
    char *text = d ? json_dumps(d, JSON_COMPACT) : NULL;
    json_decref(d);
    return text;
}

int skd_store_live_set(skd_store *st, const char *url, const json_t *sandbox, skd_err *err)
{
    const char *id = json_string_value(json_object_get(sandbox, "id"));
    const char *state = json_string_value(json_object_get(sandbox, "state"));
    if (!id || !state)
        return skd_err_set(err, SKD_EINVAL, "a live sandbox object without id or state");
    char *text = skd__live_detail(url, sandbox);
    if (!text)
        return skd_err_set(err, SKD_ENOMEM, "out of memory");
    skd__conn *c = NULL;
    skd__q q = {0};
    int rc;
    if ((rc = skd__conn_get(st, &c, err)) || (rc = skd__q_start(c, &q_set, &q, err)))
        goto out;
    skd__q_text(&q, 1, id);
    skd__q_text(&q, 2, strcmp(state, "paused") == 0 ? "paused" : "running");
    skd__q_text(&q, 3, text);
    skd__q_text(&q, 4, skd_store_replica_id(st));
    rc = skd__q_run(&q, NULL, err);
out:
    skd__q_end(&q);
    skd__conn_put(st, c);
    free(text);
    return rc;
}

/* detail's text as JSON, or NULL (none yet, or not JSON). */
static json_t *detail_of(skd__q *q, int col)
{
    const char *t = skd__q_col_null(q, col) ? NULL : skd__q_col(q, col);
    return t ? json_loads(t, 0, NULL) : NULL;
}

int skd_store_live_get(skd_store *st, const char *key_id, const char *id, skd_live_row *row,
                       skd_err *err)
{
    memset(row, 0, sizeof(*row));
    skd__conn *c = NULL;
    skd__q q = {0};
    int rc;
    if ((rc = skd__conn_get(st, &c, err)) || (rc = skd__q_start(c, &q_get, &q, err)))
        goto out;
    skd__q_text(&q, 1, id);
    skd__q_text(&q, 2, key_id);
    rc = skd__q_step(&q, err);
    if (rc == 1) {
        const char *rep = skd__q_col(&q, 0), *state = skd__q_col(&q, 1);
        snprintf(row->replica, sizeof(row->replica), "%s", rep ? rep : "");
        snprintf(row->state, sizeof(row->state), "%s", state ? state : "");
        row->detail = detail_of(&q, 2);
        row->leased = skd__q_col_int(&q, 3) != 0;
        rc = 0;
    } else if (rc == 0) {
        rc = skd_err_set(err, SKD_ENOENT, "no such sandbox");
    }
out:
    skd__q_end(&q);
    skd__conn_put(st, c);
    return rc;
}

json_t *skd_store_live_list(skd_store *st, const char *key_id, skd_err *err)
{
    skd__conn *c = NULL;
    skd__q q = {0};
    json_t *arr = NULL;
    int rc;
    if ((rc = skd__list_start(st, &q_list, &c, &q, &arr, err)))
        goto out;
    skd__q_text(&q, 1, key_id);
    while ((rc = skd__q_step(&q, err)) == 1) {
        json_t *o = json_pack("{s:s, s:s, s:o*, s:b}", "id", skd__q_col(&q, 0), "replica",
                              skd__q_col(&q, 1), "detail", detail_of(&q, 2), "held",
                              skd__q_col_int(&q, 3) != 0);
        if (o)
            json_array_append_new(arr, o);
    }
out:
    return skd__list_end(st, c, &q, arr, rc);
}

int skd_store_live_paused_elsewhere(skd_store *st, const char *key_id, int *n, int64_t *bytes,
                                    skd_err *err)
{
    *n = 0;
    *bytes = 0;
    skd__conn *c = NULL;
    skd__q q = {0};
    int rc;
    if ((rc = skd__conn_get(st, &c, err)) || (rc = skd__q_start(c, &q_paused, &q, err)))
        goto out;
    skd__q_text(&q, 1, key_id);
    skd__q_text(&q, 2, skd_store_replica_id(st));
    while ((rc = skd__q_step(&q, err)) == 1) {
        json_t *d = detail_of(&q, 0);
        json_int_t b =
            json_integer_value(json_object_get(json_object_get(d, "sandbox"), "savedBytes"));
        (*n)++;
        *bytes += b > 0 ? (int64_t)b : 0;
        json_decref(d);
    }
out:
    skd__q_end(&q);
    skd__conn_put(st, c);
    return rc < 0 ? rc : 0;
}

/* The first column of q's rows, as strings (here: this replica's id as ?1). */
static json_t *key_list(skd_store *st, skd__sql *sql, int here, skd_err *err)
{
    skd__conn *c = NULL;
    skd__q q = {0};
    json_t *arr = NULL;
    int rc;
    if ((rc = skd__list_start(st, sql, &c, &q, &arr, err)))
        goto out;
    if (here)
        skd__q_text(&q, 1, skd_store_replica_id(st));
    while ((rc = skd__q_step(&q, err)) == 1) {
        const char *k = skd__q_col(&q, 0);
        if (k)
            json_array_append_new(arr, json_string(k));
    }
out:
    return skd__list_end(st, c, &q, arr, rc);
}

json_t *skd_store_live_revoked_here(skd_store *st, skd_err *err)
{
    return key_list(st, &q_revoked, 1, err);
}

json_t *skd_store_live_revoked_unheld(skd_store *st, skd_err *err)
{
    return key_list(st, &q_revoked_unheld, 0, err);
}

int skd_store_live_state(skd_store *st, const char *id, char *state, size_t cap, skd_err *err)
{
    skd__conn *c = NULL;
    skd__q q = {0};
    int rc;
    if ((rc = skd__conn_get(st, &c, err)) || (rc = skd__q_start(c, &q_state, &q, err)))
        goto out;
    skd__q_text(&q, 1, id);
    rc = skd__q_step(&q, err);
    if (rc == 1) {
        const char *s = skd__q_col(&q, 0);
        snprintf(state, cap, "%s", s ? s : "");
        rc = 0;
    } else if (rc == 0) {
        rc = skd_err_set(err, SKD_ENOENT, "no row for live sandbox %s", id);
    }
out:
    skd__q_end(&q);
    skd__conn_put(st, c);
    return rc;
}
