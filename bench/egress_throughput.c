/*
 * bench/egress_throughput: a download through the egress proxy against the
 * same download straight over loopback (bench/README.md).
 *
 * An upstream thread serves N MiB (default 100) from memory on 127.0.0.1;
 * the proxy (src/net/egress.c, the server's code, with
 * SKILLS_OUTBOUND_ALLOW_CIDRS=127.0.0.1/32 so the guard lets loopback by)
 * serves a loopback listener; a client reads the bytes and drops them,
 * either directly or through a CONNECT tunnel. Rounds alternate direct and
 * proxied; the medians and their ratio are printed.
 *
 *   build/bench/egress_throughput [-m MIB] [-n ROUNDS] [--plain]
 *   --plain: a plain-HTTP GET through the proxy instead of CONNECT.
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

/* One download; MiB/s. via_proxy: 0 direct, 1 CONNECT, 2 plain HTTP. */
static double once(int proxy_port, int via)
{
    char req[256];
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
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
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    if (got < total_bytes) {
        fprintf(stderr, "short download: %zu of %zu bytes\n", got, total_bytes);
        exit(1);
    }
    return (double)total_bytes / (1 << 20) / secs;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    int mib = 100, rounds = 7, via = 1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-m") == 0 && i + 1 < argc)
            mib = (int)strtol(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "-n") == 0 && i + 1 < argc)
            rounds = (int)strtol(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--plain") == 0)
            via = 2;
        else {
            fprintf(stderr, "usage: %s [-m MIB] [-n ROUNDS] [--plain]\n", argv[0]);
            return 2;
        }
    }
    if (mib < 1 || rounds < 1 || rounds > 1000)
        return 2;
    total_bytes = (size_t)mib << 20;
    up_fd = listen_any(&up_port);
    pthread_t th;
    pthread_create(&th, NULL, upstream, NULL);
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
    double *direct = calloc((size_t)rounds, sizeof(double));
    double *proxied = calloc((size_t)rounds, sizeof(double));
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
    qsort(direct, (size_t)rounds, sizeof(double), cmp);
    qsort(proxied, (size_t)rounds, sizeof(double), cmp);
    double dm = direct[rounds / 2], pm = proxied[rounds / 2];
    printf("download of %d MiB over loopback, %d rounds (median, min..max MiB/s)\n", mib, rounds);
    printf("  direct          %8.0f  (%.0f..%.0f)\n", dm, direct[0], direct[rounds - 1]);
    printf("  proxy %-9s %8.0f  (%.0f..%.0f)\n", via == 1 ? "CONNECT" : "plain", pm, proxied[0],
           proxied[rounds - 1]);
    printf("  ratio proxy/direct  %.2f\n", pm / dm);
    json_decref(skd__egress_detach(eg, run));
    skd__egress_free(eg);
    skd_config_free(cfg);
    free(direct);
    free(proxied);
    return 0;
}
