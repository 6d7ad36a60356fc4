/*
 * The spawner protocol: typed, length-bounded messages between the
 * unprivileged server (spawner_client.c) and the single-threaded spawner
 * (spawner.c), over a SOCK_SEQPACKET socketpair, one message per packet,
 * descriptors by SCM_RIGHTS.
 *
 * Wire form of one message (host byte order: both ends are one binary on
 * one machine):
 *   header  u32 magic, u16 type, u16 nfields, u64 handle, u32 nfds, u32 flags
 *   fields  u16 tag, u16 zero, u32 len, len bytes   (nfields times)
 * A message larger than SKD__SPAWN_PACKET_MAX travels in a sealed memfd
 * (flag SKD__MSGF_MEMFD, the memfd is the last descriptor), bounded by
 * SKD__SPAWN_MSG_MAX.
 *
 * The limits of a run travel as tagged fields, never by position: one
 * SKD__T_LIMIT field per limit, its 16 bytes
 *   u32 limit tag, u32 zero, i64 value
 * where the limit tag is the row's tag in include/skilld/limits.h. The
 * decoder refuses a tag no row has, a tag seen twice, a value outside the
 * row's [min, max] (0 or 1 for a BOOL row), and a REQ_PREPARE that lacks
 * any row. The spawner then checks every value against the operator's
 * ceilings (spawner.c), whatever the server checked before.
 *
 * Trust: the spawner decodes what an unprivileged (possibly compromised)
 * server sent. The decoder checks every length, count, tag and string
 * (NUL-free, bounded) and keeps no pointer outside its own copy; anything
 * unexpected is SKD_EINVAL with a message. It has a fuzz driver
 * (tests/fuzz/fuzz_spawner_msg.c).
 */
#ifndef SKILLD_SANDBOX_SPAWNER_PROTO_H
#define SKILLD_SANDBOX_SPAWNER_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include "skilld/error.h"
#include "skilld/sandbox.h"

#define SKD__SPAWN_MAGIC 0x534b4450u /* "SKDP" */
#define SKD__SPAWN_PACKET_MAX (96u * 1024u)
#define SKD__SPAWN_MSG_MAX (8u * 1024u * 1024u)
#define SKD__SPAWN_MAX_FDS 8
#define SKD__SPAWN_STR_MAX (256u * 1024u)
#define SKD__MSGF_MEMFD 1u

enum skd__spawn_type {
    SKD__REQ_PREPARE = 1, /* -> REP_OK(handle) | REP_ERROR */
    SKD__REQ_SPAWN,       /* handle -> REP_SPAWNED (fds) | REP_ERROR */
    SKD__REQ_KILL,        /* handle -> REP_OK */
    SKD__REQ_CLEANUP,     /* handle -> REP_OUTCOME; the handle is gone after */
    SKD__REQ_NEW_SPAWNER, /* (zygote) -> REP_OK with the new socket | REP_ERROR */
    SKD__REQ_LIVE_CREATE, /* live id, image, limits, workspace fd -> REP_OK | REP_ERROR */
    SKD__REQ_LIVE_DELETE, /* live id -> REP_OK | REP_ERROR (no such live sandbox or snapshot) */
    SKD__REQ_LIVE_SAVE,   /* live id, snap (the new snapshot), snap args (flags, max bytes)
                             -> REP_OK with snap args (0, bytes saved) | REP_ERROR */
    SKD__REQ_LIVE_COMMIT, /* live id -> REP_OK with its workspace's commit (workspace, usage,
                             ws message; none when it has no quota overlay) | REP_ERROR */
    SKD__REQ_SNAP_LIST,   /* (nothing) -> REP_OK with snap (the sandbox ids under
                             snapshots/paused, each followed by '\n'), snap args (0, how many
                             other names) and, when there are others, message
                             (the first of them) | REP_ERROR */
    SKD__REP_OK = 16,
    SKD__REP_ERROR,
    SKD__REP_SPAWNED,
    SKD__REP_OUTCOME,
    SKD__TYPE_MAX
};

enum skd__spawn_tag {
    SKD__T_PROVIDER = 1, /* string: native | docker | podman */
    SKD__T_ID,           /* string: the run's UUID */
    SKD__T_IMAGE,        /* string: "host" or an image reference */
    SKD__T_CWD,          /* string: absolute path inside the sandbox */
    SKD__T_ARG,          /* string, repeated: argv in order */
    SKD__T_ENV,          /* string, repeated: NAME=value */
    SKD__T_LIMIT,        /* repeated, one per limit: u32 tag, u32 zero, i64 value (above) */
    SKD__T_FDROLE,       /* u32, repeated: what each received fd is (enum fd_role) */
    SKD__T_CODE,         /* i32: an SKD_E* code (REP_ERROR) */
    SKD__T_MESSAGE,      /* string: error or setup message */
    SKD__T_OUTCOME,      /* 5 x i32: exited, exit_code, signal, oom_killed, killed */
    SKD__T_KILLED,       /* i32: the runner killed it (REQ_CLEANUP) */
    SKD__T_WORKSPACE,    /* REP_OUTCOME: i32 code (0: kept), pad, u64 bytes: the quota overlay */
    SKD__T_WS_MESSAGE,   /* REP_OUTCOME: string: why the workspace changes were not kept */
    SKD__T_LIVE,         /* string: a live sandbox's UUID (REQ_LIVE_*; REQ_PREPARE: exec in it) */
    SKD__T_USAGE,        /* REP_OUTCOME: 3 x i64 >= 0: cpu_us, mem_peak, ws_written (metering) */
    SKD__T_CA_PEM,       /* string: the egress CA's certificate for the sandbox's trust bundle */
    SKD__T_SNAP,         /* string: a snapshot's name, a UUID (REQ_LIVE_SAVE: the new one) */
    SKD__T_SNAP_ARGS,    /* i32 flags (SKD__SNAP_*; REQ_LIVE_CREATE: 1 = from the snapshot of
                            its id), i32 zero, i64 bytes >= 0 (a cap, or what was saved) */
    SKD__T_MAX
};

enum skd__fd_role {
    SKD__FD_WORKSPACE = 1, /* REQ_PREPARE: directory fd of the workspace */
    SKD__FD_SKILL,         /* REQ_PREPARE: directory fd of the skill folder */
    SKD__FD_PIDFD,         /* REP_SPAWNED */
    SKD__FD_STDIN,
    SKD__FD_STDOUT,
    SKD__FD_STDERR,
    SKD__FD_STATUS,
    SKD__FD_SOCKET, /* REP_OK to REQ_NEW_SPAWNER */
    SKD__FD_EGRESS, /* REP_SPAWNED: networkEnabled: the egress proxy's listening socket */
    SKD__FD_ROLE_MAX
};

#define SKD__LIMIT_FIELD_LEN 16

/* A decoded message. Strings point into buf (owned); argv/envp are
 * NULL-terminated arrays into buf. fds are owned until taken (set to -1). */
typedef struct skd__spawn_msg {
    uint16_t type;
    uint64_t handle;
    const char *provider, *id, *image, *cwd, *message;
    const char *live;   /* SKD__T_LIVE or NULL */
    const char *ca_pem; /* NULL when not sent */
    const char *snap;   /* SKD__T_SNAP or NULL */
    int has_snap_args;
    int snap_flags;
    int64_t snap_bytes;
    char **argv, **envp;
    size_t argc, envc;
    int has_config; /* every limit arrived (nlimits == SKD_LIMIT_N) */
    int nlimits;
    uint32_t limits_seen; /* bit id: row id's tag arrived */
    skd_sandbox_config cfg;
    int code;
    int has_outcome;
    int outcome[5];
    int has_ws; /* the run had the workspace quota overlay */
    int ws_code;
    uint64_t ws_bytes;
    const char *ws_message;
    int has_usage;
    int64_t usage[3]; /* SKD__T_USAGE: cpu_us, mem_peak, ws_written */
    int killed;
    int fds[SKD__SPAWN_MAX_FDS];
    int roles[SKD__SPAWN_MAX_FDS];
    int nfds;
    unsigned char *buf;
    size_t len;
} skd__spawn_msg;

/* A message being built. */
typedef struct skd__spawn_out {
    unsigned char *buf;
    size_t len, cap;
    uint16_t nfields;
    int fds[SKD__SPAWN_MAX_FDS]; /* borrowed: sent, not closed */
    int nfds;
    int failed; /* out of memory or over SKD__SPAWN_MSG_MAX */
} skd__spawn_out;

void skd__spawn_out_init(skd__spawn_out *o, uint16_t type, uint64_t handle);
void skd__spawn_out_str(skd__spawn_out *o, uint16_t tag, const char *s);
void skd__spawn_out_i32(skd__spawn_out *o, uint16_t tag, int32_t v);
/* Every limit of c, one SKD__T_LIMIT field each. */
void skd__spawn_out_config(skd__spawn_out *o, const skd_sandbox_config *c);
/* One SKD__T_LIMIT field (tag, value) as it is, for tests of the decoder. */
void skd__spawn_out_limit(skd__spawn_out *o, uint32_t tag, int64_t value);
void skd__spawn_out_outcome(skd__spawn_out *o, const int v[5]);
void skd__spawn_out_workspace(skd__spawn_out *o, int code, uint64_t bytes);
/* The run's metering: v[3] = {cpu_us, mem_peak, ws_written}, each >= 0. */
void skd__spawn_out_usage(skd__spawn_out *o, const int64_t v[3]);
void skd__spawn_out_snap_args(skd__spawn_out *o, int flags, int64_t bytes);
/* Attach fd (borrowed) with its role. */
void skd__spawn_out_fd(skd__spawn_out *o, int fd, int role);
void skd__spawn_out_free(skd__spawn_out *o);

/* Send o on sock (blocking; EINTR retried). 0 or SKD_ESANDBOX/SKD_EINVAL. */
int skd__spawn_send(int sock, skd__spawn_out *o, skd_err *err);

/* Receive one message (blocking). 0; SKD_ENOENT when the peer closed the
 * socket; SKD_EINVAL for a malformed message (its fds are closed). */
int skd__spawn_recv(int sock, skd__spawn_msg *m, skd_err *err);

/* Decode len bytes (the packet, or the memfd's content) with fds already
 * received (stolen: closed on failure and by skd__spawn_msg_free). Used by
 * skd__spawn_recv and the fuzz driver. */
int skd__spawn_decode(const unsigned char *data, size_t len, const int *fds, int nfds,
                      skd__spawn_msg *m, skd_err *err);

/* The fd of the given role (ownership moves to the caller), or -1. */
int skd__spawn_take_fd(skd__spawn_msg *m, int role);
void skd__spawn_msg_free(skd__spawn_msg *m);

#endif
