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

int skd_store_task_put(skd_store *st, const char *id, const char *key_id, const char *context_id,
                       const char *state, const json_t *task, skd_err *err)
{
    sqlite3_stmt *q = NULL;
    char *text = skd_json_dump(task);
    int rc = 0;
    int64_t now = skd_wall_ms();
    if (!text)
        return skd_err_set(err, SKD_ENOMEM, "out of memory");
    if (sqlite3_prepare_v2(skd__store_db(st),
                           "INSERT INTO a2a_tasks(id,key_id,context_id,state,task,created_ms,"
                           "updated_ms) VALUES(?1,?2,?3,?4,?5,?6,?6) ON CONFLICT(id) DO UPDATE "
                           "SET state=?4, task=?5, updated_ms=?6 WHERE key_id=?2",
                           -1, &q, NULL) != SQLITE_OK) {
        free(text);
        return skd__store_fail(st, err, "save task");
    }
    sqlite3_bind_text(q, 1, id, -1, SQLITE_STATIC);
    sqlite3_bind_text(q, 2, key_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(q, 3, context_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(q, 4, state, -1, SQLITE_STATIC);
    sqlite3_bind_text(q, 5, text, -1, SQLITE_STATIC);
    sqlite3_bind_int64(q, 6, now);
    if (sqlite3_step(q) != SQLITE_DONE)
        rc = skd__store_fail(st, err, "save task");
    sqlite3_finalize(q);
    free(text);
    return rc;
}

static json_t *column_json(sqlite3_stmt *q, int col)
{
    const char *text = (const char *)sqlite3_column_text(q, col);
    return text ? skd_json_parse(text, strlen(text), NULL) : NULL;
}

json_t *skd_store_task_get(skd_store *st, const char *key_id, const char *id, skd_err *err)
{
    sqlite3_stmt *q = NULL;
    json_t *t = NULL;
    if (sqlite3_prepare_v2(skd__store_db(st), "SELECT task FROM a2a_tasks WHERE key_id=? AND id=?",
                           -1, &q, NULL) != SQLITE_OK) {
        skd__store_fail(st, err, "read task");
        return NULL;
    }
    sqlite3_bind_text(q, 1, key_id, -1, SQLITE_STATIC);
    sqlite3_bind_text(q, 2, id, -1, SQLITE_STATIC);
    if (sqlite3_step(q) == SQLITE_ROW)
        t = column_json(q, 0);
    if (!t)
        skd_err_set(err, SKD_ENOENT, "no task %s", id);
    sqlite3_finalize(q);
    return t;
}

#define TASK_FILTER                                                                                \
    " FROM a2a_tasks WHERE key_id=?1 AND (?2 IS NULL OR context_id=?2) AND (?3 IS NULL OR "        \
    "state=?3)"

static void bind_filter(sqlite3_stmt *q, const char *key_id, const char *ctx, const char *state)
{
    sqlite3_bind_text(q, 1, key_id, -1, SQLITE_STATIC);
    if (ctx)
        sqlite3_bind_text(q, 2, ctx, -1, SQLITE_STATIC);
    if (state)
        sqlite3_bind_text(q, 3, state, -1, SQLITE_STATIC);
}

json_t *skd_store_task_list(skd_store *st, const char *key_id, const char *ctx, const char *state,
                            int offset, int limit, int64_t *total, skd_err *err)
{
    sqlite3_stmt *q = NULL;
    json_t *arr = json_array();
    *total = 0;
    if (!arr || sqlite3_prepare_v2(skd__store_db(st), "SELECT count(*)" TASK_FILTER, -1, &q,
                                   NULL) != SQLITE_OK)
        goto fail;
    bind_filter(q, key_id, ctx, state);
    if (sqlite3_step(q) == SQLITE_ROW)
        *total = sqlite3_column_int64(q, 0);
    sqlite3_finalize(q);
    if (sqlite3_prepare_v2(skd__store_db(st),
                           "SELECT task" TASK_FILTER
                           " ORDER BY updated_ms DESC, rowid DESC LIMIT ?4 OFFSET ?5",
                           -1, &q, NULL) != SQLITE_OK)
        goto fail;
    bind_filter(q, key_id, ctx, state);
    sqlite3_bind_int(q, 4, limit);
    sqlite3_bind_int(q, 5, offset);
    while (sqlite3_step(q) == SQLITE_ROW) {
        json_t *t = column_json(q, 0);
        if (t)
            json_array_append_new(arr, t);
    }
    sqlite3_finalize(q);
    return arr;
fail:
    skd__store_fail(st, err, "list tasks");
    json_decref(arr);
    return NULL;
}

int skd_store_task_prune(skd_store *st, int64_t before_ms, int64_t *removed, skd_err *err)
{
    sqlite3_stmt *q = NULL;
    int rc = 0;
    if (sqlite3_prepare_v2(skd__store_db(st), "DELETE FROM a2a_tasks WHERE updated_ms < ?", -1, &q,
                           NULL) != SQLITE_OK)
        return skd__store_fail(st, err, "prune tasks");
    sqlite3_bind_int64(q, 1, before_ms);
    rc = skd__store_step_write(st, q, "prune tasks", removed, err);
    sqlite3_finalize(q);
    return rc;
}
