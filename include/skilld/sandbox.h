/*
 * The sandbox runner: run an untrusted command in an isolated environment
 * with CPU, memory, time, process, output, network and filesystem limits,
 * and get back what it printed and how it ended.
 *
 * One runner per engine (skd_engine_runner). A run is described by a
 * skd_sandbox_spec and a skd_sandbox_config (OmniRoute's field names on the
 * wire); it gets a UUID, waits in a FIFO queue while the global or the
 * per-key cap on concurrent runs is reached, and is then started by the
 * runner's one supervisor thread through a provider (native, docker,
 * podman). The supervisor watches every running sandbox at once: process
 * descriptors, output pipes and timers. Output is read as it arrives and
 * kept up to outputLimit bytes per stream; the rest is drained and counted.
 *
 * Fail closed: when any limit or isolation step cannot be applied the
 * command does not run and the result's error is SKD_ESANDBOX
 * (sandbox_unavailable) with a message naming the step.
 */
#ifndef SKILLD_SANDBOX_H
#define SKILLD_SANDBOX_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "skilld/config.h"
#include "skilld/error.h"
#include "skilld/limits.h"
#include "skilld/net.h"
#include "skilld/registry.h"
#include "skilld/util.h"

typedef struct skd_runner skd_runner;

/* Limits of one run: one member per row of include/skilld/limits.h (an
 * int64_t for an INT row, an int 0/1 for a BOOL row), named there with
 * what it means and its range. */
#define SKD__LIMIT_CTYPE_INT int64_t
#define SKD__LIMIT_CTYPE_BOOL int
typedef struct skd_sandbox_config {
#define SKD__LIMIT_MEMBER(ID, field, kind, ...) SKD__LIMIT_CTYPE_##kind field;
    SKD_SANDBOX_LIMITS(SKD__LIMIT_MEMBER)
#undef SKD__LIMIT_MEMBER
    /* Not on the wire: set by the runner from the operator's settings. */
    int64_t workspace_quota; /* SKILLS_WORKSPACE_QUOTA_BYTES for the overlay; 0: none */
    int64_t data_reserve;    /* SKILLS_DATA_RESERVE_BYTES kept free when committing */
} skd_sandbox_config;

/* The value of row id in c, as an int64_t (a BOOL as 0 or 1). */
int64_t skd_limit_get(const skd_sandbox_config *c, int id);
/* Set row id of c to v (a BOOL row takes v != 0). */
void skd_limit_set(skd_sandbox_config *c, int id, int64_t v);

/* Hard bounds accepted from a caller (the limits' ranges are the rows'). */
#define SKD_SANDBOX_MAX_ARGS 4096
#define SKD_SANDBOX_MAX_STDIN (64u << 20)

/* The operator's ceilings (SKILLS_SANDBOX_MAX_*, SKILLS_SANDBOX_NETWORK_ENABLED):
 * no call input, no manifest and no default may go above them. The runner
 * checks every run against them at submission and the spawner checks again
 * (the last line), so this is a plain value that can be sent and copied.
 * max[id] is the ceiling of row id in the field's unit: its ceiling setting
 * (x scale; for a BOOL row 1 when the operator's switch is on, else 0), or
 * the row's max when it has no setting. */
typedef struct skd_sandbox_ceilings {
    int64_t max[SKD_LIMIT_N];
} skd_sandbox_ceilings;

/* Fill c from cfg; cfg NULL gives the built-in defaults (60000 ms,
 * 1024 MiB, cores x 100 %, 256 pids, 1 MiB, 256 MiB, no network). */
void skd_sandbox_ceilings_from_config(skd_sandbox_ceilings *c, const skd_config *cfg);

/* The ceiling check where a run enters (the runner's submission, which every
 * sandboxed call passes; the spawner checks again on its own). Checks every
 * field of sc against its row's range and ceil. Returns 0; SKD_EINVAL when a
 * limit is out of its range or above its ceiling, the message naming the
 * field and the setting ("memoryLimit 2048 is above the operator's ceiling
 * SKILLS_SANDBOX_MAX_MEMORY_MB=1024"); SKD_EFORBIDDEN for networkEnabled
 * true when the operator did not allow it. */
int skd_sandbox_config_check(const skd_sandbox_config *sc, const skd_sandbox_ceilings *ceil,
                             skd_err *err);

/* Lower every INT field of sc that is above its ceiling to the ceiling.
 * Returns the bits (1u << id) of the fields lowered (0: none).
 * networkEnabled is not clamped: skd_sandbox_config_check refuses it. */
unsigned skd_sandbox_config_clamp(skd_sandbox_config *sc, const skd_sandbox_ceilings *ceil);

/* The wire names of the fields in bits ("timeout", "memoryLimit", ...) as
 * a new JSON array (NULL when out of memory). */
json_t *skd_sandbox_clamped_json(unsigned bits);

/* Log a warning for every default (SKILLS_SANDBOX_TIMEOUT_MS, ...) above
 * its ceiling: such a default is clamped to the ceiling. Returns the
 * number of warnings. */
int skd_sandbox_ceilings_warn(const skd_config *cfg);

/* One line for `skilld doctor`: every limit's default (after the ceiling)
 * and its ceiling, in row order, into buf (cap bytes, NUL-terminated,
 * cut short when it does not fit). Returns the number of defaults the
 * ceilings lowered. cfg NULL: the built-in values. */
int skd_sandbox_limits_describe(const skd_config *cfg, char *buf, size_t cap);

/* Fill c with the defaults from cfg (SKILLS_SANDBOX_TIMEOUT_MS,
 * SKILLS_SANDBOX_MEMORY_MB, ...), each clamped to its ceiling;
 * networkEnabled is false. cfg NULL gives the built-in defaults. */
void skd_sandbox_config_defaults(skd_sandbox_config *c, const skd_config *cfg);

/* Override the fields present in obj (borrowed; a JSON object with
 * OmniRoute's names; unknown keys are errors). Values are range-checked.
 * Returns 0 or SKD_EINVAL naming the field; c is unchanged on error. */
int skd_sandbox_config_from_json(skd_sandbox_config *c, const json_t *obj, skd_err *err);

/* Add row id's property to a skill's input schema (stolen; its
 * "properties" object gets the row's manifest key, e.g. timeoutMs, typed
 * and ranged as the row says). Returns schema, or NULL (schema released)
 * when it has no properties, the row no manifest key, or memory ran out. */
json_t *skd_sandbox_limit_schema(json_t *schema, int id);

/* The config as a JSON object. New reference. */
json_t *skd_sandbox_config_to_json(const skd_sandbox_config *c);

/* What happened to one run. Strings owned by the result; release with
 * skd_sandbox_result_free. */
typedef struct skd_sandbox_result {
    char id[SKD_UUID_LEN + 1];
    char runtime[16]; /* provider name: "native", "docker", ... */
    int error;        /* 0, or SKD_E*: the command did not run (message below) */
    char message[SKD_ERR_MSG_MAX];
    int exited; /* 1: the process exited and exit_code is valid */
    int exit_code;
    int signal; /* terminating signal, 0 when it exited */
    char *out;  /* kept stdout bytes (NUL-terminated), never NULL after a run */
    size_t out_len;
    uint64_t out_total; /* bytes the command wrote to stdout, kept or not */
    char *err;
    size_t err_len;
    uint64_t err_total;
    int truncated; /* some output was dropped */
    int64_t duration_ms;
    int killed; /* killed by the runner: timeout, kill(), cancel, OOM */
    int timed_out;
    int oom_killed;
    json_t *egress; /* networkEnabled: what the run reached through the egress
                       proxy (an array, see src/net/egress.h), else NULL */
    /* The workspace quota overlay (a writable workspace with a quota):
     * ws_checked 1 when there was one; ws_error 0 when the run's changes
     * were kept (ws_bytes: what the workspace holds now, or
     * SKD_WS_BYTES_UNCHANGED when the run changed nothing and the workspace
     * was not measured), else SKD_EQUOTA or SKD_ECANCELLED (killed: nothing
     * kept) with ws_message. */
    int ws_checked;
    int ws_error;
    uint64_t ws_bytes;
    char ws_message[SKD_ERR_MSG_MAX];
    uint64_t ws_written; /* bytes of files the run's kept changes wrote */
    /* Metering, read from the run's own cgroup when it ended (native):
     * CPU time in microseconds and the memory high-water mark in bytes;
     * 0 where the kernel or the provider does not keep them. */
    int64_t cpu_us;
    int64_t mem_peak_bytes;
} skd_sandbox_result;

/* ws_bytes of a run that wrote nothing: its workspace is as it was, so it
 * is not walked (a walk costs a stat per entry, in the spawner every key
 * shares). The result then says "changed": false and no bytes. */
#define SKD_WS_BYTES_UNCHANGED UINT64_MAX

/* Add what run r used to u (NULL ok: nothing metered): one sandbox run,
 * its CPU time, its memory peak (the largest of the call's runs), the
 * bytes its egress record says went up and down, and the bytes it wrote
 * into the workspace. */
void skd_sandbox_usage_add(skd_usage *u, const skd_sandbox_result *r);

/* The bytes, up and down, an egress record (an array as in
 * skd_sandbox_result.egress; NULL ok: 0) says went through the proxy. */
int64_t skd_sandbox_egress_bytes(const json_t *egress);

/* Free the strings of r (not r itself) and clear them. NULL ok. */
void skd_sandbox_result_free(skd_sandbox_result *r);

/* {id, runtime, exitCode (null when signalled or not run), signal (name or
 * null), stdout, stderr, truncated, duration, killed, timedOut, oomKilled}
 * plus error {code, message} when the command did not run, workspace
 * {kept, bytes} or {kept: false, error: {code, message}} when the run had
 * the quota overlay, and egress [...] with networkEnabled. Output bytes that
 * are not UTF-8 are replaced with U+FFFD. New reference. */
json_t *skd_sandbox_result_to_json(const skd_sandbox_result *r);

/* Called once per second (about) from the thread blocked in
 * skd_sandbox_run, with the milliseconds since the run was submitted. */
typedef void (*skd_sandbox_tick_fn)(void *arg, int64_t elapsed_ms);

/* One run. Everything is borrowed and copied by skd_sandbox_run/start, so
 * it may be freed as soon as they return. */
typedef struct skd_sandbox_spec {
    const char *runtime;     /* NULL: the runner's (SKILLS_SANDBOX_RUNTIME) */
    const char *image;       /* NULL or "host": the host image */
    const char *const *argv; /* NULL-terminated; argv[0] is the program */
    const char *const *env;  /* "NAME=value", NULL-terminated; NULL: PATH, HOME, LANG, TMPDIR */
    const void *stdin_data;  /* may be NULL: stdin is empty */
    size_t stdin_len;
    const skd_sandbox_config *config; /* NULL: the runner's defaults */
    const char *workspace;            /* host directory at /workspace; NULL: none */
    const char *key_id;               /* for the per-key cap; NULL counts as "" */
    const char *cwd;                  /* NULL: /workspace when there is one, else /tmp */
    skd_cancel *cancel;               /* skd_sandbox_run only: firing it kills the run */
    skd_sandbox_tick_fn tick;         /* skd_sandbox_run only; may be NULL */
    void *tick_arg;
    const char *skill_dir; /* host directory mounted read-only at /skill; NULL: none
                              (Agent Skills folders, src/skills/command_skill.c) */
    /* networkEnabled: host patterns that narrow the operator's egress lists
     * for this run (a key's or a custom skill's); NULL: no narrowing. A host
     * must match the operator's SKILLS_SANDBOX_EGRESS_ALLOW_HOSTS and this. */
    const char *egress_allow;
    const char *egress_deny;
    /* Set by skd_live_exec only: run in this live sandbox (its UUID),
     * whose workspace and image are its own. */
    const char *live_id;
    /* May be NULL. Called on the supervisor thread with every chunk the
     * command writes (stream 1: stdout, 2: stderr) as it arrives, kept or
     * not; it must not block and must not call into the runner. */
    void (*on_output)(void *arg, int stream, const char *data, size_t len);
    void *output_arg;
    /* skd_sandbox_run only: call on_output on the waiting thread instead
     * (there it may block); chunks wait in a queue of at most 1 MiB, past
     * which they are dropped (the result still holds the kept output). */
    int output_on_caller;
    /* With live_id only: a process that keeps running after the call (no
     * timeout; it ends with its sandbox, or when it is killed), not
     * counted against the caps of concurrent runs. */
    int background;
    /* May be NULL; with background only. The process's stdin stays open:
     * its write end (non-blocking, close-on-exec) is handed to on_stdin
     * (with output_arg) on the supervisor thread when the process starts,
     * and the callee owns it from then on (interpreter contexts,
     * src/sandbox/interp.c). stdin_data is then ignored. */
    void (*on_stdin)(void *arg, int fd);
} skd_sandbox_spec;

/* Completion of an asynchronous run, called on the supervisor thread: it
 * must not block and must not call skd_sandbox_run. res is the callback's:
 * it must release it with skd_sandbox_result_free (at once or later). */
typedef void (*skd_sandbox_done_fn)(void *arg, skd_sandbox_result *res);

/* Runner settings. Zero fields take the defaults noted. */
typedef struct skd_runner_opts {
    int max_concurrent;         /* 0: SKILLS_SANDBOX_MAX_CONCURRENT, or 4 x cores */
    int max_per_key;            /* 0: SKILLS_SANDBOX_MAX_PER_KEY, or half the global cap (>= 1) */
    const char *runtime;        /* NULL: SKILLS_SANDBOX_RUNTIME */
    const char *data_dir;       /* NULL: DATA_DIR (images/ lives there) */
    const char *allowed_images; /* NULL: SKILLS_ALLOWED_SANDBOX_IMAGES */
    int max_queued;             /* 0: 16 x the global cap (at least 64) */
    /* The user that owns DATA_DIR's workspaces when the process drops
     * privileges after starting the runner (skilld serve as root): the
     * sandbox's idmapped workspace mount maps it to the sandbox user. */
    int owner_uid_set;
    unsigned owner_uid, owner_gid;
    /* 1: the caller starts at most one sandbox (skilld exec): the spawner
     * makes one pre-made native sandbox at start and no other after it. */
    int one_run;
} skd_runner_opts;

/* Start a runner and its supervisor thread. cfg is borrowed and must outlive
 * the runner; opts may be NULL. Caller frees with skd_runner_free. */
int skd_runner_new(const skd_config *cfg, const skd_runner_opts *opts, skd_runner **out,
                   skd_err *err);

/* Kill every run (queued runs complete with killed), wait for their
 * completions, stop the supervisor and free. NULL ok. */
void skd_runner_free(skd_runner *r);

/* The first half of skd_runner_free: kill every run, wait for their
 * completions, stop the supervisor and let the spawner begin its exit
 * (its cgroups and mounts are removed in it) without waiting for it; no
 * run can start afterwards. skd_runner_free then waits. For a caller with
 * work left to do meanwhile (skilld exec writes its audit row). NULL ok. */
void skd_runner_stop(skd_runner *r);

/*
 * Where a run's secrets come from (src/engine/secrets.c): fn fills *out
 * with key_id's secrets, opened (a new array of *n, the runner frees it
 * with skd_secrets_free), or returns an SKD_E* code with err set; the run
 * is then refused (fail closed). Called on the submitting thread for a run
 * with networkEnabled and a key. The run's environment gets NAME=placeholder
 * for each, and its egress proxy the values.
 */
typedef int (*skd_sandbox_secrets_fn)(void *arg, const char *key_id, skd_secret **out, size_t *n,
                                      skd_err *err);
void skd_runner_set_secrets(skd_runner *r, skd_sandbox_secrets_fn fn, void *arg);

/* 1 when NAME (or NAME=value) is a variable the sandbox's environment sets
 * itself: PATH, HOME, the proxy and CA variables, any SKILLD_ or SKILLS_
 * name. A secret may not take such a name. */
int skd_sandbox_env_reserved(const char *name);

/* Run and wait. Fills res (caller releases with skd_sandbox_result_free)
 * and returns 0 when the run was attempted — res->error then says whether
 * the command really ran. Returns SKD_EINVAL / SKD_ENOMEM / SKD_ESANDBOX
 * (no provider) without touching res->out when the spec is refused. */
int skd_sandbox_run(skd_runner *r, const skd_sandbox_spec *spec, skd_sandbox_result *res,
                    skd_err *err);

/* Queue a run and return at once; id_out (may be NULL) receives its id.
 * done is called exactly once when 0 is returned. SKD_EBUSY when the queue
 * of waiting runs is full (skd_runner_opts.max_queued). */
int skd_sandbox_start(skd_runner *r, const skd_sandbox_spec *spec, skd_sandbox_done_fn done,
                      void *arg, char id_out[SKD_UUID_LEN + 1], skd_err *err);

/* Kill one run (queued or running): its whole process tree gets SIGKILL.
 * Returns 0, or SKD_ENOENT when no such run is active. */
int skd_runner_kill(skd_runner *r, const char *id);

/* The pid of the runner's spawner process (the single-threaded helper that
 * makes every sandbox; its cgroups are "<...>/skilld/<that pid>/<run id>"),
 * or -1 while it is being replaced. */
long skd_runner_spawner_pid(skd_runner *r);

/* Kill every active run. Returns how many were signalled. */
int skd_runner_kill_all(skd_runner *r);

/* 1 when id is queued or running. */
int skd_runner_is_running(skd_runner *r, const char *id);

/* Runs started and not finished (queued ones not counted). */
int skd_runner_running_count(skd_runner *r);
/* Runs waiting in the queue. */
int skd_runner_queued_count(skd_runner *r);

/* Map an image name to its root filesystem: "host" (or NULL/"") gives
 * *rootfs NULL (the host image); "name[:tag]" (tag default "latest") must be
 * listed in allowed (comma-separated; NULL: none) and exist as
 * data_dir/images/<name>/<tag>/rootfs. Returns 0, SKD_EINVAL for a bad
 * name, SKD_EFORBIDDEN when not allowed, SKD_ENOENT when not imported.
 * *rootfs is malloc'd (caller frees). */
int skd_sandbox_image_rootfs(const char *data_dir, const char *allowed, const char *image,
                             char **rootfs, skd_err *err);

/* The provider runtime ("native", "docker", "podman" or "auto") stands
 * for: itself, or for auto the first that works here (native, podman,
 * docker). Returns its name (static) or NULL with err set. */
const char *skd_sandbox_runtime_pick(const char *runtime, skd_err *err);

/* Is the named provider usable here? 0 or SKD_ESANDBOX with why. */
int skd_sandbox_provider_detect(const char *runtime, skd_err *err);

/* The engine's runner, started on first use (thread-safe). Borrowed; it
 * lives until skd_engine_close. NULL with err set when it cannot start. */
skd_runner *skd_engine_runner(skd_engine *e, skd_err *err);

/* ---- live sandboxes (src/sandbox/live.c; DESIGN.md, "Live sandboxes") ----
 *
 * A live sandbox lives across calls: its processes, its /tmp and its
 * cgroup (the limits hold for the sandbox as a whole) stay until it is
 * deleted, its idle timeout or lifetime is over, its key is revoked or the
 * server ends. Each belongs to the key that made it; every call below
 * takes that key, and another key's sandbox is SKD_ENOENT, as one that
 * does not exist. Native runtime only. */
typedef struct skd_live_opts {
    const char *image;                /* NULL or "host": the host image */
    const skd_sandbox_config *config; /* NULL: the runner's defaults */
    const char *workspace;            /* host directory at /workspace, or NULL */
    int64_t idle_timeout_ms;          /* 0: SKILLS_SANDBOX_IDLE_TIMEOUT_MS (also the ceiling) */
    int64_t lifetime_ms;              /* 0: SKILLS_SANDBOX_LIFETIME_MS (also the ceiling) */
    int on_idle_pause;                /* the idle timeout pauses it instead of ending it */
    const char *id;                   /* NULL: a new UUID; else this one (the caller's row) */
} skd_live_opts;

/* Make a live sandbox for key. *out: a new object {id, state, image,
 * createdAt, expiresAt, idleExpiresAt, limits, idleTimeoutMs, lifetimeMs,
 * workspace}. SKD_EINVAL naming a field above its ceiling; SKD_EBUSY past
 * SKILLS_SANDBOX_MAX_LIVE_PER_KEY or SKILLS_SANDBOX_MAX_LIVE; SKD_ESANDBOX
 * when it cannot be made (fail closed). Blocks while the spawner makes it. */
int skd_live_create(skd_runner *r, const char *key, const skd_live_opts *o, json_t **out,
                    skd_err *err);
/* key's live sandboxes, an array of the objects above. New reference. */
json_t *skd_live_list(skd_runner *r, const char *key);
/* One of key's: 0 and *out (new reference), or SKD_ENOENT. */
int skd_live_get(skd_runner *r, const char *key, const char *id, json_t **out, skd_err *err);
/* End one of key's: every process killed, its cgroup and layers removed.
 * 0 or SKD_ENOENT. */
int skd_live_delete(skd_runner *r, const char *key, const char *id, skd_err *err);
/* As skd_live_delete; *egress receives what the sandbox's egress proxy
 * did since the last exec took its records (a new array of records as in
 * skd_sandbox_result.egress, each with sandboxId; NULL without network or
 * when there is nothing). egress NULL: they go to the live egress hook
 * below (skd_live_delete does that). */
int skd_live_delete_egress(skd_runner *r, const char *key, const char *id, json_t **egress,
                           skd_err *err);
/* End every live sandbox of key (its revocation). Returns how many. */
int skd_live_delete_key(skd_runner *r, const char *key);

/* Where the egress records of a live sandbox go when no call takes them:
 * it ended by its idle timeout, its lifetime, its key's revocation, the
 * server's stop, or skd_live_delete. fn gets the owner key, the sandbox
 * id and the records (borrowed, as in skd_live_delete_egress); it may
 * block briefly (it writes a row). NULL fn: they are dropped. */
typedef void (*skd_live_egress_fn)(void *arg, const char *key_id, const char *sandbox_id,
                                   const json_t *egress);
void skd_runner_set_live_egress(skd_runner *r, skd_live_egress_fn fn, void *arg);

/* What a live event tells. */
enum {
    SKD_LIVE_ENDED = 0,    /* whatever ended it: a delete, its idle timeout or
                              lifetime, its key's revocation, its spawner's
                              death, the runner's stop while it ran */
    SKD_LIVE_PAUSED = 1,   /* the reaper paused it (sandbox: its object) */
    SKD_LIVE_RELEASED = 2, /* the runner stopped while it was paused: its
                              saved files stay, for whoever resumes it */
};
/* Told of a live sandbox's event (what: SKD_LIVE_*; sandbox borrowed, or
 * NULL). Called without the runner's locks; it may block briefly (the
 * engine updates the sandbox's row in the store). */
typedef void (*skd_live_event_fn)(void *arg, const char *key_id, const char *sandbox_id, int what,
                                  const json_t *sandbox);
void skd_runner_set_live_events(skd_runner *r, skd_live_event_fn fn, void *arg);
/* Asked before a pause: key_id's paused sandboxes that other holders (other
 * replicas, or none) keep, and the bytes of their saved files, for the
 * per-key paused cap and quota. Not 0: the pause is refused with err. */
typedef int (*skd_live_paused_fn)(void *arg, const char *key_id, int *n, int64_t *bytes,
                                  skd_err *err);
void skd_runner_set_live_paused(skd_runner *r, skd_live_paused_fn fn, void *arg);
/* The periodic work of whoever holds the runner over its live sandboxes
 * (the engine: its keys' revocations on other replicas, the saved files
 * no row names; src/engine/live_tick.c), called by the live sandbox
 * reaper every SKD_LIVE_TICK_MS with r and without the runner's locks. It
 * may block (it asks the store and the spawner); the reaper's idle and
 * lifetime checks wait meanwhile. Setting it starts the reaper, so the
 * first call comes within the reaper's first wait (200 ms). 0, or
 * SKD_ESANDBOX (no reaper thread). */
#define SKD_LIVE_TICK_MS 1000
typedef void (*skd_live_tick_fn)(void *arg, skd_runner *r);
int skd_runner_set_live_tick(skd_runner *r, skd_live_tick_fn fn, void *arg, skd_err *err);
/* The names under DATA_DIR/snapshots/paused (the spawner reads them: the
 * directory is root's): a new array of the sandbox ids there, at most the
 * ~7,000 one answer holds; *others: how many other names there are, and
 * other (cap bytes) the first of them. NULL on error (SKD_EUNSUPPORTED:
 * no snapshot directory). */
json_t *skd_live_saved_list(skd_runner *r, int *others, char *other, size_t cap, skd_err *err);
/* Remove the saved files of sandbox id (DATA_DIR/snapshots/paused/<id>)
 * through the spawner, as a delete of it does: for a sandbox that has
 * ended. SKD_EBUSY when this runner holds a sandbox of that id (it is
 * left alone); 0, or SKD_ENOENT when there were none. */
int skd_live_saved_drop(skd_runner *r, const char *id, skd_err *err);

typedef struct skd_live_exec_opts {
    /* argv, env, stdin, cwd (NULL: /workspace when the sandbox has one,
     * else /tmp), cancel, tick; runtime, image, workspace and config are
     * the sandbox's and ignored. Borrowed. */
    const skd_sandbox_spec *spec;
    int64_t timeout_ms; /* 0: the sandbox's timeout */
} skd_live_exec_opts;

/* Run one command in key's live sandbox id and wait, as skd_sandbox_run
 * does (the same result). SKD_ENOENT when there is no such sandbox of key
 * or it ended. */
int skd_live_exec(skd_runner *r, const char *key, const char *id, const skd_live_exec_opts *o,
                  skd_sandbox_result *res, skd_err *err);

/* Start a background process in key's live sandbox id and return at once
 * with its processId: it keeps running after the call (no timeout) until
 * it exits, is killed (skd_live_kill) or the sandbox ends. Its output is
 * kept up to the sandbox's outputLimit per stream. A sandbox keeps 16
 * processes (running, or ended and still readable); SKD_EBUSY when all 16
 * run. SKD_ENOENT for no such sandbox of key. */
int skd_live_exec_background(skd_runner *r, const char *key, const char *id,
                             const skd_live_exec_opts *o, char process_id[SKD_UUID_LEN + 1],
                             skd_err *err);
/* process_id NULL: an array of {processId, command, running, startedAt,
 * and when ended exitCode, signal, killed, oomKilled, durationMs}. Else
 * that one process with its kept output from the byte offsets given
 * (stdout, stderr, stdoutOffset and stderrOffset to read on from,
 * truncated). *out is a new reference. SKD_ENOENT for no such sandbox of
 * key or no such process in it. */
int skd_live_processes(skd_runner *r, const char *key, const char *id, const char *process_id,
                       int64_t out_off, int64_t err_off, json_t **out, skd_err *err);
/* Kill a background process (and everything it started). 0 or SKD_ENOENT. */
int skd_live_kill(skd_runner *r, const char *key, const char *id, const char *process_id,
                  skd_err *err);

/* ---- pause, resume, fork (live.c, native_snap.c) ----
 * A filesystem snapshot, not a process checkpoint: pause saves the root
 * layer and /tmp under DATA_DIR and ends every process; resume starts the
 * sandbox again (new processes, the same id) with those files; fork makes
 * a new sandbox of key with a copy of them. Memory is not kept.
 *
 * Pause: *changed 0 when it was paused already (nothing done). SKD_EBUSY
 * past SKILLS_SANDBOX_MAX_PAUSED_PER_KEY or while another pause, resume or
 * fork of it runs; SKD_EQUOTA when its files would take the key's paused
 * bytes past SKILLS_SANDBOX_PAUSED_MAX_BYTES (it runs on). Resume:
 * *changed 0 when it was running; SKD_EBUSY past the live caps. *out: the
 * sandbox object (new reference). Fork: *out is the new sandbox; the live
 * caps hold for it; new_id names it (NULL: a new UUID). SKD_ENOENT for no
 * such sandbox of key. An exec in a
 * paused sandbox is SKD_EPAUSED: nothing resumes it but a resume. */
int skd_live_pause(skd_runner *r, const char *key, const char *id, int *changed, json_t **out,
                   skd_err *err);
/* Hold key's paused sandbox sandbox (its object as skd_live_get gave it,
 * kept by another runner or this one's former life, whose saved files are
 * under the shared DATA_DIR) as a paused sandbox of this runner, with
 * workspace (NULL: none) for its resume. 0 (also when it is held here
 * already), SKD_EINVAL for an object that is not one or whose limits are
 * above this runner's ceilings, SKD_ENOMEM. */
int skd_live_adopt(skd_runner *r, const char *key, const json_t *sandbox, const char *workspace,
                   skd_err *err);
/* Forget key's paused sandbox id, which another runner holds now: the
 * record goes, its saved files and its row stay. 0, or SKD_ENOENT (none,
 * or not paused and still). */
int skd_live_forget(skd_runner *r, const char *key, const char *id);
int skd_live_resume(skd_runner *r, const char *key, const char *id, int *changed, json_t **out,
                    skd_err *err);
int skd_live_fork(skd_runner *r, const char *key, const char *id, const char *new_id, json_t **out,
                  skd_err *err);

#endif
