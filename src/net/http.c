/*
 * The outbound fetch helper (skd_http_fetch in include/skilld/net.h) over
 * libcurl, used by http_request, web_fetch and the search providers.
 *
 * What it trusts: nothing that comes from the caller or the network. Every
 * connection libcurl opens goes through open_socket(), which asks the guard
 * about the address actually being connected; redirects are followed here,
 * one hop at a time, so every target URL is checked as text (scheme,
 * credentials, denied hosts) and every connection again by address. Proxies
 * from the environment are switched off, because a proxy would make the
 * guard judge the proxy's address instead of the target's. The body is kept
 * up to a cap counted after decompression, and one deadline covers DNS,
 * connect, every hop and the whole body. Once a redirect leaves the first
 * URL's origin, only the caller's content-negotiation headers follow it.
 */
#include "skilld/net.h"
#include "skilld/buf.h"
#include "skilld/registry.h"
#include "skilld/skilld.h"
#include "skilld/util.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

/* Response headers kept per hop, in bytes. */
#define HDR_MAX (64 * 1024)

struct fetch {
    const skd_net_guard *guard;
    char *host;      /* host of the current hop (curl_free) */
    skd_err blocked; /* first guard refusal of this fetch */
    skd_buf body;
    int truncated;
    skd_buf hdrs; /* raw header lines of the last response */
    int hdr_overflow;
    skd_cancel *cancel;
    int operator_url; /* skd_fetch_req.operator_url */
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static int curl_init_rc;

static void curl_init(void)
{
    curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK ? 0 : SKD_EINTERNAL;
}

static curl_socket_t open_socket(void *clientp, curlsocktype purpose, struct curl_sockaddr *a)
{
    struct fetch *f = clientp;
    skd_err e = {0};
    if (purpose != CURLSOCKTYPE_IPCXN) {
        skd_err_set(&f->blocked, SKD_EBLOCKED, "only outbound connections are allowed");
        return CURL_SOCKET_BAD;
    }
    if (!f->operator_url && skd_net_guard_check_addr(f->guard, f->host, &a->addr, a->addrlen, &e)) {
        if (!f->blocked.code)
            f->blocked = e;
        return CURL_SOCKET_BAD;
    }
    return socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
}

static size_t on_body(char *p, size_t size, size_t n, void *arg)
{
    struct fetch *f = arg;
    size_t len = size * n;
    size_t room = f->body.max - f->body.len;
    if (len > room) {
        /* Keep what fits, then stop the transfer: the rest is never read. */
        if (room && skd_buf_append(&f->body, p, room))
            return 0;
        f->truncated = 1;
        return 0;
    }
    if (len && skd_buf_append(&f->body, p, len))
        return 0;
    return len;
}

static size_t on_header(char *p, size_t size, size_t n, void *arg)
{
    struct fetch *f = arg;
    size_t len = size * n;
    if (len >= 5 && memcmp(p, "HTTP/", 5) == 0)
        f->hdrs.len = 0; /* a new response (after 1xx): forget the previous one */
    if (skd_buf_append(&f->hdrs, p, len)) {
        f->hdr_overflow = 1;
        return 0;
    }
    return len;
}

static int on_progress(void *arg, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
    (void)dt, (void)dn, (void)ut, (void)un;
    struct fetch *f = arg;
    return skd_cancel_is_set(f->cancel);
}

static const char *reason_phrase(long status)
{
    static const struct {
        long code;
        const char *text;
    } t[] = {{200, "OK"},
             {201, "Created"},
             {202, "Accepted"},
             {204, "No Content"},
             {206, "Partial Content"},
             {301, "Moved Permanently"},
             {302, "Found"},
             {303, "See Other"},
             {304, "Not Modified"},
             {307, "Temporary Redirect"},
             {308, "Permanent Redirect"},
             {400, "Bad Request"},
             {401, "Unauthorized"},
             {403, "Forbidden"},
             {404, "Not Found"},
             {405, "Method Not Allowed"},
             {409, "Conflict"},
             {413, "Content Too Large"},
             {422, "Unprocessable Content"},
             {429, "Too Many Requests"},
             {500, "Internal Server Error"},
             {502, "Bad Gateway"},
             {503, "Service Unavailable"},
             {504, "Gateway Timeout"}};
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
        if (t[i].code == status)
            return t[i].text;
    return "";
}

/* Parse the raw header block into resp->headers and resp->status_text. */
static int parse_headers(const skd_buf *raw, skd_fetch_resp *resp)
{
    json_t *h = json_object();
    if (!h)
        return SKD_ENOMEM;
    const char *p = raw->data ? raw->data : "";
    const char *end = p + raw->len;
    int first = 1;
    while (p < end) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        size_t len = eol ? (size_t)(eol - p) : (size_t)(end - p);
        const char *next = eol ? eol + 1 : end;
        while (len && (p[len - 1] == '\r' || p[len - 1] == ' '))
            len--;
        if (first) {
            first = 0;
            const char *sp = memchr(p, ' ', len);
            const char *sp2 = sp ? memchr(sp + 1, ' ', len - (size_t)(sp + 1 - p)) : NULL;
            if (sp2 && (size_t)(sp2 + 1 - p) < len) {
                free(resp->status_text);
                resp->status_text = strndup(sp2 + 1, len - (size_t)(sp2 + 1 - p));
            }
        } else {
            const char *colon = memchr(p, ':', len);
            if (colon && colon > p) {
                char name[256];
                size_t nl = (size_t)(colon - p);
                if (nl < sizeof(name)) {
                    for (size_t i = 0; i < nl; i++)
                        name[i] = (char)(p[i] >= 'A' && p[i] <= 'Z' ? p[i] + 32 : p[i]);
                    name[nl] = '\0';
                    const char *v = colon + 1;
                    while (v < p + len && (*v == ' ' || *v == '\t'))
                        v++;
                    size_t vl = (size_t)(p + len - v);
                    json_t *old = json_object_get(h, name);
                    skd_buf val;
                    skd_buf_init(&val, HDR_MAX);
                    if (old)
                        skd_buf_printf(&val, "%s, ", json_string_value(old));
                    skd_buf_append(&val, v, vl);
                    json_t *js = val.data ? json_stringn_nocheck(val.data, val.len) : NULL;
                    if (js && json_string_length(js) == val.len &&
                        skd_utf8_valid(val.data, val.len))
                        json_object_set_new(h, name, js);
                    else
                        json_decref(js);
                    skd_buf_free(&val);
                }
            }
        }
        p = next;
    }
    json_decref(resp->headers);
    resp->headers = h;
    if (!resp->status_text || !*resp->status_text) {
        free(resp->status_text);
        resp->status_text = strdup(reason_phrase(resp->status));
    }
    return resp->status_text ? 0 : SKD_ENOMEM;
}

static void parse_content_type(const char *ct, skd_fetch_resp *resp)
{
    char media[128] = "", charset[64] = "";
    if (ct) {
        size_t i = 0;
        while (ct[i] && ct[i] != ';' && ct[i] != ' ' && i + 1 < sizeof(media)) {
            media[i] = (char)(ct[i] >= 'A' && ct[i] <= 'Z' ? ct[i] + 32 : ct[i]);
            i++;
        }
        media[i] = '\0';
        const char *cs = strcasestr(ct, "charset=");
        if (cs) {
            cs += 8;
            if (*cs == '"')
                cs++;
            size_t j = 0;
            while (cs[j] && cs[j] != ';' && cs[j] != '"' && cs[j] != ' ' &&
                   j + 1 < sizeof(charset)) {
                charset[j] = (char)(cs[j] >= 'A' && cs[j] <= 'Z' ? cs[j] + 32 : cs[j]);
                j++;
            }
            charset[j] = '\0';
        }
    }
    free(resp->content_type);
    free(resp->charset);
    resp->content_type = strdup(media);
    resp->charset = strdup(charset);
}

static int method_valid(const char *m)
{
    static const char *const ok[] = {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"};
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
        if (strcmp(m, ok[i]) == 0)
            return 1;
    return 0;
}

/* Options of one hop. Returns 0 or SKD_ENOMEM. */
static int setup_hop(CURL *c, struct fetch *f, CURLU *u, const char *method, const void *body,
                     size_t body_len, struct curl_slist *headers, struct curl_slist *pins,
                     long timeout_ms, char *errbuf)
{
    curl_easy_reset(c);
    int bad = 0;
    bad |= curl_easy_setopt(c, CURLOPT_CURLU, u) != CURLE_OK;
    bad |= curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L) != CURLE_OK;
    bad |= curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https") != CURLE_OK;
    bad |= curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https") != CURLE_OK;
    bad |= curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L) != CURLE_OK;
    bad |= curl_easy_setopt(c, CURLOPT_PROXY, "") != CURLE_OK;
    bad |= curl_easy_setopt(c, CURLOPT_NOPROXY, "*") != CURLE_OK;
    bad |= curl_easy_setopt(c, CURLOPT_OPENSOCKETFUNCTION, open_socket) != CURLE_OK;
    bad |= curl_easy_setopt(c, CURLOPT_OPENSOCKETDATA, f) != CURLE_OK;
    bad |= curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body) != CURLE_OK;
    bad |= curl_easy_setopt(c, CURLOPT_WRITEDATA, f) != CURLE_OK;
    bad |= curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header) != CURLE_OK;
    bad |= curl_easy_setopt(c, CURLOPT_HEADERDATA, f) != CURLE_OK;
    bad |= curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress) != CURLE_OK;
    bad |= curl_easy_setopt(c, CURLOPT_XFERINFODATA, f) != CURLE_OK;
    bad |= curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L) != CURLE_OK;
    bad |= curl_easy_setopt(c, CURLOPT_ACCEPT_ENCODING, "") != CURLE_OK;
    bad |= curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms) != CURLE_OK;
    bad |= curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms) != CURLE_OK;
    bad |= curl_easy_setopt(c, CURLOPT_USERAGENT, "skilld/" SKD_VERSION) != CURLE_OK;
    bad |= curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf) != CURLE_OK;
    bad |= curl_easy_setopt(c, CURLOPT_MAXREDIRS, 0L) != CURLE_OK;
    if (headers)
        bad |= curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers) != CURLE_OK;
    if (pins)
        bad |= curl_easy_setopt(c, CURLOPT_RESOLVE, pins) != CURLE_OK;
    if (strcmp(method, "HEAD") == 0) {
        bad |= curl_easy_setopt(c, CURLOPT_NOBODY, 1L) != CURLE_OK;
    } else if (strcmp(method, "GET") != 0) {
        if (strcmp(method, "POST") != 0)
            bad |= curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method) != CURLE_OK;
        if (body || strcmp(method, "DELETE") != 0) {
            bad |=
                curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len) != CURLE_OK;
            bad |= curl_easy_setopt(c, CURLOPT_POSTFIELDS, body ? body : "") != CURLE_OK;
        }
    }
    return bad ? SKD_EINTERNAL : 0;
}

/* Map the outcome of one perform to 0 or an SKD_E* code. */
static int perform_result(CURLcode cc, struct fetch *f, const char *errbuf, int64_t timeout_ms,
                          skd_err *err)
{
    if (cc == CURLE_OK)
        return 0;
    if (cc == CURLE_WRITE_ERROR && f->truncated)
        return 0;
    if (f->blocked.code) {
        *err = f->blocked;
        return f->blocked.code;
    }
    if (f->hdr_overflow)
        return skd_err_set(err, SKD_ENETWORK, "the response headers exceed %d bytes", HDR_MAX);
    if (cc == CURLE_OPERATION_TIMEDOUT)
        return skd_err_set(err, SKD_ETIMEOUT, "no complete answer within %lld ms",
                           (long long)timeout_ms);
    if (cc == CURLE_ABORTED_BY_CALLBACK)
        return skd_err_set(err, SKD_ECANCELLED, "the request was cancelled");
    if (cc == CURLE_UNSUPPORTED_PROTOCOL)
        return skd_err_set(err, SKD_EBLOCKED, "the protocol is not allowed");
    if (cc == CURLE_OUT_OF_MEMORY)
        return skd_err_set(err, SKD_ENOMEM, "out of memory");
    return skd_err_set(err, SKD_ENETWORK, "%s%s%s", curl_easy_strerror(cc), *errbuf ? ": " : "",
                       errbuf);
}

/* Parse and check the URL of a hop; on success *u and f->host are set. */
static int open_hop(struct fetch *f, const char *url, int hop, CURLU **u, skd_err *err)
{
    int rc = skd_net_url_check(url, hop ? SKD_EBLOCKED : SKD_EINVAL, err);
    if (rc) {
        if (hop) {
            char msg[SKD_ERR_MSG_MAX];
            skd_strlcpy(msg, skd_err_msg(err), sizeof(msg));
            skd_err_set(err, rc, "redirect refused: %s", msg);
        }
        return rc;
    }
    curl_url_cleanup(*u);
    curl_free(f->host);
    f->host = NULL;
    if (!(*u = curl_url()) || curl_url_set(*u, CURLUPART_URL, url, 0) != CURLUE_OK ||
        curl_url_get(*u, CURLUPART_HOST, &f->host, 0) != CURLUE_OK)
        return skd_err_set(err, SKD_EINVAL, "not a valid URL");
    return skd_net_guard_check_host(f->guard, f->host, err);
}

static int is_redirect(long status)
{
    return status == 301 || status == 302 || status == 303 || status == 307 || status == 308;
}

/* Request headers that may follow a redirect to another origin; everything
 * else the caller set (keys, tokens, cookies) is sent only to the origin of
 * the first URL, so a redirect cannot carry a secret elsewhere. */
static int header_travels(const char *line)
{
    static const char *const safe[] = {
        "accept",   "accept-language", "accept-encoding",   "cache-control",       "content-type",
        "if-match", "if-none-match",   "if-modified-since", "if-unmodified-since", "pragma",
        "range",    "user-agent"};
    size_t n = strcspn(line, ":;");
    for (size_t i = 0; i < sizeof(safe) / sizeof(safe[0]); i++)
        if (strlen(safe[i]) == n && strncasecmp(line, safe[i], n) == 0)
            return 1;
    return 0;
}

/* "scheme://host:port" of u into buf; "" when it cannot be read. */
static void origin_of(CURLU *u, char *buf, size_t cap)
{
    char *scheme = NULL, *host = NULL, *port = NULL;
    buf[0] = '\0';
    if (curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) == CURLUE_OK)
        snprintf(buf, cap, "%s://%s:%s", scheme, host, port);
    curl_free(scheme);
    curl_free(host);
    curl_free(port);
}

/* The hop loop: perform, follow redirects, fill resp. */
static int run(CURL *c, struct fetch *f, const skd_fetch_req *req, struct curl_slist *const hl[2],
               struct curl_slist *pins, skd_fetch_resp *resp, skd_err *err)
{
    char errbuf[CURL_ERROR_SIZE], origin[512] = "", here[512];
    int crossed = 0; /* a hop left the first origin: only safe headers from now on */
    const char *method = req->method && *req->method ? req->method : "GET";
    const void *body = req->body;
    size_t body_len = req->body_len;
    int64_t start = skd_mono_ms(), deadline = start + req->timeout_ms;
    char *url = strdup(req->url ? req->url : "");
    CURLU *u = NULL;
    int rc;
    if (!url)
        return skd_err_set(err, SKD_ENOMEM, "out of memory");
    for (int hop = 0;; hop++) {
        if ((rc = open_hop(f, url, hop, &u, err)) != 0)
            goto out;
        int64_t left = deadline - skd_mono_ms();
        if (left <= 0) {
            rc = skd_err_set(err, SKD_ETIMEOUT, "no complete answer within %lld ms",
                             (long long)req->timeout_ms);
            goto out;
        }
        errbuf[0] = '\0';
        f->body.len = 0;
        f->hdrs.len = 0;
        f->truncated = 0;
        origin_of(u, here, sizeof(here));
        if (hop == 0)
            memcpy(origin, here, sizeof(origin));
        else if (strcmp(here, origin) != 0 || !*here)
            crossed = 1;
        if ((rc =
                 setup_hop(c, f, u, method, body, body_len, hl[crossed], pins, (long)left, errbuf)))
            goto out;
        if ((rc = perform_result(curl_easy_perform(c), f, errbuf, req->timeout_ms, err)))
            goto out;
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &resp->status);
        char *loc = NULL;
        curl_easy_getinfo(c, CURLINFO_REDIRECT_URL, &loc);
        if (!req->follow_redirects || !is_redirect(resp->status) || !loc)
            break;
        if (hop + 1 > SKD_HTTP_MAX_REDIRECTS) {
            rc = skd_err_set(err, SKD_ENETWORK, "more than %d redirects", SKD_HTTP_MAX_REDIRECTS);
            goto out;
        }
        char *next = strdup(loc);
        if (!next) {
            rc = skd_err_set(err, SKD_ENOMEM, "out of memory");
            goto out;
        }
        free(url);
        url = next;
        resp->redirects = hop + 1;
        /* As browsers do: 303, and 301/302 after POST, continue as GET. */
        if ((resp->status == 303 && strcmp(method, "HEAD") != 0) ||
            ((resp->status == 301 || resp->status == 302) && strcmp(method, "POST") == 0)) {
            method = "GET";
            body = NULL;
            body_len = 0;
        }
    }
    char *eff = NULL, *ct = NULL;
    curl_easy_getinfo(c, CURLINFO_EFFECTIVE_URL, &eff);
    curl_easy_getinfo(c, CURLINFO_CONTENT_TYPE, &ct);
    resp->final_url = strdup(eff ? eff : url);
    parse_content_type(ct, resp);
    if ((rc = parse_headers(&f->hdrs, resp)) != 0 || !resp->final_url || !resp->content_type ||
        !resp->charset) {
        rc = skd_err_set(err, SKD_ENOMEM, "out of memory");
        goto out;
    }
    resp->truncated = f->truncated;
    size_t blen = 0;
    resp->body = skd_buf_steal(&f->body, &blen);
    resp->body_len = blen;
    if (!resp->body)
        rc = skd_err_set(err, SKD_ENOMEM, "out of memory");
    resp->duration_ms = skd_mono_ms() - start;
out:
    curl_url_cleanup(u);
    free(url);
    return rc;
}

int skd_http_fetch(const skd_config *cfg, const skd_fetch_req *req, skd_fetch_resp *resp,
                   skd_err *err)
{
    struct fetch f = {0};
    skd_net_guard *guard = NULL;
    struct curl_slist *hl[2] = {NULL, NULL}, *pins = NULL; /* all headers, travelling ones */
    CURL *c = NULL;
    int rc;
    memset(resp, 0, sizeof(*resp));
    skd_buf_init(&f.body, req->max_bytes);
    skd_buf_init(&f.hdrs, HDR_MAX);
    f.cancel = req->cancel;
    f.operator_url = req->operator_url;
    pthread_once(&curl_once, curl_init);
    if (curl_init_rc)
        return skd_err_set(err, SKD_EINTERNAL, "libcurl could not be initialised");
    if (req->method && *req->method && !method_valid(req->method))
        return skd_err_set(err, SKD_EINVAL, "method %s is not allowed", req->method);
    if (req->timeout_ms <= 0 || req->max_bytes == 0)
        return skd_err_set(err, SKD_EINVAL, "timeout and byte cap must be positive");
    if ((rc = skd_net_guard_new(cfg, &guard, err)) != 0)
        return rc;
    f.guard = guard;
    rc = SKD_ENOMEM;
    for (size_t i = 0; i <= req->nheaders; i++) {
        /* Last, "Expect:" drops the 100-continue round trip for bodies. */
        const char *line = i < req->nheaders ? req->headers[i] : "Expect:";
        for (int k = 0; k < 2; k++) {
            if (k == 1 && i < req->nheaders && !header_travels(line))
                continue;
            struct curl_slist *t = curl_slist_append(hl[k], line);
            if (!t)
                goto nomem;
            hl[k] = t;
        }
    }
    size_t npins = 0;
    const char *const *pv = skd_net_guard_pins(guard, &npins);
    for (size_t i = 0; i < npins; i++) {
        struct curl_slist *p = curl_slist_append(pins, pv[i]);
        if (!p)
            goto nomem;
        pins = p;
    }
    if (!(c = curl_easy_init()))
        goto nomem;
    rc = run(c, &f, req, hl, pins, resp, err);
    goto out;
nomem:
    rc = skd_err_set(err, SKD_ENOMEM, "out of memory");
out:
    curl_easy_cleanup(c);
    curl_slist_free_all(hl[0]);
    curl_slist_free_all(hl[1]);
    curl_slist_free_all(pins);
    curl_free(f.host);
    skd_buf_free(&f.body);
    skd_buf_free(&f.hdrs);
    skd_net_guard_free(guard);
    return rc;
}

void skd_fetch_resp_free(skd_fetch_resp *resp)
{
    if (!resp)
        return;
    free(resp->status_text);
    free(resp->final_url);
    free(resp->content_type);
    free(resp->charset);
    json_decref(resp->headers);
    free(resp->body);
    memset(resp, 0, sizeof(*resp));
}
