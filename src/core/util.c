/*
 * Helpers (see include/skilld/util.h). Randomness comes from the kernel
 * (getrandom), digests and the constant-time compare from nettle; nothing
 * here keeps state. The small-file readers and writers and the openat2
 * wrapper are the only copies of that logic in the tree: every part that
 * reads a /proc or cgroup file or writes a control file comes here.
 *
 * Why nettle and not libcrypto, which skilld uses elsewhere: every server
 * process has nettle mapped already (libmicrohttpd -> gnutls -> nettle), and
 * a SHA-256 of a few hundred bytes needs none of OpenSSL's provider and
 * configuration set-up. libcrypto's first use maps about 3.4 MiB of it and
 * costs about 1 ms; a server that only serves file and sandbox skills, and
 * `skilld exec`, never load it (bench/README.md, "`skilld exec` start-up").
 */
#include "skilld/util.h"
#include "skilld/buf.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <nettle/memops.h>
#include <nettle/sha2.h>
#include <nettle/version.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

int skd_random(void *out, size_t n)
{
    /* The kernel's CSPRNG, which OpenSSL's DRBG seeds from. getrandom may
     * return fewer bytes than asked for above 256 and on a signal. */
    unsigned char *p = out;
    while (n) {
        ssize_t r = getrandom(p, n, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return SKD_EINTERNAL;
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

/* 8-4-4-4-12 lower-case hex of b, with the version nibble and variant. */
static void uuid_format(unsigned char b[16], unsigned version, char out[SKD_UUID_LEN + 1])
{
    static const char hex[] = "0123456789abcdef";
    b[6] = (unsigned char)((b[6] & 0x0f) | (version << 4));
    b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
    size_t o = 0;
    for (int i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10)
            out[o++] = '-';
        out[o++] = hex[b[i] >> 4];
        out[o++] = hex[b[i] & 15];
    }
    out[o] = '\0';
}

int skd_uuid(char out[SKD_UUID_LEN + 1])
{
    unsigned char b[16];
    if (skd_random(b, sizeof(b)))
        return SKD_EINTERNAL;
    uuid_format(b, 4, out);
    return 0;
}

int skd_uuid7(char out[SKD_UUID_LEN + 1])
{
    unsigned char b[16];
    if (skd_random(b + 6, sizeof(b) - 6))
        return SKD_EINTERNAL;
    uint64_t ms = (uint64_t)skd_wall_ms();
    for (int i = 5; i >= 0; i--, ms >>= 8)
        b[i] = (unsigned char)(ms & 0xff);
    uuid_format(b, 7, out);
    return 0;
}

void skd_sha256_hex(const void *data, size_t len, char out[SKD_SHA256_HEX_LEN + 1])
{
    unsigned char md[SHA256_DIGEST_SIZE];
    static const char hex[] = "0123456789abcdef";
    struct sha256_ctx c;
    sha256_init(&c);
    sha256_update(&c, len, data);
#if NETTLE_VERSION_MAJOR >= 4 /* the digest functions lost their length argument */
    sha256_digest(&c, md);
#else
    sha256_digest(&c, sizeof(md), md);
#endif
    for (unsigned i = 0; i < SHA256_DIGEST_SIZE; i++) {
        out[2 * i] = hex[md[i] >> 4];
        out[2 * i + 1] = hex[md[i] & 15];
    }
    out[SKD_SHA256_HEX_LEN] = '\0';
}

int skd_ct_equal(const void *a, const void *b, size_t n)
{
    return memeql_sec(a, b, n) != 0;
}

static int64_t clock_ms(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t skd_mono_ms(void)
{
    return clock_ms(CLOCK_MONOTONIC);
}

int64_t skd_wall_ms(void)
{
    return clock_ms(CLOCK_REALTIME);
}

int skd_parse_i64(const char *s, int64_t min, int64_t max, int64_t *out)
{
    if (!s || !*s || isspace((unsigned char)*s))
        return SKD_EINVAL;
    char *end = NULL;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || !end || *end || v < min || v > max)
        return SKD_EINVAL;
    *out = v;
    return 0;
}

int skd_parse_bool(const char *s, int *out)
{
    static const char *yes[] = {"1", "true", "yes", "on"};
    static const char *no[] = {"0", "false", "no", "off"};
    for (size_t i = 0; s && i < 4; i++) {
        if (strcasecmp(s, yes[i]) == 0)
            return *out = 1, 0;
        if (strcasecmp(s, no[i]) == 0)
            return *out = 0, 0;
    }
    return SKD_EINVAL;
}

int skd_strlcpy(char *dst, const char *src, size_t cap)
{
    size_t n = strlen(src);
    if (cap == 0)
        return SKD_ETOOBIG;
    size_t c = n < cap ? n : cap - 1;
    memcpy(dst, src, c);
    dst[c] = '\0';
    return n < cap ? 0 : SKD_ETOOBIG;
}

/* Bytes of the valid UTF-8 sequence at s (n bytes available), 0 when the
 * bytes there are not one (no overlongs, no surrogates, nothing past
 * U+10FFFF). */
size_t skd_utf8_seq_len(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    size_t k;
    unsigned cp;
    if (c < 0x80)
        return 1;
    if ((c & 0xe0) == 0xc0)
        k = 1, cp = c & 0x1f;
    else if ((c & 0xf0) == 0xe0)
        k = 2, cp = c & 0x0f;
    else if ((c & 0xf8) == 0xf0)
        k = 3, cp = c & 0x07;
    else
        return 0;
    if (n <= k)
        return 0;
    for (size_t j = 1; j <= k; j++) {
        if ((s[j] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[j] & 0x3f);
    }
    if ((k == 1 && cp < 0x80) || (k == 2 && cp < 0x800) || (k == 3 && cp < 0x10000) ||
        cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return k + 1;
}

int skd_utf8_valid(const char *str, size_t n)
{
    const unsigned char *s = (const unsigned char *)str;
    for (size_t i = 0, k; i < n; i += k)
        if (!(k = skd_utf8_seq_len(s + i, n - i)))
            return 0;
    return 1;
}

void skd_utf8_scrub(char *str)
{
    unsigned char *s = (unsigned char *)str;
    size_t n = strlen(str);
    for (size_t i = 0, k; i < n; i += k) {
        if (!(k = skd_utf8_seq_len(s + i, n - i))) {
            s[i] = '?';
            k = 1;
        }
    }
}

void skd_vformat(char *buf, size_t cap, const char *fmt, va_list ap)
{
    if (!cap)
        return;
    vsnprintf(buf, cap, fmt, ap);
    skd_utf8_scrub(buf);
}

size_t skd_utf8_cut(const char *str, size_t n)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t back = 0;
    while (back < 3 && back < n && (s[n - 1 - back] & 0xc0) == 0x80)
        back++;
    if (back == n)
        return n;
    unsigned lead = s[n - 1 - back];
    size_t need = (lead & 0xe0) == 0xc0   ? 2
                  : (lead & 0xf0) == 0xe0 ? 3
                  : (lead & 0xf8) == 0xf0 ? 4
                                          : 0;
    if (need == 0 || back + 1 >= need)
        return n;
    return n - 1 - back;
}

int skd_utf8_repair(skd_buf *b, const char *str, size_t n)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0;
    while (i < n) {
        size_t j = i, k;
        while (j < n && s[j] != 0 && (k = skd_utf8_seq_len(s + j, n - j)) > 0)
            j += k;
        int rc = skd_buf_append(b, str + i, j - i);
        if (rc)
            return rc;
        if (j < n) {
            rc = skd_buf_append(b, "\xef\xbf\xbd", 3);
            if (rc)
                return rc;
            j++;
        }
        i = j;
    }
    return 0;
}

/* ---- small files and openat2 ---------------------------------------------- */

/* Read fd to its end into buf (cap >= 1) and terminate it. */
static int read_to_end(int fd, char *buf, size_t cap, size_t *len)
{
    size_t got = 0;
    int rc = 0;
    for (;;) {
        char extra;
        int full = got == cap - 1; /* one more byte, read aside, says "too big" */
        ssize_t r = full ? read(fd, &extra, 1) : read(fd, buf + got, cap - 1 - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            rc = SKD_EIO;
            break;
        }
        if (r == 0)
            break;
        if (full) {
            errno = EFBIG;
            rc = SKD_ETOOBIG;
            break;
        }
        got += (size_t)r;
    }
    buf[got] = '\0';
    if (len)
        *len = got;
    return rc;
}

static int open_err(void)
{
    return errno == ENOENT ? SKD_ENOENT : SKD_EIO;
}

int skd_read_small(int dirfd, const char *path, int flags, char *buf, size_t cap, size_t *len)
{
    if (len)
        *len = 0;
    buf[0] = '\0';
    int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC | flags);
    if (fd < 0)
        return open_err();
    int rc = read_to_end(fd, buf, cap, len);
    int saved = errno;
    close(fd);
    errno = saved;
    return rc;
}

int skd_read_alloc(int dirfd, const char *path, int flags, size_t max, char **out, size_t *len)
{
    *out = NULL;
    if (len)
        *len = 0;
    int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC | flags);
    if (fd < 0)
        return open_err();
    /* The size is a hint (/proc files say 0, a file may grow): room for it
     * and one byte more, which tells its end; then doubled up to max + 1
     * bytes, one past the limit. The allocation has a byte more for '\0'. */
    struct stat st;
    size_t cap = fstat(fd, &st) == 0 && st.st_size > 0 && (uint64_t)st.st_size < max
                     ? (size_t)st.st_size + 1
                     : 4096;
    char *buf = NULL;
    size_t got = 0;
    int rc = 0;
    for (;;) {
        if (!buf || got == cap) {
            if (buf && cap > max) {
                errno = EFBIG;
                rc = SKD_ETOOBIG;
                break;
            }
            cap = buf ? cap * 2 : cap;
            cap = cap > max + 1 ? max + 1 : cap;
            char *nb = realloc(buf, cap + 1);
            if (!nb) {
                rc = SKD_ENOMEM;
                break;
            }
            buf = nb;
        }
        ssize_t r = read(fd, buf + got, cap - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            rc = SKD_EIO;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    int saved = errno;
    close(fd);
    errno = saved;
    if (rc) {
        free(buf);
        return rc;
    }
    buf[got] = '\0';
    *out = buf;
    if (len)
        *len = got;
    return 0;
}

int skd_write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n > 0) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            if (w == 0)
                errno = EIO;
            return SKD_EIO;
        }
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

int skd_write_small(int dirfd, const char *path, int flags, const char *s)
{
    int fd = openat(dirfd, path, O_WRONLY | O_CLOEXEC | flags, 0600);
    if (fd < 0)
        return open_err();
    int rc = skd_write_all(fd, s, strlen(s));
    int saved = errno;
    if (close(fd) != 0 && rc == 0) /* NFS and quotas report at close */
        return SKD_EIO;
    errno = saved;
    return rc;
}

#define OPENAT2_RETRIES 8 /* EAGAIN: a rename raced the kernel's lookup */

int skd_openat2(int dirfd, const char *path, int flags, unsigned mode, uint64_t resolve)
{
    struct open_how how;
    memset(&how, 0, sizeof(how));
    how.flags = (uint64_t)(unsigned)(flags | O_CLOEXEC);
    how.mode = (flags & (O_CREAT | O_TMPFILE)) ? (uint64_t)mode : 0;
    how.resolve = resolve;
    for (int i = 0;; i++) {
        long fd = syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
        if (fd >= 0)
            return (int)fd;
        if (errno != EAGAIN || i >= OPENAT2_RETRIES)
            return -1;
    }
}
