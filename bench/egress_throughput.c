/*
 * bench/egress_throughput: a download through the egress proxy against the
 * same download straight over loopback (bench/README.md).
 *
 * An upstream thread serves N MiB (default 100) from memory on 127.0.0.1;
 * the proxy (src/net/egress.c, the server's code, with
 * SKILLS_OUTBOUND_ALLOW_CIDRS=127.0.0.1/32 so the guard lets loopback by)
 * serves a loopback listener; a client reads the bytes and drops them,
 * either directly or through a CONNECT tunnel. Rounds alternate direct and
 * proxied; the medians, their ratio and the CPU time each thread spent
 * per 100 MiB are printed.
 *
 *   build/bench/egress_throughput [-m MIB] [-n ROUNDS] [--plain] [--raw]
 *                                 [--only-direct | --only-proxy]
 *   --plain: a plain-HTTP GET through the proxy instead of CONNECT.
 *   --raw: also one line a download (what bench/egress-compare reads).
 *   --only-direct, --only-proxy: ROUNDS downloads of one kind and nothing
 *   else (no warm-up, no table), for perf record / strace.
 */
#include "net/egress.h"
#include "skilld/config.h"
#include "skilld/util.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static size_t total_bytes;
static int up_fd, up_port;

static int listen_any(int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t al = sizeof(a);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) || listen(fd, 16) ||
        getsockname(fd, (struct sockaddr *)&a, &al)) {
        perror("listen");
        exit(1);
    }
    *port = ntohs(a.sin_port);
    return fd;
}

/* Each connection: read whatever request comes (up to a blank line or a
 * short pause), answer with total_bytes of body. */
static void *upstream(void *arg)
{
    (void)arg;
    static char chunk[256 * 1024];
    memset(chunk, 'x', sizeof(chunk));
    for (;;) {
        int c = accept(up_fd, NULL, NULL);
        if (c < 0)
            return NULL;
        char req[4096];
        ssize_t n = recv(c, req, sizeof(req), 0);
        (void)n;
        char hdr[128];
        int hl = snprintf(hdr, sizeof(hdr), "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n\r\n",
                          total_bytes);
        send(c, hdr, (size_t)hl, MSG_NOSIGNAL);
        for (size_t sent = 0; sent < total_bytes;) {
            size_t k = total_bytes - sent < sizeof(chunk) ? total_bytes - sent : sizeof(chunk);
            ssize_t w = send(c, chunk, k, MSG_NOSIGNAL);
            if (w <= 0)
                break;
            sent += (size_t)w;
        }
        close(c);
    }
}

static int dial(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof(a))) {
        perror("connect");
        exit(1);
    }
    return fd;
}

/* Read until EOF; returns the bytes read. */
static size_t drain(int fd)
{
    static char buf[256 * 1024];
    size_t got = 0;
    ssize_t n;
    while ((n = recv(fd, buf, sizeof(buf), 0)) > 0)
        got += (size_t)n;
    return got;
}

static pthread_t up_thread;

static double ts_ms(clockid_t id)
{
    struct timespec t;
    clock_gettime(id, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* CPU time so far of the client (this thread), the upstream thread, and
 * everything else in the process: the proxy's loop (its resolver threads
 * sleep). Kernel work done in softirq context (a loopback segment's receive
 * processing) is charged to whichever thread was running, as the kernel
 * charges it. */
struct cpu {
    double client, upstream, proxy;
};

static struct cpu cpu_now(void)
{
    clockid_t up;
    pthread_getcpuclockid(up_thread, &up);
    struct cpu c = {ts_ms(CLOCK_THREAD_CPUTIME_ID), ts_ms(up), 0};
    c.proxy = ts_ms(CLOCK_PROCESS_CPUTIME_ID) - c.client - c.upstream;
    return c;
}

struct sample {
    double mibs;       /* MiB/s */
    struct cpu per100; /* CPU ms per 100 MiB */
};

/* One download. via: 0 direct, 1 CONNECT, 2 plain HTTP. */
static struct sample once(int proxy_port, int via)
{
    char req[256];
    struct cpu c0 = cpu_now();
    double t0 = ts_ms(CLOCK_MONOTONIC);
    int fd = dial(via ? proxy_port : up_port);
    if (via == 1) {
        snprintf(req, sizeof(req), "CONNECT 127.0.0.1:%d HTTP/1.1\r\n\r\n", up_port);
        send(fd, req, strlen(req), 0);
        char ok[64];
        size_t n = 0;
        while (n < 39 &&
               recv(fd, ok + n, 1, 0) == 1) /* "HTTP/1.1 200 Connection established\r\n\r\n" */
            n++;
        snprintf(req, sizeof(req), "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    } else if (via == 2) {
        snprintf(req, sizeof(req), "GET http://127.0.0.1:%d/ HTTP/1.1\r\n\r\n", up_port);
    } else {
        snprintf(req, sizeof(req), "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    }
    send(fd, req, strlen(req), 0);
    size_t got = drain(fd);
    close(fd);
    double t1 = ts_ms(CLOCK_MONOTONIC);
    struct cpu c1 = cpu_now();
    if (got < total_bytes) {
        fprintf(stderr, "short download: %zu of %zu bytes\n", got, total_bytes);
        exit(1);
    }
    double mib = (double)total_bytes / (1 << 20);
    struct sample r = {mib / ((t1 - t0) / 1e3),
                       {(c1.client - c0.client) * 100 / mib,
                        (c1.upstream - c0.upstream) * 100 / mib,
                        (c1.proxy - c0.proxy) * 100 / mib}};
    return r;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(double), cmp);
    return v[n / 2];
}

/* Print one row; returns its median MiB/s. */
static double row(const char *name, const struct sample *s, int n)
{
    double *v = calloc((size_t)n, sizeof(double));
    double m[4];
    for (int k = 0; k < 4; k++) {
        for (int i = 0; i < n; i++)
            v[i] = k == 0   ? s[i].mibs
                   : k == 1 ? s[i].per100.client
                   : k == 2 ? s[i].per100.upstream
                            : s[i].per100.proxy;
        m[k] = median(v, n);
        if (k == 0)
            printf("  %-17s %6.0f  (%.0f..%.0f)", name, m[0], v[0], v[n - 1]);
    }
    double sum = m[1] + m[2] + m[3];
    printf("  cpu client %.0f upstream %.0f proxy %.0f (sum %.0f)\n", m[1], m[2],
           m[3] < 0.5 ? 0 : m[3], sum);
    free(v);
    return m[0];
}

int main(int argc, char **argv)
{
    int mib = 100, rounds = 7, via = 1, only = -1, raw = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-m") == 0 && i + 1 < argc)
            mib = (int)strtol(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "-n") == 0 && i + 1 < argc)
            rounds = (int)strtol(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--plain") == 0)
            via = 2;
        else if (strcmp(argv[i], "--raw") == 0)
            raw = 1;
        else if (strcmp(argv[i], "--only-direct") == 0)
            only = 0;
        else if (strcmp(argv[i], "--only-proxy") == 0)
            only = 1;
        else {
            fprintf(
                stderr,
                "usage: %s [-m MIB] [-n ROUNDS] [--plain] [--raw] [--only-direct | --only-proxy]\n",
                argv[0]);
            return 2;
        }
    }
    if (mib < 1 || rounds < 1 || rounds > 1000)
        return 2;
    total_bytes = (size_t)mib << 20;
    up_fd = listen_any(&up_port);
    pthread_create(&up_thread, NULL, upstream, NULL);
    skd_config *cfg = skd_config_new();
    skd_err e = {0};
    skd_config_set(cfg, "SKILLS_OUTBOUND_ALLOW_CIDRS", "127.0.0.1/32", NULL);
    skd_config_set(cfg, "SKILLS_SANDBOX_EGRESS_MAX_BYTES_DOWN", "1099511627776", NULL);
    skd_egress *eg = NULL;
    if (skd__egress_new(cfg, &eg, &e)) {
        fprintf(stderr, "%s\n", e.msg);
        return 1;
    }
    skd_egress_policy p;
    skd__egress_policy_defaults(&p, cfg);
    int proxy_port;
    int lfd = listen_any(&proxy_port);
    skd_egress_run *run = NULL;
    if (skd__egress_attach(eg, lfd, &p, &run, &e)) {
        fprintf(stderr, "%s\n", e.msg);
        return 1;
    }
    struct sample *direct = calloc((size_t)rounds, sizeof(*direct));
    struct sample *proxied = calloc((size_t)rounds, sizeof(*proxied));
    if (only >= 0) { /* for a profiler: one kind of download, nothing else */
        for (int i = 0; i < rounds; i++) {
            struct sample x = once(proxy_port, only ? via : 0);
            printf("%.0f MiB/s  cpu ms per 100 MiB: client %.1f upstream %.1f proxy %.1f\n", x.mibs,
                   x.per100.client, x.per100.upstream, x.per100.proxy);
        }
        goto out;
    }
    once(proxy_port, 0); /* warm-up */
    once(proxy_port, via);
    for (int i = 0; i < rounds; i++) {
        if (i % 2) {
            proxied[i] = once(proxy_port, via);
            direct[i] = once(proxy_port, 0);
        } else {
            direct[i] = once(proxy_port, 0);
            proxied[i] = once(proxy_port, via);
        }
    }
    for (int i = 0; raw && i < rounds; i++) /* one line a download, for bench/egress-compare */
        for (int k = 0; k < 2; k++) {
            const struct sample *x = k ? &proxied[i] : &direct[i];
            printf("raw %d %s %.1f %.2f %.2f %.2f\n", i, k ? "proxy" : "direct", x->mibs,
                   x->per100.client, x->per100.upstream, x->per100.proxy);
        }
    printf("download of %d MiB over loopback, %d rounds (median, min..max MiB/s; median CPU ms "
           "per 100 MiB)\n",
           mib, rounds);
    double dm = row("direct", direct, rounds);
    double pm = row(via == 1 ? "proxy CONNECT" : "proxy plain", proxied, rounds);
    printf("  ratio proxy/direct  %.2f\n", pm / dm);
out:
    json_decref(skd__egress_detach(eg, run));
    skd__egress_free(eg);
    skd_config_free(cfg);
    free(direct);
    free(proxied);
    return 0;
}
