/*
 * Operator console sessions: a signed-in admin's cookie names a row here
 * by the SHA-256 of its token (a copy of the database gives no usable
 * cookie), with the key it acts as, the CSRF token its state-changing
 * requests must carry, and its expiry. In the store, so that every
 * replica behind one load balancer knows the session.
 */
#include "skilld/util.h"
#include "store/store_internal.h"

#include <string.h>

static skd__sql q_purge = SKD__SQL("DELETE FROM ui_sessions WHERE expires_ms <= ?1");
static skd__sql q_put = SKD__SQL("INSERT INTO ui_sessions(id_sha256,key_id,csrf,created_ms,"
                                 "expires_ms) VALUES(?1,?2,?3,?4,?5)");
static skd__sql q_get = SKD__SQL("SELECT key_id, csrf FROM ui_sessions WHERE id_sha256=?1 AND "
                                 "expires_ms > ?2");
static skd__sql q_del = SKD__SQL("DELETE FROM ui_sessions WHERE id_sha256=?1");

int skd_store_ui_session_put(skd_store *st, const char *id_sha256, const char *key_id,
                             const char *csrf, int64_t now_ms, int64_t expires_ms, skd_err *err)
{
    skd__conn *c = NULL;
    skd__q q = {0};
    int rc = skd__conn_get(st, &c, err);
    if (rc)
        return rc;
    if ((rc = skd__q_start(c, &q_purge, &q, err)) == 0) {
        skd__q_int(&q, 1, now_ms);
        rc = skd__q_run(&q, NULL, err);
        skd__q_end(&q);
    }
    if (rc == 0 && (rc = skd__q_start(c, &q_put, &q, err)) == 0) {
        skd__q_text(&q, 1, id_sha256);
        skd__q_text(&q, 2, key_id);
        skd__q_text(&q, 3, csrf);
        skd__q_int(&q, 4, now_ms);
        skd__q_int(&q, 5, expires_ms);
        rc = skd__q_run(&q, NULL, err);
        skd__q_end(&q);
    }
    skd__conn_put(st, c);
    return rc;
}

int skd_store_ui_session_get(skd_store *st, const char *id_sha256, int64_t now_ms, char key_id[64],
                             char csrf[65], skd_err *err)
{
    skd__conn *c = NULL;
    skd__q q = {0};
    int rc;
    key_id[0] = csrf[0] = '\0';
    if ((rc = skd__conn_get(st, &c, err)) || (rc = skd__q_start(c, &q_get, &q, err)))
        goto out;
    skd__q_text(&q, 1, id_sha256);
    skd__q_int(&q, 2, now_ms);
    rc = skd__q_step(&q, err);
    if (rc == 1) {
        const char *k = skd__q_col(&q, 0), *t = skd__q_col(&q, 1);
        rc = skd_strlcpy(key_id, k ? k : "", 64) || skd_strlcpy(csrf, t ? t : "", 65)
                 ? skd_err_set(err, SKD_ENOENT, "no such session")
                 : 0;
    } else if (rc == 0) {
        rc = skd_err_set(err, SKD_ENOENT, "no such session, or it has expired");
    }
out:
    skd__q_end(&q);
    skd__conn_put(st, c);
    return rc;
}

int skd_store_ui_session_del(skd_store *st, const char *id_sha256, skd_err *err)
{
    skd__conn *c = NULL;
    skd__q q = {0};
    int rc = skd__conn_get(st, &c, err);
    if (rc == 0 && (rc = skd__q_start(c, &q_del, &q, err)) == 0) {
        skd__q_text(&q, 1, id_sha256);
        rc = skd__q_run(&q, NULL, err);
    }
    skd__q_end(&q);
    skd__conn_put(st, c);
    return rc;
}
