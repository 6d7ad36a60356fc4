/* libFuzzer driver for the egress proxy's request-head parser
 * (src/net/egress_parse.c). Any bytes: the parser must not read past them
 * and must keep its contract. A refusal carries a status and a reason; an
 * accepted head has a host, a port in range and a head length within the
 * input; for plain HTTP the head it writes for the upstream is well framed
 * (every line ends in CRLF, no NUL, ends with the blank line and says
 * "Connection: close") and names no proxy header. */
#include "net/egress.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char out[SKD_EGRESS_HEAD_MAX + 512];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 4 * SKD_EGRESS_HEAD_MAX)
        return 0;
    /* An exact-size heap copy, so ASan sees any read past the end. */
    char *buf = malloc(size ? size : 1);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    skd_egress_req req;
    size_t outlen = 12345;
    int rc = skd__egress_parse_head(buf, size, &req, out, sizeof(out), &outlen);
    if (rc == 1) {
        if (size >= SKD_EGRESS_HEAD_MAX || outlen != 0)
            abort();
    } else if (rc == SKD_EINVAL) {
        if (!req.reason[0] || (req.status != 400 && req.status != 403 && req.status != 414 &&
                               req.status != 431 && req.status != 501))
            abort();
    } else if (rc == 0) {
        size_t hl = strlen(req.host);
        if (hl == 0 || hl > SKD_EGRESS_HOST_MAX || req.port < 1 || req.port > 65535 ||
            req.head_len == 0 || req.head_len > size || req.head_len > SKD_EGRESS_HEAD_MAX)
            abort();
        for (size_t i = 0; i < hl; i++)
            if (req.host[i] >= 'A' && req.host[i] <= 'Z')
                abort();
        if (req.connect && outlen != 0)
            abort();
        if (!req.connect) {
            if (outlen < 4 || outlen > sizeof(out) || memcmp(out + outlen - 4, "\r\n\r\n", 4))
                abort();
            for (size_t i = 0; i < outlen; i++) {
                if (out[i] == '\0' || (out[i] == '\n' && (i == 0 || out[i - 1] != '\r')) ||
                    (out[i] == '\r' && (i + 1 >= outlen || out[i + 1] != '\n')))
                    abort();
            }
            if (outlen < 21 || memcmp(out + outlen - 21, "Connection: close\r\n\r\n", 21))
                abort();
            for (size_t i = 0; i + 6 < outlen; i++)
                if (out[i] == '\n' && strncasecmp(out + i + 1, "proxy-", 6) == 0)
                    abort();
        }
    } else {
        abort();
    }
    /* The host matcher over the same bytes as a pattern list. */
    if (size < 512) {
        char *pat = malloc(size + 1);
        if (pat) {
            memcpy(pat, data, size);
            pat[size] = '\0';
            if (skd__egress_host_match(pat, "") < 0)
                abort();
            (void)skd__egress_host_match(pat, "files.pythonhosted.org");
            free(pat);
        }
    }
    free(buf);
    return 0;
}
