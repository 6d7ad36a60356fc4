/*
 * Privilege separation of the command line (DESIGN.md, "Processes and
 * privileges"). Every subcommand that opens the engine goes through
 * skd__cli_engine_flags, which, in this order:
 *   1. started as root: finds SKILLD_USER (default "skilld") and refuses to
 *      go on without it, naming the fix; checks, as that user, that it can
 *      reach DATA_DIR (refusing before anything in it is touched); makes
 *      DATA_DIR that user's (migrating a root-owned one, and saying so in
 *      the log);
 *   2. starts the sandbox runner, whose supervisor forks the spawner while
 *      this process still has its privileges and no other thread;
 *   3. started as root: drops to SKILLD_USER for good (groups, gid, uid;
 *      no capability is left) and checks it;
 *   4. sets no_new_privs, and only then opens the store and loads skills,
 *      so every byte from a client, the network, a manifest or a sandbox is
 *      parsed without privileges.
 * Started as an ordinary user (rootless), steps 1 and 3 do nothing.
 *
 * Subcommands that parse hostile bytes without an engine (`skilld image
 * import`: a tarball through libarchive) do it in a child made by
 * skd__cli_unprivileged, which holds SKILLD_USER's ids, no capability and
 * no_new_privs; only opaque bytes come back to the privileged parent.
 */
#include "cli/cli.h"
#include "skilld/log.h"
#include "skilld/sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <libgen.h>
#include <limits.h>
#include <linux/capability.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static uid_t chown_uid;
static gid_t chown_gid;
static long chowned;

static int chown_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)type;
    (void)ftw;
    if ((st->st_uid != chown_uid || st->st_gid != chown_gid) &&
        lchown(path, chown_uid, chown_gid) == 0)
        chowned++;
    return 0;
}

/* DATA_DIR belongs to the server's user: create it, or migrate it when a
 * root-run skilld of an earlier version made it. Symbolic links are not
 * followed (FTW_PHYS, lchown). */
static int own_data_dir(const char *dir, const struct passwd *pw)
{
    struct stat st;
    if (mkdir(dir, 0700) == 0) {
        /* Made just now: the user's from the start, not a migration. */
        if (chown(dir, pw->pw_uid, pw->pw_gid) != 0) {
            fprintf(stderr, "skilld: cannot hand DATA_DIR %s to user %s: %s\n", dir, pw->pw_name,
                    strerror(errno));
            return -1;
        }
    } else if (errno != EEXIST) {
        fprintf(stderr, "skilld: cannot create DATA_DIR %s: %s\n", dir, strerror(errno));
        return -1;
    }
    if (lstat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        fprintf(stderr, "skilld: DATA_DIR %s is not a directory\n", dir);
        return -1;
    }
    /* Walked every time, not only when DATA_DIR itself is root's: files a
     * root-run skilld of an earlier version added are taken over too. */
    chown_uid = pw->pw_uid;
    chown_gid = pw->pw_gid;
    chowned = 0;
    if (nftw(dir, chown_one, 32, FTW_PHYS | FTW_MOUNT) != 0) {
        fprintf(stderr, "skilld: cannot hand DATA_DIR %s to user %s: %s\n", dir, pw->pw_name,
                strerror(errno));
        return -1;
    }
    if (chowned > 0)
        skd_info("DATA_DIR %s: %ld entries were owned by another user and now belong to %s "
                 "(the server runs as %s, not root)",
                 dir, chowned, pw->pw_name, pw->pw_name);
    return 0;
}

static int drop_to(const struct passwd *pw)
{
    gid_t g = pw->pw_gid;
    if (setgroups(1, &g) != 0 || setresgid(g, g, g) != 0 ||
        setresuid(pw->pw_uid, pw->pw_uid, pw->pw_uid) != 0) {
        fprintf(stderr, "skilld: cannot become user %s: %s\n", pw->pw_name, strerror(errno));
        return -1;
    }
    uid_t r, e, s;
    struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct d[2];
    memset(d, 0, sizeof(d));
    if (getresuid(&r, &e, &s) != 0 || r == 0 || e == 0 || s == 0 ||
        syscall(SYS_capget, &h, d) != 0 || d[0].effective || d[0].permitted || d[1].effective ||
        d[1].permitted) {
        fprintf(stderr, "skilld: privileges were not dropped; refusing to go on\n");
        return -1;
    }
    return 0;
}

/* In a child with pw's ids (or ours when pw is NULL): can that user reach
 * DATA_DIR and write it? The parent directory must be searchable; an
 * existing DATA_DIR must be writable, unless will_own (root hands it to pw
 * first); a missing one must be creatable, unless will_own (root makes
 * it). Exit status: 0, else errno, plus 128 when DATA_DIR itself failed. */
static int reach_probe(const char *dir, const char *parent, int will_own)
{
    struct stat st;
    if (access(parent, will_own ? X_OK : W_OK | X_OK) != 0 && errno != ENOENT)
        return errno & 0x7f;
    if (stat(dir, &st) == 0 && (!will_own || st.st_uid == geteuid()) &&
        access(dir, R_OK | W_OK | X_OK) != 0)
        return 128 | (errno & 0x7f);
    return 0;
}

int skd__cli_data_dir_check(const char *dir, const struct passwd *pw, char *why, size_t cap)
{
    char copy[PATH_MAX], parent[PATH_MAX];
    if (skd_strlcpy(copy, dir, sizeof(copy))) {
        snprintf(why, cap, "DATA_DIR is too long");
        return -1;
    }
    skd_strlcpy(parent, dirname(copy), sizeof(parent));
    int st = 0;
    if (pw) {
        fflush(NULL);
        pid_t pid = fork();
        if (pid < 0) {
            snprintf(why, cap, "fork: %s", strerror(errno));
            return -1;
        }
        if (pid == 0) {
            /* One thread here (no runner yet): libc is whole after fork. */
            gid_t g = pw->pw_gid;
            if (setgroups(1, &g) != 0 || setresgid(g, g, g) != 0 ||
                setresuid(pw->pw_uid, pw->pw_uid, pw->pw_uid) != 0)
                _exit(EPERM);
            _exit(reach_probe(dir, parent, 1));
        }
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
            ;
        st = WIFEXITED(st) ? WEXITSTATUS(st) : EINTR;
    } else {
        st = reach_probe(dir, parent, 0);
    }
    if (st == 0)
        return 0;
    const char *user = pw ? pw->pw_name : "running skilld";
    char shown[PATH_MAX];
    if (!realpath(st & 128 ? dir : parent, shown))
        skd_strlcpy(shown, st & 128 ? dir : parent, sizeof(shown));
    snprintf(why, cap,
             "DATA_DIR %s is not usable by user %s: %s %s: %s; fix: set DATA_DIR (or --data-dir) "
             "to a directory that user can reach%s, or let it search every directory above it "
             "(chmod o+x)",
             dir, user, st & 128 ? "cannot write" : "cannot reach its parent", shown,
             strerror(st & 0x7f), pw ? " (as root the default is " SKD_ROOT_DATA_DIR ")" : "");
    return -1;
}

/* Step 1 of the list above: SKILLD_USER, refusing to go on without it,
 * and DATA_DIR handed to it. NULL (after saying why) when it cannot be. */
static struct passwd *service_user(skd_cli *cli, const char *dir)
{
    const char *user = skd_config_str(cli->cfg, "SKILLD_USER");
    errno = 0;
    struct passwd *pw = getpwnam(user);
    if (!pw || pw->pw_uid == 0) {
        fprintf(stderr,
                "skilld: started as root, skilld drops to the system user '%s' "
                "(SKILLD_USER), which %s.\n"
                "Create it:  useradd --system --no-create-home --shell /usr/sbin/nologin "
                "%s\n(scripts/quickstart.sh and scripts/deps.sh do this), or set "
                "SKILLD_USER to another unprivileged user.\n",
                user, pw ? "is root" : "does not exist", user);
        return NULL;
    }
    char why[PATH_MAX + 512];
    if (skd__cli_data_dir_check(dir, pw, why, sizeof(why)) != 0) {
        fprintf(stderr, "skilld: %s\n", why);
        return NULL;
    }
    if (own_data_dir(dir, pw) != 0)
        return NULL;
    return pw;
}

int skd__cli_unprivileged(skd_cli *cli, int (*fn)(skd_cli *, void *, int), void *arg, char **reply,
                          size_t *len, size_t cap)
{
    *reply = NULL;
    *len = 0;
    struct passwd *pw = NULL;
    if (geteuid() == 0 && !(pw = service_user(cli, skd_config_str(cli->cfg, "DATA_DIR"))))
        return CLI_FAIL;
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) {
        fprintf(stderr, "skilld: pipe: %s\n", strerror(errno));
        return CLI_FAIL;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "skilld: fork: %s\n", strerror(errno));
        close(p[0]);
        close(p[1]);
        return CLI_FAIL;
    }
    if (pid == 0) {
        /* This process has one thread (no engine, no runner yet): after
         * fork the child may use the whole of libc. */
        close(p[0]);
        int rc = CLI_FAIL;
        if ((!pw || drop_to(pw) == 0) && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0)
            rc = fn(cli, arg, p[1]);
        fflush(NULL);
        _exit(rc);
    }
    close(p[1]);
    char *buf = NULL;
    size_t n = 0, size = 0;
    int too_big = 0;
    for (;;) {
        if (n == size) {
            size_t ns = size ? size * 2 : 4096;
            char *nb = ns <= cap + 1 ? realloc(buf, ns) : NULL;
            if (!nb) {
                too_big = 1;
                break;
            }
            buf = nb;
            size = ns;
        }
        ssize_t r = read(p[0], buf + n, size - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    close(p[0]);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    if (too_big || n > cap) {
        fprintf(stderr, "skilld: the unprivileged child's answer is over %zu bytes\n", cap);
        free(buf);
        return CLI_FAIL;
    }
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        if (WIFSIGNALED(st))
            fprintf(stderr, "skilld: the unprivileged child died of signal %d\n", WTERMSIG(st));
        free(buf);
        return WIFEXITED(st) ? WEXITSTATUS(st) : CLI_FAIL;
    }
    *reply = buf;
    *len = n;
    return CLI_OK;
}

skd_engine *skd__cli_engine_flags(skd_cli *cli, unsigned flags)
{
    if (cli->engine)
        return cli->engine;
    skd_err err = {0};
    const char *dir = skd_config_str(cli->cfg, "DATA_DIR");
    struct passwd *pw = NULL;
    int root = geteuid() == 0;
    if (root && !(pw = service_user(cli, dir)))
        return NULL;
    skd_runner *r = NULL;
    skd_runner_opts o = {.one_run = cli->one_run};
    if (root) {
        o.owner_uid_set = 1;
        o.owner_uid = pw->pw_uid;
        o.owner_gid = pw->pw_gid;
    }
    if (skd_runner_new(cli->cfg, &o, &r, &err) != 0) {
        fprintf(stderr, "skilld: %s: %s\n", skd_errcode(err.code), skd_err_msg(&err));
        return NULL;
    }
    if ((root && drop_to(pw) != 0) || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
        skd_runner_free(r);
        return NULL;
    }
    if (skd_engine_open_flags(cli->cfg, flags, &cli->engine, &err)) {
        fprintf(stderr, "skilld: %s: %s\n", skd_errcode(err.code), skd_err_msg(&err));
        if (err.code == SKD_EIO)
            fprintf(stderr,
                    "skilld: DATA_DIR %s must be reachable by user %s (check the "
                    "permissions of its parent directories)\n",
                    dir, root ? pw->pw_name : "running skilld");
        skd_runner_free(r);
        return NULL;
    }
    skd_engine_adopt_runner(cli->engine, r);
    return cli->engine;
}
