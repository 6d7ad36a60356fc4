/*
 * `skilld doctor`'s look at the egress proxy (see src/net/egress.h): is
 * network for sandboxes switched on, with which host lists and limits, and
 * does the proxy refuse what the guard forbids? The probe starts a proxy
 * of its own on a loopback port of this process, asks it for a tunnel to
 * the cloud-metadata address and expects a 403; it reaches nothing else.
 */
#include "net/egress.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

/* A request to the metadata address through a proxy on a loopback port:
 * 0 when it answers 403, else SKD_EINTERNAL with what it answered. */
static int probe(skd_egress *e, const skd_config *cfg, skd_err *err)
{
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), c = -1, rc;
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t al = sizeof(a);
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof(a)) || listen(lfd, 4) ||
        getsockname(lfd, (struct sockaddr *)&a, &al)) {
        if (lfd >= 0)
            close(lfd);
        return skd_err_set(err, SKD_EIO, "no loopback socket for the probe");
    }
    skd_egress_policy p;
    skd__egress_policy_defaults(&p, cfg);
    skd_egress_run *run = NULL;
    if ((rc = skd__egress_attach(e, lfd, &p, &run, err)))
        return rc;
    char buf[512] = "";
    size_t n = 0;
    struct timeval tv = {5, 0};
    static const char req[] = "CONNECT 169.254.169.254:80 HTTP/1.1\r\n\r\n";
    if ((c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) >= 0 &&
        setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) == 0 &&
        connect(c, (struct sockaddr *)&a, sizeof(a)) == 0 &&
        send(c, req, sizeof(req) - 1, MSG_NOSIGNAL) == (ssize_t)sizeof(req) - 1) {
        ssize_t r;
        while (n + 1 < sizeof(buf) && (r = recv(c, buf + n, sizeof(buf) - 1 - n, 0)) > 0)
            n += (size_t)r;
    }
    buf[n] = '\0';
    if (c >= 0)
        close(c);
    json_decref(skd__egress_detach(e, run));
    if (strncmp(buf, "HTTP/1.1 403 ", 13) != 0)
        return skd_err_set(err, SKD_EINTERNAL,
                           "a tunnel to 169.254.169.254 was not refused (answer: %.60s)",
                           n ? buf : "none");
    return 0;
}

int skd__egress_doctor(const skd_config *cfg, char *detail, size_t cap, skd_err *err)
{
    if (!skd_config_bool(cfg, "SKILLS_SANDBOX_NETWORK_ENABLED")) {
        snprintf(detail, cap,
                 "off: networkEnabled is refused (SKILLS_SANDBOX_NETWORK_ENABLED=false); "
                 "sandboxes have no network at all");
        return 0;
    }
    skd_egress *e = NULL;
    int rc = skd__egress_new(cfg, &e, err);
    if (rc == 0)
        rc = probe(e, cfg, err);
    skd__egress_free(e);
    if (rc)
        return rc;
    const char *allow = skd_config_str(cfg, "SKILLS_SANDBOX_EGRESS_ALLOW_HOSTS");
    const char *deny = skd_config_str(cfg, "SKILLS_SANDBOX_EGRESS_DENY_HOSTS");
    snprintf(detail, cap,
             "on: sandboxes reach the network only through the proxy on 127.0.0.1:%d; "
             "allow hosts '%s', deny hosts '%s'; at most %lld connections, %lld bytes up, "
             "%lld bytes down per run; the probe's tunnel to 169.254.169.254 was refused%s",
             SKD_EGRESS_PORT, allow, deny,
             (long long)skd_config_int(cfg, "SKILLS_SANDBOX_EGRESS_MAX_CONNECTIONS"),
             (long long)skd_config_int(cfg, "SKILLS_SANDBOX_EGRESS_MAX_BYTES_UP"),
             (long long)skd_config_int(cfg, "SKILLS_SANDBOX_EGRESS_MAX_BYTES_DOWN"),
             geteuid() == 0 ? "" : "; not root: placing the proxy socket needs a root spawner");
    return geteuid() == 0 ? 0 : 1;
}
