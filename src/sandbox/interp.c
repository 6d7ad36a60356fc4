/*
 * Interpreter contexts of live sandboxes (docs/sandbox.md, "Interpreter
 * contexts"; DESIGN.md, "Live sandboxes"). A context is one long-lived
 * interpreter process inside a live sandbox, per (sandbox, language,
 * name): a background process of the sandbox like any other (src/sandbox
 * /live.c's machinery: the sandbox user, its cgroup, its seccomp filter),
 * whose program is our driver (src/sandbox/interp/driver.py and
 * driver.js, embedded in the binary at build time and passed on its
 * command line; never read from the image).
 *
 * The server keeps the write end of the driver's stdin (the runner's
 * on_stdin) and reads its stdout through the supervisor (on_output). The
 * protocol is line-delimited JSON: a request is one line; an answer is a
 * frame, the byte 0x1e, a JSON object and a newline. Bytes outside frames
 * are output of the running call (a child process writing to fd 1).
 *
 * Trust: the driver runs the caller's code in its own process, so it is
 * as untrusted as that code. Every frame is bounded (max_line bytes; past
 * it the process is ended), every field is type-checked, the timeout is
 * enforced from here (an interrupt request, then the process is killed),
 * and a context's calls are one at a time.
 *
 * Locking: in->mu guards the table and every context's fields; a context
 * has its own condition variable. No runner call is made under mu.
 * Lifetime: a context is referenced by the table, by its running process
 * (its completion lets go) and by each call using it; the last frees it.
 */
#include "sandbox/runner_int.h"
#include "skilld/interp.h"
#include "skilld/registry.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The drivers (generated from src/sandbox/interp/ by the Makefile). */
extern const char skd__interp_driver_py[];
extern const char skd__interp_driver_js[];

/* How long a new interpreter may take to say it is ready. */
#define START_MS 15000
/* After an interrupt, how long the code has to stop before the process
 * is killed. */
#define INTERRUPT_GRACE_MS 2000
/* How long a killed interpreter's end is waited for. */
#define KILL_WAIT_MS 5000
/* The start of an interpreter's stderr kept to say why it failed. */
#define ERRTAIL 1024

enum lang { L_PYTHON, L_JS };
static const char *const lang_names[] = {"python", "javascript"};

struct ictx {
    struct ictx *next;
    struct skd__interp *in;
    char sandbox[SKD_UUID_LEN + 1];
    enum lang lang;
    char name[SKD_INTERP_NAME_MAX + 1];
    int refs;
    int linked; /* in the table */
    int busy;   /* a call holds it */
    int proc;   /* its process runs (started, not yet completed) */
    int ever;   /* a process was started: the next one is a restart */
    char proc_id[SKD_UUID_LEN + 1];
    int in_fd; /* the driver's stdin, -1 */
    int in_frame, overflow;
    skd_buf line; /* the frame being read */
    char *frame;  /* the last complete frame, not yet taken */
    size_t frame_len;
    int too_big; /* a frame past max_line */
    skd_buf raw; /* output outside frames, capped */
    uint64_t raw_total;
    char errtail[ERRTAIL];
    size_t errtail_len;
    char end_msg[SKD_ERR_MSG_MAX]; /* how its process ended */
    int oom;
    pthread_cond_t cv;
};

struct skd__interp {
    pthread_mutex_t mu;
    struct ictx *list;
    int max_ctx;     /* contexts per sandbox */
    size_t max_line; /* bytes of a request or an answer */
    uint64_t seq;
};

int skd_interp_name_ok(const char *name)
{
    size_t n = 0;
    if (!name)
        return 0;
    for (; name[n]; n++) {
        char c = name[n];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-'))
            return 0;
    }
    return n >= 1 && n <= SKD_INTERP_NAME_MAX;
}

void skd__interp_init(skd_runner *r, const skd_config *cfg)
{
    struct skd__interp *in = calloc(1, sizeof(*in));
    if (!in)
        return; /* every eval then answers out of memory */
    pthread_mutex_init(&in->mu, NULL);
    in->max_ctx = cfg ? (int)skd_config_int(cfg, "SKILLS_INTERP_MAX_CONTEXTS") : 8;
    in->max_line =
        cfg ? (size_t)skd_config_int(cfg, "SKILLS_INTERP_MAX_LINE_BYTES") : (size_t)4 << 20;
    r->interp = in;
}

static void ctx_free(struct ictx *c)
{
    if (c->in_fd >= 0)
        close(c->in_fd);
    skd_buf_free(&c->line);
    skd_buf_free(&c->raw);
    free(c->frame);
    pthread_cond_destroy(&c->cv);
    free(c);
}

/* Drop one reference; caller holds in->mu. */
static void unref_locked(struct ictx *c)
{
    if (--c->refs > 0)
        return;
    ctx_free(c);
}

static void unlink_locked(struct skd__interp *in, struct ictx *c)
{
    for (struct ictx **pp = &in->list; *pp; pp = &(*pp)->next)
        if (*pp == c) {
            *pp = c->next;
            c->linked = 0;
            unref_locked(c);
            return;
        }
}

void skd__interp_forget(skd_runner *r, const char *sandbox_id)
{
    struct skd__interp *in = r->interp;
    if (!in)
        return;
    pthread_mutex_lock(&in->mu);
    struct ictx *c = in->list, *next;
    for (; c; c = next) {
        next = c->next;
        if (strcmp(c->sandbox, sandbox_id) == 0) {
            pthread_cond_broadcast(&c->cv);
            unlink_locked(in, c);
        }
    }
    pthread_mutex_unlock(&in->mu);
}

void skd__interp_free(skd_runner *r)
{
    struct skd__interp *in = r->interp;
    if (!in)
        return;
    /* The supervisor has stopped: every process has completed, and no
     * call is running (the engine closes after its calls). */
    while (in->list) {
        struct ictx *c = in->list;
        in->list = c->next;
        ctx_free(c);
    }
    pthread_mutex_destroy(&in->mu);
    free(in);
    r->interp = NULL;
}

/* ---- the process's callbacks (supervisor thread: no blocking) ---- */

static void on_stdin(void *arg, int fd)
{
    struct ictx *c = arg;
    pthread_mutex_lock(&c->in->mu);
    if (c->in_fd >= 0)
        close(c->in_fd);
    c->in_fd = fd;
    pthread_mutex_unlock(&c->in->mu);
}

static void raw_add(struct ictx *c, const char *p, size_t n)
{
    size_t room = c->raw.max - c->raw.len;
    if (room)
        skd_buf_append(&c->raw, p, n < room ? n : room);
    c->raw_total += n;
}

static void frame_end(struct ictx *c)
{
    if (c->overflow) {
        c->too_big = 1;
    } else {
        size_t len = 0;
        char *f = skd_buf_steal(&c->line, &len);
        if (f) {
            free(c->frame); /* an answer not taken is stale */
            c->frame = f;
            c->frame_len = len;
        }
    }
    skd_buf_free(&c->line);
    c->in_frame = c->overflow = 0;
    pthread_cond_broadcast(&c->cv);
}

static void on_output(void *arg, int stream, const char *data, size_t len)
{
    struct ictx *c = arg;
    pthread_mutex_lock(&c->in->mu);
    if (stream == 2) {
        size_t room = sizeof(c->errtail) - 1 - c->errtail_len;
        size_t k = len < room ? len : room;
        memcpy(c->errtail + c->errtail_len, data, k);
        c->errtail_len += k;
        c->errtail[c->errtail_len] = '\0';
        pthread_mutex_unlock(&c->in->mu);
        return;
    }
    while (len) {
        if (!c->in_frame) {
            const char *m = memchr(data, 0x1e, len);
            size_t n = m ? (size_t)(m - data) : len;
            raw_add(c, data, n);
            if (!m)
                break;
            c->in_frame = 1;
            data += n + 1;
            len -= n + 1;
            continue;
        }
        const char *nl = memchr(data, '\n', len);
        size_t n = nl ? (size_t)(nl - data) : len;
        if (!c->overflow && skd_buf_append(&c->line, data, n) != 0) {
            c->overflow = c->too_big = 1; /* the waiting call ends the process now */
            pthread_cond_broadcast(&c->cv);
        }
        if (!nl)
            break;
        frame_end(c);
        data += n + 1;
        len -= n + 1;
    }
    pthread_mutex_unlock(&c->in->mu);
}

static void on_done(void *arg, skd_sandbox_result *res)
{
    struct ictx *c = arg;
    struct skd__interp *in = c->in; /* c may be freed below */
    pthread_mutex_lock(&in->mu);
    c->proc = 0;
    c->oom = res->oom_killed;
    if (res->error)
        snprintf(c->end_msg, sizeof(c->end_msg), "%s", res->message);
    else if (res->oom_killed)
        snprintf(c->end_msg, sizeof(c->end_msg), "killed: out of memory (memoryLimit)");
    else if (res->killed)
        snprintf(c->end_msg, sizeof(c->end_msg), "killed");
    else if (!res->exited)
        snprintf(c->end_msg, sizeof(c->end_msg), "ended by signal %d", res->signal);
    else
        snprintf(c->end_msg, sizeof(c->end_msg), "exited with code %d", res->exit_code);
    pthread_cond_broadcast(&c->cv);
    unref_locked(c);
    pthread_mutex_unlock(&in->mu);
    skd_sandbox_result_free(res);
}

/* ---- a call ---- */

/* Wait on c's condition for at most ms; caller holds mu. */
static void cv_wait_ms(struct ictx *c, int64_t ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int64_t ns = ts.tv_nsec + ms * 1000000LL;
    ts.tv_sec += (time_t)(ns / 1000000000LL);
    ts.tv_nsec = (long)(ns % 1000000000LL);
    pthread_cond_timedwait(&c->cv, &c->in->mu, &ts);
}

enum wait_rc { W_FRAME, W_DIED, W_TOOBIG, W_TIMEOUT, W_CANCEL, W_GONE };

/* Wait for a frame of c until deadline (monotonic ms); caller holds mu.
 * W_FRAME leaves it in c->frame for the caller to take. */
static enum wait_rc wait_frame_locked(struct ictx *c, int64_t deadline, skd_cancel *cancel)
{
    for (;;) {
        if (c->too_big)
            return W_TOOBIG;
        if (c->frame)
            return W_FRAME;
        if (!c->proc)
            return W_DIED;
        if (!c->linked)
            return W_GONE;
        if (skd_cancel_is_set(cancel))
            return W_CANCEL;
        int64_t now = skd_mono_ms();
        if (now >= deadline)
            return W_TIMEOUT;
        cv_wait_ms(c, deadline - now < 100 ? deadline - now : 100); /* to see a cancel */
    }
}

/* Take the waiting frame as JSON (NULL when it does not parse); caller
 * holds mu. */
static json_t *take_frame_locked(struct ictx *c)
{
    json_t *j = json_loadb(c->frame, c->frame_len, JSON_REJECT_DUPLICATES, NULL);
    free(c->frame);
    c->frame = NULL;
    if (j && !json_is_object(j)) {
        json_decref(j);
        j = NULL;
    }
    return j;
}

/* Write all of p to fd (non-blocking) by deadline. 0, or -1 when the
 * reader is gone or time ran out. SIGPIPE is held back in this thread. */
static int write_all(int fd, const char *p, size_t n, int64_t deadline)
{
    sigset_t pipe_set, old;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
    int rc = 0;
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w > 0) {
            p += w;
            n -= (size_t)w;
            continue;
        }
        if (w < 0 && errno == EINTR)
            continue;
        int64_t left = deadline - skd_mono_ms();
        if (w < 0 && errno == EAGAIN && left > 0) {
            struct pollfd pf = {.fd = fd, .events = POLLOUT};
            poll(&pf, 1, (int)(left < 100 ? left : 100));
            continue;
        }
        if (w < 0 && errno == EPIPE) {
            struct timespec zero = {0, 0};
            sigtimedwait(&pipe_set, NULL, &zero);
        }
        rc = -1;
        break;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc;
}

/* Send one request line to c's driver by deadline. */
static int send_line(struct ictx *c, json_t *msg, int64_t deadline)
{
    char *s = json_dumps(msg, JSON_COMPACT);
    if (!s)
        return -1;
    pthread_mutex_lock(&c->in->mu);
    int fd = c->in_fd;
    pthread_mutex_unlock(&c->in->mu);
    /* The descriptor is closed only by the call that holds c (busy) or
     * when c is freed, so it stays valid here. */
    size_t n = strlen(s);
    int rc = fd < 0 ? -1 : write_all(fd, s, n, deadline);
    if (rc == 0)
        rc = write_all(fd, "\n", 1, deadline);
    free(s);
    return rc;
}

/* Start c's interpreter and wait for it to be ready. The caller holds c
 * (busy). 0, or SKD_ESANDBOX / another SKD_E* code with err set. */
static int start(skd_runner *r, struct ictx *c, const char *key, const skd_sandbox_config *cfg,
                 int has_ws, skd_err *err)
{
    struct skd__interp *in = c->in;
    pthread_mutex_lock(&in->mu);
    if (c->in_fd >= 0)
        close(c->in_fd);
    c->in_fd = -1;
    free(c->frame);
    c->frame = NULL;
    skd_buf_free(&c->line);
    skd_buf_free(&c->raw);
    c->raw_total = 0;
    c->in_frame = c->overflow = c->too_big = c->oom = 0;
    c->errtail_len = 0;
    c->errtail[0] = c->end_msg[0] = '\0';
    c->proc = 1;
    c->ever = 1;
    c->refs++; /* the process's */
    pthread_mutex_unlock(&in->mu);
    char cap[32];
    snprintf(cap, sizeof(cap), "%lld", (long long)cfg->output_limit);
    /* node: one V8 helper thread instead of four (each thread of the
     * sandbox counts against its pidsLimit). */
    const char *py_argv[] = {"python3", "-c", skd__interp_driver_py, cap, NULL};
    const char *js_argv[] = {"node", "--v8-pool-size=1", "-e", skd__interp_driver_js, cap, NULL};
    const char *const *argv = c->lang == L_PYTHON ? py_argv : js_argv;
    skd_sandbox_spec spec = {
        .argv = argv,
        .config = cfg,
        .key_id = key,
        .cwd = has_ws ? "/workspace" : "/tmp",
        .live_id = c->sandbox,
        .background = 1,
        .on_output = on_output,
        .on_stdin = on_stdin,
        .output_arg = c,
    };
    char pid[SKD_UUID_LEN + 1];
    int rc = skd_sandbox_start(r, &spec, on_done, c, pid, err);
    pthread_mutex_lock(&in->mu);
    if (rc != 0) {
        c->proc = 0;
        unref_locked(c);
        pthread_mutex_unlock(&in->mu);
        return rc;
    }
    memcpy(c->proc_id, pid, sizeof(pid));
    enum wait_rc w = wait_frame_locked(c, skd_mono_ms() + START_MS, NULL);
    json_t *f = w == W_FRAME ? take_frame_locked(c) : NULL;
    int ready = f && json_is_true(json_object_get(f, "ready"));
    json_decref(f);
    if (!ready) {
        rc = skd_err_set(err, SKD_ESANDBOX,
                         "the %s interpreter did not start (%s is needed in the sandbox's image)"
                         "%s%s%s%s",
                         lang_names[c->lang], argv[0], c->end_msg[0] ? ": " : "", c->end_msg,
                         c->errtail_len ? ": " : "", c->errtail);
    }
    pthread_mutex_unlock(&in->mu);
    if (!ready && w != W_DIED)
        skd_runner_kill(r, pid);
    return rc;
}

/* Kill c's process and wait (bounded) for its end. */
static void end_process(skd_runner *r, struct ictx *c)
{
    pthread_mutex_lock(&c->in->mu);
    char pid[SKD_UUID_LEN + 1];
    memcpy(pid, c->proc_id, sizeof(pid));
    int running = c->proc;
    pthread_mutex_unlock(&c->in->mu);
    if (!running)
        return;
    skd_runner_kill(r, pid);
    pthread_mutex_lock(&c->in->mu);
    int64_t end = skd_mono_ms() + KILL_WAIT_MS;
    while (c->proc && c->linked && skd_mono_ms() < end)
        cv_wait_ms(c, 50);
    pthread_mutex_unlock(&c->in->mu);
}

static json_t *str_or(const json_t *o, const char *k, const char *def)
{
    const json_t *v = json_object_get(o, k);
    return json_is_string(v) ? json_string(json_string_value(v)) : (def ? json_string(def) : NULL);
}

/* The skill result from the driver's answer (may be NULL: none), the
 * output outside frames and what happened. */
static json_t *shape(const struct ictx *c, const char *id, const json_t *ans, const char *raw,
                     size_t raw_len, int raw_trunc, int timed_out, int restarted, int64_t duration,
                     int fail_code, const char *fail_msg)
{
    json_t *o = json_object();
    if (!o)
        return NULL;
    const json_t *e = ans ? json_object_get(ans, "error") : NULL;
    int code_failed = json_is_object(e);
    json_t *out = str_or(ans, "stdout", "");
    if (out && raw_len) { /* a child process's direct writes first */
        json_t *joined = skd__lossy_string(raw, raw_len);
        if (joined) {
            size_t a = json_string_length(joined), b = json_string_length(out);
            char *s = malloc(a + b + 1);
            if (s) {
                memcpy(s, json_string_value(joined), a);
                memcpy(s + a, json_string_value(out), b);
                json_decref(out);
                out = json_stringn(s, a + b);
                free(s);
            }
            json_decref(joined);
        }
    }
    json_object_set_new(o, "success", json_boolean(!code_failed && !fail_code));
    json_object_set_new(o, "sandboxId", json_string(id));
    json_object_set_new(o, "context", json_string(c->name));
    json_object_set_new(o, "language", json_string(lang_names[c->lang]));
    json_object_set_new(o, "stdout", out ? out : json_string(""));
    json_object_set_new(o, "stderr", str_or(ans, "stderr", ""));
    json_object_set_new(o, "result", ans ? str_or(ans, "result", NULL) : NULL);
    if (!json_object_get(o, "result"))
        json_object_set_new(o, "result", json_null());
    json_object_set_new(
        o, "truncated",
        json_boolean(raw_trunc || (ans && json_is_true(json_object_get(ans, "truncated")))));
    json_object_set_new(o, "durationMs", json_integer(duration));
    json_object_set_new(o, "timedOut", json_boolean(timed_out));
    json_object_set_new(o, "contextRestarted", json_boolean(restarted));
    json_t *err = NULL;
    if (code_failed) {
        json_t *name = str_or(e, "name", "Error"), *value = str_or(e, "value", "");
        char msg[512];
        snprintf(msg, sizeof(msg), "%.120s%s%.360s", json_string_value(name),
                 json_string_length(value) ? ": " : "", json_string_value(value));
        err = json_pack("{s:s, s:s, s:o, s:o, s:o}", "code",
                        fail_code ? skd_errcode(fail_code) : skd_errcode(SKD_ECOMMAND), "message",
                        fail_code && fail_msg ? fail_msg : msg, "name", name, "value", value,
                        "traceback", str_or(e, "traceback", ""));
    } else if (fail_code) {
        err = json_pack("{s:s, s:s}", "code", skd_errcode(fail_code), "message",
                        fail_msg ? fail_msg : "");
    }
    if (err)
        json_object_set_new(o, "error", err);
    return o;
}

/* Find or make the context; caller holds mu. NULL with err set. */
static struct ictx *get_locked(struct skd__interp *in, const char *id, enum lang lang,
                               const char *name, int64_t out_cap, skd_err *err)
{
    int n = 0;
    for (struct ictx *c = in->list; c; c = c->next) {
        if (strcmp(c->sandbox, id) != 0)
            continue;
        if (c->lang == lang && strcmp(c->name, name) == 0)
            return c;
        n++;
    }
    if (n >= in->max_ctx) {
        skd_err_set(err, SKD_EBUSY,
                    "the sandbox holds %d interpreter contexts, its cap "
                    "(SKILLS_INTERP_MAX_CONTEXTS); delete the sandbox or reuse a context",
                    in->max_ctx);
        return NULL;
    }
    struct ictx *c = calloc(1, sizeof(*c));
    if (!c) {
        skd_err_set(err, SKD_ENOMEM, "out of memory");
        return NULL;
    }
    c->in = in;
    snprintf(c->sandbox, sizeof(c->sandbox), "%s", id);
    snprintf(c->name, sizeof(c->name), "%s", name);
    c->lang = lang;
    c->in_fd = -1;
    skd_buf_init(&c->line, in->max_line);
    skd_buf_init(&c->raw, (size_t)(out_cap > 0 ? out_cap : 0));
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&c->cv, &ca);
    pthread_condattr_destroy(&ca);
    c->refs = 1; /* the table's */
    c->linked = 1;
    c->next = in->list;
    in->list = c;
    return c;
}

/* Run the code in c, which the caller holds (busy, its process ready). */
static json_t *run_code(skd_runner *r, struct ictx *c, const char *id, const skd_live_eval_opts *o,
                        int64_t timeout, int restarted, skd_err *err)
{
    struct skd__interp *in = c->in;
    int64_t t0 = skd_mono_ms(), deadline = t0 + timeout;
    pthread_mutex_lock(&in->mu);
    uint64_t seq = ++in->seq;
    skd_buf_free(&c->raw);
    c->raw_total = 0;
    pthread_mutex_unlock(&in->mu);
    json_t *req = json_pack("{s:I, s:s%}", "id", (json_int_t)seq, "code", o->code, o->code_len);
    if (!req) {
        skd_err_set(err, SKD_ENOMEM, "out of memory");
        return NULL;
    }
    int sent = send_line(c, req, deadline) == 0;
    json_decref(req);
    json_t *ans = NULL;
    int timed_out = 0, interrupted = 0, fail = 0;
    char fail_msg[SKD_ERR_MSG_MAX] = "";
    enum wait_rc w = W_DIED;
    pthread_mutex_lock(&in->mu);
    while (sent) {
        w = wait_frame_locked(c, deadline, o->cancel);
        if (w == W_FRAME) {
            json_t *f = take_frame_locked(c);
            const json_t *fid = json_object_get(f, "id");
            if (json_is_integer(fid) && (uint64_t)json_integer_value(fid) == seq) {
                ans = f;
                break;
            }
            json_decref(f); /* an answer to an earlier call */
            continue;
        }
        if ((w == W_TIMEOUT || w == W_CANCEL) && !interrupted) {
            /* SIGINT first: the driver raises it in the running code. */
            interrupted = 1;
            timed_out = w == W_TIMEOUT;
            pthread_mutex_unlock(&in->mu);
            json_t *irq = json_pack("{s:s}", "op", "interrupt");
            int ok = irq && send_line(c, irq, skd_mono_ms() + 500) == 0;
            json_decref(irq);
            pthread_mutex_lock(&in->mu);
            deadline = skd_mono_ms() + INTERRUPT_GRACE_MS;
            if (ok)
                continue;
            w = W_TIMEOUT;
        }
        break;
    }
    size_t raw_len = 0;
    uint64_t raw_total = c->raw_total;
    char *raw = skd_buf_steal(&c->raw, &raw_len);
    c->raw_total = 0;
    char end_msg[SKD_ERR_MSG_MAX];
    snprintf(end_msg, sizeof(end_msg), "%s", c->end_msg);
    int oom = c->oom;
    pthread_mutex_unlock(&in->mu);
    int kill_it = !ans && (w == W_TIMEOUT || w == W_CANCEL || w == W_TOOBIG || !sent);
    if (kill_it)
        end_process(r, c);
    if (!ans) {
        if (w == W_GONE) {
            fail = SKD_ENOENT;
            snprintf(fail_msg, sizeof(fail_msg), "the sandbox ended during the call");
        } else if (w == W_TOOBIG) {
            fail = SKD_ETOOBIG;
            snprintf(fail_msg, sizeof(fail_msg),
                     "an answer of the interpreter is larger than SKILLS_INTERP_MAX_LINE_BYTES "
                     "(%zu); it was ended and the next call starts a new one",
                     in->max_line);
        } else if (interrupted) {
            fail = timed_out ? SKD_ETIMEOUT : SKD_ECANCELLED;
            snprintf(fail_msg, sizeof(fail_msg),
                     "%s, and the code did not stop within %d ms of SIGINT: the interpreter was "
                     "ended and the next call starts a new one (its state is lost)",
                     timed_out ? "the code timed out" : "the call was cancelled",
                     INTERRUPT_GRACE_MS);
        } else {
            fail = SKD_ECOMMAND;
            snprintf(
                fail_msg, sizeof(fail_msg),
                "the interpreter ended while running the code (%.200s)%s; the next call starts "
                "a new one (its state is lost)",
                end_msg[0] ? end_msg : "its input closed", oom ? ", out of memory" : "");
        }
    } else if (interrupted) {
        fail = timed_out ? SKD_ETIMEOUT : SKD_ECANCELLED;
        snprintf(fail_msg, sizeof(fail_msg),
                 "%s after %lld ms and was interrupted (SIGINT); the "
                 "context keeps its state",
                 timed_out ? "the code timed out" : "the call was cancelled", (long long)timeout);
    }
    json_t *res = shape(c, id, ans, raw, raw_len, raw_total > raw_len, timed_out, restarted,
                        skd_mono_ms() - t0, fail, fail_msg);
    if (res && oom)
        json_object_set_new(res, "oomKilled", json_true());
    free(raw);
    json_decref(ans);
    if (!res)
        skd_err_set(err, SKD_ENOMEM, "out of memory");
    return res;
}

/* Keep what the call wrote to the workspace, as an exec's end does, so the
 * next file_read sees it: res gets "workspace" (result.c's shape), and a
 * commit the quota refused fails the call. A sandbox that ended meanwhile
 * committed at its end. The interpreter keeps running either way. */
static void commit_ws(skd_runner *r, const char *id, unsigned gen, skd_usage *usage, json_t *res)
{
    skd__outcome oc;
    skd_err e = {0};
    if (skd__spawner_live_commit(r->spawner, id, gen, &oc, &e) != 0) {
        if (e.code != SKD_ENOENT)
            skd_warn("live sandbox %s: an interpreter call's workspace writes are kept at its "
                     "next exec or its end: %s",
                     id, skd_err_msg(&e));
        return;
    }
    if (!oc.ws_checked)
        return;
    if (usage)
        usage->workspace_bytes += (int64_t)(oc.ws_written & INT64_MAX);
    json_object_set_new(res, "workspace",
                        skd__ws_result_json(oc.ws_error, oc.ws_bytes, oc.ws_message));
    if (oc.ws_error && !json_object_get(res, "error")) {
        json_object_set_new(res, "success", json_false());
        json_object_set_new(
            res, "error",
            json_pack("{s:s, s:s}", "code", skd_errcode(oc.ws_error), "message", oc.ws_message));
    }
}

int skd_live_eval(skd_runner *r, const char *key, const char *id, const skd_live_eval_opts *o,
                  json_t **out, skd_err *err)
{
    *out = NULL;
    struct skd__interp *in = r->interp;
    if (!in)
        return skd_err_set(err, SKD_ENOMEM, "out of memory");
    key = key ? key : "";
    const char *name = o->context ? o->context : "default";
    enum lang lang;
    if (o->language && strcmp(o->language, "python") == 0)
        lang = L_PYTHON;
    else if (o->language && strcmp(o->language, "javascript") == 0)
        lang = L_JS;
    else
        return skd_err_set(err, SKD_EINVAL,
                           "language: a context runs python or javascript (sh runs one-shot, "
                           "without sandboxId)");
    if (!skd_interp_name_ok(name))
        return skd_err_set(err, SKD_EINVAL, "context: 1 to %d characters of A-Z, a-z, 0-9, _ and -",
                           SKD_INTERP_NAME_MAX);
    if (o->code_len + 64 > in->max_line)
        return skd_err_set(err, SKD_ETOOBIG,
                           "code: %zu bytes, more than a request line may hold "
                           "(SKILLS_INTERP_MAX_LINE_BYTES %zu)",
                           o->code_len, in->max_line);
    if (memchr(o->code, '\0', o->code_len))
        return skd_err_set(err, SKD_EINVAL, "code contains a NUL byte");
    if (o->timeout_ms < 0 || o->timeout_ms > r->ceilings.max[SKD_LIMIT_TIMEOUT])
        return skd_err_set(err, SKD_EINVAL,
                           "timeoutMs %lld is above the operator's ceiling "
                           "SKILLS_SANDBOX_MAX_TIMEOUT_MS=%lld",
                           (long long)o->timeout_ms, (long long)r->ceilings.max[SKD_LIMIT_TIMEOUT]);
    skd_sandbox_config cfg;
    int has_ws = 0, rc;
    unsigned gen = 0;
    if ((rc = skd__live_hold(r, key, id, &cfg, &has_ws, &gen, err)) != 0)
        return rc;
    int64_t timeout = o->timeout_ms > 0 ? o->timeout_ms : cfg.timeout_ms;
    int64_t t_end = skd_mono_ms() + timeout;
    pthread_mutex_lock(&in->mu);
    struct ictx *c = get_locked(in, id, lang, name, cfg.output_limit, err);
    if (c) {
        c->refs++; /* this call's */
        while (c->busy && c->linked && skd_mono_ms() < t_end)
            cv_wait_ms(c, 50);
        if (c->busy || !c->linked) {
            rc = c->linked ? skd_err_set(err, SKD_EBUSY,
                                         "context %s is running another call; try again when "
                                         "it ends",
                                         name)
                           : skd_err_set(err, SKD_ENOENT, "no such sandbox (it has ended)");
            unref_locked(c);
            c = NULL;
        } else {
            c->busy = 1;
        }
    } else {
        rc = err->code ? err->code : SKD_ENOMEM;
    }
    int need_start = c && !c->proc;
    int restarted = need_start && c->ever;
    pthread_mutex_unlock(&in->mu);
    if (c && need_start)
        rc = start(r, c, key, &cfg, has_ws, err);
    if (c && rc == 0) {
        *out = run_code(r, c, id, o, timeout, restarted, err);
        if (!*out)
            rc = err->code ? err->code : SKD_ENOMEM;
        else if (has_ws)
            commit_ws(r, id, gen, o->usage, *out);
    }
    if (c) {
        pthread_mutex_lock(&in->mu);
        c->busy = 0;
        pthread_cond_broadcast(&c->cv);
        unref_locked(c);
        pthread_mutex_unlock(&in->mu);
    }
    skd__live_release(r, key, id);
    return rc;
}
