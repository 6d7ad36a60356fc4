/*
 * The workspace quota's leftovers and its probe (see ws_quota.h): the run
 * directories under SKD__WSQ_DIR of servers that are gone (a kill -9 left
 * their tmpfs and overlay mounted), unmounted and removed; and whether
 * this process can mount the tmpfs at all (root).
 */
#include "sandbox/ws_quota.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandbox/container/container.h"
#include "skilld/image.h"

static void sweep_owner(int base, const char *owner)
{
    int fd = openat(base, owner, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    char path[PATH_MAX];
    if (!d) {
        if (fd >= 0)
            close(fd);
        return;
    }
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        snprintf(path, sizeof(path), "%s/%s/%s/merged", SKD__WSQ_DIR, owner, de->d_name);
        (void)umount2(path, MNT_DETACH);
        snprintf(path, sizeof(path), "%s/%s/%s", SKD__WSQ_DIR, owner, de->d_name);
        (void)umount2(path, MNT_DETACH);
        (void)skd_image_rm_tree_at(dirfd(d), de->d_name);
    }
    closedir(d);
    (void)unlinkat(base, owner, AT_REMOVEDIR);
}

void skd__wsq_sweep(void)
{
    int base = open(SKD__WSQ_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    DIR *d = base >= 0 ? fdopendir(dup(base)) : NULL;
    if (d) {
        struct dirent *de;
        while ((de = readdir(d)) != NULL)
            if (de->d_name[0] != '.' && !skd__ctr_owner_alive(de->d_name))
                sweep_owner(base, de->d_name);
        closedir(d);
    }
    if (base >= 0)
        close(base);
}

int skd__wsq_probe(skd_err *err)
{
    char dir[PATH_MAX];
    int rc = 0;
    if (mkdir(SKD__WSQ_DIR, 0700) != 0 && errno != EEXIST)
        return skd_err_set(err, SKD_ESANDBOX, "cannot create %s: %s", SKD__WSQ_DIR,
                           strerror(errno));
    snprintf(dir, sizeof(dir), "%s/.probe-%ld", SKD__WSQ_DIR, (long)getpid());
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        return skd_err_set(err, SKD_ESANDBOX, "cannot create %s: %s", dir, strerror(errno));
    if (mount("skilld-wsq", dir, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m") != 0)
        rc = skd_err_set(err, SKD_ESANDBOX, "cannot mount a tmpfs (needs root): %s",
                         strerror(errno));
    else
        (void)umount2(dir, MNT_DETACH);
    (void)rmdir(dir);
    return rc;
}
