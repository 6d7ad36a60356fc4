/*
 * Live sandboxes, the server's half: what live.c (the records, the caps,
 * the reaper, create, exec, delete), live_proc.c (background processes)
 * and live_snap.c (pause, resume, fork) share. Functions named _locked
 * are called with r->live_mu held.
 */
#ifndef SKD_SANDBOX_LIVE_INT_H
#define SKD_SANDBOX_LIVE_INT_H

#include "sandbox/runner_int.h"

/* How many background processes a sandbox keeps (running or ended, whose
 * output may still be read); the oldest ended one makes room. */
#define MAX_PROCS 16

/* A background process. Freed by whoever is last: its completion or its
 * sandbox's end (detached). Under live_mu. */
struct live_proc {
    struct live_proc *next;
    skd_runner *r;
    char id[SKD_UUID_LEN + 1]; /* the run's id: the processId */
    char *command;
    skd_buf out, err; /* kept output, capped at the sandbox's outputLimit */
    uint64_t out_total, err_total;
    int running, detached;
    int exited, exit_code, signal, killed, oom_killed;
    int64_t started_unix, duration_ms;
};

struct skd__live_rec {
    struct skd__live_rec *next;
    char id[SKD_UUID_LEN + 1];
    char *key;
    char *image;
    skd_sandbox_config cfg;
    int has_ws;
    unsigned gen;           /* the spawner that holds it */
    int64_t created_unix;   /* ms since the epoch */
    int64_t created, used;  /* monotonic ms */
    int64_t idle, lifetime; /* ms */
    int busy;               /* foreground execs running */
    int making;             /* the spawner is making it: counted, not yet usable */
    struct live_proc *procs;
    int nprocs;
    /* networkEnabled: its egress proxy while it runs (a pause ends it, a
     * resume places a new one), and the key's
     * secrets it was made or resumed with (its execs' placeholders). */
    skd_egress_run *egress;
    skd_secret *secrets;
    size_t nsecrets;
    /* Pause, resume, fork (the section at the end). */
    char *ws;            /* the workspace's path, for a resume, or NULL */
    int on_idle_pause;   /* its idle timeout pauses it instead of ending it */
    int paused;          /* its files are saved; it has no process */
    int moving;          /* MOVE_PAUSE or MOVE_RESUME under way, or 0 */
    int forks;           /* forks of it under way */
    int64_t saved_bytes; /* paused: what its saved files hold */
};

enum { MOVE_PAUSE = 1, MOVE_RESUME };

void skd__live_proc_free(struct live_proc *p);
void skd__live_procs_detach_locked(struct skd__live_rec *l);
void skd__live_rec_free(struct skd__live_rec *l);
int64_t skd__live_unix_ms(void);
/* ms since the epoch as an ISO 8601 string in UTC. */
json_t *skd__live_iso_time(int64_t ms);
/* The record as the API shows it, or NULL (no memory). */
json_t *skd__live_rec_json(const struct skd__live_rec *l, int64_t now);
/* The record of id owned by key (not being made), or NULL. */
struct skd__live_rec *skd__live_find_locked(skd_runner *r, const char *key, const char *id);
/* 1 with err set (SKD_EPAUSED) when l is paused or being paused. */
int skd__live_paused_locked(const struct skd__live_rec *l, skd_err *err);
void skd__live_unlink_locked(skd_runner *r, struct skd__live_rec *l);
/* Running (and being made) sandboxes of key, or of every key with NULL. */
int skd__live_count_key_locked(skd_runner *r, const char *key);
/* Stop serving an egress proxy of sandbox id of key; its last records go
 * to *out when asked for, else to the runner's live egress hook. */
void skd__live_egress_end_run(skd_runner *r, const char *key, const char *id, skd_egress_run *eg,
                              json_t **out);
/* Tell the live event hook (no lock held) what (SKD_LIVE_*) happened to
 * sandbox id of key (sandbox: its object, or NULL). */
void skd__live_tell(skd_runner *r, const char *key, const char *id, int what,
                    const json_t *sandbox);
/* End a record already unlinked (the spawner kills its processes). */
void skd__live_end_rec(skd_runner *r, struct skd__live_rec *l, json_t **egress);
/* Have the spawner make l (restore: from its snapshot), with its proxy. */
int skd__live_make(skd_runner *r, struct skd__live_rec *l, const char *workspace, int restore,
                   skd_err *err);
/* Start the reaper on first use. */
int skd__live_reaper_start_locked(skd_runner *r, skd_err *err);
/* The reaper: l's idle timeout is over and it pauses (live_snap.c). */
int skd__live_idle_pause_locked(skd_runner *r, struct skd__live_rec *l);

#endif
