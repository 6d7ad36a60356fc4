/*
 * Placing a run's egress proxy socket inside its network namespace
 * (egress_place.c). This is the privileged half of the egress proxy
 * (src/net/egress.h has the server's half) and runs in the spawner, which
 * hands the socket to the server.
 */
#ifndef SKD_SANDBOX_SPAWNER_EGRESS_PLACE_H
#define SKD_SANDBOX_SPAWNER_EGRESS_PLACE_H

#include "net/egress.h"

/*
 * Make a TCP socket listening on 127.0.0.1:SKD_EGRESS_PORT in the network
 * namespace of the process pidfd refers to (its loopback is brought up
 * first), by entering that namespace in the calling thread and returning
 * to the thread's own before this returns. *out receives the descriptor
 * (O_CLOEXEC, blocking: skd__egress_attach makes it non-blocking). Needs
 * CAP_SYS_ADMIN over both namespaces (a root spawner); otherwise
 * SKD_ESANDBOX with the reason, and nothing is left behind.
 */
int skd__egress_place(int pidfd, int *out, skd_err *err);

#endif
