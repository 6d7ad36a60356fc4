/*
 * Runner internals shared by runner.c (submission, queue, kill) and
 * supervisor.c (the one thread that starts and watches runs). Not a public
 * interface.
 *
 * Locking: r->mu protects the run list, the counters, each run's state and
 * kill_req. Everything else in a run (descriptors, buffers, outcome) is
 * touched only by the supervisor thread once the run is queued.
 */
#ifndef SKILLD_SANDBOX_RUNNER_INT_H
#define SKILLD_SANDBOX_RUNNER_INT_H

#include <pthread.h>
#include <stdint.h>

#include "net/egress.h"
#include "sandbox/provider.h"
#include "sandbox/spawner/spawner_client.h"
#include "skilld/buf.h"
#include "skilld/log.h"

enum run_state { RUN_QUEUED, RUN_STARTING, RUN_RUNNING };
enum watch_kind { W_PID, W_OUT, W_ERR, W_IN, W_STATUS, W_TIMER, W_COUNT };

struct run;

/* The epoll tag of one descriptor of one run. */
struct watch {
    struct run *run;
    enum watch_kind kind;
};

struct stream {
    int fd;         /* read end, -1 once closed */
    skd_buf buf;    /* kept bytes, max = outputLimit */
    uint64_t total; /* every byte read, kept or not */
};

struct skd__live_rec; /* live.c */

struct run {
    struct run *next;      /* r->head list, in submission order */
    struct run *kill_next; /* supervisor-local list of runs to kill */
    char id[SKD_UUID_LEN + 1];
    char *key;
    char **argv, **envp;
    char *image, *rootfs, *workspace, *cwd;
    char *skill_dir;                  /* read-only at /skill, or NULL (Agent Skills folders) */
    char *egress_allow, *egress_deny; /* narrowing host patterns, or NULL */
    char *live;                       /* an exec into this live sandbox, or NULL */
    int background;                   /* live only: no timer, not counted against the caps */
    void (*on_output)(void *arg, int stream, const char *data, size_t len);
    void *output_arg;
    /* background: takes the write end of its stdin (interp.c) */
    void (*on_stdin)(void *arg, int fd);
    skd_egress_run *egress; /* networkEnabled: its proxy, while running */
    skd_secret *secrets;    /* networkEnabled: the key's secrets (values
                               only ever here and in the proxy) */
    size_t nsecrets;
    char *ca_pem; /* with secrets: the egress CA for the trust bundle */
    skd_sandbox_config cfg;
    skd__sandbox_req req; /* points into the fields above */
    unsigned char *in;    /* stdin bytes */
    size_t in_len, in_off;
    const skd__provider *prov;
    void *pstate;
    char runtime_name[16]; /* the provider that runs it (from prepare) */
    enum run_state state;
    int kill_req;  /* under r->mu */
    int kill_sent; /* provider kill already called */
    int timed_out;
    int pidfd, in_fd, status_fd, timer_fd;
    struct stream out, err;
    char status_msg[SKD_ERR_MSG_MAX];
    size_t status_len;
    int reaped;
    skd__outcome oc;
    int64_t submitted, started, ended;
    skd_sandbox_done_fn done;
    void *done_arg;
    struct watch w[W_COUNT];
    /* Completed: its result was delivered and its descriptors unwatched,
     * but events of it may still be in the supervisor's current epoll
     * batch (supervisor.c, complete), so it is freed after the batch. */
    int completed;
    struct run *dead_next;
};

struct skd_runner {
    pthread_mutex_t mu;
    pthread_t thread;
    int thread_started;
    int epfd, evfd;
    int stopping;
    struct run *head, *tail;
    int running, queued;
    int running_bg; /* of running: background runs of live sandboxes */
    int max_conc, max_key, max_queued;
    char *runtime, *data_dir, *allowed;
    skd_sandbox_config defaults;
    skd_sandbox_ceilings ceilings; /* checked at submission (the spawner checks again) */
    skd__spawner_client *spawner;  /* made by the supervisor thread */
    skd__spawner_conf spawner_conf;
    int spawner_ready; /* under mu: 1 ok, -1 failed */
    pthread_cond_t spawner_cv;
    skd_err spawner_err;
    const skd_config *cfg;             /* borrowed */
    struct run *dead;                  /* completed runs, freed after the batch (supervisor only) */
    skd_egress *egress;                /* the egress proxy, made on the first networkEnabled run
                                          (under mu) */
    skd_sandbox_secrets_fn secrets_fn; /* under mu; NULL: no secrets */
    void *secrets_arg;
    skd_live_egress_fn live_egress_fn; /* under mu; NULL: records dropped */
    void *live_egress_arg;
    skd_live_event_fn live_event_fn; /* under mu; NULL: nobody is told */
    void *live_event_arg;
    skd_live_paused_fn live_paused_fn; /* under mu; NULL: this runner's alone */
    void *live_paused_arg;
    /* Live sandboxes (live.c), under live_mu. */
    skd_live_tick_fn live_tick_fn; /* NULL: none */
    void *live_tick_arg;
    int64_t live_next_tick; /* skd_mono_ms */
    pthread_mutex_t live_mu;
    pthread_cond_t live_cv;
    pthread_t live_thread; /* the reaper, started by the first create or the tick hook */
    int live_thread_started, live_stop;
    struct skd__live_rec *lives;
    int nlive, live_max, live_max_key;
    int64_t live_idle, live_lifetime; /* defaults and ceilings, ms */
    int live_max_paused_key;          /* SKILLS_SANDBOX_MAX_PAUSED_PER_KEY */
    int64_t live_paused_bytes;        /* SKILLS_SANDBOX_PAUSED_MAX_BYTES, per key */
    struct skd__interp *interp;       /* interpreter contexts (interp.c) */
};

/* live.c: set up (from the operator's settings), stop the reaper and
 * forget every record (the spawner ends the sandboxes as it goes), free. */
void skd__live_init(skd_runner *r, const skd_config *cfg);
void skd__live_stop(skd_runner *r);
void skd__live_free(skd_runner *r);

/* Interpreter contexts (interp.c): set up from the operator's settings;
 * forget a sandbox's contexts when it ends; free every context once the
 * supervisor has stopped. */
struct skd__interp;
void skd__interp_init(skd_runner *r, const skd_config *cfg);
void skd__interp_forget(skd_runner *r, const char *sandbox_id);
void skd__interp_free(skd_runner *r);
/* live.c, for interp.c: key's live sandbox id, its limits, whether it
 * has a workspace and the spawner that holds it (*gen); held (counted as a
 * running exec, so not idle) until skd__live_release. 0, SKD_EPAUSED or
 * SKD_ENOENT. */
int skd__live_hold(skd_runner *r, const char *key, const char *id, skd_sandbox_config *cfg,
                   int *has_ws, unsigned *gen, skd_err *err);
void skd__live_release(skd_runner *r, const char *key, const char *id);

/* The runner's egress proxy, started on first use (thread-safe); NULL with
 * err set when it cannot start. */
skd_egress *skd__runner_egress(skd_runner *r, skd_err *err);

/* supervisor.c: serve egress_fd (stolen: closed on every path), a socket
 * placed on a sandbox's loopback, with the operator's egress policy
 * narrowed by the operator's list for key and by allow/deny (either may
 * be NULL), and secrets (borrowed; copied). The runner's proxy must be
 * started (skd__runner_egress). *out: the handle for skd__egress_detach. */
int skd__runner_egress_attach(skd_runner *r, const char *key, const char *allow, const char *deny,
                              const skd_secret *secrets, size_t nsecrets, int egress_fd,
                              skd_egress_run **out, skd_err *err);

/* live.c: a copy of the secrets live sandbox id of key was made with (what
 * its proxy puts in), for an exec's placeholders: 0 with *out (caller
 * frees with skd_secrets_free; NULL and 0 when it has none or is gone). */
int skd__live_secrets(skd_runner *r, const char *key, const char *id, skd_secret **out, size_t *n,
                      skd_err *err);

/* runner.c: key's secrets from the engine's source (none without one). */
int skd__runner_secrets(skd_runner *r, const char *key, skd_secret **out, size_t *n, skd_err *err);

void skd__run_free(struct run *run);
/* result.c: a JSON string of the n bytes at p (NULL: ""), invalid UTF-8
 * replaced with U+FFFD. New reference, NULL when out of memory. */
json_t *skd__lossy_string(const char *p, size_t n);
/* result.c: a result's "workspace" object: {kept: false, error} when the
 * commit was refused (ws_error), else {kept: true, changed[, bytes]}. */
json_t *skd__ws_result_json(int ws_error, uint64_t ws_bytes, const char *ws_message);
void skd__runner_wake(skd_runner *r);
int skd__supervisor_start(skd_runner *r, skd_err *err);

#endif
