/*
 * What the two halves of the native provider's cgroups share:
 * native_cgroup.c (the tree: detection, set-up, release) and
 * native_cgroup_run.c (one run's cgroup: its limits, kill, OOM, removal).
 */
#ifndef SKILLD_SANDBOX_NATIVE_CGROUP_INT_H
#define SKILLD_SANDBOX_NATIVE_CGROUP_INT_H

#include <limits.h>
#include <stddef.h>
#include <sys/types.h>

#include "skilld/error.h"

/* v1 controllers. freezer and cpuacct are optional: a controller that is
 * not mounted, or cpuacct mounted with cpu (its files are then in the cpu
 * directory), has an empty parent and no directory per run. */
enum skd__cg_ctl { C_MEMORY, C_PIDS, C_CPU, C_FREEZER, C_CPUACCT, C_COUNT };

/* The tree this process set up (skd__cgroup_detect runs the set-up once). */
struct skd__cg_tree {
    int version;                    /* 0: unusable, 1, 2 */
    char parent[C_COUNT][PATH_MAX]; /* v1: per controller; v2: parent[0] */
    int nctl;                       /* v1: C_COUNT (a skipped controller's parent is "") */
    int has_memsw;
    int has_kill; /* v2 cgroup.kill */
    char why[SKD_ERR_MSG_MAX];
    char desc[256];
    pid_t owner;         /* the process that made the cgroups below */
    char base[PATH_MAX]; /* v2: our cgroup, where "skilld" was made */
    char leaf[PATH_MAX]; /* v2: "<base>/skilld-server" when we moved there */
    int base_is_root;    /* v2: base is the root of the tree */
};
extern struct skd__cg_tree skd__cg;

/* Write val to dir/file (skd_write_small). 0 or -1 with errno. */
int skd__cg_write_file(const char *dir, const char *file, const char *val);
/* Read dir/file into buf (cap bytes, NUL-terminated; skd_read_small). 0 or -1. */
int skd__cg_read_file(const char *dir, const char *file, char *buf, size_t cap);
/* SIGKILL every pid listed in dir/cgroup.procs. */
void skd__cg_kill_procs(const char *dir);

#endif
