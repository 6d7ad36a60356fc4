/*
 * Placing a run's proxy socket (see src/net/egress.h): a TCP socket that
 * listens on 127.0.0.1:SKD_EGRESS_PORT inside the network namespace of the
 * sandbox, made by entering that namespace with setns(2) for the length of
 * socket/bind/listen and coming back. The socket keeps the namespace it was
 * made in, so whoever holds the descriptor accepts the sandbox's
 * connections from outside; nothing else connects the two namespaces (no
 * veth, no bridge).
 *
 * This is the privileged half of the proxy and runs where sandboxes are
 * spawned (the spawner). It reads no byte from the sandbox. setns changes
 * the calling thread only, and the thread is back in its own namespace
 * before this returns; if it could not come back, the process aborts
 * rather than go on in the sandbox's namespace.
 */
#include "sandbox/spawner/egress_place.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

/* In the current namespace: it must hold nothing but loopback (fail
 * closed: a sandbox with another interface would have a way around the
 * proxy), then loopback up, then the listener. */
static int make_listener(skd_err *err)
{
    struct if_nameindex *ifs = if_nameindex();
    if (!ifs)
        return skd_err_set(err, SKD_ESANDBOX, "egress proxy: list the sandbox's interfaces: %s",
                           strerror(errno));
    for (struct if_nameindex *i = ifs; i->if_index; i++) {
        if (strcmp(i->if_name, "lo") != 0) {
            skd_err_set(err, SKD_ESANDBOX,
                        "egress proxy: the sandbox's network namespace has an interface "
                        "besides loopback (%.32s): no proxy is placed there",
                        i->if_name);
            if_freenameindex(ifs);
            return SKD_ESANDBOX;
        }
    }
    if_freenameindex(ifs);
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct ifreq ifr;
    memset(&ifr, 0, sizeof(ifr));
    memcpy(ifr.ifr_name, "lo", 3);
    if (s < 0 || ioctl(s, SIOCGIFFLAGS, &ifr) != 0) {
        int e = errno;
        if (s >= 0)
            close(s);
        return skd_err_set(err, SKD_ESANDBOX, "egress proxy: the sandbox's loopback: %s",
                           strerror(e));
    }
    if (!(ifr.ifr_flags & IFF_UP)) {
        ifr.ifr_flags |= IFF_UP;
        if (ioctl(s, SIOCSIFFLAGS, &ifr) != 0) {
            int e = errno;
            close(s);
            return skd_err_set(err, SKD_ESANDBOX, "egress proxy: bring the loopback up: %s",
                               strerror(e));
        }
    }
    close(s);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(SKD_EGRESS_PORT)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int one = 1;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
        bind(fd, (struct sockaddr *)&a, sizeof(a)) || listen(fd, 128)) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        return skd_err_set(err, SKD_ESANDBOX,
                           "egress proxy: listen on 127.0.0.1:%d in the sandbox: %s",
                           SKD_EGRESS_PORT, strerror(e));
    }
    return fd;
}

int skd__egress_place(int pidfd, int *out, skd_err *err)
{
    *out = -1;
    int self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    if (self < 0)
        return skd_err_set(err, SKD_ESANDBOX, "egress proxy: open this thread's namespace: %s",
                           strerror(errno));
    if (setns(pidfd, CLONE_NEWNET) != 0) {
        int e = errno;
        close(self);
        return skd_err_set(err, SKD_ESANDBOX,
                           "egress proxy: enter the sandbox's network namespace: %s%s", strerror(e),
                           e == EPERM ? " (placing the proxy needs CAP_SYS_ADMIN: rootless "
                                        "mode cannot give networkEnabled)"
                                      : "");
    }
    int fd = make_listener(err);
    if (setns(self, CLONE_NEWNET) != 0)
        abort(); /* never go on inside the sandbox's namespace */
    close(self);
    if (fd < 0)
        return fd;
    *out = fd;
    return 0;
}
