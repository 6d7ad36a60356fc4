/*
 * The spawner (src/sandbox/spawner/): the protocol over a real
 * SOCK_SEQPACKET pair (fields, descriptors, the memfd path for large
 * messages, garbage refused with every descriptor closed), a spawner
 * driven directly as a hostile server would (bad ids, limits above the
 * ceilings, a workspace that is not a directory, unknown handles), and the
 * lifecycle through a runner: one thread, a killed spawner refused and
 * replaced, its running sandboxes gone with it.
 */
#include "sandbox_test.h"
#include "sandbox/spawner/spawner.h"
#include "sandbox/spawner/spawner_proto.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int count_fds(void)
{
    int n = 0;
    DIR *d = opendir("/proc/self/fd");
    struct dirent *de;
    while (d && (de = readdir(d)) != NULL)
        if (de->d_name[0] != '.')
            n++;
    if (d)
        closedir(d);
    return n;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static skd_sandbox_config cfg_default(void)
{
    skd_sandbox_config c;
    skd_sandbox_config_defaults(&c, NULL);
    return c;
}

static void put_prepare(skd__spawn_out *o, const char *id, const skd_sandbox_config *c,
                        size_t nargs)
{
    skd__spawn_out_init(o, SKD__REQ_PREPARE, 0);
    skd__spawn_out_str(o, SKD__T_PROVIDER, "native");
    skd__spawn_out_str(o, SKD__T_ID, id);
    skd__spawn_out_str(o, SKD__T_IMAGE, "host");
    skd__spawn_out_str(o, SKD__T_CWD, "/tmp");
    skd__spawn_out_str(o, SKD__T_ARG, "true");
    for (size_t i = 1; i < nargs; i++)
        skd__spawn_out_str(o, SKD__T_ARG,
                           "an argument of about a hundred bytes, to make the message large "
                           "enough for the memfd path");
    skd__spawn_out_str(o, SKD__T_ENV, "PATH=/bin");
    skd__spawn_out_config(o, c);
}

TEST(proto_fields_and_fds)
{
    int sv[2], p[2];
    CHECK(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0);
    CHECK(pipe2(p, O_CLOEXEC) == 0);
    skd_sandbox_config c = cfg_default();
    c.memory_limit = 77;
    skd__spawn_out o;
    skd_err e = {0};
    put_prepare(&o, "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0", &c, 3);
    skd__spawn_out_fd(&o, p[0], SKD__FD_WORKSPACE);
    CHECK_EQ_INT(skd__spawn_send(sv[0], &o, &e), 0);
    skd__spawn_out_free(&o);
    skd__spawn_msg m;
    CHECK_EQ_INT(skd__spawn_recv(sv[1], &m, &e), 0);
    CHECK_EQ_INT(m.type, SKD__REQ_PREPARE);
    CHECK_STR(m.provider, "native");
    CHECK_EQ_INT(m.argc, 3);
    CHECK_STR(m.argv[0], "true");
    CHECK(m.argv[3] == NULL);
    CHECK_EQ_INT(m.cfg.memory_limit, 77);
    int fd = skd__spawn_take_fd(&m, SKD__FD_WORKSPACE);
    CHECK(fd >= 0 && fd != p[0]);
    /* The descriptor is the same pipe: a byte written here arrives there. */
    CHECK(write(p[1], "x", 1) == 1);
    char b = 0;
    CHECK(read(fd, &b, 1) == 1 && b == 'x');
    close(fd);
    skd__spawn_msg_free(&m);
    close(p[0]), close(p[1]), close(sv[0]), close(sv[1]);
}

/* The quota overlay's outcome travels back with the process's; a code
 * that is no SKD_E* is refused. */
TEST(proto_workspace_outcome)
{
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0);
    skd__spawn_out o;
    skd__spawn_msg m;
    skd_err e = {0};
    int v[5] = {1, 0, 0, 0, 0};
    skd__spawn_out_init(&o, SKD__REP_OUTCOME, 7);
    skd__spawn_out_outcome(&o, v);
    skd__spawn_out_workspace(&o, SKD_EQUOTA, 18870278);
    skd__spawn_out_str(&o, SKD__T_WS_MESSAGE, "above its quota");
    CHECK_EQ_INT(skd__spawn_send(sv[0], &o, &e), 0);
    skd__spawn_out_free(&o);
    CHECK_EQ_INT(skd__spawn_recv(sv[1], &m, &e), 0);
    CHECK_EQ_INT(m.has_ws, 1);
    CHECK_EQ_INT(m.ws_code, SKD_EQUOTA);
    CHECK_EQ_INT(m.ws_bytes, 18870278);
    CHECK_STR(m.ws_message, "above its quota");
    skd__spawn_msg_free(&m);
    skd__spawn_out_init(&o, SKD__REP_OUTCOME, 7);
    skd__spawn_out_outcome(&o, v);
    skd__spawn_out_workspace(&o, 5, 0); /* not an error code */
    CHECK_EQ_INT(skd__spawn_send(sv[0], &o, &e), 0);
    skd__spawn_out_free(&o);
    CHECK_EQ_INT(skd__spawn_recv(sv[1], &m, &e), SKD_EINVAL);
    close(sv[0]), close(sv[1]);
}

/* A live sandbox's save (pause, fork) names the sandbox, the new snapshot
 * and its flags and cap; a save without them, negative bytes, unknown
 * flags or a second set are refused. */
TEST(proto_live_save)
{
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0);
    skd__spawn_out o;
    skd__spawn_msg m;
    skd_err e = {0};
    const char *id = "11111111-2222-4333-8444-555555555555";
    skd__spawn_out_init(&o, SKD__REQ_LIVE_SAVE, 0);
    skd__spawn_out_str(&o, SKD__T_LIVE, id);
    skd__spawn_out_str(&o, SKD__T_SNAP, id);
    skd__spawn_out_snap_args(&o, SKD__SNAP_END, 104857600);
    CHECK_EQ_INT(skd__spawn_send(sv[0], &o, &e), 0);
    skd__spawn_out_free(&o);
    CHECK_EQ_INT(skd__spawn_recv(sv[1], &m, &e), 0);
    CHECK_EQ_INT(m.type, SKD__REQ_LIVE_SAVE);
    CHECK_STR(m.snap, id);
    CHECK_EQ_INT(m.snap_flags, SKD__SNAP_END);
    CHECK_EQ_INT(m.snap_bytes, 104857600);
    skd__spawn_msg_free(&m);
    /* no snapshot name */
    skd__spawn_out_init(&o, SKD__REQ_LIVE_SAVE, 0);
    skd__spawn_out_str(&o, SKD__T_LIVE, id);
    skd__spawn_out_snap_args(&o, 0, 1);
    CHECK_EQ_INT(skd__spawn_send(sv[0], &o, &e), 0);
    skd__spawn_out_free(&o);
    CHECK_EQ_INT(skd__spawn_recv(sv[1], &m, &e), SKD_EINVAL);
    /* negative bytes, unknown flags, twice */
    int64_t bad_bytes[] = {-1, 1, 1};
    int bad_flags[] = {0, 8, 0};
    for (int i = 0; i < 3; i++) {
        skd__spawn_out_init(&o, SKD__REQ_LIVE_SAVE, 0);
        skd__spawn_out_str(&o, SKD__T_LIVE, id);
        skd__spawn_out_str(&o, SKD__T_SNAP, id);
        skd__spawn_out_snap_args(&o, bad_flags[i], bad_bytes[i]);
        if (i == 2)
            skd__spawn_out_snap_args(&o, 0, 1);
        CHECK_EQ_INT(skd__spawn_send(sv[0], &o, &e), 0);
        skd__spawn_out_free(&o);
        CHECK_EQ_INT(skd__spawn_recv(sv[1], &m, &e), SKD_EINVAL);
    }
    close(sv[0]), close(sv[1]);
}

/* The listing of snapshots/paused asks nothing: one that names a sandbox
 * or a snapshot is refused. Its answer, ids and the count of other names
 * with the first of them, crosses in a memfd when it is large. */
TEST(proto_snap_list)
{
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0);
    skd__spawn_out o;
    skd__spawn_msg m;
    skd_err e = {0};
    const char *id = "11111111-2222-4333-8444-555555555555";
    skd__spawn_out_init(&o, SKD__REQ_SNAP_LIST, 0);
    CHECK_EQ_INT(skd__spawn_send(sv[0], &o, &e), 0);
    skd__spawn_out_free(&o);
    CHECK_EQ_INT(skd__spawn_recv(sv[1], &m, &e), 0);
    CHECK_EQ_INT(m.type, SKD__REQ_SNAP_LIST);
    skd__spawn_msg_free(&m);
    for (int i = 0; i < 2; i++) {
        skd__spawn_out_init(&o, SKD__REQ_SNAP_LIST, 0);
        skd__spawn_out_str(&o, i ? SKD__T_SNAP : SKD__T_LIVE, id);
        CHECK_EQ_INT(skd__spawn_send(sv[0], &o, &e), 0);
        skd__spawn_out_free(&o);
        CHECK_EQ_INT(skd__spawn_recv(sv[1], &m, &e), SKD_EINVAL);
    }
    /* 4,000 ids: past one packet */
    size_t n = 4000, len = n * 37;
    char *ids = malloc(len + 1);
    CHECK(ids != NULL);
    for (size_t i = 0; i < n; i++) {
        memcpy(ids + i * 37, id, 36);
        ids[i * 37 + 36] = '\n';
    }
    ids[len] = '\0';
    skd__spawn_out_init(&o, SKD__REP_OK, 0);
    skd__spawn_out_str(&o, SKD__T_SNAP, ids);
    skd__spawn_out_snap_args(&o, 0, 2);
    skd__spawn_out_str(&o, SKD__T_MESSAGE, "lost+found");
    CHECK_EQ_INT(skd__spawn_send(sv[0], &o, &e), 0);
    skd__spawn_out_free(&o);
    CHECK_EQ_INT(skd__spawn_recv(sv[1], &m, &e), 0);
    CHECK_EQ_INT(m.type, SKD__REP_OK);
    CHECK(m.snap && strlen(m.snap) == len && memcmp(m.snap, ids, len) == 0);
    CHECK_EQ_INT(m.snap_bytes, 2);
    CHECK_STR(m.message, "lost+found");
    skd__spawn_msg_free(&m);
    free(ids);
    close(sv[0]), close(sv[1]);
}

/* The run's metering (cpu_us, mem_peak, ws_written) crosses as one field;
 * a negative count, a field of the wrong size or a second one is refused. */
TEST(proto_usage_outcome)
{
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0);
    skd__spawn_out o;
    skd__spawn_msg m;
    skd_err e = {0};
    int v[5] = {1, 0, 0, 0, 0};
    int64_t u[3] = {1523456, 8 << 20, 200000};
    skd__spawn_out_init(&o, SKD__REP_OUTCOME, 7);
    skd__spawn_out_outcome(&o, v);
    skd__spawn_out_usage(&o, u);
    CHECK_EQ_INT(skd__spawn_send(sv[0], &o, &e), 0);
    skd__spawn_out_free(&o);
    CHECK_EQ_INT(skd__spawn_recv(sv[1], &m, &e), 0);
    CHECK_EQ_INT(m.has_usage, 1);
    CHECK(m.usage[0] == 1523456 && m.usage[1] == (8 << 20) && m.usage[2] == 200000);
    skd__spawn_msg_free(&m);
    int64_t neg[3] = {1, -5, 0};
    skd__spawn_out_init(&o, SKD__REP_OUTCOME, 7);
    skd__spawn_out_usage(&o, neg);
    CHECK_EQ_INT(skd__spawn_send(sv[0], &o, &e), 0);
    skd__spawn_out_free(&o);
    CHECK_EQ_INT(skd__spawn_recv(sv[1], &m, &e), SKD_EINVAL);
    skd__spawn_out_init(&o, SKD__REP_OUTCOME, 7);
    skd__spawn_out_usage(&o, u);
    skd__spawn_out_usage(&o, u);
    CHECK_EQ_INT(skd__spawn_send(sv[0], &o, &e), 0);
    skd__spawn_out_free(&o);
    CHECK_EQ_INT(skd__spawn_recv(sv[1], &m, &e), SKD_EINVAL);
    skd__spawn_out_init(&o, SKD__REP_OUTCOME, 7);
    skd__spawn_out_i32(&o, SKD__T_USAGE, 1);
    CHECK_EQ_INT(skd__spawn_send(sv[0], &o, &e), 0);
    skd__spawn_out_free(&o);
    CHECK_EQ_INT(skd__spawn_recv(sv[1], &m, &e), SKD_EINVAL);
    close(sv[0]), close(sv[1]);
}

TEST(proto_large_message_by_memfd)
{
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0);
    skd_sandbox_config c = cfg_default();
    skd__spawn_out o;
    skd_err e = {0};
    put_prepare(&o, "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0", &c, 3000); /* ~300 KB */
    CHECK(o.len > SKD__SPAWN_PACKET_MAX);
    CHECK_EQ_INT(skd__spawn_send(sv[0], &o, &e), 0);
    skd__spawn_out_free(&o);
    skd__spawn_msg m;
    CHECK_EQ_INT(skd__spawn_recv(sv[1], &m, &e), 0);
    CHECK_EQ_INT(m.argc, 3000);
    CHECK_EQ_INT(m.nfds, 0); /* the memfd is consumed by the transport */
    skd__spawn_msg_free(&m);
    close(sv[0]), close(sv[1]);
}

TEST(proto_garbage_refused_fds_closed)
{
    int sv[2], p[2];
    CHECK(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0);
    CHECK(pipe2(p, O_CLOEXEC) == 0);
    int before = count_fds();
    /* A packet of junk with a descriptor attached. */
    char junk[100];
    memset(junk, 'A', sizeof(junk));
    struct iovec iov = {.iov_base = junk, .iov_len = sizeof(junk)};
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } u;
    memset(&u, 0, sizeof(u));
    struct msghdr mh = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof(u.buf)};
    struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(cm), &p[0], sizeof(int));
    CHECK(sendmsg(sv[0], &mh, 0) == (ssize_t)sizeof(junk));
    skd__spawn_msg m;
    skd_err e = {0};
    CHECK_EQ_INT(skd__spawn_recv(sv[1], &m, &e), SKD_EINVAL);
    CHECK(strstr(e.msg, "spawner message") != NULL);
    CHECK_EQ_INT(count_fds(), before); /* the received copy was closed */
    close(p[0]), close(p[1]), close(sv[0]), close(sv[1]);
}

/* ---- a spawner driven directly, as a compromised server would ---- */

static int zctrl = -1, zsock = -1;
static pid_t zpid = -1;
static skd__spawner_conf zconf;

static int start_spawner(void)
{
    memset(&zconf, 0, sizeof(zconf));
    skd_strlcpy(zconf.data_dir, "/tmp/skilld-spawner-test", sizeof(zconf.data_dir));
    skd_strlcpy(zconf.runtime, "native", sizeof(zconf.runtime));
    skd_sandbox_ceilings_from_config(&zconf.ceil, NULL);
    zconf.ceil.max[SKD_LIMIT_CPU] = 200;
    zconf.ceil.max[SKD_LIMIT_MEMORY] = 256;
    zconf.ceil.max[SKD_LIMIT_TIMEOUT] = 5000;
    zconf.ceil.max[SKD_LIMIT_PIDS] = 64;
    zconf.ceil.max[SKD_LIMIT_OUTPUT] = 1 << 20;
    zconf.ceil.max[SKD_LIMIT_TMP] = 256LL << 20;
    mkdir(zconf.data_dir, 0700);
    if (skd__zygote_fork(&zconf, &zctrl, &zpid) != 0)
        return -1;
    skd__spawn_out o;
    skd__spawn_msg m;
    skd_err e = {0};
    skd__spawn_out_init(&o, SKD__REQ_NEW_SPAWNER, 0);
    int rc = skd__spawn_send(zctrl, &o, &e);
    skd__spawn_out_free(&o);
    if (rc || skd__spawn_recv(zctrl, &m, &e))
        return -1;
    zsock = skd__spawn_take_fd(&m, SKD__FD_SOCKET);
    skd__spawn_msg_free(&m);
    return zsock >= 0 ? 0 : -1;
}

/* Send o (freed) and return the reply's type; *code and msg get the error. */
static int ask(skd__spawn_out *o, int *code, char *msg, size_t cap, uint64_t *handle)
{
    skd__spawn_msg m;
    skd_err e = {0};
    int rc = skd__spawn_send(zsock, o, &e);
    skd__spawn_out_free(o);
    if (rc || skd__spawn_recv(zsock, &m, &e))
        return -1;
    int t = m.type;
    *code = m.code;
    if (msg)
        skd_strlcpy(msg, m.message ? m.message : "", cap);
    if (handle)
        *handle = m.handle;
    skd__spawn_msg_free(&m);
    return t;
}

TEST(hostile_requests_refused)
{
    CHECK_EQ_INT(start_spawner(), 0);
    skd_sandbox_config c = cfg_default();
    c.memory_limit = 128;
    c.timeout_ms = 2000;
    c.cpu_limit = 100;
    c.pids_limit = 32;
    c.output_limit = 1000;
    c.tmp_size = 16 << 20;
    skd__spawn_out o;
    int code = 0;
    char msg[SKD_ERR_MSG_MAX];
    uint64_t h = 0;
    /* Not a UUID: a path-like id could name a cgroup elsewhere. */
    put_prepare(&o, "../../../etc", &c, 1);
    CHECK_EQ_INT(ask(&o, &code, msg, sizeof(msg), NULL), SKD__REP_ERROR);
    CHECK_EQ_INT(code, SKD_EINVAL);
    /* Every limit above the operator's ceiling is refused by name. */
    skd_sandbox_config over = c;
    over.memory_limit = 1024 * 1024;
    put_prepare(&o, "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0", &over, 1);
    CHECK_EQ_INT(ask(&o, &code, msg, sizeof(msg), NULL), SKD__REP_ERROR);
    CHECK_EQ_INT(code, SKD_EFORBIDDEN);
    CHECK(strstr(msg, "memoryLimit") != NULL);
    over = c;
    over.timeout_ms = 3600000;
    put_prepare(&o, "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0", &over, 1);
    CHECK_EQ_INT(ask(&o, &code, msg, sizeof(msg), NULL), SKD__REP_ERROR);
    CHECK(strstr(msg, "timeout") != NULL);
    /* Every row with a ceiling, one above it (include/skilld/limits.h):
     * the spawner holds each to the ceilings it was told at start. */
    for (int i = 0; i < SKD_LIMIT_N; i++) {
        const skd_limit *l = &skd_limits[i];
        if (!l->ceil_env || zconf.ceil.max[i] >= l->max)
            continue;
        over = c;
        skd_limit_set(&over, i, zconf.ceil.max[i] + 1);
        put_prepare(&o, "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0", &over, 1);
        CHECK_EQ_INT(ask(&o, &code, msg, sizeof(msg), NULL), SKD__REP_ERROR);
        CHECK_EQ_INT(code, SKD_EFORBIDDEN);
        CHECK(strstr(msg, l->key) != NULL);
    }
    over = c;
    over.pids_limit = 0;
    put_prepare(&o, "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0", &over, 1);
    CHECK_EQ_INT(ask(&o, &code, msg, sizeof(msg), NULL), SKD__REP_ERROR);
    CHECK(strstr(msg, "pidsLimit") != NULL);
    /* An unknown provider name. */
    put_prepare(&o, "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0", &c, 1);
    skd__spawn_out_free(&o);
    skd__spawn_out_init(&o, SKD__REQ_PREPARE, 0);
    skd__spawn_out_str(&o, SKD__T_PROVIDER, "/bin/sh");
    skd__spawn_out_str(&o, SKD__T_ID, "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0");
    skd__spawn_out_str(&o, SKD__T_IMAGE, "host");
    skd__spawn_out_str(&o, SKD__T_CWD, "/tmp");
    skd__spawn_out_str(&o, SKD__T_ARG, "true");
    skd__spawn_out_config(&o, &c);
    CHECK_EQ_INT(ask(&o, &code, msg, sizeof(msg), NULL), SKD__REP_ERROR);
    /* An image path instead of a name: resolved against the allow-list. */
    skd__spawn_out_init(&o, SKD__REQ_PREPARE, 0);
    skd__spawn_out_str(&o, SKD__T_PROVIDER, "native");
    skd__spawn_out_str(&o, SKD__T_ID, "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0");
    skd__spawn_out_str(&o, SKD__T_IMAGE, "/etc");
    skd__spawn_out_str(&o, SKD__T_CWD, "/tmp");
    skd__spawn_out_str(&o, SKD__T_ARG, "true");
    skd__spawn_out_config(&o, &c);
    CHECK_EQ_INT(ask(&o, &code, msg, sizeof(msg), NULL), SKD__REP_ERROR);
    /* A "workspace" that is a regular file. */
    int f = open("/etc/hostname", O_RDONLY | O_CLOEXEC);
    put_prepare(&o, "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0", &c, 1);
    skd__spawn_out_fd(&o, f, SKD__FD_WORKSPACE);
    CHECK_EQ_INT(ask(&o, &code, msg, sizeof(msg), NULL), SKD__REP_ERROR);
    CHECK(strstr(msg, "not a directory") != NULL);
    close(f);
    /* Handles that do not exist. */
    skd__spawn_out_init(&o, SKD__REQ_SPAWN, 424242);
    CHECK_EQ_INT(ask(&o, &code, msg, sizeof(msg), NULL), SKD__REP_ERROR);
    skd__spawn_out_init(&o, SKD__REQ_CLEANUP, 424242);
    CHECK_EQ_INT(ask(&o, &code, msg, sizeof(msg), NULL), SKD__REP_ERROR);
    /* A workspace commit for a live sandbox that is not a UUID, or that
     * no live sandbox has: no such sandbox, and the spawner goes on. */
    skd__spawn_out_init(&o, SKD__REQ_LIVE_COMMIT, 0);
    skd__spawn_out_str(&o, SKD__T_LIVE, "../../../etc");
    CHECK_EQ_INT(ask(&o, &code, msg, sizeof(msg), NULL), SKD__REP_ERROR);
    CHECK_EQ_INT(code, SKD_ENOENT);
    skd__spawn_out_init(&o, SKD__REQ_LIVE_COMMIT, 0);
    skd__spawn_out_str(&o, SKD__T_LIVE, "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0");
    CHECK_EQ_INT(ask(&o, &code, msg, sizeof(msg), NULL), SKD__REP_ERROR);
    CHECK_EQ_INT(code, SKD_ENOENT);
    /* After all that, a proper request still runs. */
    put_prepare(&o, "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f1", &c, 1);
    CHECK_EQ_INT(ask(&o, &code, msg, sizeof(msg), &h), SKD__REP_OK);
    CHECK(h != 0);
    skd__spawn_out_init(&o, SKD__REQ_SPAWN, h);
    CHECK_EQ_INT(ask(&o, &code, msg, sizeof(msg), NULL), SKD__REP_SPAWNED);
    skd__spawn_out_init(&o, SKD__REQ_CLEANUP, h);
    skd__spawn_out_i32(&o, SKD__T_KILLED, 0);
    CHECK_EQ_INT(ask(&o, &code, msg, sizeof(msg), NULL), SKD__REP_OUTCOME);
    /* Closing the sockets ends the spawner and the zygote. */
    close(zsock);
    close(zctrl);
    int st = 0;
    CHECK_EQ_INT(waitpid(zpid, &st, 0), zpid);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* ---- the lifecycle through a runner ---- */

static skd_runner *R;

static int threads_of(long pid)
{
    char p[64], line[256];
    snprintf(p, sizeof(p), "/proc/%ld/status", pid);
    FILE *f = fopen(p, "re");
    int n = -1;
    while (f && fgets(line, sizeof(line), f))
        if (strncmp(line, "Threads:", 8) == 0)
            n = (int)strtol(line + 8, NULL, 10);
    if (f)
        fclose(f);
    return n;
}

TEST(spawner_has_one_thread)
{
    long sp = skd_runner_spawner_pid(R);
    CHECK(sp > 0);
    CHECK_EQ_INT(threads_of(sp), 1);
}

struct done {
    int done;
    skd_sandbox_result res;
};

static void on_done(void *arg, skd_sandbox_result *res)
{
    struct done *d = arg;
    d->res = *res;
    __atomic_store_n(&d->done, 1, __ATOMIC_SEQ_CST);
}

static int procs_with(const char *token)
{
    int n = 0;
    DIR *d = opendir("/proc");
    struct dirent *de;
    while (d && (de = readdir(d)) != NULL) {
        char p[300], buf[512];
        if (de->d_name[0] < '0' || de->d_name[0] > '9')
            continue;
        snprintf(p, sizeof(p), "/proc/%s/cmdline", de->d_name);
        FILE *f = fopen(p, "re");
        if (!f)
            continue;
        size_t k = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        for (size_t i = 0; i < k; i++)
            if (!buf[i])
                buf[i] = ' ';
        buf[k] = '\0';
        if (strstr(buf, token))
            n++;
    }
    if (d)
        closedir(d);
    return n;
}

TEST(killed_spawner_takes_its_sandboxes_and_is_replaced)
{
    char token[32];
    snprintf(token, sizeof(token), "302.%06d", (int)(getpid() % 1000000));
    const char *argv[] = {"sleep", token, NULL};
    skd_sandbox_spec spec = {.argv = argv, .key_id = "k"};
    skd_err err = {0};
    struct done d = {0};
    CHECK_EQ_INT(skd_sandbox_start(R, &spec, on_done, &d, NULL, &err), 0);
    int seen = 0;
    for (int i = 0; i < 500 && !seen; i++, sleep_ms(10))
        seen = procs_with(token);
    CHECK_EQ_INT(seen, 1);
    long old = skd_runner_spawner_pid(R);
    CHECK(old > 0);
    kill((pid_t)old, SIGKILL);
    /* The sandbox dies with it, and its run completes as lost. */
    for (int i = 0; i < 200 && (!__atomic_load_n(&d.done, __ATOMIC_SEQ_CST) || procs_with(token));
         i++)
        sleep_ms(10);
    CHECK(__atomic_load_n(&d.done, __ATOMIC_SEQ_CST));
    CHECK_EQ_INT(procs_with(token), 0);
    CHECK(d.res.error != 0 || d.res.killed || !d.res.exited);
    skd_sandbox_result_free(&d.res);
    /* The next runs: a new spawner serves them within moments. */
    int ok = 0;
    for (int i = 0; i < 20 && !ok; i++) {
        const char *t[] = {"true", NULL};
        skd_sandbox_result res;
        skd_sandbox_spec s2 = {.argv = t, .key_id = "k"};
        int rc = skd_sandbox_run(R, &s2, &res, &err);
        ok = rc == 0 && res.error == 0 && res.exited && res.exit_code == 0;
        if (rc == 0)
            skd_sandbox_result_free(&res);
        else
            CHECK_EQ_INT(rc, SKD_ESANDBOX); /* refused, never hung */
        if (!ok)
            sleep_ms(100);
    }
    CHECK(ok);
    long now = skd_runner_spawner_pid(R);
    CHECK(now > 0 && now != old);
    CHECK_EQ_INT(threads_of(now), 1);
}

int main(int argc, char **argv)
{
    sbt_maybe_reexec(argc, argv);
    tap_prog = "test_sandbox_spawner";
    RUN(proto_fields_and_fds);
    RUN(proto_workspace_outcome);
    RUN(proto_usage_outcome);
    RUN(proto_live_save);
    RUN(proto_snap_list);
    RUN(proto_large_message_by_memfd);
    RUN(proto_garbage_refused_fds_closed);
    RUN(hostile_requests_refused);
    skd_err err = {0};
    if (skd_runner_new(NULL, NULL, &R, &err) != 0) {
        printf("FAIL test_sandbox_spawner: runner: %s\n", skd_err_msg(&err));
        return 1;
    }
    RUN(spawner_has_one_thread);
    RUN(killed_spawner_takes_its_sandboxes_and_is_replaced);
    skd_runner_free(R);
    return tap_failed_total ? 1 : 0;
}
