/*
 * MCP sessions in the store (see include/skilld/store.h): a session begun
 * on one replica is continued by any other, which rebuilds its local
 * session object from this row (src/server/mcp.c). Only the protocol state
 * is kept: key, scopes, negotiated version, initialized, log level. Streams
 * and calls in flight stay with the replica that holds them.
 */
#include "skilld/util.h"
#include "store/store_internal.h"

#include <string.h>

static skd__sql q_put =
    SKD__SQL("INSERT INTO mcp_sessions(id,key_id,scopes,version,initialized,log_level,updated_ms) "
             "VALUES(?1,?2,?3,?4,?5,?6,?7) ON CONFLICT(id) DO UPDATE SET version=excluded.version, "
             "initialized=excluded.initialized, log_level=excluded.log_level, "
             "updated_ms=excluded.updated_ms WHERE mcp_sessions.key_id=excluded.key_id");
static skd__sql q_prune = SKD__SQL("DELETE FROM mcp_sessions WHERE updated_ms < ?1");
static skd__sql q_get = SKD__SQL("SELECT id,key_id,scopes,version,initialized,log_level FROM "
                                 "mcp_sessions WHERE id=?1 AND key_id=?2 AND updated_ms >= ?3");
static skd__sql q_touch = SKD__SQL("UPDATE mcp_sessions SET updated_ms=?2 WHERE id=?1");
static skd__sql q_del = SKD__SQL("DELETE FROM mcp_sessions WHERE id=?1");

int skd_store_session_put(skd_store *st, const skd_session_row *row, int64_t idle_ms, skd_err *err)
{
    skd__conn *c = NULL;
    skd__q q = {0};
    int64_t now = skd_wall_ms();
    int rc;
    if ((rc = skd__conn_get(st, &c, err)) || (rc = skd__q_start(c, &q_put, &q, err)))
        goto out;
    skd__q_text(&q, 1, row->id);
    skd__q_text(&q, 2, row->key_id);
    skd__q_int(&q, 3, row->scopes);
    skd__q_text(&q, 4, row->version);
    skd__q_int(&q, 5, row->initialized);
    skd__q_int(&q, 6, row->log_level);
    skd__q_int(&q, 7, now);
    if ((rc = skd__q_run(&q, NULL, err)))
        goto out;
    skd__q_end(&q);
    if (idle_ms > 0 && (rc = skd__q_start(c, &q_prune, &q, err)) == 0) {
        skd__q_int(&q, 1, now - idle_ms);
        rc = skd__q_run(&q, NULL, err);
    }
out:
    skd__q_end(&q);
    skd__conn_put(st, c);
    return rc;
}

int skd_store_session_get(skd_store *st, const char *key_id, const char *id, int64_t idle_ms,
                          skd_session_row *row, skd_err *err)
{
    skd__conn *c = NULL;
    skd__q q = {0};
    int64_t now = skd_wall_ms();
    int rc;
    memset(row, 0, sizeof(*row));
    if ((rc = skd__conn_get(st, &c, err)) || (rc = skd__q_start(c, &q_get, &q, err)))
        goto out;
    skd__q_text(&q, 1, id);
    skd__q_text(&q, 2, key_id);
    skd__q_int(&q, 3, idle_ms > 0 ? now - idle_ms : 0);
    rc = skd__q_step(&q, err);
    if (rc == 1) {
        const char *v;
        skd_strlcpy(row->id, (v = skd__q_col(&q, 0)) ? v : "", sizeof(row->id));
        skd_strlcpy(row->key_id, (v = skd__q_col(&q, 1)) ? v : "", sizeof(row->key_id));
        row->scopes = (unsigned)skd__q_col_int(&q, 2);
        skd_strlcpy(row->version, (v = skd__q_col(&q, 3)) ? v : "", sizeof(row->version));
        row->initialized = (int)skd__q_col_int(&q, 4);
        row->log_level = (int)skd__q_col_int(&q, 5);
        skd__q_end(&q);
        /* used now: its idle time starts again */
        if ((rc = skd__q_start(c, &q_touch, &q, err)) == 0) {
            skd__q_text(&q, 1, id);
            skd__q_int(&q, 2, now);
            rc = skd__q_run(&q, NULL, err);
        }
    } else if (rc == 0) {
        rc = skd_err_set(err, SKD_ENOENT, "no MCP session %s", id);
    }
out:
    skd__q_end(&q);
    skd__conn_put(st, c);
    return rc;
}

int skd_store_session_delete(skd_store *st, const char *id, skd_err *err)
{
    skd__conn *c = NULL;
    skd__q q = {0};
    int rc;
    if ((rc = skd__conn_get(st, &c, err)) || (rc = skd__q_start(c, &q_del, &q, err)))
        goto out;
    skd__q_text(&q, 1, id);
    rc = skd__q_run(&q, NULL, err);
out:
    skd__q_end(&q);
    skd__conn_put(st, c);
    return rc;
}
