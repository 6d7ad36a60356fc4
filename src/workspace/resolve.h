/*
 * Library-internal: resolve a path strictly beneath a directory fd.
 *
 * The kernel does it (openat2 with RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)
 * wherever openat2 exists. Where it answers ENOSYS (Linux before 5.6, a
 * container seccomp profile that predates it, valgrind before 3.21) the same
 * rules are applied in user space, one component at a time.
 */
#ifndef SKILLD_WORKSPACE_RESOLVE_H
#define SKILLD_WORKSPACE_RESOLVE_H

#include <sys/types.h>

/* Open path beneath root. flags are open(2) flags; O_CLOEXEC is added.
 * With O_NOFOLLOW the last component is not followed (as open(2)); other
 * components may be symlinks whose targets stay beneath root. Absolute
 * symlinks, ".." above root and magic links fail with EXDEV (or ELOOP).
 * Returns an fd, or -1 with errno set. */
int skd__ws_open_beneath(int root, const char *path, int flags, mode_t mode);

/* Tests: 1 forces the user-space resolver, 0 restores the automatic
 * choice. Returns 1 when openat2 is known to be missing. */
int skd__ws_force_userspace(int on);

#endif
