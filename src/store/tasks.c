/*
 * A2A tasks in the store (src/server/a2a.c decides what a task holds): the
 * task object as JSON text with its owner, context and state in columns so
 * that listing can filter without parsing. Every read names the key, so a
 * key never sees another key's task, not even whether it exists. Old tasks
 * are pruned by the A2A layer after its retention period.
 */
#include "skilld/json.h"
#include "skilld/util.h"
#include "store/store_internal.h"

#include <stdlib.h>
#include <string.h>

static skd__sql q_put =
    SKD__SQL("INSERT INTO a2a_tasks(id,key_id,context_id,state,task,created_ms,updated_ms) "
             "VALUES(?1,?2,?3,?4,?5,?6,?6) ON CONFLICT(id) DO UPDATE "
             "SET state=?4, task=?5, updated_ms=?6 WHERE a2a_tasks.key_id=?2");
static skd__sql q_get = SKD__SQL("SELECT task FROM a2a_tasks WHERE key_id=?1 AND id=?2");
#define TASK_FILTER                                                                                \
    " FROM a2a_tasks WHERE key_id=?1 AND (?2 IS NULL OR context_id=?2) AND (?3 IS NULL OR "        \
    "state=?3)"
#define TASK_FILTER_PG                                                                             \
    " FROM a2a_tasks WHERE key_id=$1 AND ($2::text IS NULL OR context_id=$2) AND "                 \
    "($3::text IS NULL OR state=$3)"
static skd__sql q_count =
    SKD__SQL2("SELECT count(*)" TASK_FILTER, "SELECT count(*)" TASK_FILTER_PG);
static skd__sql q_page = SKD__SQL2(
    "SELECT task" TASK_FILTER " ORDER BY updated_ms DESC, rowid DESC LIMIT ?4 OFFSET ?5",
    "SELECT task" TASK_FILTER_PG " ORDER BY updated_ms DESC, rowid DESC LIMIT $4 OFFSET $5");
static skd__sql q_prune = SKD__SQL("DELETE FROM a2a_tasks WHERE updated_ms < ?1");

int skd_store_task_put(skd_store *st, const char *id, const char *key_id, const char *context_id,
                       const char *state, const json_t *task, skd_err *err)
{
    skd__conn *c = NULL;
    skd__q q = {0};
    char *text = skd_json_dump(task);
    int rc;
    if (!text)
        return skd_err_set(err, SKD_ENOMEM, "out of memory");
    if ((rc = skd__conn_get(st, &c, err)) || (rc = skd__q_start(c, &q_put, &q, err)))
        goto out;
    skd__q_text(&q, 1, id);
    skd__q_text(&q, 2, key_id);
    skd__q_text(&q, 3, context_id);
    skd__q_text(&q, 4, state);
    skd__q_text(&q, 5, text);
    skd__q_int(&q, 6, skd_wall_ms());
    rc = skd__q_run(&q, NULL, err);
out:
    skd__q_end(&q);
    skd__conn_put(st, c);
    free(text);
    return rc;
}

static json_t *column_json(skd__q *q, int col)
{
    const char *text = skd__q_col(q, col);
    return text ? skd_json_parse(text, strlen(text), NULL) : NULL;
}

json_t *skd_store_task_get(skd_store *st, const char *key_id, const char *id, skd_err *err)
{
    skd__conn *c = NULL;
    skd__q q = {0};
    json_t *t = NULL;
    int rc;
    if ((rc = skd__conn_get(st, &c, err)) || (rc = skd__q_start(c, &q_get, &q, err)))
        goto out;
    skd__q_text(&q, 1, key_id);
    skd__q_text(&q, 2, id);
    rc = skd__q_step(&q, err);
    if (rc == 1)
        t = column_json(&q, 0);
    if (rc >= 0 && !t)
        skd_err_set(err, SKD_ENOENT, "no task %s", id);
out:
    skd__q_end(&q);
    skd__conn_put(st, c);
    return t;
}

static void bind_filter(skd__q *q, const char *key_id, const char *ctx, const char *state)
{
    skd__q_text(q, 1, key_id);
    skd__q_text(q, 2, ctx);
    skd__q_text(q, 3, state);
}

json_t *skd_store_task_list(skd_store *st, const char *key_id, const char *ctx, const char *state,
                            int offset, int limit, int64_t *total, skd_err *err)
{
    skd__conn *c = NULL;
    skd__q q = {0};
    json_t *arr = NULL;
    int rc;
    *total = 0;
    if ((rc = skd__list_start(st, &q_count, &c, &q, &arr, err)))
        goto out;
    bind_filter(&q, key_id, ctx, state);
    if ((rc = skd__q_step(&q, err)) == 1) {
        *total = skd__q_col_int(&q, 0);
        rc = 0;
    } else if (rc == 0) {
        rc = skd_err_set(err, SKD_ESTORE, "store: count tasks: no answer");
    }
    skd__q_end(&q);
    if (rc || (rc = skd__q_start(c, &q_page, &q, err)))
        goto out;
    bind_filter(&q, key_id, ctx, state);
    skd__q_int(&q, 4, limit);
    skd__q_int(&q, 5, offset);
    while ((rc = skd__q_step(&q, err)) == 1) {
        json_t *t = column_json(&q, 0);
        if (t)
            json_array_append_new(arr, t);
    }
out:
    return skd__list_end(st, c, &q, arr, rc);
}

int skd_store_task_prune(skd_store *st, int64_t before_ms, int64_t *removed, skd_err *err)
{
    skd__conn *c = NULL;
    skd__q q = {0};
    int rc;
    if ((rc = skd__conn_get(st, &c, err)) || (rc = skd__q_start(c, &q_prune, &q, err)))
        goto out;
    skd__q_int(&q, 1, before_ms);
    rc = skd__q_run(&q, removed, err);
out:
    skd__q_end(&q);
    skd__conn_put(st, c);
    return rc;
}
