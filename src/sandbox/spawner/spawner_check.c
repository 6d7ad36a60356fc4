/*
 * Checks the spawner makes of what the server sends it (spawner.c): the
 * shape of an id, a directory descriptor and a CA certificate. Nothing here
 * trusts the server: every byte is checked as if a sandbox had written it.
 */
#include "sandbox/spawner/spawner.h"
#include "skilld/util.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int skd__spawner_valid_uuid(const char *s)
{
    if (strlen(s) != SKD_UUID_LEN)
        return 0;
    for (size_t i = 0; i < SKD_UUID_LEN; i++) {
        char c = s[i];
        int dash = i == 8 || i == 13 || i == 18 || i == 23;
        if (dash ? c != '-' : !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
            return 0;
    }
    return 1;
}

/* A directory descriptor from the server: check it is one, and give the
 * provider a path that names exactly it. Native uses the descriptor itself
 * (req.workspace_fd); the container CLIs need a path, which is the
 * descriptor's own (/proc/self/fd/N resolved) and checked to still name the
 * same directory. */
int skd__spawner_fd_dir_path(int fd, char **path, skd_err *err)
{
    struct stat a, b;
    char link[64], real[PATH_MAX];
    if (fstat(fd, &a) != 0 || !S_ISDIR(a.st_mode))
        return skd_err_set(err, SKD_EINVAL, "sandbox spawner: the workspace is not a directory");
    snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, real, sizeof(real) - 1);
    if (n <= 0 || real[0] != '/')
        return skd_err_set(err, SKD_EINVAL, "sandbox spawner: cannot name the directory");
    real[n] = '\0';
    if (lstat(real, &b) != 0 || !S_ISDIR(b.st_mode) || a.st_dev != b.st_dev || a.st_ino != b.st_ino)
        return skd_err_set(err, SKD_EINVAL, "sandbox spawner: the directory moved");
    if (!(*path = strdup(real)))
        return skd_err_set(err, SKD_ENOMEM, "out of memory");
    return 0;
}

/* One PEM certificate and nothing else (it is written into the sandbox's
 * trust bundle): the armour lines around base64 text, at most 8 KiB. */
int skd__spawner_valid_pem(const char *s)
{
    static const char begin[] = "-----BEGIN CERTIFICATE-----\n";
    static const char end[] = "-----END CERTIFICATE-----\n";
    size_t n = strlen(s), bl = sizeof(begin) - 1, el = sizeof(end) - 1;
    if (n > 8192 || n < bl + el || strncmp(s, begin, bl) != 0 || strcmp(s + n - el, end) != 0)
        return 0;
    for (size_t i = bl; i < n - el; i++) {
        char c = s[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '+' || c == '/' || c == '=' || c == '\n'))
            return 0;
    }
    return 1;
}
