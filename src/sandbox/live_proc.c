/*
 * Background processes of live sandboxes, the server's half (DESIGN.md,
 * "Live sandboxes"): an exec with background: true answers at once with a
 * processId; its output is kept, capped at the sandbox's outputLimit, for
 * GET .../processes/{id}/output; at most MAX_PROCS per sandbox, the oldest
 * ended one making room. Under r->live_mu, as the records (live.c).
 */
#include "sandbox/live_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void bg_output(void *arg, int stream, const char *data, size_t len)
{
    struct live_proc *p = arg;
    pthread_mutex_lock(&p->r->live_mu);
    skd_buf *b = stream == 1 ? &p->out : &p->err;
    uint64_t *total = stream == 1 ? &p->out_total : &p->err_total;
    size_t room = b->max - b->len;
    if (room)
        skd_buf_append(b, data, len < room ? len : room);
    *total += len;
    pthread_mutex_unlock(&p->r->live_mu);
}

static void bg_done(void *arg, skd_sandbox_result *res)
{
    struct live_proc *p = arg;
    skd_runner *r = p->r;
    pthread_mutex_lock(&r->live_mu);
    p->running = 0;
    p->exited = res->exited;
    p->exit_code = res->exit_code;
    p->signal = res->signal;
    p->killed = res->killed;
    p->oom_killed = res->oom_killed;
    p->duration_ms = res->duration_ms;
    if (p->detached)
        skd__live_proc_free(p);
    pthread_mutex_unlock(&r->live_mu);
    skd_sandbox_result_free(res);
}

/* Make room for one more process in l; caller holds live_mu. */
static int proc_room_locked(struct skd__live_rec *l)
{
    if (l->nprocs < MAX_PROCS)
        return 1;
    struct live_proc **oldest = NULL;
    for (struct live_proc **pp = &l->procs; *pp; pp = &(*pp)->next)
        if (!(*pp)->running)
            oldest = pp; /* the list is newest first */
    if (!oldest)
        return 0;
    struct live_proc *p = *oldest;
    *oldest = p->next;
    skd__live_proc_free(p);
    l->nprocs--;
    return 1;
}

int skd_live_exec_background(skd_runner *r, const char *key, const char *id,
                             const skd_live_exec_opts *o, char process_id[SKD_UUID_LEN + 1],
                             skd_err *err)
{
    key = key ? key : "";
    skd_sandbox_config cfg;
    struct live_proc *p = calloc(1, sizeof(*p));
    if (!p || !(p->command = strdup(o->spec->argv[0]))) {
        free(p);
        return skd_err_set(err, SKD_ENOMEM, "out of memory");
    }
    p->r = r;
    p->running = 1;
    p->started_unix = skd__live_unix_ms();
    pthread_mutex_lock(&r->live_mu);
    struct skd__live_rec *l = skd__live_find_locked(r, key, id);
    if (l && skd__live_paused_locked(l, err)) {
        pthread_mutex_unlock(&r->live_mu);
        skd__live_proc_free(p);
        return SKD_EPAUSED;
    }
    int room = l && proc_room_locked(l);
    int has_ws = l && l->has_ws;
    if (l) {
        cfg = l->cfg;
        l->used = skd_mono_ms();
    }
    pthread_mutex_unlock(&r->live_mu);
    if (!l || !room) {
        skd__live_proc_free(p);
        return l ? skd_err_set(err, SKD_EBUSY,
                               "the sandbox runs %d background processes, its cap; kill one "
                               "first",
                               MAX_PROCS)
                 : skd_err_set(err, SKD_ENOENT, "no such sandbox");
    }
    skd_buf_init(&p->out, (size_t)cfg.output_limit);
    skd_buf_init(&p->err, (size_t)cfg.output_limit);
    skd_sandbox_spec spec = *o->spec;
    spec.config = &cfg;
    spec.workspace = NULL;
    spec.image = NULL;
    spec.live_id = id;
    spec.key_id = key;
    spec.background = 1;
    spec.cancel = NULL; /* it outlives the call */
    spec.tick = NULL;
    spec.on_output = bg_output;
    spec.output_arg = p;
    if (!spec.cwd)
        spec.cwd = has_ws ? "/workspace" : "/tmp";
    int rc = skd_sandbox_start(r, &spec, bg_done, p, p->id, err);
    if (rc) {
        skd__live_proc_free(p);
        return rc;
    }
    memcpy(process_id, p->id, sizeof(p->id));
    pthread_mutex_lock(&r->live_mu);
    if ((l = skd__live_find_locked(r, key, id)) != NULL && proc_room_locked(l)) {
        p->next = l->procs;
        l->procs = p;
        l->nprocs++;
        p = NULL;
    } else {
        p->detached = 1; /* the sandbox ended meanwhile: so does the process */
    }
    pthread_mutex_unlock(&r->live_mu);
    if (p)
        skd_runner_kill(r, process_id);
    return 0;
}

static json_t *proc_json(const struct live_proc *p, int with_output, uint64_t out_off,
                         uint64_t err_off)
{
    json_t *o = json_pack("{s:s, s:s, s:b, s:o}", "processId", p->id, "command", p->command,
                          "running", p->running, "startedAt", skd__live_iso_time(p->started_unix));
    if (!o)
        return NULL;
    if (!p->running) {
        json_object_set_new(o, "exitCode", p->exited ? json_integer(p->exit_code) : json_null());
        json_object_set_new(o, "signal", p->signal ? json_integer(p->signal) : json_null());
        json_object_set_new(o, "killed", json_boolean(p->killed));
        json_object_set_new(o, "oomKilled", json_boolean(p->oom_killed));
        json_object_set_new(o, "durationMs", json_integer(p->duration_ms));
    }
    if (with_output) {
        size_t so = out_off < p->out.len ? (size_t)out_off : p->out.len;
        size_t se = err_off < p->err.len ? (size_t)err_off : p->err.len;
        json_object_set_new(
            o, "stdout", skd__lossy_string(p->out.data ? p->out.data + so : NULL, p->out.len - so));
        json_object_set_new(
            o, "stderr", skd__lossy_string(p->err.data ? p->err.data + se : NULL, p->err.len - se));
        json_object_set_new(o, "stdoutOffset", json_integer((json_int_t)p->out.len));
        json_object_set_new(o, "stderrOffset", json_integer((json_int_t)p->err.len));
        json_object_set_new(o, "truncated",
                            json_boolean(p->out_total > p->out.len || p->err_total > p->err.len));
    }
    return o;
}

int skd_live_processes(skd_runner *r, const char *key, const char *id, const char *process_id,
                       int64_t out_off, int64_t err_off, json_t **out, skd_err *err)
{
    *out = NULL;
    pthread_mutex_lock(&r->live_mu);
    struct skd__live_rec *l = skd__live_find_locked(r, key ? key : "", id);
    struct live_proc *p = NULL;
    if (l && process_id) {
        for (p = l->procs; p && strcmp(p->id, process_id) != 0; p = p->next)
            ;
        if (p)
            *out = proc_json(p, 1, (uint64_t)out_off, (uint64_t)err_off);
    } else if (l) {
        *out = json_array();
        for (p = l->procs; p && *out; p = p->next)
            json_array_append_new(*out, proc_json(p, 0, 0, 0));
    }
    pthread_mutex_unlock(&r->live_mu);
    if (!l || (process_id && !p))
        return skd_err_set(err, SKD_ENOENT, l ? "no such process" : "no such sandbox");
    return *out ? 0 : skd_err_set(err, SKD_ENOMEM, "out of memory");
}

int skd_live_kill(skd_runner *r, const char *key, const char *id, const char *process_id,
                  skd_err *err)
{
    pthread_mutex_lock(&r->live_mu);
    struct skd__live_rec *l = skd__live_find_locked(r, key ? key : "", id);
    struct live_proc *p = l ? l->procs : NULL;
    while (p && strcmp(p->id, process_id) != 0)
        p = p->next;
    int running = p && p->running;
    pthread_mutex_unlock(&r->live_mu);
    if (!p)
        return skd_err_set(err, SKD_ENOENT, l ? "no such process" : "no such sandbox");
    if (running)
        skd_runner_kill(r, process_id);
    return 0;
}
