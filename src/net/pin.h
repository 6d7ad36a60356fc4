/*
 * Library-internal: the administrator's address pins, SKILLS_OUTBOUND_RESOLVE
 * entries of the form host:port:address (curl's CURLOPT_RESOLVE syntax, the
 * address in brackets or not). The guard checks them when it is made, the
 * egress proxy connects to them, and libcurl gets them as they are written.
 */
#ifndef SKILLD_NET_PIN_H
#define SKILLD_NET_PIN_H

#include <sys/socket.h>

#define SKD__PIN_HOST_MAX 253 /* a DNS name's longest text form */

struct skd__pin {
    char host[SKD__PIN_HOST_MAX + 1]; /* lower case */
    int port;                         /* 1..65535 */
    struct sockaddr_storage sa;       /* the address with the port */
    socklen_t salen;
};

/* Parse one pin (borrowed) into *out. Returns 0, or SKD_EINVAL when it is
 * not host:port:address with a host of 1..253 bytes, a port of 1..65535 and
 * an IPv4 or IPv6 address. */
int skd__pin_parse(const char *s, struct skd__pin *out);

#endif
