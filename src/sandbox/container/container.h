/*
 * Library-internal helpers shared by the docker and podman providers
 * (src/sandbox/container/docker.c) and the engine CLI plumbing they use
 * (src/sandbox/container/container_cli.c): running one engine command with its
 * output captured and a deadline, forking the long-lived `start -a -i`
 * client, and the fire-and-forget kill helper.
 *
 * Everything here runs the engine's own command-line client with an argv
 * array (never a shell). The client binary is found on PATH once and then
 * executed by absolute path.
 */
#ifndef SKILLD_SANDBOX_CONTAINER_H
#define SKILLD_SANDBOX_CONTAINER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "skilld/error.h"

#define SKD__CTR_BIN_MAX 512

/* One engine: its name ("docker", "podman") and the resolved client path. */
typedef struct skd__engine {
    const char *name;
    char bin[SKD__CTR_BIN_MAX];
} skd__engine;

/* Resolve the engine's client on PATH into e->bin. Returns 0, or
 * SKD_ESANDBOX when it is not installed. Thread-safe (the result is
 * cached per engine name). */
int skd__engine_resolve(const char *name, skd__engine *e, skd_err *err);

/* Captured result of one engine command. */
typedef struct skd__ctr_cmd {
    int status;        /* exit code; -1 when killed (deadline) or not run */
    char out[8192];    /* stdout, NUL-terminated, truncated to fit */
    char errout[1024]; /* stderr, NUL-terminated, truncated to fit */
} skd__ctr_cmd;

/* Run e->bin with args (NULL-terminated, args[0] is the first argument
 * after the binary), stdin from /dev/null, and wait at most timeout_ms.
 * Returns 0 when the command ran to an exit (its code in r->status), or
 * SKD_ETIMEOUT (killed at the deadline) / SKD_ESANDBOX (could not start).
 * Output beyond the buffers is read and dropped. */
int skd__ctr_run(const skd__engine *e, const char *const *args, int64_t timeout_ms, skd__ctr_cmd *r,
                 skd_err *err);

/* The last non-empty line of an engine's stderr, without "Error: " and
 * "Error response from daemon: " prefixes, for messages. Borrowed view
 * into buf (modified in place). */
const char *skd__ctr_errline(char *buf);

/* Fork and exec argv (argv[0] an absolute path) with the given descriptors
 * as 0, 1, 2 and every other descriptor closed, in directory cwd ("/" when
 * NULL); the child gets PR_SET_PDEATHSIG SIGKILL (it dies with the calling
 * thread). Returns the child's pid or -1 (errno set). */
pid_t skd__ctr_fork_exec(char *const *argv, int in_fd, int out_fd, int err_fd, const char *cwd);

/* Fork a helper that runs argv (the engine's kill command, with /dev/null
 * as its descriptors), waits for it, then waits up to grace_ms for the
 * process behind watch_pidfd to exit and SIGKILLs it if it has not. It
 * never blocks the caller. Returns the helper's pid (caller reaps it with
 * waitpid) or -1. */
pid_t skd__ctr_kill_helper(char *const *argv, int watch_pidfd, int grace_ms);

/* Owner label of this process: "<pid>-<start time in clock ticks>-<pid
 * namespace inode>", so that leftover containers of a dead skilld can be
 * told from those of a live one. Static storage. */
const char *skd__ctr_owner(void);

/* 1 when the owner label names a live process (this one or another), or
 * a process of another pid namespace (which cannot be judged from here:
 * its containers are left alone). Labels without the namespace part (older
 * skilld) are judged by pid and start time. */
int skd__ctr_owner_alive(const char *owner);

/* cgroup v1 OOM evidence for podman (src/sandbox/container/container_cgroup.c).
 * skd__ctr_cg_v1: 1 when the memory controller is mounted as v1.
 * skd__ctr_cg_make: make the run's parent memory cgroup with the limit;
 *   parent receives the --cgroup-parent value. 0 or SKD_ESANDBOX.
 * skd__ctr_cg_hit_limit: 1 when the parent's usage reached its limit.
 * skd__ctr_cg_usage: the parent's CPU time (us) and memory peak (bytes),
 *   0 where not kept (metering).
 * skd__ctr_cg_remove: remove the run's parent under every controller. */
int skd__ctr_cg_v1(void);
int skd__ctr_cg_make(const char *id, int64_t mem_bytes, char *parent, size_t cap, skd_err *err);
int skd__ctr_cg_hit_limit(const char *id);
void skd__ctr_cg_usage(const char *id, int64_t *cpu_us, int64_t *mem_peak);
void skd__ctr_cg_remove(const char *id);

/* The per-run directory SKD__CTR_RUNDIR/<id>: podman's working directory
 * (conmon writes its "oom" marker there), and for a networkEnabled run of
 * either engine the files bound read-only into the container (the node
 * preload, the trust bundle). skd__ctr_rundir_remove deletes its files and
 * the directory; missing is fine. */
#define SKD__CTR_RUNDIR "/run/skilld-podman"
void skd__ctr_rundir_remove(const char *id);

#endif
