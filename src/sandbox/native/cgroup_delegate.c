/*
 * A cgroup v2 subtree of our own, from systemd, the way runc's systemd
 * driver and podman get one.
 *
 * Under systemd the cgroup tree belongs to systemd: a process may make
 * child cgroups and enable controllers only below a unit that has
 * Delegate=yes. A root login shell sits in session-N.scope (not delegated,
 * and shared with login and the shell, so "no internal processes" forbids
 * enabling controllers there); a service without Delegate= gets only the
 * controllers systemd chose for it. skd__cgroup_delegated() tells these
 * cases apart by asking systemd (the unit that owns our cgroup and its
 * Delegate property) and reading the controllers the kernel offers our
 * cgroup; skd__cgroup_delegate() then asks systemd, over D-Bus
 * (StartTransientUnit), for a transient scope "skilld-<pid>.scope" with
 * Delegate=yes that holds this process, and waits until the kernel shows us
 * in it. Without systemd nothing is asked: the caller uses the cgroup it is
 * in when it can (a container's delegated root, a cgroup made for it by
 * runit, s6, supervisord, OpenRC or by hand), provided every process in it
 * is skilld's (skd__cgroup_foreign_procs): those are moved into a leaf
 * beside the sandboxes, anyone else's never are.
 *
 * The bus: root talks to the system manager on its private socket
 * (/run/systemd/private, as systemctl does; no dbus-daemon needed), then the
 * system bus; an ordinary user talks to its user manager
 * ($XDG_RUNTIME_DIR/systemd/private, then the user bus).
 *
 * Trust: systemd and the kernel. Unit names come from sd-login (read from
 * our own /proc entry); nothing here is built from client text.
 */
#include "sandbox/native/native.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-daemon.h>
#include <systemd/sd-login.h>
#include <time.h>
#include <unistd.h>

#define SD_DEST "org.freedesktop.systemd1"
#define SD_PATH "/org/freedesktop/systemd1"
#define SD_MANAGER "org.freedesktop.systemd1.Manager"

/* The manager that owns our cgroup: the system one for root, the user's
 * own for everyone else. NULL when none answers; why says what failed. */
static sd_bus *manager_bus(char *why, size_t cap)
{
    sd_bus *bus = NULL;
    char addr[300];
    int rc = -ENOENT;
    const char *rt = getenv("XDG_RUNTIME_DIR");
    if (geteuid() == 0)
        snprintf(addr, sizeof(addr), "unix:path=/run/systemd/private");
    else if (rt && *rt && strlen(rt) < 200)
        snprintf(addr, sizeof(addr), "unix:path=%s/systemd/private", rt);
    else
        addr[0] = '\0';
    if (addr[0] && (rc = sd_bus_new(&bus)) >= 0) {
        if ((rc = sd_bus_set_address(bus, addr)) < 0 || (rc = sd_bus_start(bus)) < 0)
            bus = sd_bus_flush_close_unref(bus);
    }
    if (!bus)
        rc = geteuid() == 0 ? sd_bus_open_system(&bus) : sd_bus_open_user(&bus);
    if (rc < 0) {
        bus = sd_bus_flush_close_unref(bus);
        snprintf(why, cap, "cannot reach the systemd %s manager: %s",
                 geteuid() == 0 ? "system" : "user (is XDG_RUNTIME_DIR set?)", strerror(-rc));
    }
    return bus;
}

/* The unit that owns our cgroup, in the manager manager_bus() reaches: for
 * root the system unit, for a user the unit in its user manager (or, when
 * we are not below user@UID.service, the system unit, which that user's
 * manager cannot delegate). Caller frees. */
static char *own_unit(int *system_unit)
{
    char *unit = NULL;
    *system_unit = 1;
    if (geteuid() != 0 && sd_pid_get_user_unit(0, &unit) >= 0) {
        *system_unit = 0;
        return unit;
    }
    if (sd_pid_get_unit(0, &unit) < 0)
        return NULL;
    return unit;
}

static int has_word(const char *list, const char *w)
{
    size_t n = strlen(w);
    for (const char *p = list; (p = strstr(p, w)); p += n)
        if ((p == list || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\n' || p[n] == '\0'))
            return 1;
    return 0;
}

/* The controllers of memory, pids, cpu the kernel does not offer the cgroup
 * at path, into out ("" when all are there); -1 when unreadable. */
int skd__cgroup_missing_controllers(const char *path, char *out, size_t cap)
{
    static const char *const want[] = {"memory", "pids", "cpu"};
    char p[4200], ctl[512];
    out[0] = '\0';
    if (snprintf(p, sizeof(p), "%s/cgroup.controllers", path) >= (int)sizeof(p))
        return -1;
    int rc = skd_read_small(AT_FDCWD, p, 0, ctl, sizeof(ctl), NULL);
    if (rc && rc != SKD_ETOOBIG)
        return -1;
    for (size_t i = 0; i < 3; i++)
        if (!has_word(ctl, want[i])) {
            size_t n = strlen(out);
            snprintf(out + n, cap - n, "%s%s", n ? " " : "", want[i]);
        }
    return 0;
}

int skd__cgroup_foreign_procs(const char *dir, char *names, size_t cap)
{
    char p[4200], line[32];
    struct stat self, st;
    int n = 0;
    names[0] = '\0';
    if (snprintf(p, sizeof(p), "%s/cgroup.procs", dir) >= (int)sizeof(p) ||
        stat("/proc/self/exe", &self) != 0)
        return -1;
    FILE *f = fopen(p, "re");
    if (!f)
        return -1;
    while (fgets(line, sizeof(line), f)) {
        int64_t pid;
        char exe[64], comm[64] = "?";
        line[strcspn(line, "\n")] = '\0';
        if (skd_parse_i64(line, 1, INT32_MAX, &pid) != 0)
            continue;
        /* Ours: a process of the same executable file (the server, its
         * zygote and spawners are forks of one program). One we may not
         * look at is counted as someone else's. */
        snprintf(exe, sizeof(exe), "/proc/%lld/exe", (long long)pid);
        if (stat(exe, &st) == 0 && st.st_dev == self.st_dev && st.st_ino == self.st_ino)
            continue;
        if (stat(exe, &st) != 0 && errno == ENOENT)
            continue; /* gone since the list was read */
        snprintf(exe, sizeof(exe), "/proc/%lld/comm", (long long)pid);
        FILE *c = fopen(exe, "re");
        if (c) {
            if (!fgets(comm, sizeof(comm), c))
                snprintf(comm, sizeof(comm), "?");
            comm[strcspn(comm, "\n")] = '\0';
            fclose(c);
        }
        size_t k = strlen(names);
        if (n < 4)
            snprintf(names + k, cap - k, "%s%s (pid %lld)", n ? ", " : "", comm, (long long)pid);
        else if (n == 4)
            snprintf(names + k, cap - k, ", ...");
        n++;
    }
    fclose(f);
    return n;
}

/* Delegate property of unit: 1, 0, or -1 (why filled). */
static int unit_delegates(sd_bus *bus, const char *unit, char *why, size_t cap)
{
    sd_bus_error e = SD_BUS_ERROR_NULL;
    sd_bus_message *reply = NULL;
    const char *path = NULL;
    const char *dot = strrchr(unit, '.');
    const char *iface = dot && strcmp(dot, ".scope") == 0     ? "org.freedesktop.systemd1.Scope"
                        : dot && strcmp(dot, ".service") == 0 ? "org.freedesktop.systemd1.Service"
                        : dot && strcmp(dot, ".slice") == 0   ? "org.freedesktop.systemd1.Slice"
                                                              : NULL;
    int deleg = 0, rc = -1;
    if (!iface) {
        snprintf(why, cap, "our cgroup belongs to %s, which cannot delegate", unit);
        return 0;
    }
    if (sd_bus_call_method(bus, SD_DEST, SD_PATH, SD_MANAGER, "GetUnit", &e, &reply, "s", unit) <
            0 ||
        sd_bus_message_read(reply, "o", &path) < 0 ||
        sd_bus_get_property_trivial(bus, SD_DEST, path, iface, "Delegate", &e, 'b', &deleg) < 0)
        snprintf(why, cap, "cannot read Delegate of %s: %s", unit,
                 e.message ? e.message : "bad reply");
    else
        rc = deleg != 0;
    sd_bus_message_unref(reply);
    sd_bus_error_free(&e);
    return rc;
}

int skd__cgroup_delegated(const char *path, const char *self, char *why, size_t cap)
{
    char missing[64];
    why[0] = '\0';
    if (sd_booted() <= 0)
        return -1;
    if (self[0] == '\0')
        return 1; /* the root of a cgroup namespace: not systemd's to manage */
    int system_unit = 1;
    char *unit = own_unit(&system_unit);
    if (!unit) {
        snprintf(why, cap, "systemd runs, but no unit owns our cgroup %s", self);
        return -2;
    }
    int rc;
    sd_bus *bus = NULL;
    if (geteuid() != 0 && system_unit) {
        snprintf(why, cap,
                 "our cgroup belongs to the system unit %s, which our user manager cannot "
                 "delegate",
                 unit);
        rc = -2;
    } else if (!(bus = manager_bus(why, cap))) {
        rc = -2;
    } else if ((rc = unit_delegates(bus, unit, why, cap)) == 0 && !why[0]) {
        if (strncmp(unit, "session-", 8) == 0)
            snprintf(why, cap,
                     "%s is a login session scope: systemd does not delegate it, and it holds "
                     "the session's other processes",
                     unit);
        else
            snprintf(why, cap, "%s has no Delegate=yes", unit);
    } else if (rc == 1 && skd__cgroup_missing_controllers(path, missing, sizeof(missing)) == 0 &&
               missing[0]) {
        snprintf(why, cap, "%s is delegated, but without the %s controller(s)", unit, missing);
        rc = 0;
    }
    if (rc == -1)
        rc = -2;
    sd_bus_flush_close_unref(bus);
    free(unit);
    return rc;
}

static const char FIX[] =
    "start skilld in a delegated cgroup: as skilld.service (Delegate=yes, `systemctl start "
    "skilld`), as a user service (skilld-user.service), or under `systemd-run --scope -p "
    "Delegate=yes`";

int skd__cgroup_delegate(const char *reason, skd_err *err)
{
    char why[256] = "", name[64], unit_cg[80], now[1024];
    sd_bus_error e = SD_BUS_ERROR_NULL;
    sd_bus_message *m = NULL, *reply = NULL;
    sd_bus *bus = manager_bus(why, sizeof(why));
    int rc = SKD_ESANDBOX;
    snprintf(name, sizeof(name), "skilld-%d.scope", (int)getpid());
    snprintf(unit_cg, sizeof(unit_cg), "/%s", name);
    if (!bus)
        goto out;
    /* Delegate=yes makes systemd enable every controller down to the scope
     * and leave the subtree to us; PIDs moves this process (all threads). */
    if (sd_bus_message_new_method_call(bus, &m, SD_DEST, SD_PATH, SD_MANAGER,
                                       "StartTransientUnit") < 0 ||
        sd_bus_message_append(m, "ss", name, "fail") < 0 ||
        sd_bus_message_open_container(m, 'a', "(sv)") < 0 ||
        sd_bus_message_append(m, "(sv)", "Description", "s", "skilld sandboxes") < 0 ||
        sd_bus_message_append(m, "(sv)", "Delegate", "b", 1) < 0 ||
        sd_bus_message_append(m, "(sv)", "CollectMode", "s", "inactive-or-failed") < 0 ||
        sd_bus_message_append(m, "(sv)", "PIDs", "au", 1, (uint32_t)getpid()) < 0 ||
        sd_bus_message_close_container(m) < 0 || sd_bus_message_append(m, "a(sa(sv))", 0) < 0) {
        snprintf(why, sizeof(why), "cannot build the StartTransientUnit call");
        goto out;
    }
    if (sd_bus_call(bus, m, 0, &e, &reply) < 0) {
        snprintf(why, sizeof(why), "StartTransientUnit %s: %s", name,
                 e.message ? e.message : "no reply");
        goto out;
    }
    /* The reply comes when the job is queued; the move follows at once.
     * Wait (10 s: slow machines, emulated CPUs) until the kernel shows it. */
    for (int i = 0; i < 1000; i++) {
        size_t n, k = strlen(unit_cg);
        if (skd__cgroup_self(NULL, now, sizeof(now)) == 0 && (n = strlen(now)) >= k &&
            strcmp(now + n - k, unit_cg) == 0) {
            rc = 0;
            goto out;
        }
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
    snprintf(why, sizeof(why), "systemd started %s but did not move us into it", name);
out:
    if (rc)
        rc = skd_err_set(err, SKD_ESANDBOX,
                         "cgroups: not delegated (%s), and systemd gave no delegated scope (%s); "
                         "fix: %s",
                         reason, why, FIX);
    sd_bus_message_unref(reply);
    sd_bus_message_unref(m);
    sd_bus_error_free(&e);
    sd_bus_flush_close_unref(bus);
    return rc;
}

const char *skd__cgroup_delegate_fix(void)
{
    return FIX;
}
