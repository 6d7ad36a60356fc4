/*
 * bench/secrets_latency: what a secret costs an HTTPS request (bench/README.md).
 *
 * One TLS upstream on 127.0.0.1 (a certificate from a CA made here, which
 * the proxy trusts through SKILLS_EGRESS_UPSTREAM_CA_FILE) answers every
 * request with a short body. The egress proxy (the server's code) serves a
 * run that holds one secret bound to up.test; tun.test names the same
 * upstream and is bound to nothing. A client times, from connect() to the
 * proxy to the first byte of the answer: CONNECT, 200, the TLS handshake
 * and one GET. Through up.test the proxy intercepts (its own TLS both ways,
 * the value put in, the answer read whole and scrubbed); through tun.test
 * the CONNECT is the spliced tunnel. Rounds alternate the two; p50, p90
 * and their ratio are printed.
 *
 *   build/bench/secrets_latency [-n ROUNDS]
 */
#include "net/egress.h"
#include "skilld/config.h"
#include "skilld/util.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static SSL_CTX *up_ctx;
static int up_fd;

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static int listen_any(int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t al = sizeof(a);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) || listen(fd, 64) ||
        getsockname(fd, (struct sockaddr *)&a, &al)) {
        perror("listen");
        exit(1);
    }
    *port = ntohs(a.sin_port);
    return fd;
}

static void ext(X509 *c, X509 *iss, int nid, const char *v)
{
    X509V3_CTX x;
    X509V3_set_ctx_nodb(&x);
    X509V3_set_ctx(&x, iss, c, NULL, NULL, 0);
    X509_EXTENSION *e = X509V3_EXT_conf_nid(NULL, &x, nid, v);
    X509_add_ext(c, e, -1);
    X509_EXTENSION_free(e);
}

static X509 *cert(const char *cn, EVP_PKEY *k, X509 *iss, EVP_PKEY *ik, int ca)
{
    X509 *c = X509_new();
    X509_set_version(c, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(c), ca ? 1 : 2);
    X509_gmtime_adj(X509_getm_notBefore(c), -3600);
    X509_gmtime_adj(X509_getm_notAfter(c), 86400);
    X509_set_pubkey(c, k);
    X509_NAME_add_entry_by_txt(X509_get_subject_name(c), "CN", MBSTRING_UTF8,
                               (const unsigned char *)cn, -1, -1, 0);
    X509_set_issuer_name(c, X509_get_subject_name(iss ? iss : c));
    if (ca) {
        ext(c, c, NID_basic_constraints, "critical,CA:TRUE");
        ext(c, c, NID_key_usage, "critical,keyCertSign");
        ext(c, c, NID_subject_key_identifier, "hash");
    } else {
        ext(c, iss, NID_subject_alt_name, "DNS:up.test,DNS:tun.test");
        ext(c, iss, NID_authority_key_identifier, "keyid:always");
    }
    X509_sign(c, ik ? ik : k, EVP_sha256());
    return c;
}

/* The upstream: one connection at a time, one answer each. */
static void *upstream(void *arg)
{
    (void)arg;
    static const char ans[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok";
    for (;;) {
        int c = accept(up_fd, NULL, NULL);
        if (c < 0)
            return NULL;
        SSL *s = SSL_new(up_ctx);
        SSL_set_fd(s, c);
        char buf[8192];
        size_t len = 0;
        if (SSL_accept(s) == 1) {
            while (len < sizeof(buf)) {
                int n = SSL_read(s, buf + len, (int)(sizeof(buf) - len));
                if (n <= 0)
                    break;
                len += (size_t)n;
                if (memmem(buf, len, "\r\n\r\n", 4)) {
                    SSL_write(s, ans, sizeof(ans) - 1);
                    break;
                }
            }
            SSL_shutdown(s);
        }
        SSL_free(s);
        close(c);
        ERR_clear_error();
    }
}

/* One request through the proxy to host: ms from connect to first byte. */
static double once(int proxy_port, int up_port, const char *host, SSL_CTX *cctx)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)proxy_port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    double t0 = now_ms();
    if (connect(fd, (struct sockaddr *)&a, sizeof(a))) {
        perror("connect");
        exit(1);
    }
    char req[512], buf[4096];
    int n = snprintf(req, sizeof(req), "CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n\r\n", host,
                     up_port, host, up_port);
    if (write(fd, req, (size_t)n) != n)
        exit(1);
    size_t len = 0;
    while (!memmem(buf, len, "\r\n\r\n", 4)) {
        ssize_t r = read(fd, buf + len, sizeof(buf) - len);
        if (r <= 0) {
            fprintf(stderr, "CONNECT %s failed\n", host);
            exit(1);
        }
        len += (size_t)r;
    }
    SSL *s = SSL_new(cctx);
    SSL_set_tlsext_host_name(s, host);
    SSL_set1_host(s, host);
    SSL_set_fd(s, fd);
    if (SSL_connect(s) != 1) {
        fprintf(stderr, "TLS to %s through the proxy failed\n", host);
        ERR_print_errors_fp(stderr);
        exit(1);
    }
    n = snprintf(req, sizeof(req),
                 "GET / HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer skd_secret_bench\r\n\r\n",
                 host);
    SSL_write(s, req, n);
    if (SSL_read(s, buf, 1) != 1) {
        fprintf(stderr, "no answer from %s\n", host);
        exit(1);
    }
    double t = now_ms() - t0;
    SSL_shutdown(s);
    SSL_free(s);
    close(fd);
    return t;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double pct(double *v, int n, double p)
{
    qsort(v, (size_t)n, sizeof(*v), cmp);
    return v[(int)((n - 1) * p)];
}

int main(int argc, char **argv)
{
    int rounds = 200;
    if (argc == 3 && strcmp(argv[1], "-n") == 0)
        rounds = (int)strtol(argv[2], NULL, 10);
    else if (argc != 1) {
        fprintf(stderr, "usage: %s [-n ROUNDS]\n", argv[0]);
        return 2;
    }
    if (rounds < 2 || rounds > 100000)
        return 2;
    char dir[] = "/tmp/skd-bench-secrets.XXXXXX", capath[64], ourca[64];
    if (!mkdtemp(dir))
        return 1;
    snprintf(capath, sizeof(capath), "%s/upstream-ca.pem", dir);
    snprintf(ourca, sizeof(ourca), "%s/egress-ca.pem", dir);
    EVP_PKEY *cak = EVP_EC_gen("P-256"), *lk = EVP_EC_gen("P-256");
    X509 *ca = cert("bench upstream CA", cak, NULL, NULL, 1),
         *leaf = cert("up.test", lk, ca, cak, 0);
    FILE *f = fopen(capath, "w");
    PEM_write_X509(f, ca);
    fclose(f);
    up_ctx = SSL_CTX_new(TLS_server_method());
    SSL_CTX_use_certificate(up_ctx, leaf);
    SSL_CTX_use_PrivateKey(up_ctx, lk);
    int up_port;
    up_fd = listen_any(&up_port);
    pthread_t th;
    pthread_create(&th, NULL, upstream, NULL);

    skd_config *cfg = skd_config_new();
    skd_err e = {0};
    char pins[256];
    snprintf(pins, sizeof(pins), "up.test:%d:127.0.0.1,tun.test:%d:127.0.0.1", up_port, up_port);
    skd_config_set(cfg, "DATA_DIR", dir, NULL);
    skd_config_set(cfg, "SKILLS_OUTBOUND_ALLOW_CIDRS", "127.0.0.1/32", NULL);
    skd_config_set(cfg, "SKILLS_OUTBOUND_RESOLVE", pins, NULL);
    skd_config_set(cfg, "SKILLS_EGRESS_UPSTREAM_CA_FILE", capath, NULL);
    skd_config_set(cfg, "SKILLS_SANDBOX_EGRESS_MAX_CONNECTIONS", "64", NULL);
    skd_egress *eg = NULL;
    if (skd__egress_new(cfg, &eg, &e)) {
        fprintf(stderr, "%s\n", e.msg);
        return 1;
    }
    skd_egress_policy p;
    skd__egress_policy_defaults(&p, cfg);
    skd_secret sec = {"TOKEN", "skd_secret_bench", "value-of-the-bench-secret", "up.test", ""};
    p.secrets = &sec;
    p.nsecrets = 1;
    int proxy_port;
    int lfd = listen_any(&proxy_port);
    skd_egress_run *run = NULL;
    if (skd__egress_attach(eg, lfd, &p, &run, &e)) {
        fprintf(stderr, "%s\n", e.msg);
        return 1;
    }
    /* The client trusts the upstream's CA (tunnel) and skilld's (intercepted). */
    SSL_CTX *cctx = SSL_CTX_new(TLS_client_method());
    SSL_CTX_set_verify(cctx, SSL_VERIFY_PEER, NULL);
    SSL_CTX_load_verify_locations(cctx, capath, NULL);
    SSL_CTX_load_verify_locations(cctx, ourca, NULL);
    SSL_CTX_set_session_cache_mode(cctx, SSL_SESS_CACHE_OFF);
    double *sub = calloc((size_t)rounds, sizeof(double)),
           *tun = calloc((size_t)rounds, sizeof(double));
    for (int i = 0; i < 5; i++) { /* warm-up: the leaf is minted, caches filled */
        once(proxy_port, up_port, "up.test", cctx);
        once(proxy_port, up_port, "tun.test", cctx);
    }
    for (int i = 0; i < rounds; i++) {
        if (i % 2) {
            sub[i] = once(proxy_port, up_port, "up.test", cctx);
            tun[i] = once(proxy_port, up_port, "tun.test", cctx);
        } else {
            tun[i] = once(proxy_port, up_port, "tun.test", cctx);
            sub[i] = once(proxy_port, up_port, "up.test", cctx);
        }
    }
    double s50 = pct(sub, rounds, 0.5), s90 = pct(sub, rounds, 0.9);
    double t50 = pct(tun, rounds, 0.5), t90 = pct(tun, rounds, 0.9);
    printf("HTTPS request through the egress proxy, connect to first byte, %d rounds (ms)\n",
           rounds);
    printf("  CONNECT tunnel (no secret)      p50 %.3f  p90 %.3f\n", t50, t90);
    printf("  intercepted, value put in       p50 %.3f  p90 %.3f\n", s50, s90);
    printf("  added p50 %.3f ms, ratio p50 %.2f, p90 %.2f\n", s50 - t50, s50 / t50, s90 / t90);
    json_t *rec = skd__egress_detach(eg, run);
    char *txt = json_dumps(rec, 0);
    if (!txt || !strstr(txt, "\"substituted\": [\"TOKEN\"]")) {
        fprintf(stderr, "the intercepted requests carried no substitution: %s\n", txt);
        return 1;
    }
    free(txt);
    json_decref(rec);
    skd__egress_free(eg);
    skd_config_free(cfg);
    free(sub);
    free(tun);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "%s/egress-ca.key", dir);
    unlink(cmd);
    unlink(ourca);
    unlink(capath);
    rmdir(dir);
    return 0;
}
