/*
 * The provider interface: how the runner (src/sandbox/runner.c) starts,
 * kills and cleans up one sandboxed process without knowing how the
 * isolation is made. Providers: native (namespaces + cgroups + seccomp,
 * src/sandbox/native/), docker and podman (their own files).
 *
 * Life of one run, and which thread calls what:
 *   detect   any thread, any time: can this provider work on this machine?
 *   prepare  the submitting thread: check that every limit in req can be
 *            applied (fail closed: SKD_ESANDBOX naming the limit), resolve
 *            the image, allocate the per-run state. May block briefly.
 *   spawn    the supervisor thread, when the run leaves the queue: start the
 *            process and hand back its descriptors. Must not block for
 *            long (no waiting for the sandboxed process to get ready: report
 *            readiness or the failing step through status_fd instead).
 *            Children made here die with the supervisor thread
 *            (PR_SET_PDEATHSIG follows the creating thread).
 *   kill     the supervisor thread, possibly more than once: SIGKILL every
 *            process of the run (cgroup, container), without waiting.
 *   cleanup  the supervisor thread, exactly once after a successful
 *            prepare: after the process exited (or when spawn failed, or
 *            the run was killed while queued); reports OOM and may rewrite
 *            the exit status (for example docker's 125..137 codes), then
 *            removes everything the run made and frees the state. Must not
 *            block for long.
 * The runner owns every descriptor in skd__spawned once spawn returned 0.
 */
#ifndef SKILLD_SANDBOX_PROVIDER_H
#define SKILLD_SANDBOX_PROVIDER_H

#include "skilld/sandbox.h"

typedef struct skd__spawner_client skd__spawner_client;

/* A validated run, owned by the runner; borrowed by the provider from
 * prepare until cleanup returns. */
typedef struct skd__sandbox_req {
    const char *id;                /* the run's UUID */
    const char *image;             /* "host" or "name:tag" */
    const char *rootfs;            /* NULL for host; else the image's rootfs dir */
    char *const *argv;             /* NULL-terminated, argv[0] non-empty */
    char *const *envp;             /* NULL-terminated NAME=value */
    const char *workspace;         /* host directory or NULL */
    const char *cwd;               /* absolute path inside the sandbox */
    const skd_sandbox_config *cfg; /* validated limits */
    const char *data_dir;          /* DATA_DIR */
    const char *skill_dir;         /* host directory mounted read-only at /skill, or NULL */
    int workspace_fd;              /* directory fd of workspace (the spawner's copy), or -1 */
    int skill_fd;                  /* directory fd of skill_dir, or -1 */
    /* networkEnabled with secrets: the egress CA's certificate (PEM), put
     * with the system's roots in the sandbox's trust bundle
     * (SKD__SANDBOX_TRUST_BUNDLE, sandbox/env.h); NULL: none. */
    const char *ca_pem;
    const char *live; /* an exec into this live sandbox (its UUID), or NULL */
    /* Server side only (the remote provider): the spawner to ask, and the
     * runtime name the spawner resolves (native|docker|podman|auto). */
    skd__spawner_client *spawner;
    const char *provider;
} skd__sandbox_req;

/* What spawn hands back. All descriptors O_CLOEXEC; pipe ends O_NONBLOCK. */
typedef struct skd__spawned {
    int pidfd;     /* the process whose exit ends the run (required) */
    int stdin_fd;  /* write end of the command's stdin, or -1 */
    int stdout_fd; /* read end of its stdout (required) */
    int stderr_fd; /* read end of its stderr (required) */
    int status_fd; /* -1, or a read end that yields EOF once the command is
                      exec'd, or a message (failing step) before EOF when
                      setting up the sandbox failed and nothing ran */
    int egress_fd; /* networkEnabled: the socket listening on the sandbox's
                      loopback for the egress proxy (src/net/egress.h), else -1 */
} skd__spawned;

/* A skd__spawned with no descriptor yet. */
#define SKD__SPAWNED_NONE                                                                          \
    {                                                                                              \
        .pidfd = -1, .stdin_fd = -1, .stdout_fd = -1, .stderr_fd = -1, .status_fd = -1,            \
        .egress_fd = -1                                                                            \
    }

/* Filled by the runner from waitid() before cleanup; cleanup may change it
 * and sets oom_killed. */
typedef struct skd__outcome {
    int exited; /* 1: exit_code valid */
    int exit_code;
    int signal;
    int killed;     /* the runner killed it (timeout, kill, cancel) */
    int oom_killed; /* set by cleanup */
    /* Set by cleanup when it finds that the command never ran although
     * spawn succeeded (a container engine failed to start the container):
     * the runner then reports the run as SKD_ESANDBOX with this message. */
    char setup_error[SKD_ERR_MSG_MAX];
    /* Set by cleanup when the run had the workspace quota overlay
     * (src/sandbox/ws_quota.c): see skd_sandbox_result's ws_* fields. */
    int ws_checked;
    int ws_error;
    uint64_t ws_bytes;
    uint64_t ws_written; /* bytes of files the run's kept changes wrote */
    char ws_message[SKD_ERR_MSG_MAX];
    /* Set by cleanup from the run's cgroup (metering): CPU time in
     * microseconds and the memory high-water mark in bytes; 0 when the
     * kernel does not keep them. */
    int64_t cpu_us;
    int64_t mem_peak;
} skd__outcome;

typedef struct skd__provider {
    const char *name; /* "native", "docker", "podman" */
    int (*detect)(skd_err *err);
    int (*prepare)(const skd__sandbox_req *req, void **state, skd_err *err);
    int (*spawn)(void *state, skd__spawned *out, skd_err *err);
    void (*kill)(void *state);
    void (*cleanup)(void *state, skd__outcome *out);
    /* Optional: the provider that really runs the sandbox (the spawner
     * client answers the name the spawner picked, e.g. for "auto"). */
    const char *(*runtime)(void *state);
} skd__provider;

/* The providers compiled in. */
extern const skd__provider skd__provider_native;
extern const skd__provider skd__provider_docker; /* src/sandbox/container/docker.c */
extern const skd__provider skd__provider_podman; /* src/sandbox/container/docker.c */

/* Remove every container labelled skilld=1 in engine ("docker" or
 * "podman") whose owning skilld process is gone (all of them when
 * including_live is 1, e.g. none of ours may survive a shutdown). Called
 * by the runner when it starts. Blocks for the engine calls (bounded).
 * Returns how many were removed, or a negative SKD_E* when the engine
 * could not be asked (not installed, daemon down: nothing to reap). */
int skd__containers_reap_leftovers(const char *engine, int including_live);

/* skd__containers_reap_leftovers(engine, 0) the first time it is called
 * for engine in this process; later calls do nothing. Thread-safe. */
void skd__containers_reap_once(const char *engine);

/* Load an image tarball into engine ("docker" or "podman") as ref
 * ("name:tag"): `import` for a plain root filesystem tarball (is_archive
 * 0), `load` then `tag` for a `docker save` / OCI archive (is_archive 1).
 * Returns 0 or SKD_ESANDBOX with the engine's message. */
int skd__containers_image_load(const char *engine, const char *tar_path, const char *ref,
                               int is_archive, skd_err *err);

/* The spawner client (spawner_client.c): a provider whose every operation
 * is a message to the spawner process, which runs the real provider. */
extern const skd__provider skd__provider_remote;

/* Find a provider by name ("native", "docker", "podman"; "auto" picks the
 * first whose detect succeeds: native, podman, docker). NULL with err set
 * when unknown or (for auto) none works. */
const skd__provider *skd__provider_find(const char *name, skd_err *err);

/* How a live sandbox's files are saved (spawner_client.h, native_live.c):
 * END: pause (the sandbox ends once saved); FROM_SAVED: copy a paused
 * one's snapshot (a fork of it). */
#define SKD__SNAP_END 1
#define SKD__SNAP_FROM_SAVED 2

#endif
