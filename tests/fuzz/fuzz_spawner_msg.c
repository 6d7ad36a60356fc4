/* libFuzzer driver for the spawner protocol decoder
 * (src/sandbox/spawner/spawner_proto.c), the spawner's first line against a
 * hostile server. The first input byte says how many descriptors arrive
 * with the message (0..8, opened on /dev/null); the rest is the packet.
 * The decoder must survive any packet, accept only messages whose required
 * fields are present, and close every descriptor it received: the ones it
 * refused at once, the rest when the message is freed. An accepted message
 * must survive a round trip through the encoder unchanged. The limits are
 * tagged fields (one per row of include/skilld/limits.h): an accepted
 * message holds each tag at most once, each value in its row's range. */
#include "sandbox/spawner/spawner_proto.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_closed(const int *fds, int n)
{
    for (int i = 0; i < n; i++)
        if (fcntl(fds[i], F_GETFD) != -1)
            abort(); /* leaked */
}

static void round_trip(const skd__spawn_msg *m)
{
    skd__spawn_out o;
    skd__spawn_msg back;
    skd_err e = {0};
    skd__spawn_out_init(&o, m->type, m->handle);
    if (m->provider)
        skd__spawn_out_str(&o, SKD__T_PROVIDER, m->provider);
    if (m->id)
        skd__spawn_out_str(&o, SKD__T_ID, m->id);
    if (m->image)
        skd__spawn_out_str(&o, SKD__T_IMAGE, m->image);
    if (m->cwd)
        skd__spawn_out_str(&o, SKD__T_CWD, m->cwd);
    if (m->message)
        skd__spawn_out_str(&o, SKD__T_MESSAGE, m->message);
    if (m->live)
        skd__spawn_out_str(&o, SKD__T_LIVE, m->live);
    for (size_t i = 0; i < m->argc; i++)
        skd__spawn_out_str(&o, SKD__T_ARG, m->argv[i]);
    for (size_t i = 0; i < m->envc; i++)
        skd__spawn_out_str(&o, SKD__T_ENV, m->envp[i]);
    for (int i = 0; i < SKD_LIMIT_N; i++)
        if (m->limits_seen & (1u << i))
            skd__spawn_out_limit(&o, skd_limits[i].tag, skd_limit_get(&m->cfg, i));
    if (m->code)
        skd__spawn_out_i32(&o, SKD__T_CODE, m->code);
    if (m->has_outcome)
        skd__spawn_out_outcome(&o, m->outcome);
    if (o.failed || o.len < 24)
        abort();
    memcpy(o.buf + 6, &o.nfields, 2);
    if (skd__spawn_decode(o.buf, o.len, NULL, 0, &back, &e) != 0)
        abort();
    if (back.type != m->type || back.handle != m->handle || back.argc != m->argc ||
        back.envc != m->envc || (m->id && strcmp(back.id, m->id) != 0) ||
        (m->live && (!back.live || strcmp(back.live, m->live) != 0)) ||
        back.limits_seen != m->limits_seen || back.has_config != m->has_config)
        abort();
    for (int i = 0; i < SKD_LIMIT_N; i++)
        if (skd_limit_get(&back.cfg, i) != skd_limit_get(&m->cfg, i))
            abort();
    for (size_t i = 0; i < m->argc; i++)
        if (strcmp(back.argv[i], m->argv[i]) != 0)
            abort();
    skd__spawn_msg_free(&back);
    skd__spawn_out_free(&o);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > SKD__SPAWN_PACKET_MAX + 1)
        return 0;
    int n = data[0] % (SKD__SPAWN_MAX_FDS + 1), fds[SKD__SPAWN_MAX_FDS];
    for (int i = 0; i < n; i++)
        if ((fds[i] = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0)
            abort();
    skd__spawn_msg m;
    skd_err e = {0};
    int rc = skd__spawn_decode(data + 1, size - 1, fds, n, &m, &e);
    if (rc != 0) {
        if (rc != SKD_EINVAL || strncmp(e.msg, "spawner message: ", 17) != 0)
            abort();
        check_closed(fds, n);
        return 0;
    }
    if (m.type == SKD__REQ_PREPARE && (!m.provider || !m.id || !m.image || !m.cwd || !m.argc ||
                                       !m.argv[0] || m.argv[m.argc] || !m.has_config))
        abort();
    for (int i = 0; i < SKD_LIMIT_N; i++) {
        int64_t v = skd_limit_get(&m.cfg, i);
        if ((m.limits_seen & (1u << i)) && (v < skd_limits[i].min || v > skd_limits[i].max))
            abort(); /* a value out of its row's range got through */
    }
    if (m.has_config != (m.limits_seen == (1u << SKD_LIMIT_N) - 1))
        abort();
    for (int i = 0; m.has_usage && i < 3; i++)
        if (m.usage[i] < 0)
            abort(); /* metering is never negative */
    /* The fds stay open, owned by the message, until taken or freed. */
    for (int i = 0; i < n; i++)
        if (fcntl(fds[i], F_GETFD) == -1)
            abort();
    int ws = skd__spawn_take_fd(&m, SKD__FD_WORKSPACE);
    round_trip(&m);
    skd__spawn_msg_free(&m);
    if (ws >= 0)
        close(ws);
    check_closed(fds, n);
    return 0;
}
