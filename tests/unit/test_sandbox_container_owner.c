/*
 * The owner label of container runs (src/sandbox/container/container_cli.c): a live
 * skilld must look alive to every other skilld however its memory grows,
 * or their leftover sweep removes its running containers (a run then ends
 * with exit 137 and timedOut false).
 */
#include "tap.h"

#include <stdint.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandbox/container/container.h"

TEST(own_label_stays_alive_as_memory_grows)
{
    const char *own = skd__ctr_owner();
    char copy[128];
    snprintf(copy, sizeof(copy), "%s", own);
    CHECK(skd__ctr_owner_alive(copy));
    /* Grow the address space (field 23 of /proc/PID/stat, beside the start time). */
    size_t big = 256u << 20;
    void *p = mmap(NULL, big, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(p != MAP_FAILED);
    CHECK(skd__ctr_owner_alive(copy));
    if (p != MAP_FAILED)
        munmap(p, big);
    /* The label holds our pid and our start time (field 22), not vsize. */
    long long pid = 0;
    unsigned long long start = 0, ns = 0;
    CHECK_EQ_INT(sscanf(copy, "%lld-%llu-%llu", &pid, &start, &ns), 3);
    CHECK_EQ_INT(pid, getpid());
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%ld/stat", (long)getpid());
    FILE *f = fopen(path, "r");
    CHECK(f && fgets(buf, sizeof(buf), f));
    if (f)
        fclose(f);
    char *q = strrchr(buf, ')');
    unsigned long long st22 = 0;
    CHECK(q && sscanf(q + 2,
                      "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d "
                      "%*d %*d %llu",
                      &st22) == 1);
    CHECK_EQ_INT(start, st22);
}

TEST(dead_or_wrong_labels)
{
    char label[128];
    const char *own = skd__ctr_owner();
    long long pid = 0;
    unsigned long long start = 0, ns = 0;
    sscanf(own, "%lld-%llu-%llu", &pid, &start, &ns);
    snprintf(label, sizeof(label), "%lld-%llu-%llu", pid, start + 1, ns); /* pid reused */
    CHECK(!skd__ctr_owner_alive(label));
    snprintf(label, sizeof(label), "%lld-%llu", pid, start); /* an older label */
    CHECK(skd__ctr_owner_alive(label));
    snprintf(label, sizeof(label), "%lld-%llu-%llu", pid, start + 1, ns + 1); /* other pid ns */
    CHECK(skd__ctr_owner_alive(label));
    CHECK(!skd__ctr_owner_alive("4194303-1-0x"));
    CHECK(!skd__ctr_owner_alive("junk"));
    CHECK(!skd__ctr_owner_alive(""));
    CHECK(!skd__ctr_owner_alive(NULL));
}

int main(void)
{
    TAP_BEGIN("sandbox_container_owner");
    RUN(own_label_stays_alive_as_memory_grows);
    RUN(dead_or_wrong_labels);
    return TAP_END();
}
