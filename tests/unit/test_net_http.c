/*
 * skd_http_fetch against a tiny in-process HTTP server on 127.0.0.2 (opened
 * with SKILLS_OUTBOUND_ALLOW_CIDRS=127.0.0.2/32): the answer's parts, the
 * byte cap, redirects followed and refused, the default deny, cancellation
 * and the store's cache (which web_search keeps its answers in). Runs in the
 * unit ring so the fetch path is also exercised under ASan and valgrind.
 */
#include "skilld/net.h"
#include "skilld/skilld.h"
#include "skilld/store.h"
#include "tap.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

static int listen_fd = -1;
static int port;
static pthread_t server_thread;

static void answer(int c, const char *path)
{
    char out[4096];
    if (strcmp(path, "/text") == 0)
        snprintf(out, sizeof(out),
                 "HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=UTF-8\r\n"
                 "X-Twice: a\r\nX-Twice: b\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello");
    else if (strcmp(path, "/big") == 0) {
        char body[2001];
        memset(body, 'z', 2000);
        body[2000] = '\0';
        snprintf(out, sizeof(out),
                 "HTTP/1.1 200 OK\r\nContent-Length: 2000\r\nConnection: close\r\n\r\n%s", body);
    } else if (strcmp(path, "/redir-ok") == 0)
        snprintf(out, sizeof(out),
                 "HTTP/1.1 302 Found\r\nLocation: /text\r\nContent-Length: 0\r\n"
                 "Connection: close\r\n\r\n");
    else if (strcmp(path, "/redir-bad") == 0)
        snprintf(out, sizeof(out),
                 "HTTP/1.1 301 Moved\r\nLocation: http://127.0.0.1:%d/text\r\nContent-Length: 0\r\n"
                 "Connection: close\r\n\r\n",
                 port);
    else
        snprintf(out, sizeof(out),
                 "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    (void)!write(c, out, strlen(out));
}

static void *serve(void *arg)
{
    (void)arg;
    for (;;) {
        int c = accept(listen_fd, NULL, NULL);
        if (c < 0)
            return NULL;
        char req[4096];
        size_t got = 0;
        ssize_t r;
        while (got < sizeof(req) - 1 && (r = read(c, req + got, sizeof(req) - 1 - got)) > 0) {
            got += (size_t)r;
            req[got] = '\0';
            if (strstr(req, "\r\n\r\n"))
                break;
        }
        req[got] = '\0';
        char path[256] = "";
        if (sscanf(req, "%*s %255s", path) == 1)
            answer(c, path);
        close(c);
    }
}

static int start_server(void)
{
    struct sockaddr_in a = {.sin_family = AF_INET};
    socklen_t len = sizeof(a);
    inet_pton(AF_INET, "127.0.0.2", &a.sin_addr);
    listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (listen_fd < 0 || bind(listen_fd, (struct sockaddr *)&a, sizeof(a)) ||
        listen(listen_fd, 16) || getsockname(listen_fd, (struct sockaddr *)&a, &len))
        return -1;
    port = ntohs(a.sin_port);
    return pthread_create(&server_thread, NULL, serve, NULL) ? -1 : 0;
}

static int fetch(const char *cidrs, const char *path, size_t max, skd_cancel *cancel,
                 skd_fetch_resp *resp, skd_err *err)
{
    skd_config *cfg = skd_config_new();
    char url[128];
    snprintf(url, sizeof(url), "http://127.0.0.2:%d%s", port, path);
    skd_config_set(cfg, "SKILLS_OUTBOUND_ALLOW_CIDRS", cidrs, err);
    skd_fetch_req req = {
        .url = url, .timeout_ms = 5000, .max_bytes = max, .follow_redirects = 1, .cancel = cancel};
    int rc = skd_http_fetch(cfg, &req, resp, err);
    skd_config_free(cfg);
    return rc;
}

TEST(answer_parts)
{
    skd_fetch_resp r;
    skd_err err = {0};
    CHECK_EQ_INT(fetch("127.0.0.2/32", "/text", 1000, NULL, &r, &err), 0);
    CHECK_EQ_INT(r.status, 200);
    CHECK_STR(r.status_text, "OK");
    CHECK_STR(r.body, "hello");
    CHECK_EQ_INT(r.body_len, 5);
    CHECK_EQ_INT(r.truncated, 0);
    CHECK_STR(r.content_type, "text/plain");
    CHECK_STR(r.charset, "utf-8");
    CHECK_STR(json_string_value(json_object_get(r.headers, "x-twice")), "a, b");
    skd_fetch_resp_free(&r);
    skd_fetch_resp_free(&r); /* safe twice */
}

TEST(byte_cap)
{
    skd_fetch_resp r;
    skd_err err = {0};
    CHECK_EQ_INT(fetch("127.0.0.2/32", "/big", 100, NULL, &r, &err), 0);
    CHECK_EQ_INT(r.body_len, 100);
    CHECK_EQ_INT(r.truncated, 1);
    skd_fetch_resp_free(&r);
}

TEST(redirects)
{
    skd_fetch_resp r;
    skd_err err = {0};
    CHECK_EQ_INT(fetch("127.0.0.2/32", "/redir-ok", 1000, NULL, &r, &err), 0);
    CHECK_EQ_INT(r.redirects, 1);
    CHECK_STR(r.body, "hello");
    CHECK(strstr(r.final_url, "/text") != NULL);
    skd_fetch_resp_free(&r);
    uint64_t before = skd_net_blocked_total();
    CHECK_EQ_INT(fetch("127.0.0.2/32", "/redir-bad", 1000, NULL, &r, &err), SKD_EBLOCKED);
    CHECK(strstr(err.msg, "loopback") != NULL);
    CHECK(skd_net_blocked_total() > before);
    skd_fetch_resp_free(&r);
}

TEST(default_deny_and_errors)
{
    skd_fetch_resp r;
    skd_err err = {0};
    CHECK_EQ_INT(fetch("", "/text", 1000, NULL, &r, &err), SKD_EBLOCKED);
    skd_fetch_resp_free(&r);
    skd_cancel *c = skd_cancel_new();
    skd_cancel_fire(c);
    CHECK_EQ_INT(fetch("127.0.0.2/32", "/text", 1000, c, &r, &err), SKD_ECANCELLED);
    skd_fetch_resp_free(&r);
    skd_cancel_free(c);
    skd_config *cfg = skd_config_new();
    skd_fetch_req bad = {
        .url = "http://127.0.0.2/", .method = "TRACE", .timeout_ms = 1000, .max_bytes = 10};
    CHECK_EQ_INT(skd_http_fetch(cfg, &bad, &r, &err), SKD_EINVAL);
    skd_fetch_resp_free(&r);
    bad.method = "GET";
    bad.url = "file:///etc/passwd";
    CHECK_EQ_INT(skd_http_fetch(cfg, &bad, &r, &err), SKD_EINVAL);
    skd_fetch_resp_free(&r);
    skd_config_free(cfg);
}

TEST(store_cache)
{
    char dir[] = "/tmp/skd-cache-XXXXXX", path[128];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof(path), "%s/skilld.db", dir);
    skd_store *st = NULL;
    skd_err err = {0};
    char *v = NULL;
    CHECK_EQ_INT(skd_store_open(path, &st, &err), 0);
    if (!st)
        return;
    CHECK_EQ_INT(skd_store_cache_get(st, "k", 1000, &v, &err), SKD_ENOENT);
    CHECK_EQ_INT(skd_store_cache_put(st, "k", "[1]", 1000, 500, &err), 0);
    CHECK_EQ_INT(skd_store_cache_get(st, "k", 1499, &v, &err), 0);
    CHECK_STR(v, "[1]");
    free(v);
    v = NULL;
    CHECK_EQ_INT(skd_store_cache_get(st, "k", 1500, &v, &err), SKD_ENOENT);
    CHECK_EQ_INT(skd_store_cache_put(st, "k", "[2]", 2000, 500, &err), 0);
    CHECK_EQ_INT(skd_store_cache_get(st, "k", 2001, &v, &err), 0);
    CHECK_STR(v, "[2]");
    free(v);
    skd_store_close(st);
    char wal[160];
    const char *const suffix[] = {"", "-wal", "-shm"};
    for (size_t i = 0; i < 3; i++) {
        snprintf(wal, sizeof(wal), "%s%s", path, suffix[i]);
        unlink(wal);
    }
    rmdir(dir);
}

int main(void)
{
    TAP_BEGIN("test_net_http");
    if (start_server()) {
        printf("FAIL test_net_http: setup: cannot listen on 127.0.0.2\n");
        return 1;
    }
    RUN(answer_parts);
    RUN(byte_cap);
    RUN(redirects);
    RUN(default_deny_and_errors);
    RUN(store_cache);
    shutdown(listen_fd, SHUT_RDWR); /* wakes the accept() so the thread ends */
    pthread_join(server_thread, NULL);
    close(listen_fd);
    return TAP_END();
}
