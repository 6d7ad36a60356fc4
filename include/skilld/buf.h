/*
 * Capped growable byte buffers. Every buffer has a maximum; an append past it
 * fails with SKD_ETOOBIG and leaves the buffer as it was. The data is always
 * NUL-terminated (the terminator is not counted in len or against max).
 */
#ifndef SKILLD_BUF_H
#define SKILLD_BUF_H

#include <stddef.h>

typedef struct skd_buf {
    char *data; /* NULL until the first append */
    size_t len;
    size_t cap;
    size_t max; /* hard limit on len */
} skd_buf;

/* Prepare b (caller-owned storage) with the given maximum length. */
void skd_buf_init(skd_buf *b, size_t max);

/* Append n bytes. Returns 0, SKD_ETOOBIG past max, SKD_ENOMEM. */
int skd_buf_append(skd_buf *b, const void *p, size_t n);

/* Append a NUL-terminated string. */
int skd_buf_puts(skd_buf *b, const char *s);

/* Append printf-style text. */
int skd_buf_printf(skd_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Take the data (caller frees with free()); b is left empty. Never NULL on
 * success: an empty buffer yields "". Returns NULL only when out of memory. */
char *skd_buf_steal(skd_buf *b, size_t *len);

/* Release the data; b stays usable with the same max. Accepts NULL. */
void skd_buf_free(skd_buf *b);

#endif
