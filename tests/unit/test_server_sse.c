/*
 * SSE stream queue (src/server/sse.c): the cap is on bytes not yet sent,
 * so a reader that keeps up is never cut off however long the stream runs,
 * while one that stops reading is.
 */
#include "server/sse.h"
#include "tap.h"

#include <stdlib.h>
#include <string.h>

static json_t *msg(int i)
{
    return json_pack("{s:s, s:i}", "jsonrpc", "2.0", "n", i);
}

/* Bytes of the SSE frame that carries m. */
static size_t frame_len(const json_t *m)
{
    char *d = json_dumps(m, JSON_COMPACT);
    size_t n = strlen("event: message\ndata: ") + strlen(d) + 2;
    free(d);
    return n;
}

/* A reader one byte behind the writer, for far more than the cap in total:
 * the unsent bytes never exceed one frame, so the stream must live on. */
TEST(sse_cap_counts_unsent_bytes_only)
{
    skd_sse *s = skd__sse_new(256, NULL);
    char buf[512];
    size_t total = 0;
    for (int i = 0; i < 200; i++) {
        json_t *m = msg(i);
        size_t want = frame_len(m) - (i == 0 ? 1 : 0);
        skd__sse_send(s, m);
        json_decref(m);
        CHECK(!skd__sse_gone(s));
        ssize_t n = skd__sse_read(s, buf, want);
        CHECK(n == (ssize_t)want);
        total += (size_t)n;
    }
    CHECK(total > 4096);
    CHECK(!skd__sse_gone(s));
    skd__sse_unref(s);
}

/* A reader that never reads: the stream ends at the cap. */
TEST(sse_stalled_reader_ends_stream)
{
    skd_sse *s = skd__sse_new(256, NULL);
    for (int i = 0; i < 50; i++) {
        json_t *m = msg(i);
        skd__sse_send(s, m);
        json_decref(m);
    }
    CHECK(skd__sse_gone(s));
    skd__sse_unref(s);
}

/* Bytes come out in order and intact across the compaction. */
TEST(sse_frames_in_order)
{
    skd_sse *s = skd__sse_new(4096, NULL);
    char out[4096];
    size_t o = 0;
    for (int i = 0; i < 3; i++) {
        json_t *m = msg(i);
        skd__sse_send(s, m);
        json_decref(m);
        ssize_t n = skd__sse_read(s, out + o, 10);
        CHECK(n == 10);
        o += (size_t)n;
    }
    skd__sse_close(s);
    ssize_t n;
    while ((n = skd__sse_read(s, out + o, sizeof(out) - 1 - o)) > 0)
        o += (size_t)n;
    CHECK(n == MHD_CONTENT_READER_END_OF_STREAM);
    out[o] = '\0';
    CHECK(strcmp(out, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"n\":0}\n\n"
                      "event: message\ndata: {\"jsonrpc\":\"2.0\",\"n\":1}\n\n"
                      "event: message\ndata: {\"jsonrpc\":\"2.0\",\"n\":2}\n\n") == 0);
    skd__sse_unref(s);
}

int main(void)
{
    TAP_BEGIN("server_sse");
    RUN(sse_cap_counts_unsent_bytes_only);
    RUN(sse_stalled_reader_ends_stream);
    RUN(sse_frames_in_order);
    return TAP_END();
}
