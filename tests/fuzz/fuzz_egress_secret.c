/* libFuzzer driver for what the egress proxy does with a run's secrets
 * (src/net/egress_secret.c). Any bytes, read as a request head and as a
 * response: the substitution keeps to its buffer, never puts a value on a
 * host it is not bound to, and never leaves a placeholder of a bound secret
 * in a header it may go in; the head rewrite ends with "Connection:
 * close"; the response framing stays within the input; the scrub leaves no
 * value in what the sandbox would read. */
#include "net/egress.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char out[SKD_EGRESS_SUBST_MAX], fin[SKD_EGRESS_SUBST_MAX + 128];

static skd_secret secrets[2] = {
    {"A", "skd_secret_aaaa", "VALUE-A", "api.test", ""},
    {"B", "skd_secret_bbbb", "vb", "*.b.test", "x-key"},
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 4 * SKD_EGRESS_HEAD_MAX)
        return 0;
    char *buf = malloc(size ? size : 1);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    size_t ol = 0, fl = 0;
    uint64_t used = 0, els = 0;
    if (skd__egress_subst_head(secrets, 2, "evil.test", buf, size, out, sizeof(out), &ol, &used,
                               &els) == 0) {
        /* An unbound host never gets a value: the head goes as it came. */
        if (used || ol != size || memcmp(out, buf, size))
            abort();
    }
    used = els = 0;
    if (skd__egress_subst_head(secrets, 2, "api.test", buf, size, out, sizeof(out), &ol, &used,
                               &els) == 0) {
        if (ol > sizeof(out))
            abort();
        if (skd__egress_close_head(out, ol, fin, sizeof(fin), &fl) == 0 &&
            (fl < 21 || memcmp(fin + fl - 21, "Connection: close\r\n\r\n", 21)))
            abort();
    }
    long n = skd__egress_resp_complete(buf, size, size & 1);
    if (n > (long)size)
        abort();
    char *s = NULL;
    size_t sl = 0;
    int r = skd__egress_scrub(secrets, 2, buf, size, (int)(size & 1), &s, &sl);
    if (r == 1 && (memmem(s, sl, "VALUE-A", 7) || memmem(s, sl, "vb", 2)))
        abort();
    if (r == 0 && (memmem(buf, size, "VALUE-A", 7) || memmem(buf, size, "vb", 2)))
        abort();
    free(s);
    free(buf);
    return 0;
}
