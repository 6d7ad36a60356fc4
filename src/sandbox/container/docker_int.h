/*
 * Internals shared by the docker and podman provider's two files:
 * docker.c (the life of a run: detect, prepare, spawn, kill, cleanup, and
 * the workspace lent to the sandbox uid) and docker_args.c (the `create`
 * command line: every limit of the run as the engine's flags, then the
 * image and the command).
 */
#ifndef SKILLD_SANDBOX_CONTAINER_DOCKER_INT_H
#define SKILLD_SANDBOX_CONTAINER_DOCKER_INT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "sandbox/container/container.h"
#include "sandbox/provider.h"
#include "sandbox/ws_quota.h"

#define SKD__CTR_UID 65534
#define CTR_NAME_MAX 80
#define CREATE_TIMEOUT_MS 60000
#define SHORT_TIMEOUT_MS 20000
#define KILL_GRACE_MS 5000
#define NOFILE_LIMIT 1024
#define NPROC_LIMIT 16384 /* RLIMIT_NPROC is per host uid; pids-limit is the real cap */
#define MAX_WALK_DEPTH 128

typedef struct ctr_state {
    skd__engine eng;
    char name[CTR_NAME_MAX]; /* skilld-<id> */
    char *start_argv[6];     /* bin start -a -i name NULL */
    char *kill_argv[7];      /* bin kill --signal KILL name NULL */
    pid_t client;            /* the start -a -i client, or -1 */
    int client_pidfd;        /* our copy for the kill helper, or -1 */
    pid_t killer;            /* kill helper, or -1 */
    char *ws;                /* workspace lent to the sandbox uid, or NULL */
    skd__wsq *wsq;           /* the workspace quota overlay, or NULL */
    char id[SKD_UUID_LEN + 1];
    int cg_parent;   /* podman on cgroup v1: the parent cgroup holds the memory limit */
    int64_t reserve; /* SKILLS_DATA_RESERVE_BYTES for the commit */
    char rundir[96]; /* podman: the client's working directory, or "" */
    int network;     /* networkEnabled: the egress proxy goes into the container */
    int trust;       /* the trust bundle is in rundir (a run with secrets) */
    int live;        /* a live sandbox's container (container_live.c): --rm, and its
                        command is the init that holds it (SKD__CTR_LIVE_HOLD) */
} ctr_state;

/* A live sandbox's container holds on a FIFO of its run directory, bound
 * read-only at /.skilld-hold: its command (under the engine's --init) reads
 * it until EOF, which comes when the spawner, the only writer, closes it
 * or dies (kill -9 of the server too). The container then stops, and --rm
 * removes it. */
#define SKD__CTR_LIVE_HOLD "hold"
#define SKD__CTR_LIVE_HOLD_AT "/.skilld-hold"

/* A live sandbox's killed execs, one run id a line, appended by the
 * spawner and bound read-only: an exec's first process reads it and exits
 * when its own id is there, so that a kill that came before the engine
 * started the process still holds (container_live.c, "kill"). */
#define SKD__CTR_LIVE_ENDED "ended"
#define SKD__CTR_LIVE_ENDED_AT "/.skilld-ended"

/* The files of the run's directory bound read-only into a networkEnabled
 * container at SKD__SANDBOX_NODE_PRELOAD and SKD__SANDBOX_TRUST_BUNDLE. */
#define SKD__CTR_NODE_PRELOAD "egress.cjs"
#define SKD__CTR_TRUST_BUNDLE "trust.pem"

/* A growable argv with strings owned by it (freed by skd__ctr_argv_free);
 * oom is set by the first allocation that failed, and later adds do
 * nothing. */
typedef struct skd__ctr_argv {
    char **v;
    size_t n, cap;
    int oom;
} skd__ctr_argv;

void skd__ctr_argv_add(skd__ctr_argv *a, const char *s);
void skd__ctr_argv_addf(skd__ctr_argv *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void skd__ctr_argv_free(skd__ctr_argv *a);

/* The `create` arguments for req into a: every limit of req->cfg as the
 * engine's flags (the provider's enforcement of include/skilld/limits.h's
 * rows), then the image and the command. 0, or SKD_ESANDBOX (a limit the
 * engine cannot take), SKD_EINVAL, SKD_ENOMEM. */
int skd__ctr_create_argv(ctr_state *s, const skd__sandbox_req *req, skd__ctr_argv *a, skd_err *err);

/* docker.c's steps, shared with container_live.c (see docker.c for each):
 * the engine's limits (cached detect), what the engines cannot take, the
 * run directory and its egress files, the workspace lent to the sandbox
 * uid (counted per path), the create command, and the egress proxy's
 * socket placed in the started container's network namespace. */
int skd__ctr_detect_cached(const char *engine, skd_err *err);
int skd__ctr_check_req(const char *engine, const skd__sandbox_req *req, skd_err *err);
int skd__ctr_rundir_make(ctr_state *s, skd_err *err);
int skd__ctr_rundir_egress_files(ctr_state *s, const skd__sandbox_req *req, skd_err *err);
int skd__ctr_ws_acquire(const char *ws, skd_err *err);
void skd__ctr_ws_release(const char *ws);
int skd__ctr_run_create(ctr_state *s, const skd__ctr_argv *a, skd__ctr_cmd *r, skd_err *err);
int skd__ctr_place_egress(ctr_state *s, int *egress_fd, skd_err *err);

/* container_live.c: live sandbox id's state, its init's pid and pidfd
 * (borrowed), and whether its root filesystem is read-only; NULL when
 * there is none or its container has ended. */
ctr_state *skd__ctr_live_state(const char *id, long long *pid, int *init_pidfd, int *root_ro);
/* container_snap.c: a resume's or fork's saved /tmp from snapshot fd snap
 * into started container s's (its init's pid and pidfd), at most max
 * bytes, once the origin is checked to be s's engine. */
int skd__ctr_snap_restore_tmp(ctr_state *s, long long pid, int pidfd, int snap, int64_t max,
                              skd_err *err);
/* The pid (host's) of the container's first process, 0 while it has
 * none, -1 when inspect fails. */
long long skd__ctr_container_pid(ctr_state *s);
/* Fork the engine's client argv in cwd (NULL: "/") with fresh pipes as its
 * stdin, stdout and stderr; out receives its pidfd and our pipe ends,
 * *client its pid and *client_pidfd a second pidfd (for kills). */
int skd__ctr_spawn_client(char *const *argv, const char *cwd, pid_t *client, int *client_pidfd,
                          skd__spawned *out, skd_err *err);

#endif
