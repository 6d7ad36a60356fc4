/*
 * The seccomp filter of native sandboxes, built once with libseccomp and
 * exported as a BPF program so the child (which may not allocate between
 * clone3 and execve) only has to install it with one raw syscall.
 *
 * Policy: allow by default and deny the families that widen the kernel's
 * attack surface or escape the namespaces (DESIGN.md, "Sandbox
 * providers"). The architecture is checked first: only x86_64 (or the build
 * architecture) system calls pass; i386 and x32 calls kill the process.
 * Denied calls fail with EPERM (ENOSYS for clone3, so libc falls back to
 * clone, whose flags the filter can see; EAFNOSUPPORT for socket families).
 */
#include "sandbox/native/native.h"
#include "skilld/log.h"

#include <errno.h>
#include <linux/sched.h>
#include <pthread.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

static const int denied[] = {
    SYS_io_uring_setup,
    SYS_io_uring_enter,
    SYS_io_uring_register,
    SYS_keyctl,
    SYS_add_key,
    SYS_request_key,
    SYS_bpf,
    SYS_perf_event_open,
    SYS_userfaultfd,
    SYS_ptrace,
    SYS_process_vm_readv,
    SYS_process_vm_writev,
    SYS_kcmp,
    SYS_pidfd_getfd,
    SYS_mount,
    SYS_umount2,
    SYS_pivot_root,
    SYS_chroot,
    SYS_fsopen,
    SYS_fsconfig,
    SYS_fsmount,
    SYS_fspick,
    SYS_move_mount,
    SYS_open_tree,
    SYS_mount_setattr,
    SYS_unshare,
    SYS_setns,
    SYS_kexec_load,
    SYS_kexec_file_load,
    SYS_init_module,
    SYS_finit_module,
    SYS_delete_module,
    SYS_reboot,
    SYS_swapon,
    SYS_swapoff,
    SYS_open_by_handle_at,
    SYS_name_to_handle_at,
    SYS_acct,
    SYS_quotactl,
    SYS_syslog,
    SYS_vhangup,
    SYS_lookup_dcookie,
    SYS_uselib,
    SYS_iopl,
    SYS_ioperm,
    SYS_settimeofday,
    SYS_clock_settime,
    SYS_clock_adjtime,
#ifdef SYS_quotactl_fd
    SYS_quotactl_fd,
#endif
};

static const unsigned long ns_flags[] = {
    CLONE_NEWUSER, CLONE_NEWNS,  CLONE_NEWPID,    CLONE_NEWNET,
    CLONE_NEWIPC,  CLONE_NEWUTS, CLONE_NEWCGROUP,
#ifdef CLONE_NEWTIME
    CLONE_NEWTIME,
#endif
};

/* Socket families allowed: AF_UNIX (1), AF_INET (2), AF_INET6 (10). */
static int socket_rules(scmp_filter_ctx ctx, int nr)
{
    int rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), nr, 1,
                              SCMP_A0(SCMP_CMP_GT, AF_INET6, 0));
    for (int fam = 0; fam < AF_INET6 && rc == 0; fam++)
        if (fam != AF_UNIX && fam != AF_INET)
            rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), nr, 1,
                                  SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)fam, 0));
    return rc;
}

static int add_rules(scmp_filter_ctx ctx, const char **what)
{
    int rc;
    *what = "deny list";
    for (size_t i = 0; i < sizeof(denied) / sizeof(denied[0]); i++)
        if ((rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), denied[i], 0)) != 0)
            return rc;
    *what = "clone3";
    if ((rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SYS_clone3, 0)) != 0)
        return rc;
    *what = "clone flags";
    for (size_t i = 0; i < sizeof(ns_flags) / sizeof(ns_flags[0]); i++)
        if ((rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SYS_clone, 1,
                                   SCMP_A0(SCMP_CMP_MASKED_EQ, ns_flags[i], ns_flags[i]))) != 0)
            return rc;
    *what = "socket families";
    if ((rc = socket_rules(ctx, SYS_socket)) != 0 || (rc = socket_rules(ctx, SYS_socketpair)))
        return rc;
    /* personality: no 32-bit personality and none of the flags that weaken
     * the address space (libseccomp cannot say "not 0 and not ~0" on one
     * argument, so the dangerous bits are denied one by one). */
    *what = "personality";
    static const unsigned long pers_bits[] = {0x0040000, 0x0100000, 0x0200000,
                                              0x0400000, 0x0800000, 0x8000000};
    if ((rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SYS_personality, 1,
                               SCMP_A0(SCMP_CMP_MASKED_EQ, 0xff, 0x08))) ||
        (rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SYS_personality, 1,
                               SCMP_A0(SCMP_CMP_GT, 0xffffffffu, 0))))
        return rc;
    for (size_t i = 0; i < sizeof(pers_bits) / sizeof(pers_bits[0]); i++)
        if ((rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SYS_personality, 1,
                                   SCMP_A0(SCMP_CMP_MASKED_EQ, pers_bits[i], pers_bits[i]))))
            return rc;
    /* Terminal injection, in case a tty ever reaches a sandbox. */
    *what = "ioctl";
    if ((rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SYS_ioctl, 1,
                               SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, 0x5412))) ||
        (rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SYS_ioctl, 1,
                               SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, 0x541c))))
        return rc;
    return 0;
}

static struct {
    struct sock_fprog prog;
    char why[SKD_ERR_MSG_MAX];
} S;
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* Export ctx as BPF into S.prog via a memfd. */
static int export_bpf(scmp_filter_ctx ctx)
{
    int fd = memfd_create("skilld-seccomp", MFD_CLOEXEC);
    if (fd < 0)
        return -errno;
    int rc = seccomp_export_bpf(ctx, fd);
    off_t len = rc == 0 ? lseek(fd, 0, SEEK_END) : -1;
    if (rc == 0 && (len <= 0 || len % (off_t)sizeof(struct sock_filter) ||
                    len > 65536 * (off_t)sizeof(struct sock_filter)))
        rc = -EINVAL;
    struct sock_filter *f = rc == 0 ? malloc((size_t)len) : NULL;
    if (rc == 0 && (!f || pread(fd, f, (size_t)len, 0) != len))
        rc = -EIO;
    close(fd);
    if (rc) {
        free(f);
        return rc;
    }
    S.prog.filter = f;
    S.prog.len = (unsigned short)(len / (off_t)sizeof(struct sock_filter));
    return 0;
}

static void build(void)
{
    const char *what = "init";
    int rc = -ENOMEM;
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    if (!ctx)
        goto out;
    /* Only the native architecture; anything else (i386 via int 0x80, x32)
     * kills the whole process. */
    what = "bad-arch action";
    if ((rc = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS)))
        goto out;
    what = "no_new_privs";
    if ((rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0)))
        goto out;
    /* The syscall numbers as a binary tree instead of libseccomp's default
     * linear list: the same rules, in about log2(60) comparisons instead
     * of up to 60. It matters at every start as well as at every system
     * call: installing a filter makes the kernel run it once per syscall
     * number (its action cache), with interrupts off. A libseccomp without
     * the attribute (before 2.5) keeps the list; the filter is the same. */
    if (seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2) != 0)
        skd_debug("seccomp: no binary-tree layout in this libseccomp; the linear one is used");
    if ((rc = add_rules(ctx, &what)))
        goto out;
    what = "export";
    rc = export_bpf(ctx);
out:
    if (rc)
        snprintf(S.why, sizeof(S.why), "seccomp filter (%s): %s", what, strerror(-rc));
    seccomp_release(ctx);
}

int skd__seccomp_program(const struct sock_fprog **out, skd_err *err)
{
    pthread_once(&once, build);
    if (!S.prog.filter)
        return skd_err_set(err, SKD_ESANDBOX, "native sandbox: %s", S.why);
    *out = &S.prog;
    return 0;
}
