/*
 * Capped buffers (see include/skilld/buf.h). Growth doubles up to the cap so
 * a hostile stream costs at most max bytes plus one doubling step.
 */
#include "skilld/buf.h"
#include "skilld/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void skd_buf_init(skd_buf *b, size_t max)
{
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
    b->max = max;
}

static int reserve(skd_buf *b, size_t need)
{
    if (need <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need)
        cap = cap > ((size_t)-1) / 2 ? need : cap * 2;
    if (cap > b->max + 1)
        cap = b->max + 1;
    char *p = realloc(b->data, cap);
    if (!p)
        return SKD_ENOMEM;
    b->data = p;
    b->cap = cap;
    return 0;
}

int skd_buf_append(skd_buf *b, const void *p, size_t n)
{
    if (n > b->max || b->len > b->max - n)
        return SKD_ETOOBIG;
    int rc = reserve(b, b->len + n + 1);
    if (rc)
        return rc;
    if (n)
        memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
    return 0;
}

int skd_buf_puts(skd_buf *b, const char *s)
{
    return skd_buf_append(b, s, strlen(s));
}

int skd_buf_printf(skd_buf *b, const char *fmt, ...)
{
    char small[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof(small), fmt, ap);
    va_end(ap);
    if (n < 0)
        return SKD_EINVAL;
    if ((size_t)n < sizeof(small))
        return skd_buf_append(b, small, (size_t)n);
    char *big = malloc((size_t)n + 1);
    if (!big)
        return SKD_ENOMEM;
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    int rc = skd_buf_append(b, big, (size_t)n);
    free(big);
    return rc;
}

char *skd_buf_steal(skd_buf *b, size_t *len)
{
    char *p = b->data;
    if (!p) {
        p = calloc(1, 1);
        if (!p)
            return NULL;
    }
    if (len)
        *len = b->len;
    b->data = NULL;
    b->len = b->cap = 0;
    return p;
}

void skd_buf_free(skd_buf *b)
{
    if (!b)
        return;
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}
