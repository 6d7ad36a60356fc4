/*
 * Encoder, decoder and transport of the spawner protocol (spawner_proto.h).
 * The decoder is the spawner's first line against a hostile server: it
 * trusts no length, count or tag, copies what it keeps, and closes every
 * received descriptor it does not hand out.
 */
#include "sandbox/spawner/spawner_proto.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define HDR_LEN 24
#define FIELD_HDR 8
#define MAX_FIELDS (2 * SKD_SANDBOX_MAX_ARGS + 64)

/* ---- encoding ---- */

static void put(skd__spawn_out *o, const void *p, size_t n)
{
    if (o->failed)
        return;
    if (o->len + n > SKD__SPAWN_MSG_MAX) {
        o->failed = 1;
        return;
    }
    if (o->len + n > o->cap) {
        size_t cap = o->cap ? o->cap : 512;
        while (cap < o->len + n)
            cap *= 2;
        unsigned char *b = realloc(o->buf, cap);
        if (!b) {
            o->failed = 1;
            return;
        }
        o->buf = b;
        o->cap = cap;
    }
    memcpy(o->buf + o->len, p, n);
    o->len += n;
}

static void put_field(skd__spawn_out *o, uint16_t tag, const void *p, uint32_t n)
{
    uint16_t zero = 0;
    put(o, &tag, 2);
    put(o, &zero, 2);
    put(o, &n, 4);
    put(o, p, n);
    o->nfields++;
}

void skd__spawn_out_init(skd__spawn_out *o, uint16_t type, uint64_t handle)
{
    memset(o, 0, sizeof(*o));
    uint32_t magic = SKD__SPAWN_MAGIC, zero = 0;
    uint16_t nf = 0;
    put(o, &magic, 4);
    put(o, &type, 2);
    put(o, &nf, 2);
    put(o, &handle, 8);
    put(o, &zero, 4); /* nfds */
    put(o, &zero, 4); /* flags */
}

void skd__spawn_out_str(skd__spawn_out *o, uint16_t tag, const char *s)
{
    size_t n = strlen(s ? s : "");
    if (n > SKD__SPAWN_STR_MAX) {
        o->failed = 1;
        return;
    }
    put_field(o, tag, s ? s : "", (uint32_t)n);
}

void skd__spawn_out_i32(skd__spawn_out *o, uint16_t tag, int32_t v)
{
    put_field(o, tag, &v, 4);
}

void skd__spawn_out_limit(skd__spawn_out *o, uint32_t tag, int64_t value)
{
    unsigned char w[SKD__LIMIT_FIELD_LEN] = {0};
    memcpy(w, &tag, 4);
    memcpy(w + 8, &value, 8);
    put_field(o, SKD__T_LIMIT, w, sizeof(w));
}

void skd__spawn_out_config(skd__spawn_out *o, const skd_sandbox_config *c)
{
    for (int i = 0; i < SKD_LIMIT_N; i++)
        skd__spawn_out_limit(o, skd_limits[i].tag, skd_limit_get(c, i));
}

void skd__spawn_out_outcome(skd__spawn_out *o, const int v[5])
{
    int32_t w[5];
    for (int i = 0; i < 5; i++)
        w[i] = v[i];
    put_field(o, SKD__T_OUTCOME, w, sizeof(w));
}

void skd__spawn_out_workspace(skd__spawn_out *o, int code, uint64_t bytes)
{
    unsigned char w[16] = {0};
    int32_t c = code;
    memcpy(w, &c, 4);
    memcpy(w + 8, &bytes, 8);
    put_field(o, SKD__T_WORKSPACE, w, sizeof(w));
}

void skd__spawn_out_snap_args(skd__spawn_out *o, int flags, int64_t bytes)
{
    unsigned char w[16] = {0};
    int32_t f = flags;
    memcpy(w, &f, 4);
    memcpy(w + 8, &bytes, 8);
    put_field(o, SKD__T_SNAP_ARGS, w, sizeof(w));
}

void skd__spawn_out_usage(skd__spawn_out *o, const int64_t v[3])
{
    put_field(o, SKD__T_USAGE, v, 3 * sizeof(int64_t));
}

void skd__spawn_out_fd(skd__spawn_out *o, int fd, int role)
{
    if (o->nfds >= SKD__SPAWN_MAX_FDS - 1 || fd < 0) { /* one slot kept for the memfd */
        o->failed = 1;
        return;
    }
    o->fds[o->nfds++] = fd;
    uint32_t r = (uint32_t)role;
    put_field(o, SKD__T_FDROLE, &r, 4);
}

void skd__spawn_out_free(skd__spawn_out *o)
{
    free(o->buf);
    o->buf = NULL;
}

/* A sealed memfd holding the whole message, for messages over one packet. */
static int to_memfd(const unsigned char *p, size_t n)
{
    int fd = memfd_create("skilld-spawn-msg", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0)
        return -1;
    if (skd_write_all(fd, p, n)) {
        close(fd);
        return -1;
    }
    if (fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static int send_packet(int sock, const unsigned char *p, size_t n, const int *fds, int nfds)
{
    struct iovec iov = {.iov_base = (void *)p, .iov_len = n};
    union {
        char buf[CMSG_SPACE(sizeof(int) * SKD__SPAWN_MAX_FDS)];
        struct cmsghdr align;
    } u;
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
    if (nfds > 0) {
        memset(&u, 0, sizeof(u));
        mh.msg_control = u.buf;
        mh.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
        memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)nfds);
    }
    for (;;) {
        ssize_t w = sendmsg(sock, &mh, MSG_NOSIGNAL);
        if (w == (ssize_t)n)
            return 0;
        if (w < 0 && errno == EINTR)
            continue;
        return -1;
    }
}

int skd__spawn_send(int sock, skd__spawn_out *o, skd_err *err)
{
    if (o->failed)
        return skd_err_set(err, SKD_EINVAL,
                           "sandbox request too large for the spawner (at most %u bytes of "
                           "arguments and environment)",
                           SKD__SPAWN_MSG_MAX);
    uint32_t nfds = (uint32_t)o->nfds, flags = 0;
    memcpy(o->buf + 4 + 2, &o->nfields, 2);
    memcpy(o->buf + 16, &nfds, 4);
    if (o->len <= SKD__SPAWN_PACKET_MAX) {
        memcpy(o->buf + 20, &flags, 4);
        if (send_packet(sock, o->buf, o->len, o->fds, o->nfds) != 0)
            return skd_err_set(err, SKD_ESANDBOX, "sandbox spawner: send: %s", strerror(errno));
        return 0;
    }
    flags = SKD__MSGF_MEMFD;
    memcpy(o->buf + 20, &flags, 4);
    int mfd = to_memfd(o->buf, o->len);
    if (mfd < 0)
        return skd_err_set(err, SKD_ESANDBOX, "sandbox spawner: memfd: %s", strerror(errno));
    int fds[SKD__SPAWN_MAX_FDS];
    memcpy(fds, o->fds, sizeof(int) * (size_t)o->nfds);
    fds[o->nfds] = mfd;
    /* The packet is the header alone, flagged: the body is in the memfd. */
    int rc = send_packet(sock, o->buf, HDR_LEN, fds, o->nfds + 1);
    int e = errno;
    close(mfd);
    if (rc != 0)
        return skd_err_set(err, SKD_ESANDBOX, "sandbox spawner: send: %s", strerror(e));
    return 0;
}

/* ---- decoding ---- */

static void close_fds(const int *fds, int n)
{
    for (int i = 0; i < n; i++)
        if (fds[i] >= 0)
            close(fds[i]);
}

static int bad(skd__spawn_msg *m, skd_err *err, const char *what)
{
    skd__spawn_msg_free(m);
    return skd_err_set(err, SKD_EINVAL, "spawner message: %s", what);
}

/* Copy a string field into m->buf at *off; NULL when it holds a NUL. */
static char *take_str(skd__spawn_msg *m, size_t *off, const unsigned char *p, uint32_t n)
{
    if (n > SKD__SPAWN_STR_MAX || memchr(p, '\0', n))
        return NULL;
    char *s = (char *)m->buf + *off;
    memcpy(s, p, n);
    s[n] = '\0';
    *off += (size_t)n + 1;
    return s;
}

/* One tagged limit: a known tag, not seen before, its value in its row's
 * range. Returns 0, or -1 with why in what (cap bytes). */
static int take_limit(skd__spawn_msg *m, const unsigned char *p, uint32_t n, char *what, size_t cap)
{
    uint32_t tag, zero;
    int64_t v;
    if (n != SKD__LIMIT_FIELD_LEN)
        return snprintf(what, cap, "bad limit field"), -1;
    memcpy(&tag, p, 4);
    memcpy(&zero, p + 4, 4);
    memcpy(&v, p + 8, 8);
    if (zero != 0)
        return snprintf(what, cap, "bad limit field"), -1;
    int id = skd_limit_by_tag(tag);
    if (id < 0)
        return snprintf(what, cap, "unknown limit tag %u", (unsigned)tag), -1;
    const skd_limit *l = &skd_limits[id];
    if (m->limits_seen & (1u << id))
        return snprintf(what, cap, "limit %s twice", l->key), -1;
    if (v < l->min || v > l->max)
        return snprintf(what, cap, "%s %lld is out of its range [%lld, %lld]", l->key, (long long)v,
                        (long long)l->min, (long long)l->max),
               -1;
    skd_limit_set(&m->cfg, id, v);
    m->limits_seen |= 1u << id;
    m->has_config = ++m->nlimits == SKD_LIMIT_N;
    return 0;
}

static int check_required(const skd__spawn_msg *m)
{
    switch (m->type) {
    case SKD__REQ_PREPARE:
        return m->provider && m->id && m->image && m->cwd && m->argc > 0 && m->has_config;
    case SKD__REQ_LIVE_CREATE:
        return m->live && m->image && m->has_config && !m->argc;
    case SKD__REQ_LIVE_DELETE:
    case SKD__REQ_LIVE_COMMIT:
        return m->live && !m->has_config && !m->nlimits;
    case SKD__REQ_LIVE_SAVE:
        return m->live && m->snap && m->has_snap_args && !m->has_config && !m->nlimits;
    case SKD__REQ_SNAP_LIST:
        return !m->live && !m->snap && !m->has_config && !m->nlimits && !m->argc;
    case SKD__REP_ERROR:
        return m->code < 0 && m->message;
    case SKD__REP_OUTCOME:
        return m->has_outcome;
    default:
        return 1;
    }
}

static int set_once(const char **slot, char *s)
{
    if (*slot || !s)
        return -1;
    *slot = s;
    return 0;
}

int skd__spawn_decode(const unsigned char *data, size_t len, const int *fds, int nfds,
                      skd__spawn_msg *m, skd_err *err)
{
    memset(m, 0, sizeof(*m));
    for (int i = 0; i < SKD__SPAWN_MAX_FDS; i++)
        m->fds[i] = -1;
    if (nfds < 0 || nfds > SKD__SPAWN_MAX_FDS) {
        close_fds(fds, nfds > SKD__SPAWN_MAX_FDS ? SKD__SPAWN_MAX_FDS : 0);
        return skd_err_set(err, SKD_EINVAL, "spawner message: too many descriptors");
    }
    if (nfds > 0) /* fds may be NULL when there are none */
        memcpy(m->fds, fds, sizeof(int) * (size_t)nfds);
    m->nfds = nfds;
    uint32_t magic, nfd_hdr, flags;
    uint16_t nfields;
    if (len < HDR_LEN || len > SKD__SPAWN_MSG_MAX)
        return bad(m, err, "bad length");
    memcpy(&magic, data, 4);
    memcpy(&m->type, data + 4, 2);
    memcpy(&nfields, data + 6, 2);
    memcpy(&m->handle, data + 8, 8);
    memcpy(&nfd_hdr, data + 16, 4);
    memcpy(&flags, data + 20, 4);
    if (magic != SKD__SPAWN_MAGIC)
        return bad(m, err, "bad magic");
    if (m->type < SKD__REQ_PREPARE || m->type >= SKD__TYPE_MAX ||
        (m->type > SKD__REQ_SNAP_LIST && m->type < SKD__REP_OK))
        return bad(m, err, "unknown type");
    if (nfd_hdr != (uint32_t)nfds)
        return bad(m, err, "descriptor count does not match");
    if (flags != 0)
        return bad(m, err, "unexpected flags");
    if (nfields > MAX_FIELDS)
        return bad(m, err, "too many fields");
    /* Room for every string plus its NUL, and the two vectors. */
    m->buf = malloc(len + nfields + 1);
    m->argv = calloc(SKD_SANDBOX_MAX_ARGS + 1, sizeof(char *));
    m->envp = calloc(SKD_SANDBOX_MAX_ARGS + 1, sizeof(char *));
    if (!m->buf || !m->argv || !m->envp)
        return bad(m, err, "out of memory");
    m->len = len;
    size_t pos = HDR_LEN, off = 0;
    int nroles = 0;
    for (uint16_t f = 0; f < nfields; f++) {
        uint16_t tag, zero;
        uint32_t n;
        if (len - pos < FIELD_HDR)
            return bad(m, err, "truncated field");
        memcpy(&tag, data + pos, 2);
        memcpy(&zero, data + pos + 2, 2);
        memcpy(&n, data + pos + 4, 4);
        pos += FIELD_HDR;
        if (zero != 0 || n > len - pos)
            return bad(m, err, "bad field length");
        const unsigned char *p = data + pos;
        pos += n;
        int32_t v32;
        switch (tag) {
        case SKD__T_PROVIDER:
            if (set_once(&m->provider, take_str(m, &off, p, n)))
                return bad(m, err, "bad provider");
            break;
        case SKD__T_ID:
            if (set_once(&m->id, take_str(m, &off, p, n)))
                return bad(m, err, "bad id");
            break;
        case SKD__T_IMAGE:
            if (set_once(&m->image, take_str(m, &off, p, n)))
                return bad(m, err, "bad image");
            break;
        case SKD__T_CWD:
            if (set_once(&m->cwd, take_str(m, &off, p, n)))
                return bad(m, err, "bad working directory");
            break;
        case SKD__T_CA_PEM:
            if (set_once(&m->ca_pem, take_str(m, &off, p, n)))
                return bad(m, err, "bad CA certificate");
            break;
        case SKD__T_LIVE:
            if (set_once(&m->live, take_str(m, &off, p, n)))
                return bad(m, err, "bad live sandbox id");
            break;
        case SKD__T_SNAP:
            if (set_once(&m->snap, take_str(m, &off, p, n)))
                return bad(m, err, "bad snapshot name");
            break;
        case SKD__T_SNAP_ARGS:
            if (n != 16 || m->has_snap_args)
                return bad(m, err, "bad snapshot arguments");
            memcpy(&v32, p, 4);
            memcpy(&m->snap_bytes, p + 8, 8);
            if (v32 < 0 || v32 > 3 || m->snap_bytes < 0 || p[4] || p[5] || p[6] || p[7])
                return bad(m, err, "bad snapshot arguments");
            m->snap_flags = v32;
            m->has_snap_args = 1;
            break;
        case SKD__T_MESSAGE:
            if (set_once(&m->message, take_str(m, &off, p, n)))
                return bad(m, err, "bad message");
            break;
        case SKD__T_WS_MESSAGE:
            if (set_once(&m->ws_message, take_str(m, &off, p, n)))
                return bad(m, err, "bad workspace message");
            break;
        case SKD__T_WORKSPACE:
            if (n != 16 || m->has_ws)
                return bad(m, err, "bad workspace outcome");
            memcpy(&v32, p, 4);
            if (v32 > 0 || v32 < -1000)
                return bad(m, err, "bad workspace outcome");
            m->ws_code = v32;
            memcpy(&m->ws_bytes, p + 8, 8);
            m->has_ws = 1;
            break;
        case SKD__T_USAGE:
            if (n != 3 * sizeof(int64_t) || m->has_usage)
                return bad(m, err, "bad usage");
            memcpy(m->usage, p, sizeof(m->usage));
            for (int i = 0; i < 3; i++)
                if (m->usage[i] < 0)
                    return bad(m, err, "bad usage");
            m->has_usage = 1;
            break;
        case SKD__T_ARG:
        case SKD__T_ENV: {
            size_t *cnt = tag == SKD__T_ARG ? &m->argc : &m->envc;
            char **vec = tag == SKD__T_ARG ? m->argv : m->envp;
            if (*cnt >= SKD_SANDBOX_MAX_ARGS || !(vec[*cnt] = take_str(m, &off, p, n)))
                return bad(m, err, "bad argument or environment entry");
            (*cnt)++;
            break;
        }
        case SKD__T_LIMIT: {
            char what[128];
            if (take_limit(m, p, n, what, sizeof(what)) != 0)
                return bad(m, err, what);
            break;
        }
        case SKD__T_FDROLE:
            if (n != 4 || nroles >= nfds)
                return bad(m, err, "bad descriptor role");
            memcpy(&v32, p, 4);
            if (v32 < SKD__FD_WORKSPACE || v32 >= SKD__FD_ROLE_MAX)
                return bad(m, err, "unknown descriptor role");
            for (int i = 0; i < nroles; i++)
                if (m->roles[i] == v32)
                    return bad(m, err, "duplicate descriptor role");
            m->roles[nroles++] = v32;
            break;
        case SKD__T_CODE:
            if (n != 4)
                return bad(m, err, "bad code");
            memcpy(&v32, p, 4);
            if (v32 >= 0 || v32 < -1000)
                return bad(m, err, "bad code");
            m->code = v32;
            break;
        case SKD__T_KILLED:
            if (n != 4)
                return bad(m, err, "bad killed flag");
            memcpy(&v32, p, 4);
            m->killed = v32 != 0;
            break;
        case SKD__T_OUTCOME:
            if (n != 20 || m->has_outcome)
                return bad(m, err, "bad outcome");
            for (int i = 0; i < 5; i++)
                memcpy(&m->outcome[i], p + 4 * i, 4);
            m->has_outcome = 1;
            break;
        default:
            return bad(m, err, "unknown field");
        }
    }
    if (pos != len)
        return bad(m, err, "trailing bytes");
    if (nroles != nfds)
        return bad(m, err, "a descriptor without a role");
    if (!check_required(m))
        return bad(m, err, "a required field is missing");
    return 0;
}

int skd__spawn_recv(int sock, skd__spawn_msg *m, skd_err *err)
{
    static __thread unsigned char pkt[SKD__SPAWN_PACKET_MAX + 1];
    union {
        char buf[CMSG_SPACE(sizeof(int) * SKD__SPAWN_MAX_FDS)];
        struct cmsghdr align;
    } u;
    struct iovec iov = {.iov_base = pkt, .iov_len = sizeof(pkt)};
    struct msghdr mh = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof(u.buf)};
    ssize_t n;
    memset(m, 0, sizeof(*m));
    for (int i = 0; i < SKD__SPAWN_MAX_FDS; i++)
        m->fds[i] = -1;
    do
        n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return skd_err_set(err, SKD_ESANDBOX, "sandbox spawner: receive: %s", strerror(errno));
    int fds[SKD__SPAWN_MAX_FDS], nfds = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < k; i++) {
            int fd;
            memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
            if (nfds < SKD__SPAWN_MAX_FDS)
                fds[nfds++] = fd;
            else
                close(fd);
        }
    }
    if (n == 0 && nfds == 0)
        return skd_err_set(err, SKD_ENOENT, "sandbox spawner: the other end closed");
    if ((mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || (size_t)n > SKD__SPAWN_PACKET_MAX) {
        close_fds(fds, nfds);
        return skd_err_set(err, SKD_EINVAL, "spawner message: truncated");
    }
    uint32_t flags = 0;
    if (n >= HDR_LEN)
        memcpy(&flags, pkt + 20, 4);
    if (!(flags & SKD__MSGF_MEMFD))
        return skd__spawn_decode(pkt, (size_t)n, fds, nfds, m, err);
    /* The body is in the last descriptor, a sealed memfd. */
    if (n != HDR_LEN || nfds < 1) {
        close_fds(fds, nfds);
        return skd_err_set(err, SKD_EINVAL, "spawner message: bad memfd header");
    }
    int mfd = fds[--nfds];
    struct stat st;
    int seals = fcntl(mfd, F_GET_SEALS);
    unsigned char *body = NULL;
    int want = F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW;
    if (fstat(mfd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < HDR_LEN ||
        (uint64_t)st.st_size > SKD__SPAWN_MSG_MAX || seals < 0 || (seals & want) != want ||
        !(body = malloc((size_t)st.st_size)) ||
        pread(mfd, body, (size_t)st.st_size, 0) != st.st_size) {
        free(body);
        close(mfd);
        close_fds(fds, nfds);
        return skd_err_set(err, SKD_EINVAL, "spawner message: bad memfd body");
    }
    close(mfd);
    /* The body's header carries the flag too; clear it for the decoder. */
    memset(body + 20, 0, 4);
    int rc = skd__spawn_decode(body, (size_t)st.st_size, fds, nfds, m, err);
    free(body);
    return rc;
}

int skd__spawn_take_fd(skd__spawn_msg *m, int role)
{
    for (int i = 0; i < m->nfds; i++)
        if (m->roles[i] == role && m->fds[i] >= 0) {
            int fd = m->fds[i];
            m->fds[i] = -1;
            return fd;
        }
    return -1;
}

void skd__spawn_msg_free(skd__spawn_msg *m)
{
    if (!m)
        return;
    close_fds(m->fds, m->nfds);
    m->nfds = 0;
    free(m->buf);
    free(m->argv);
    free(m->envp);
    m->buf = NULL;
    m->argv = m->envp = NULL;
}
