/*
 * Small helpers shared by every part: identifiers, digests, clocks and
 * strict integer parsing (the strtonum habit: whole string, bounded range).
 */
#ifndef SKILLD_UTIL_H
#define SKILLD_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "skilld/error.h"

#define SKD_UUID_LEN 36
#define SKD_SHA256_HEX_LEN 64

/* Random version-4 UUID into out (37 bytes with NUL). Returns 0 or SKD_EINTERNAL. */
int skd_uuid(char out[SKD_UUID_LEN + 1]);
/* Time-ordered (version 7, RFC 9562): the first 48 bits are milliseconds
 * since the epoch, the rest random. Execution ids: rows keyed by them are
 * appended at the end of their index instead of at random places. */
int skd_uuid7(char out[SKD_UUID_LEN + 1]);

/* Lower-case hex SHA-256 of len bytes into out (65 bytes with NUL). */
void skd_sha256_hex(const void *data, size_t len, char out[SKD_SHA256_HEX_LEN + 1]);

/* n random bytes from the kernel CSPRNG (getrandom). Returns 0 or SKD_EINTERNAL. */
int skd_random(void *out, size_t n);

/* Constant-time comparison of two equal-length byte strings: 1 when equal. */
int skd_ct_equal(const void *a, const void *b, size_t n);

/* Milliseconds on the monotonic clock, and since the epoch. */
int64_t skd_mono_ms(void);
int64_t skd_wall_ms(void);

/* Parse a whole decimal string into [min, max]. Returns 0 or SKD_EINVAL. */
int skd_parse_i64(const char *s, int64_t min, int64_t max, int64_t *out);

/* Parse "true/false/1/0/yes/no/on/off" (any case). Returns 0 or SKD_EINVAL. */
int skd_parse_bool(const char *s, int *out);

/* Copy at most cap-1 bytes of src into dst and terminate. Returns SKD_ETOOBIG
 * when src did not fit (dst then holds a truncated copy). */
int skd_strlcpy(char *dst, const char *src, size_t cap);

/* 1 when the n bytes at s are valid UTF-8 (no overlongs, no surrogates). */
int skd_utf8_valid(const char *s, size_t n);

/* Bytes of the one valid UTF-8 sequence at s (n > 0 bytes available), or 0
 * when the bytes there are not one. */
size_t skd_utf8_seq_len(const unsigned char *s, size_t n);

struct skd_buf;
/* Append s[0..n) to b with every invalid UTF-8 sequence and every NUL byte
 * replaced by U+FFFD. Returns 0, SKD_ETOOBIG or SKD_ENOMEM. */
int skd_utf8_repair(struct skd_buf *b, const char *s, size_t n);

/* Length of the longest prefix of the n bytes at s that does not end inside
 * a UTF-8 sequence: a cut at a byte cap then drops the partial character
 * instead of leaving invalid UTF-8. Bytes that are not UTF-8 anyway (a stray
 * continuation byte, 0xf8..0xff) are cut where asked. */
size_t skd_utf8_cut(const char *s, size_t n);

/* Make the NUL-terminated s valid UTF-8 in place: every byte that does not
 * belong to a valid sequence (a character cut by a size cap, bytes a client
 * or a file name brought in) becomes '?'. The length does not change. Text
 * that goes into a JSON string must pass here first: jansson refuses
 * invalid UTF-8, and a reply that cannot be built is no reply at all. */
void skd_utf8_scrub(char *s);

/* vsnprintf into buf (cap bytes), then skd_utf8_scrub it. For messages that
 * end up in JSON replies. */
void skd_vformat(char *buf, size_t cap, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));

/* ---- small files and openat2 ------------------------------------------------
 * The one way skilld reads and writes small files (/proc and cgroup files,
 * control files, key and manifest files): bounded, O_CLOEXEC, EINTR retried.
 * path is relative to dirfd (AT_FDCWD for a plain path); flags are added to
 * the open(2) flags (O_NOFOLLOW, O_NONBLOCK...). On failure errno is the one
 * of the call that failed, for callers that tell ENOENT or ESRCH apart. */

/* Read the whole file into buf (cap >= 1 bytes, the caller's) and terminate
 * it; *len (may be NULL) gets its length. Returns 0, SKD_ENOENT (no such
 * file), SKD_ETOOBIG (it holds cap bytes or more: buf then holds its first
 * cap - 1, terminated, errno EFBIG) or SKD_EIO. */
int skd_read_small(int dirfd, const char *path, int flags, char *buf, size_t cap, size_t *len);

/* The same into a new buffer of at most max bytes plus the terminator
 * (*out: caller frees with free(); NULL on failure). Also SKD_ENOMEM. */
int skd_read_alloc(int dirfd, const char *path, int flags, size_t max, char **out, size_t *len);

/* Write n bytes to fd (borrowed), again after EINTR and partial writes.
 * Returns 0 or SKD_EIO (a write that failed, or wrote nothing: errno EIO). */
int skd_write_all(int fd, const void *p, size_t n);

/* Write the string s to the file at path, opened O_WRONLY | flags (with
 * O_CREAT the mode is 0600; control files such as cgroup ones exist and take
 * a value in one write). Returns 0, SKD_ENOENT or SKD_EIO (a short write, or
 * an error at close). */
int skd_write_small(int dirfd, const char *path, int flags, const char *s);

/* openat2(2) with RESOLVE_* flags resolve (RESOLVE_BENEATH,
 * RESOLVE_NO_MAGICLINKS, ...): flags are open(2) flags, O_CLOEXEC added,
 * mode used with O_CREAT or O_TMPFILE. EAGAIN (a rename raced the kernel's
 * lookup) is retried a few times. Returns a new descriptor (caller closes),
 * or -1 with errno: ENOSYS where the kernel or a seccomp profile lacks
 * openat2, EXDEV or ELOOP where the path would leave dirfd. */
int skd_openat2(int dirfd, const char *path, int flags, unsigned mode, uint64_t resolve);

#endif
