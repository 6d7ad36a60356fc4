/*
 * The egress proxy over loopback (src/net/egress*.c): the request-head
 * parser, host patterns and narrowing, and the service itself with a real
 * upstream: CONNECT tunnels, absolute-URI HTTP rewritten to origin form,
 * refusals with a 403 and a reason (host patterns, the outbound guard on
 * the resolved address, with no connection reaching the forbidden
 * listener), the byte cap, the connection cap, the idle limit, and the
 * records and counters a run leaves.
 *
 * The upstream listens on 127.0.0.1 and is opened by
 * SKILLS_OUTBOUND_ALLOW_CIDRS=127.0.0.1/32; the "forbidden" listener is on
 * 127.0.0.2, which the guard refuses as loopback.
 */
#include "net/egress.h"
#include "skilld/config.h"
#include "skilld/util.h"
#include "tap.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

/* ---- parser --------------------------------------------------------------- */

static int parse(const char *s, skd_egress_req *req, char *out, size_t *outlen)
{
    static char buf[SKD_EGRESS_HEAD_MAX + 512];
    char *o = out ? out : buf;
    size_t ol = 0;
    int rc = skd__egress_parse_head(s, strlen(s), req, o, sizeof(buf), &ol);
    if (outlen)
        *outlen = ol;
    if (rc == 0 && ol < sizeof(buf))
        o[ol] = '\0';
    return rc;
}

TEST(parse_connect)
{
    skd_egress_req r;
    CHECK_EQ_INT(
        parse("CONNECT Pypi.ORG.:443 HTTP/1.1\r\nHost: pypi.org:443\r\n\r\n", &r, NULL, NULL), 0);
    CHECK_EQ_INT(r.connect, 1);
    CHECK_STR(r.host, "pypi.org");
    CHECK_EQ_INT(r.port, 443);
    CHECK_EQ_INT(parse("CONNECT [::1]:8443 HTTP/1.1\r\n\r\n", &r, NULL, NULL), 0);
    CHECK_STR(r.host, "::1");
    CHECK_EQ_INT(r.port, 8443);
    CHECK_EQ_INT(parse("CONNECT pypi.org HTTP/1.1\r\n\r\n", &r, NULL, NULL), SKD_EINVAL);
    CHECK_EQ_INT(r.status, 400);
    CHECK_EQ_INT(parse("CONNECT pypi.org:0 HTTP/1.1\r\n\r\n", &r, NULL, NULL), SKD_EINVAL);
    CHECK_EQ_INT(parse("CONNECT pypi.org:65536 HTTP/1.1\r\n\r\n", &r, NULL, NULL), SKD_EINVAL);
    CHECK_EQ_INT(parse("CONNECT [fe80::1%eth0]:1 HTTP/1.1\r\n\r\n", &r, NULL, NULL), SKD_EINVAL);
    CHECK_EQ_INT(parse("CONNECT a@b:443 HTTP/1.1\r\n\r\n", &r, NULL, NULL), SKD_EINVAL);
    CHECK_EQ_INT(r.status, 403);
    /* incomplete heads ask for more */
    CHECK_EQ_INT(parse("CONNECT pypi.org:443 HTTP/1.1\r\nHost: x\r\n", &r, NULL, NULL), 1);
    CHECK_EQ_INT(parse("CONN", &r, NULL, NULL), 1);
}

TEST(parse_absolute_uri)
{
    skd_egress_req r;
    char out[SKD_EGRESS_HEAD_MAX + 512];
    size_t ol;
    CHECK_EQ_INT(parse("GET http://Example.test:8080/simple/pkg/?x=1#frag HTTP/1.1\r\n"
                       "Host: evil.test\r\nProxy-Connection: keep-alive\r\n"
                       "Proxy-Authorization: Basic eA==\r\nAccept: */*\r\n"
                       "Connection: keep-alive\r\n\r\nBODY",
                       &r, out, &ol),
                 0);
    CHECK_EQ_INT(r.connect, 0);
    CHECK_STR(r.method, "GET");
    CHECK_STR(r.host, "example.test");
    CHECK_EQ_INT(r.port, 8080);
    CHECK_STR(out, "GET /simple/pkg/?x=1 HTTP/1.1\r\nHost: example.test:8080\r\n"
                   "Accept: */*\r\nConnection: close\r\n\r\n");
    CHECK(r.head_len == strlen("GET http://Example.test:8080/simple/pkg/?x=1#frag HTTP/1.1\r\n"
                               "Host: evil.test\r\nProxy-Connection: keep-alive\r\n"
                               "Proxy-Authorization: Basic eA==\r\nAccept: */*\r\n"
                               "Connection: keep-alive\r\n\r\n"));
    CHECK_EQ_INT(parse("HEAD http://h.test HTTP/1.0\n\n", &r, out, &ol), 0);
    CHECK_STR(out, "HEAD / HTTP/1.0\r\nHost: h.test\r\nConnection: close\r\n\r\n");
    CHECK_EQ_INT(parse("GET http://[2001:db8::1]:81?q HTTP/1.1\r\n\r\n", &r, out, &ol), 0);
    CHECK_STR(out, "GET /?q HTTP/1.1\r\nHost: [2001:db8::1]:81\r\nConnection: close\r\n\r\n");
}

TEST(parse_refusals)
{
    skd_egress_req r;
    static const struct {
        const char *head;
        int status;
    } bad[] = {
        {"GET https://pypi.org/ HTTP/1.1\r\n\r\n", 400},
        {"GET /origin-form HTTP/1.1\r\n\r\n", 400},
        {"GET ftp://h/ HTTP/1.1\r\n\r\n", 400},
        {"GET http://user:pw@h/ HTTP/1.1\r\n\r\n", 403},
        {"GET http://h%2ftest/ HTTP/1.1\r\n\r\n", 400},
        {"GET http:// HTTP/1.1\r\n\r\n", 400},
        {"GET http://h/ HTTP/2.0\r\n\r\n", 400},
        {"GET  http://h/ HTTP/1.1\r\n\r\n", 400},
        {"G(T http://h/ HTTP/1.1\r\n\r\n", 400},
        {"\r\nGET http://h/ HTTP/1.1\r\n\r\n", 400},
        {"GET http://h/ HTTP/1.1\r\nX: a\r\n b\r\n\r\n", 400},
        {"GET http://h/ HTTP/1.1\r\nBad Name: a\r\n\r\n", 400},
        {"GET http://h/ HTTP/1.1\r\nX: a\x01\r\n\r\n", 400},
        {"GET http://h/ HTTP/1.1\r\nX: a\rb\r\n\r\n", 400},
        {"POST http://h/ HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n", 400},
        {"POST http://h/ HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 400},
        {"GET http://h:99999/ HTTP/1.1\r\n\r\n", 400},
        {"GET http://h\xc3\xa9/ HTTP/1.1\r\n\r\n", 400},
        {"AVERYVERYVERYLONGMETHODNAME http://h/ HTTP/1.1\r\n\r\n", 501},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int rc = parse(bad[i].head, &r, NULL, NULL);
        if (rc != SKD_EINVAL || r.status != bad[i].status || !r.reason[0])
            printf("# case %zu: rc %d status %d\n", i, rc, r.status);
        CHECK_EQ_INT(rc, SKD_EINVAL);
        CHECK_EQ_INT(r.status, bad[i].status);
        CHECK(r.reason[0] != '\0');
    }
}

TEST(parse_bounds)
{
    skd_egress_req r;
    static char big[SKD_EGRESS_HEAD_MAX + 64];
    char out[SKD_EGRESS_HEAD_MAX + 512];
    size_t ol;
    /* a request line over the line cap: 414, even before the head ends */
    memset(big, 'a', sizeof(big));
    memcpy(big, "GET http://h/", 13);
    CHECK_EQ_INT(skd__egress_parse_head(big, SKD_EGRESS_LINE_MAX + 100, &r, out, sizeof(out), &ol),
                 SKD_EINVAL);
    CHECK_EQ_INT(r.status, 414);
    /* many short header lines past the head cap: 431 */
    size_t n = 0;
    n += (size_t)snprintf(big, sizeof(big), "GET http://h/ HTTP/1.1\r\n");
    while (n + 8 < sizeof(big))
        n += (size_t)snprintf(big + n, sizeof(big) - n, "X: y\r\n");
    CHECK_EQ_INT(skd__egress_parse_head(big, n, &r, out, sizeof(out), &ol), SKD_EINVAL);
    CHECK_EQ_INT(r.status, 431);
    /* 101 header lines: 431; 100 are fine */
    n = (size_t)snprintf(big, sizeof(big), "GET http://h/ HTTP/1.1\r\n");
    for (int i = 0; i < 100; i++)
        n += (size_t)snprintf(big + n, sizeof(big) - n, "X: y\r\n");
    n += (size_t)snprintf(big + n, sizeof(big) - n, "\r\n");
    CHECK_EQ_INT(skd__egress_parse_head(big, n, &r, out, sizeof(out), &ol), 0);
    n = (size_t)snprintf(big, sizeof(big), "GET http://h/ HTTP/1.1\r\n");
    for (int i = 0; i < 101; i++)
        n += (size_t)snprintf(big + n, sizeof(big) - n, "X: y\r\n");
    n += (size_t)snprintf(big + n, sizeof(big) - n, "\r\n");
    CHECK_EQ_INT(skd__egress_parse_head(big, n, &r, out, sizeof(out), &ol), SKD_EINVAL);
    CHECK_EQ_INT(r.status, 431);
}

TEST(host_patterns)
{
    CHECK(skd__egress_host_match("*", "anything.test"));
    CHECK(skd__egress_host_match("*.pypi.org", "files.pypi.org"));
    CHECK(skd__egress_host_match(" *.PyPI.org. ", "a.b.pypi.org"));
    CHECK(!skd__egress_host_match("*.pypi.org", "pypi.org"));
    CHECK(!skd__egress_host_match("*.pypi.org", "evilpypi.org"));
    CHECK(skd__egress_host_match("x.test, registry.npmjs.org", "registry.npmjs.org"));
    CHECK(!skd__egress_host_match("registry.npmjs.org", "registry.npmjs.org.evil.test"));
    CHECK(!skd__egress_host_match("", "a.test"));
    CHECK(!skd__egress_host_match(",,", "a.test"));
}

TEST(policy_narrows_never_widens)
{
    skd_config *cfg = skd_config_new();
    skd_config_set(cfg, "SKILLS_SANDBOX_EGRESS_ALLOW_HOSTS", "*.pypi.org,files.pythonhosted.org",
                   NULL);
    skd_config_set(cfg, "SKILLS_SANDBOX_EGRESS_DENY_HOSTS", "upload.pypi.org", NULL);
    skd_egress_policy p;
    skd_err e = {0};
    skd__egress_policy_defaults(&p, cfg);
    CHECK_EQ_INT(skd__egress_policy_check_host(&p, "www.pypi.org", &e), 0);
    CHECK_EQ_INT(skd__egress_policy_check_host(&p, "upload.pypi.org", &e), SKD_EFORBIDDEN);
    CHECK(strstr(e.msg, "SKILLS_SANDBOX_EGRESS_DENY_HOSTS") != NULL);
    CHECK_EQ_INT(skd__egress_policy_check_host(&p, "github.com", &e), SKD_EFORBIDDEN);
    CHECK(strstr(e.msg, "SKILLS_SANDBOX_EGRESS_ALLOW_HOSTS") != NULL);
    /* a key asks for "*": the operator's list still holds */
    CHECK_EQ_INT(skd__egress_policy_narrow(&p, "*", NULL, &e), 0);
    CHECK_EQ_INT(skd__egress_policy_check_host(&p, "github.com", &e), SKD_EFORBIDDEN);
    /* a skill narrows to files.pythonhosted.org */
    CHECK_EQ_INT(skd__egress_policy_narrow(&p, "files.pythonhosted.org", "x.test", &e), 0);
    CHECK_EQ_INT(skd__egress_policy_check_host(&p, "files.pythonhosted.org", &e), 0);
    CHECK_EQ_INT(skd__egress_policy_check_host(&p, "www.pypi.org", &e), SKD_EFORBIDDEN);
    CHECK(strstr(e.msg, "narrowed") != NULL);
    CHECK_EQ_INT(skd__egress_policy_narrow(&p, "a", NULL, &e), 0);
    CHECK_EQ_INT(skd__egress_policy_narrow(&p, "b", NULL, &e), SKD_EINVAL);
    /* the operator's per-key lists */
    char kb[64];
    skd_config_set(cfg, "SKILLS_SANDBOX_EGRESS_KEY_ALLOW_HOSTS",
                   "alice=*.pypi.org,files.pythonhosted.org; bob=registry.npmjs.org", NULL);
    CHECK_STR(skd__egress_key_hosts(cfg, "alice", kb, sizeof(kb)),
              "*.pypi.org,files.pythonhosted.org");
    CHECK_STR(skd__egress_key_hosts(cfg, "bob", kb, sizeof(kb)), "registry.npmjs.org");
    CHECK(skd__egress_key_hosts(cfg, "ali", kb, sizeof(kb)) == NULL);
    CHECK(skd__egress_key_hosts(cfg, "carol", kb, sizeof(kb)) == NULL);
    CHECK_STR(skd__egress_key_hosts(cfg, "alice", kb, 8), ""); /* too long: nothing */
    /* an empty operator list reaches nothing */
    skd_config_set(cfg, "SKILLS_SANDBOX_EGRESS_ALLOW_HOSTS", "", NULL);
    skd__egress_policy_defaults(&p, cfg);
    CHECK_EQ_INT(skd__egress_policy_check_host(&p, "www.pypi.org", &e), SKD_EFORBIDDEN);
    skd_config_free(cfg);
}

/* ---- the service over loopback -------------------------------------------- */

struct upstream {
    int fd;
    int port;
    atomic_int accepted;
    pthread_t th;
    char last_head[4096];
    pthread_mutex_t mu;
};

static int listen_on(const char *addr, int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    inet_pton(AF_INET, addr, &a.sin_addr);
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, (struct sockaddr *)&a, sizeof(a)) || listen(fd, 64)) {
        close(fd);
        return -1;
    }
    socklen_t al = sizeof(a);
    getsockname(fd, (struct sockaddr *)&a, &al);
    *port = ntohs(a.sin_port);
    return fd;
}

static void write_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w <= 0)
            return;
        p += w;
        n -= (size_t)w;
    }
}

/* One connection at a time: "GET /big" answers 10 MiB, another GET echoes
 * its head as the body, anything else is echoed back byte for byte. */
static void *upstream_main(void *arg)
{
    struct upstream *u = arg;
    for (;;) {
        int c = accept(u->fd, NULL, NULL);
        if (c < 0)
            return NULL;
        atomic_fetch_add(&u->accepted, 1);
        struct timeval tv = {5, 0};
        setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        char buf[4096];
        ssize_t n = recv(c, buf, sizeof(buf) - 1, 0);
        if (n > 0 && strncmp(buf, "GET ", 4) == 0) {
            buf[n] = '\0';
            pthread_mutex_lock(&u->mu);
            memcpy(u->last_head, buf, (size_t)n + 1);
            pthread_mutex_unlock(&u->mu);
            if (strncmp(buf, "GET /drip", 9) == 0) {
                /* 200 KiB in 100-byte segments: many small socket buffers */
                int one = 1;
                setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
                char hdr[128], seg[100];
                int hl = snprintf(hdr, sizeof(hdr), "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n",
                                  2048 * 100);
                write_all(c, hdr, (size_t)hl);
                memset(seg, 'd', sizeof(seg));
                for (int i = 0; i < 2048; i++)
                    write_all(c, seg, sizeof(seg));
            } else if (strncmp(buf, "GET /big", 8) == 0) {
                size_t total = 10u << 20;
                char hdr[128];
                int hl = snprintf(hdr, sizeof(hdr),
                                  "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n\r\n", total);
                write_all(c, hdr, (size_t)hl);
                static char chunk[65536];
                memset(chunk, 'z', sizeof(chunk));
                for (size_t sent = 0; sent < total; sent += sizeof(chunk))
                    write_all(c, chunk, sizeof(chunk));
            } else {
                char hdr[128];
                int hl =
                    snprintf(hdr, sizeof(hdr), "HTTP/1.1 200 OK\r\nContent-Length: %zd\r\n\r\n", n);
                write_all(c, hdr, (size_t)hl);
                write_all(c, buf, (size_t)n);
            }
        } else {
            while (n > 0) {
                write_all(c, buf, (size_t)n);
                n = recv(c, buf, sizeof(buf), 0);
            }
        }
        close(c);
    }
}

static int upstream_start(struct upstream *u, const char *addr)
{
    memset(u, 0, sizeof(*u));
    pthread_mutex_init(&u->mu, NULL);
    u->fd = listen_on(addr, &u->port);
    if (u->fd < 0)
        return -1;
    return pthread_create(&u->th, NULL, upstream_main, u);
}

static void upstream_stop(struct upstream *u)
{
    shutdown(u->fd, SHUT_RDWR);
    pthread_join(u->th, NULL);
    close(u->fd);
}

/* Connect a client to the proxy at port. */
static int client(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    struct timeval tv = {5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (connect(fd, (struct sockaddr *)&a, sizeof(a))) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Read until the peer closes (or cap bytes, or 5 s of silence); the count
 * of bytes read, with the first cap-1 kept NUL-terminated in buf. */
static size_t read_all(int fd, char *buf, size_t cap)
{
    size_t total = 0;
    char tmp[65536];
    for (;;) {
        ssize_t n = recv(fd, tmp, sizeof(tmp), 0);
        if (n <= 0)
            break;
        if (total < cap - 1) {
            size_t k = (size_t)n < cap - 1 - total ? (size_t)n : cap - 1 - total;
            memcpy(buf + total, tmp, k);
        }
        total += (size_t)n;
    }
    buf[total < cap - 1 ? total : cap - 1] = '\0';
    return total;
}

/* Read up to the end of a response head ("\r\n\r\n") into buf. */
static size_t read_head(int fd, char *buf, size_t cap)
{
    size_t n = 0;
    while (n < cap - 1) {
        ssize_t r = recv(fd, buf + n, 1, 0);
        if (r <= 0)
            break;
        n++;
        buf[n] = '\0';
        if (n >= 4 && memcmp(buf + n - 4, "\r\n\r\n", 4) == 0)
            break;
    }
    buf[n] = '\0';
    return n;
}

struct env {
    skd_config *cfg;
    skd_egress *eg;
    struct upstream up, forbidden;
    char pins[256];
};

static int env_start(struct env *v)
{
    memset(v, 0, sizeof(*v));
    if (upstream_start(&v->up, "127.0.0.1") || upstream_start(&v->forbidden, "127.0.0.2"))
        return -1;
    v->cfg = skd_config_new();
    snprintf(v->pins, sizeof(v->pins), "allowed.test:%d:127.0.0.1,evil.test:%d:127.0.0.2",
             v->up.port, v->forbidden.port);
    skd_config_set(v->cfg, "SKILLS_OUTBOUND_RESOLVE", v->pins, NULL);
    skd_config_set(v->cfg, "SKILLS_OUTBOUND_ALLOW_CIDRS", "127.0.0.1/32", NULL);
    skd_err e = {0};
    return skd__egress_new(v->cfg, &v->eg, &e);
}

static void env_stop(struct env *v)
{
    skd__egress_free(v->eg);
    skd_config_free(v->cfg);
    upstream_stop(&v->up);
    upstream_stop(&v->forbidden);
}

/* Attach a fresh loopback listener under policy p; its port in *port. */
static skd_egress_run *attach(struct env *v, const skd_egress_policy *p, int *port)
{
    int lfd = listen_on("127.0.0.1", port);
    skd_egress_run *run = NULL;
    skd_err e = {0};
    if (skd__egress_attach(v->eg, lfd, p, &run, &e))
        return NULL;
    return run;
}

static json_t *find_record(json_t *a, const char *host, const char *verdict)
{
    size_t i;
    json_t *o;
    json_array_foreach (a, i, o) {
        if (strcmp(json_string_value(json_object_get(o, "host")), host) == 0 &&
            strcmp(json_string_value(json_object_get(o, "verdict")), verdict) == 0)
            return o;
    }
    return NULL;
}

TEST(proxy_connect_and_http)
{
    struct env v;
    CHECK_EQ_INT(env_start(&v), 0);
    skd_egress_policy p;
    skd__egress_policy_defaults(&p, v.cfg);
    int port;
    skd_egress_run *run = attach(&v, &p, &port);
    CHECK(run != NULL);
    char req[256], buf[8192];
    /* CONNECT: 200, then an end-to-end echo */
    int c = client(port);
    snprintf(req, sizeof(req), "CONNECT allowed.test:%d HTTP/1.1\r\nHost: x\r\n\r\n", v.up.port);
    write_all(c, req, strlen(req));
    read_head(c, buf, sizeof(buf));
    CHECK(strncmp(buf, "HTTP/1.1 200 ", 13) == 0);
    write_all(c, "ping-through-the-tunnel", 23);
    shutdown(c, SHUT_WR);
    read_all(c, buf, sizeof(buf));
    CHECK_STR(buf, "ping-through-the-tunnel");
    close(c);
    /* plain HTTP: origin form upstream, Host from the URI, Connection: close */
    c = client(port);
    snprintf(req, sizeof(req),
             "GET http://allowed.test:%d/hello HTTP/1.1\r\nHost: other.test\r\n"
             "Proxy-Connection: keep-alive\r\n\r\n",
             v.up.port);
    write_all(c, req, strlen(req));
    read_all(c, buf, sizeof(buf));
    CHECK(strncmp(buf, "HTTP/1.1 200 OK", 15) == 0);
    char want[128];
    snprintf(want, sizeof(want), "GET /hello HTTP/1.1\r\nHost: allowed.test:%d\r\n", v.up.port);
    CHECK(strstr(buf, want) != NULL);
    CHECK(strstr(buf, "Connection: close\r\n") != NULL);
    CHECK(strstr(buf, "other.test") == NULL && strstr(buf, "Proxy-") == NULL);
    close(c);
    json_t *rec = skd__egress_detach(v.eg, run);
    json_t *o = find_record(rec, "allowed.test", "allowed");
    CHECK(o != NULL);
    CHECK_EQ_INT(json_integer_value(json_object_get(o, "connections")), 2);
    CHECK_STR(json_string_value(json_object_get(o, "address")), "127.0.0.1");
    CHECK_EQ_INT(json_integer_value(json_object_get(o, "port")), v.up.port);
    CHECK(json_integer_value(json_object_get(o, "bytesUp")) > 23);
    CHECK(json_integer_value(json_object_get(o, "bytesDown")) > 23);
    json_decref(rec);
    CHECK_EQ_INT(skd__egress_active_runs(v.eg), 0);
    env_stop(&v);
}

TEST(proxy_refusals)
{
    struct env v;
    CHECK_EQ_INT(env_start(&v), 0);
    skd_config_set(v.cfg, "SKILLS_SANDBOX_EGRESS_ALLOW_HOSTS", "allowed.test,evil.test,127.0.0.2",
                   NULL);
    skd_egress_policy p;
    skd__egress_policy_defaults(&p, v.cfg);
    int port;
    skd_egress_run *run = attach(&v, &p, &port);
    uint64_t refused0 = skd_egress_refused_total();
    char req[256], buf[8192];
    static const char *const targets[] = {"CONNECT other.test:443", "CONNECT evil.test:%d",
                                          "CONNECT 127.0.0.2:%d", "GET http://evil.test:%d/"};
    for (size_t i = 0; i < 4; i++) {
        int c = client(port);
        char line[128];
        snprintf(line, sizeof(line), targets[i], v.forbidden.port);
        snprintf(req, sizeof(req), "%s HTTP/1.1\r\n\r\n", line);
        write_all(c, req, strlen(req));
        read_all(c, buf, sizeof(buf));
        CHECK(strncmp(buf, "HTTP/1.1 403 Forbidden", 22) == 0);
        CHECK(strstr(buf, "X-Skilld-Egress: refused") != NULL);
        if (i == 0)
            CHECK(strstr(buf, "not in the egress allow list") != NULL);
        else
            CHECK(strstr(buf, "refused by the outbound guard: loopback") != NULL);
        close(c);
    }
    CHECK_EQ_INT(atomic_load(&v.forbidden.accepted), 0);
    CHECK(skd_egress_refused_total() >= refused0 + 4);
    /* a bad request: 400 with the parser's reason */
    int c = client(port);
    write_all(c, "GET /x HTTP/1.1\r\n\r\n", 19);
    read_all(c, buf, sizeof(buf));
    CHECK(strncmp(buf, "HTTP/1.1 400 ", 13) == 0);
    CHECK(strstr(buf, "absolute http:// URI") != NULL);
    close(c);
    json_t *rec = skd__egress_detach(v.eg, run);
    json_t *o = find_record(rec, "other.test", "refused");
    CHECK(o != NULL && strstr(json_string_value(json_object_get(o, "reason")), "allow list"));
    o = find_record(rec, "evil.test", "refused");
    CHECK(o != NULL);
    CHECK_EQ_INT(json_integer_value(json_object_get(o, "connections")), 2);
    CHECK_STR(json_string_value(json_object_get(o, "address")), "127.0.0.2");
    CHECK(find_record(rec, "127.0.0.2", "refused") != NULL);
    json_decref(rec);
    CHECK_EQ_INT(atomic_load(&v.forbidden.accepted), 0);
    env_stop(&v);
}

TEST(proxy_byte_cap)
{
    struct env v;
    CHECK_EQ_INT(env_start(&v), 0);
    skd_egress_policy p;
    skd__egress_policy_defaults(&p, v.cfg);
    p.limits.max_bytes_down = 1 << 20;
    int port;
    skd_egress_run *run = attach(&v, &p, &port);
    uint64_t cut0 = skd_egress_cut_total();
    char req[256], buf[256];
    int c = client(port);
    snprintf(req, sizeof(req), "GET http://allowed.test:%d/big HTTP/1.1\r\n\r\n", v.up.port);
    write_all(c, req, strlen(req));
    size_t got = read_all(c, buf, sizeof(buf));
    CHECK(strncmp(buf, "HTTP/1.1 200 OK", 15) == 0);
    CHECK_EQ_INT(got, 1 << 20);
    close(c);
    /* the cap is the run's: the next connection is cut at once */
    c = client(port);
    write_all(c, req, strlen(req));
    CHECK_EQ_INT(read_all(c, buf, sizeof(buf)), 0);
    close(c);
    json_t *rec = skd__egress_detach(v.eg, run);
    json_t *o = find_record(rec, "allowed.test", "cut");
    CHECK(o != NULL);
    CHECK_EQ_INT(json_integer_value(json_object_get(o, "bytesDown")), 1 << 20);
    CHECK_EQ_INT(json_integer_value(json_object_get(o, "connections")), 2);
    CHECK(strstr(json_string_value(json_object_get(o, "reason")),
                 "SKILLS_SANDBOX_EGRESS_MAX_BYTES_DOWN") != NULL);
    CHECK(skd_egress_cut_total() >= cut0 + 2);
    json_decref(rec);
    env_stop(&v);
}

TEST(proxy_connection_cap_and_idle)
{
    struct env v;
    CHECK_EQ_INT(env_start(&v), 0);
    skd_egress_policy p;
    skd__egress_policy_defaults(&p, v.cfg);
    p.limits.max_conns = 1;
    p.limits.idle_ms = 300;
    int port;
    skd_egress_run *run = attach(&v, &p, &port);
    char req[256], buf[4096];
    int c1 = client(port);
    snprintf(req, sizeof(req), "CONNECT allowed.test:%d HTTP/1.1\r\n\r\n", v.up.port);
    write_all(c1, req, strlen(req));
    read_head(c1, buf, sizeof(buf));
    CHECK(strncmp(buf, "HTTP/1.1 200 ", 13) == 0);
    int c2 = client(port);
    read_all(c2, buf, sizeof(buf));
    CHECK(strncmp(buf, "HTTP/1.1 429 ", 13) == 0);
    CHECK(strstr(buf, "SKILLS_SANDBOX_EGRESS_MAX_CONNECTIONS=1") != NULL);
    close(c2);
    /* c1 stays silent: the idle limit closes it */
    int64_t t0 = skd_mono_ms();
    CHECK_EQ_INT(read_all(c1, buf, sizeof(buf)), 0);
    CHECK(skd_mono_ms() - t0 < 4000);
    close(c1);
    json_t *rec = skd__egress_detach(v.eg, run);
    json_t *o = find_record(rec, "allowed.test", "cut");
    CHECK(o != NULL &&
          strstr(json_string_value(json_object_get(o, "reason")), "SKILLS_SANDBOX_EGRESS_IDLE_MS"));
    CHECK(find_record(rec, "", "refused") != NULL);
    json_decref(rec);
    env_stop(&v);
}

TEST(proxy_client_hangs_up)
{
    /* A client that closes in the middle of a download: the proxy's next
     * splice to it fails, the connection ends and is recorded, and the
     * proxy goes on serving. */
    struct env v;
    CHECK_EQ_INT(env_start(&v), 0);
    skd_egress_policy p;
    skd__egress_policy_defaults(&p, v.cfg);
    int port;
    skd_egress_run *run = attach(&v, &p, &port);
    char req[256], buf[8192];
    for (int i = 0; i < 3; i++) {
        int c = client(port);
        snprintf(req, sizeof(req), "GET http://allowed.test:%d/big HTTP/1.1\r\n\r\n", v.up.port);
        write_all(c, req, strlen(req));
        CHECK(recv(c, buf, sizeof(buf), MSG_WAITALL) == (ssize_t)sizeof(buf));
        close(c);
    }
    int c = client(port);
    snprintf(req, sizeof(req), "GET http://allowed.test:%d/after HTTP/1.1\r\n\r\n", v.up.port);
    write_all(c, req, strlen(req));
    read_all(c, buf, sizeof(buf));
    CHECK(strncmp(buf, "HTTP/1.1 200 OK", 15) == 0);
    close(c);
    json_t *rec = skd__egress_detach(v.eg, run);
    json_t *o = find_record(rec, "allowed.test", "allowed");
    CHECK(o != NULL && json_integer_value(json_object_get(o, "connections")) == 4);
    CHECK(o != NULL && json_integer_value(json_object_get(o, "bytesDown")) < 3 * (10 << 20));
    json_decref(rec);
    env_stop(&v);
}

TEST(proxy_many_small_segments)
{
    /* 2048 small segments that the upstream finishes sending while the
     * client does not read: every byte still arrives, promptly. (A pipe's
     * capacity is in pages, so small segments can fill it before its byte
     * count says so; the proxy then waits for the pipe, not the socket.
     * Loopback coalesces the segments, so this case does not force that
     * branch: it guards the ordinary path around it.) */
    struct env v;
    CHECK_EQ_INT(env_start(&v), 0);
    skd_egress_policy p;
    skd__egress_policy_defaults(&p, v.cfg);
    p.limits.idle_ms = 3000;
    int port;
    skd_egress_run *run = attach(&v, &p, &port);
    char req[256], buf[256];
    int c = client(port);
    snprintf(req, sizeof(req), "GET http://allowed.test:%d/drip HTTP/1.1\r\n\r\n", v.up.port);
    write_all(c, req, strlen(req));
    usleep(500000); /* let the upstream finish while nobody reads */
    int64_t t0 = skd_mono_ms();
    size_t got = read_all(c, buf, sizeof(buf));
    CHECK(got > 2048 * 100);
    CHECK(skd_mono_ms() - t0 < 2500); /* well before the idle limit would end it */
    close(c);
    json_t *rec = skd__egress_detach(v.eg, run);
    CHECK(find_record(rec, "allowed.test", "allowed") != NULL);
    json_decref(rec);
    env_stop(&v);
}

static unsigned char pattern(size_t i)
{
    return (unsigned char)((i * 131u) ^ (i >> 12));
}

TEST(proxy_tunnel_both_ways_at_once)
{
    /* 4 MiB up a CONNECT tunnel, echoed back down by the upstream while the
     * client is still sending: both directions of flow_once() move at once,
     * each with its pipe and socket buffers filling up, and every byte comes
     * back once and in order, counted both ways. */
    struct env v;
    CHECK_EQ_INT(env_start(&v), 0);
    skd_egress_policy p;
    skd__egress_policy_defaults(&p, v.cfg);
    int port;
    skd_egress_run *run = attach(&v, &p, &port);
    CHECK(run != NULL);
    char req[256], head[512];
    int c = client(port);
    snprintf(req, sizeof(req), "CONNECT allowed.test:%d HTTP/1.1\r\n\r\n", v.up.port);
    write_all(c, req, strlen(req));
    read_head(c, head, sizeof(head));
    CHECK(strncmp(head, "HTTP/1.1 200 ", 13) == 0);
    CHECK_EQ_INT(fcntl(c, F_SETFL, O_NONBLOCK), 0);
    static unsigned char out[65536], in[65536];
    size_t total = 4u << 20, sent = 0, got = 0, bad = 0;
    int eof = 0;
    int64_t deadline = skd_mono_ms() + 30000;
    while (!eof && skd_mono_ms() < deadline) {
        struct pollfd pfd = {.fd = c, .events = POLLIN | (sent < total ? POLLOUT : 0)};
        poll(&pfd, 1, 1000);
        if (sent < total && (pfd.revents & POLLOUT)) {
            size_t k = total - sent < sizeof(out) ? total - sent : sizeof(out);
            for (size_t i = 0; i < k; i++)
                out[i] = pattern(sent + i);
            ssize_t w = send(c, out, k, MSG_NOSIGNAL);
            if (w > 0 && (sent += (size_t)w) == total)
                shutdown(c, SHUT_WR);
        }
        ssize_t n = recv(c, in, sizeof(in), 0);
        if (n == 0)
            eof = 1;
        for (ssize_t i = 0; i < n; i++)
            bad += in[i] != pattern(got + (size_t)i);
        if (n > 0)
            got += (size_t)n;
    }
    CHECK(eof);
    CHECK_EQ_INT(sent, total);
    CHECK_EQ_INT(got, total);
    CHECK_EQ_INT(bad, 0);
    close(c);
    json_t *rec = skd__egress_detach(v.eg, run);
    json_t *o = find_record(rec, "allowed.test", "allowed");
    CHECK(o != NULL && json_integer_value(json_object_get(o, "bytesUp")) >= (json_int_t)total);
    CHECK(o != NULL && json_integer_value(json_object_get(o, "bytesDown")) >= (json_int_t)total);
    json_decref(rec);
    env_stop(&v);
}

static int fcntl_closed(int fd)
{
    return fcntl(fd, F_GETFD) < 0 && errno == EBADF;
}

/* skd__egress_take: the records so far, forgotten once taken, while the
 * run is still served (a live sandbox's proxy); open_conns counts an open
 * connection until it ends. */
TEST(proxy_take_records_while_served)
{
    struct env v;
    CHECK_EQ_INT(env_start(&v), 0);
    skd_egress_policy p;
    skd__egress_policy_defaults(&p, v.cfg);
    int port;
    skd_egress_run *run = attach(&v, &p, &port);
    CHECK(run != NULL);
    char req[256], buf[8192];
    for (int round = 1; round <= 2; round++) {
        int c = client(port);
        snprintf(req, sizeof(req), "GET http://allowed.test:%d/r HTTP/1.1\r\n\r\n", v.up.port);
        write_all(c, req, strlen(req));
        read_all(c, buf, sizeof(buf));
        CHECK(strncmp(buf, "HTTP/1.1 200 OK", 15) == 0);
        close(c);
        for (int i = 0; i < 200 && skd__egress_open_conns(run) > 0; i++)
            usleep(5000);
        CHECK_EQ_INT(skd__egress_open_conns(run), 0);
        json_t *rec = skd__egress_take(run);
        json_t *o = find_record(rec, "allowed.test", "allowed");
        CHECK(o != NULL);
        CHECK_EQ_INT(json_integer_value(json_object_get(o, "connections")), 1); /* this round's */
        json_decref(rec);
    }
    int c = client(port); /* still served after the takes; open until it ends */
    snprintf(req, sizeof(req), "CONNECT allowed.test:%d HTTP/1.1\r\n\r\n", v.up.port);
    write_all(c, req, strlen(req));
    read_head(c, buf, sizeof(buf));
    CHECK(strncmp(buf, "HTTP/1.1 200 ", 13) == 0);
    CHECK_EQ_INT(skd__egress_open_conns(run), 1);
    json_t *rec = skd__egress_take(run);
    CHECK_EQ_INT((int)json_array_size(rec), 0); /* not counted before it ends */
    json_decref(rec);
    close(c);
    rec = skd__egress_detach(v.eg, run);
    CHECK_EQ_INT(json_integer_value(
                     json_object_get(find_record(rec, "allowed.test", "allowed"), "connections")),
                 1);
    json_decref(rec);
    CHECK(skd__egress_take(NULL) == NULL);
    env_stop(&v);
}

TEST(proxy_detach_closes_everything)
{
    struct env v;
    CHECK_EQ_INT(env_start(&v), 0);
    skd_egress_policy p;
    skd__egress_policy_defaults(&p, v.cfg);
    int port;
    skd_egress_run *run = attach(&v, &p, &port);
    char req[256], buf[256];
    int c = client(port);
    snprintf(req, sizeof(req), "CONNECT allowed.test:%d HTTP/1.1\r\n\r\n", v.up.port);
    write_all(c, req, strlen(req));
    read_head(c, buf, sizeof(buf));
    CHECK(strncmp(buf, "HTTP/1.1 200 ", 13) == 0);
    int half = client(port); /* a head that never completes */
    write_all(half, "CONNECT allowed", 15);
    usleep(50000);
    json_t *rec = skd__egress_detach(v.eg, run);
    CHECK(rec != NULL && json_array_size(rec) == 1);
    CHECK_EQ_INT(read_all(c, buf, sizeof(buf)), 0);    /* closed by the detach */
    CHECK_EQ_INT(read_all(half, buf, sizeof(buf)), 0); /* closed by the detach */
    CHECK(client(port) < 0);                           /* the listener is gone */
    close(c);
    close(half);
    json_decref(rec);
    /* a socket that is not a stream is refused, and closed */
    int d = socket(AF_INET, SOCK_DGRAM, 0);
    skd_err e = {0};
    CHECK_EQ_INT(skd__egress_attach(v.eg, d, &p, &run, &e), SKD_EINVAL);
    CHECK(fcntl_closed(d));
    env_stop(&v);
}

int main(void)
{
    TAP_BEGIN("test_net_egress");
    RUN(parse_connect);
    RUN(parse_absolute_uri);
    RUN(parse_refusals);
    RUN(parse_bounds);
    RUN(host_patterns);
    RUN(policy_narrows_never_widens);
    RUN(proxy_connect_and_http);
    RUN(proxy_refusals);
    RUN(proxy_byte_cap);
    RUN(proxy_connection_cap_and_idle);
    RUN(proxy_client_hangs_up);
    RUN(proxy_many_small_segments);
    RUN(proxy_tunnel_both_ways_at_once);
    RUN(proxy_take_records_while_served);
    RUN(proxy_detach_closes_everything);
    return TAP_END();
}
