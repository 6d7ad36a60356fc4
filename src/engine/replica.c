/*
 * Live sandboxes across replicas (DESIGN.md, "Where this goes past one
 * machine" and "Live sandboxes"). A live sandbox runs on one replica; its
 * row in the store names that replica and where it is reached
 * (SKILLD_REPLICA_URL; src/store/live_rows.c). A call for it that reaches
 * another replica is forwarded here to the holder, which runs it as the
 * same key and writes its audit row: HAProxy needs no stickiness.
 *
 * The forward is one POST to the holder's /v1/replica/call with the secret
 * the replicas share (SKILLD_REPLICA_SECRET), answered as a stream of
 * events (src/server/replica_http.c): the command's output and progress
 * as it runs, relayed to this call's own output and progress callbacks,
 * then the result. A cancelled call (its client went away) drops the
 * connection, which cancels the call on the holder.
 *
 * What it trusts: the holder's URL comes from the store, written by a
 * replica; the holder's answer is parsed with a cap on every event and on
 * the whole stream's pending bytes, and anything else is a clear error.
 * The SSE framing is read here by hand: libcurl hands over bytes, and no
 * library Debian ships parses an event stream from them.
 */
#include "engine/engine_int.h"
#include "skilld/buf.h"
#include "skilld/log.h"
#include "skilld/util.h"
#include "skilld/workspace.h"

#include <curl/curl.h>
#include <stdlib.h>
#include <string.h>

/* One event's data at most (a result holds the output, capped by the
 * sandbox's outputLimit; 64 MiB is far past it). */
#define EVENT_MAX (64u << 20)
#define CONNECT_MS 5000L
/* The holder sends a keep-alive at least every 15 s; this much silence
 * means it is gone. */
#define SILENT_S 45L

struct fwd {
    const skd_call *c;
    skd_buf line; /* the line being read */
    char event[32];
    skd_buf data; /* the event's data lines */
    json_t *result;
    int bad; /* the stream broke its framing or a cap */
};

static void dispatch(struct fwd *f)
{
    json_t *j = json_loadb(f->data.data ? f->data.data : "", f->data.len, 0, NULL);
    const char *ev = f->event[0] ? f->event : "message";
    if (!j) {
        f->bad = 1;
    } else if (strcmp(ev, "result") == 0) {
        json_decref(f->result);
        f->result = json_incref(j);
    } else if ((strcmp(ev, "stdout") == 0 || strcmp(ev, "stderr") == 0) && f->c->output) {
        const json_t *d = json_object_get(j, "data");
        if (json_is_string(d))
            f->c->output(f->c->output_arg, ev, json_string_value(d), json_string_length(d));
    } else if (strcmp(ev, "progress") == 0 && f->c->progress) {
        f->c->progress(f->c->progress_arg, json_number_value(json_object_get(j, "progress")),
                       json_number_value(json_object_get(j, "total")),
                       json_string_value(json_object_get(j, "message")));
    }
    json_decref(j);
    f->event[0] = '\0';
    f->data.len = 0;
}

/* One line of the stream (without its end of line). */
static void on_line(struct fwd *f, const char *s, size_t n)
{
    if (n == 0) {
        if (f->data.len || f->event[0])
            dispatch(f);
        return;
    }
    if (s[0] == ':')
        return; /* a keep-alive comment */
    const char *colon = memchr(s, ':', n);
    size_t klen = colon ? (size_t)(colon - s) : n;
    const char *v = colon ? colon + 1 : s + n;
    size_t vlen = colon ? n - klen - 1 : 0;
    if (vlen && *v == ' ')
        v++, vlen--;
    if (klen == 5 && memcmp(s, "event", 5) == 0) {
        if (vlen >= sizeof(f->event)) {
            f->bad = 1;
            return;
        }
        memcpy(f->event, v, vlen);
        f->event[vlen] = '\0';
    } else if (klen == 4 && memcmp(s, "data", 4) == 0) {
        if ((f->data.len && skd_buf_append(&f->data, "\n", 1) != 0) ||
            skd_buf_append(&f->data, v, vlen) != 0)
            f->bad = 1;
    }
}

static size_t on_body(char *p, size_t size, size_t n, void *arg)
{
    struct fwd *f = arg;
    size_t len = size * n;
    for (size_t i = 0; i < len && !f->bad; i++) {
        if (p[i] == '\n') {
            size_t l = f->line.len;
            if (l && f->line.data[l - 1] == '\r')
                l--;
            on_line(f, f->line.data ? f->line.data : "", l);
            f->line.len = 0;
        } else if (skd_buf_append(&f->line, p + i, 1) != 0) {
            f->bad = 1;
        }
    }
    return f->bad ? 0 : len; /* 0 ends the transfer */
}

static int on_progress(void *arg, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
    (void)dt, (void)dn, (void)ut, (void)un;
    struct fwd *f = arg;
    return skd_cancel_is_set(f->c->cancel) ? 1 : 0;
}

/* POST the call to url's /v1/replica/call and read the answer. A new
 * result, never NULL unless out of memory. */
static json_t *post(skd_engine *e, const char *holder, const char *url, const skd_call *c,
                    const json_t *input, char exec_id[37])
{
    const char *secret = skd_config_str(e->cfg, "SKILLD_REPLICA_SECRET");
    json_t *body =
        json_pack("{s:s, s:I, s:s, s:O, s:s}", "keyId", c->key_id, "scopes", (json_int_t)c->scopes,
                  "skill", c->skill, "input", input, "from", skd_store_replica_id(e->store));
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    char target[1024], auth[600];
    size_t ul = strlen(url);
    while (ul && url[ul - 1] == '/')
        ul--;
    struct fwd f = {.c = c};
    skd_buf_init(&f.line, EVENT_MAX);
    skd_buf_init(&f.data, EVENT_MAX);
    CURL *h = curl_easy_init();
    struct curl_slist *hl = NULL;
    json_t *res = NULL;
    if (!text || !h ||
        snprintf(target, sizeof(target), "%.*s/v1/replica/call", (int)ul, url) >=
            (int)sizeof(target) ||
        snprintf(auth, sizeof(auth), "Skilld-Replica-Secret: %s", secret) >= (int)sizeof(auth)) {
        res = skd_result_error(SKD_ENOMEM, "out of memory (or a replica URL over 1000 bytes)");
        goto out;
    }
    hl = curl_slist_append(hl, auth);
    hl = curl_slist_append(hl, "Content-Type: application/json");
    hl = curl_slist_append(hl, "Accept: text/event-stream");
    char errbuf[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(h, CURLOPT_URL, target);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_PROXY, "");
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hl);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, text);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, CONNECT_MS);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, SILENT_S);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &f);
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, &f);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
    CURLcode cc = curl_easy_perform(h);
    long status = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    if (f.result && !f.bad) {
        res = f.result;
        f.result = NULL;
        /* The holder's execution (its audit row) is this call's. */
        const char *xid = json_string_value(json_object_get(res, "executionId"));
        if (exec_id && xid && strlen(xid) == 36)
            memcpy(exec_id, xid, 37);
        json_object_del(res, "executionId");
    } else if (cc == CURLE_ABORTED_BY_CALLBACK && skd_cancel_is_set(c->cancel)) {
        res = skd_result_error(SKD_ECANCELLED, "cancelled");
    } else if (status == 401 || status == 404) {
        res = skd_result_error(SKD_EREPLICA,
                               "replica %s refused the forwarded call (HTTP %ld): the replicas' "
                               "SKILLD_REPLICA_SECRET settings differ",
                               holder, status);
    } else {
        res = skd_result_error(SKD_EREPLICA,
                               "replica %s, which holds this sandbox, did not answer at %s (%s); "
                               "retry, and if it stays down its sandboxes are marked lost within "
                               "SKILLD_RUN_LEASE_MS",
                               holder, url,
                               f.bad            ? "its answer broke the event stream"
                               : cc != CURLE_OK ? (errbuf[0] ? errbuf : curl_easy_strerror(cc))
                                                : "no result");
    }
out:
    curl_slist_free_all(hl);
    if (h)
        curl_easy_cleanup(h);
    free(text);
    json_decref(f.result);
    skd_buf_free(&f.line);
    skd_buf_free(&f.data);
    return res;
}

/* Take over key's paused sandbox id, whose row no replica holds (row: as
 * read): claim the row, then hold the sandbox in this replica's runner, so
 * that the call runs here. NULL when it is ours now, else the error
 * result; *beaten 1 when another replica claimed it first. */
static json_t *take_paused(skd_engine *e, const skd_call *c, const char *id,
                           const skd_live_row *row, int *beaten)
{
    skd_err err = {0};
    *beaten = 0;
    const json_t *sb = json_object_get(row->detail, "sandbox");
    skd_runner *r = skd_engine_runner(e, &err);
    skd_workspace *ws = NULL;
    if (!r)
        return skd_result_from_err(&err);
    if (!json_is_object(sb))
        return skd_result_error(SKD_ESTORE,
                                "paused sandbox %s: its row in the store has no record of it", id);
    int rc = skd_store_live_claim(e->store, c->key_id, id,
                                  skd_config_str(e->cfg, "SKILLD_REPLICA_URL"), sb, &err);
    if (rc && rc != SKD_EBUSY)
        return skd_result_from_err(&err);
    if (rc && (*beaten = 1))
        return skd_result_error(SKD_EREPLICA,
                                "paused sandbox %s is being taken over by another replica "
                                "(%s); retry",
                                id, skd_err_msg(&err));
    rc = skd_workspace_open(skd_config_str(e->cfg, "DATA_DIR"), c->key_id, &ws, &err);
    if (rc == 0)
        rc = skd_live_adopt(r, c->key_id, sb, skd_workspace_path(ws), &err);
    skd_workspace_close(ws);
    if (rc) {
        skd_store_live_release(e->store, id);
        return skd_result_from_err(&err);
    }
    skd_info("live sandbox %s: paused, taken over from replica %s", id, row->replica);
    return NULL;
}

int skd__engine_live_drop_unheld(skd_engine *e, const char *key_id)
{
    json_t *rows = e->store ? skd_store_live_list(e->store, key_id, NULL) : NULL;
    size_t i;
    json_t *v;
    int n = 0;
    json_array_foreach (rows, i, v) {
        const char *id = json_string_value(json_object_get(v, "id"));
        json_t *sb = json_object_get(json_object_get(v, "detail"), "sandbox");
        if (!id || json_is_true(json_object_get(v, "held")) ||
            !json_is_string(json_object_get(sb, "state")) ||
            strcmp(json_string_value(json_object_get(sb, "state")), "paused") != 0)
            continue;
        skd_live_row row = {.detail = json_pack("{s:O}", "sandbox", sb)};
        skd_call c = {.key_id = key_id};
        skd_err err = {0};
        skd_runner *r = NULL;
        int beaten = 0;
        json_t *res = row.detail ? take_paused(e, &c, id, &row, &beaten) : NULL;
        if (!res && row.detail && (r = skd_engine_runner(e, &err)) != NULL &&
            skd_live_delete(r, key_id, id, &err) == 0)
            n++;
        else
            skd_warn("paused sandbox %s of key %s: not removed", id, key_id);
        json_decref(res);
        json_decref(row.detail);
    }
    json_decref(rows);
    return n;
}

/* 1 when this replica's runner holds key's live sandbox id. */
static int held_here(skd_engine *e, const char *key, const char *id)
{
    pthread_mutex_lock(&e->runner_mu);
    skd_runner *r = e->runner;
    pthread_mutex_unlock(&e->runner_mu);
    json_t *sb = NULL;
    int yes = r && skd_live_get(r, key, id, &sb, NULL) == 0;
    const char *st = yes ? json_string_value(json_object_get(sb, "state")) : NULL;
    if (st && strcmp(st, "paused") == 0) {
        /* A paused one is this replica's only while its row says so:
         * renewals that stalled past the lease may have let another
         * replica claim it. Then this record is forgotten, files kept. */
        skd_live_row row;
        if (skd_store_live_get(e->store, key, id, &row, NULL) == 0) {
            /* Only a claim changes a row's replica. */
            if (strcmp(row.replica, skd_store_replica_id(e->store)) != 0 &&
                skd_live_forget(r, key, id) == 0) {
                skd_warn("live sandbox %s: paused, claimed by replica %s meanwhile: forgotten here",
                         id, row.replica);
                yes = 0;
            }
            json_decref(row.detail);
        }
    }
    json_decref(sb);
    return yes;
}

json_t *skd__engine_forward(skd_engine *e, const skd_call *c, const skd_skill *s,
                            const json_t *input, char exec_id[37])
{
    const char *id = json_string_value(json_object_get(input, "sandboxId"));
    if (!skd_skill_live_bound(s) || !id || held_here(e, c->key_id, id))
        return NULL;
    skd_live_row row;
    skd_err err = {0};
    json_t *res = NULL;
    const char *me = skd_store_replica_id(e->store);
    int rc, beaten = 0, paused;
    /* Read the row again once when another replica took the sandbox over
     * under this one's hands: the call is forwarded to it. */
    for (int tries = 0;; tries++) {
        if ((rc = skd_store_live_get(e->store, c->key_id, id, &row, &err)) == SKD_ENOENT)
            return NULL; /* the handler answers not_found */
        if (rc)
            return skd_result_from_err(&err);
        /* Paused and let go (its holder stopped or died), or this
         * replica's in a former life: its files are under the shared
         * DATA_DIR. */
        paused = strcmp(row.state, "paused") == 0 && (!row.leased || strcmp(row.replica, me) == 0);
        if (paused)
            res = take_paused(e, c, id, &row, &beaten);
        if (!beaten || tries > 0)
            break;
        json_decref(res);
        json_decref(row.detail);
        res = NULL;
    }
    int held = strcmp(row.state, "running") == 0 || strcmp(row.state, "paused") == 0;
    const char *url = json_string_value(json_object_get(row.detail, "url"));
    if (paused) {
        /* taken over (res NULL), or res says why not */
    } else if (c->forwarded && held && row.leased && strcmp(row.replica, me) != 0)
        /* Sent here, but held elsewhere now: never forwarded twice. */
        res = skd_result_error(SKD_EREPLICA,
                               "sandbox %s moved to replica %s while the call was forwarded; retry",
                               id, row.replica);
    else if (strcmp(row.state, "lost") == 0 || (held && !row.leased))
        res = skd_result_error(SKD_ELOST,
                               "sandbox %s was lost: replica %s, which held it, stopped; its "
                               "processes and files are gone (create a new one)",
                               id, row.replica);
    else if (!held || strcmp(row.replica, me) == 0)
        res = NULL; /* ended, or ours: the handler answers */
    else if (!url || !*url)
        res = skd_result_error(SKD_EREPLICA,
                               "sandbox %s is held by replica %s, which has no SKILLD_REPLICA_URL "
                               "for the others to reach it",
                               id, row.replica);
    else if (!*skd_config_str(e->cfg, "SKILLD_REPLICA_SECRET"))
        res = skd_result_error(SKD_EREPLICA,
                               "sandbox %s is held by replica %s; this replica has no "
                               "SKILLD_REPLICA_SECRET to forward the call with",
                               id, row.replica);
    else
        res = post(e, row.replica, url, c, input, exec_id);
    json_decref(row.detail);
    return res;
}

/* ---- the rows of this replica's sandboxes ---- */

/* skd_live_event_fn: a sandbox ended (its row ends), the reaper paused it
 * (its row says so), or the runner stopped with it paused (its row is let
 * go, for another replica or this one's next life). */
static void live_event(void *arg, const char *key_id, const char *sandbox_id, int what,
                       const json_t *sandbox)
{
    (void)key_id;
    skd_engine *e = arg;
    skd_err err = {0};
    if (what == SKD_LIVE_RELEASED)
        skd_store_live_release(e->store, sandbox_id);
    else if (what != SKD_LIVE_PAUSED)
        skd_store_run_end(e->store, sandbox_id, "done");
    else if (skd_store_live_set(e->store, skd_config_str(e->cfg, "SKILLD_REPLICA_URL"), sandbox,
                                &err))
        skd_warn("live sandbox %s: its row was not updated: %s", sandbox_id, skd_err_msg(&err));
}

/* skd_live_paused_fn: the key's paused sandboxes this replica does not
 * hold, as the store has them. */
static int live_paused(void *arg, const char *key_id, int *n, int64_t *bytes, skd_err *err)
{
    skd_engine *e = arg;
    int rc = skd_store_live_paused_elsewhere(e->store, key_id, n, bytes, err);
    if (rc) {
        skd_err_clear(err);
        rc = skd_err_set(err, SKD_ESTORE,
                         "the key's paused sandboxes on other replicas cannot be counted (the "
                         "store does not answer), so SKILLS_SANDBOX_MAX_PAUSED_PER_KEY cannot be "
                         "held: not paused; retry");
    }
    return rc;
}

void skd__engine_live_attach(skd_engine *e, skd_runner *r)
{
    if (e->store && r) {
        skd_runner_set_live_events(r, live_event, e);
        skd_runner_set_live_paused(r, live_paused, e);
        if (!e->one_call)
            skd__engine_live_tick_attach(e, r);
    }
}
