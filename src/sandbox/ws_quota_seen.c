/*
 * What a live sandbox's commits applied (see ws_quota.h,
 * skd__wsq_commit_live): the upper layer's entries, by inode number, with
 * the change time each had when it was applied. An entry whose inode and
 * change time are both as recorded has not changed since, and is not
 * applied again; any write, rename, chmod or link changes the change time
 * (the sandbox cannot set it: the clock is not its to change). A time
 * compared with a clock would not do: the kernel stamps change times from
 * a coarse clock or, when they were looked at, finer, so an entry written
 * just before a commit may carry a later stamp than the commit's start.
 *
 * An open-addressing table (linear probing), grown at half full; it holds
 * at most the upper layer's inodes (its tmpfs caps them).
 */
#include "sandbox/ws_quota.h"

#include <stdlib.h>

struct seen_slot {
    ino_t ino; /* 0: empty (tmpfs gives no inode 0) */
    struct timespec ctime;
};

struct skd__wsq_seen {
    struct seen_slot *slot;
    size_t cap, n;
};

static size_t slot_of(const struct skd__wsq_seen *t, ino_t ino)
{
    size_t i = (size_t)(ino * 0x9E3779B97F4A7C15ull) & (t->cap - 1);
    while (t->slot[i].ino && t->slot[i].ino != ino)
        i = (i + 1) & (t->cap - 1);
    return i;
}

int skd__wsq_seen_same(const skd__wsq_seen *t, ino_t ino, const struct timespec *ctime)
{
    if (!t || !t->cap || !ino)
        return 0;
    const struct seen_slot *s = &t->slot[slot_of(t, ino)];
    return s->ino == ino && s->ctime.tv_sec == ctime->tv_sec && s->ctime.tv_nsec == ctime->tv_nsec;
}

int skd__wsq_seen_put(skd__wsq_seen **tp, ino_t ino, const struct timespec *ctime)
{
    skd__wsq_seen *t = *tp;
    if (!ino)
        return 0;
    if (!t && !(t = *tp = calloc(1, sizeof(*t))))
        return -1;
    if ((t->n + 1) * 2 > t->cap) {
        struct skd__wsq_seen g = {.cap = t->cap ? t->cap * 2 : 256};
        if (!(g.slot = calloc(g.cap, sizeof(*g.slot))))
            return -1;
        for (size_t i = 0; i < t->cap; i++)
            if (t->slot[i].ino)
                g.slot[slot_of(&g, t->slot[i].ino)] = t->slot[i];
        g.n = t->n;
        free(t->slot);
        *t = g;
    }
    struct seen_slot *s = &t->slot[slot_of(t, ino)];
    t->n += s->ino == 0;
    s->ino = ino;
    s->ctime = *ctime;
    return 0;
}

void skd__wsq_seen_free(skd__wsq_seen *t)
{
    if (t)
        free(t->slot);
    free(t);
}
