/*
 * libFuzzer driver for image import: the input is the archive file (export
 * tarball, docker-save or OCI layout, possibly compressed). Each input is
 * imported into a scratch DATA_DIR with small caps and removed again; the
 * driver checks that nothing but the images directory was written beside
 * it (no entry escaped) and that no temporary directory was left behind.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "skilld/image.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[64], data_dir[96], tar[96];

/* Number of entries in path other than . and .. (-1 when unreadable). */
static int count_entries(const char *path)
{
    DIR *d = opendir(path);
    if (!d)
        return -1;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)))
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
            n++;
    closedir(d);
    return n;
}

/* The scratch tree is empty between inputs: remove it at exit. */
static void cleanup(void)
{
    char images[128];
    snprintf(images, sizeof(images), "%s/images", data_dir);
    unlink(tar);
    rmdir(images);
    rmdir(data_dir);
    rmdir(dir);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!dir[0]) {
        snprintf(dir, sizeof(dir), "/tmp/skilld-fuzz-image.XXXXXX");
        if (!mkdtemp(dir))
            abort();
        snprintf(data_dir, sizeof(data_dir), "%s/var", dir);
        snprintf(tar, sizeof(tar), "%s/in.tar", dir);
        atexit(cleanup);
    }
    FILE *f = fopen(tar, "wb");
    if (!f || fwrite(data, 1, size, f) != size)
        abort();
    fclose(f);
    skd_image_limits lim = {1 << 20, 4096};
    skd_err err = {0};
    if (skd_image_import(data_dir, "fuzz:1", tar, &lim, NULL, &err) == 0)
        skd_image_remove(data_dir, "fuzz:1", &err);
    /* dir holds in.tar and var/ only; var holds images/ only; images holds
     * nothing (or an empty fuzz/ that rm removed). */
    char images[128];
    snprintf(images, sizeof(images), "%s/images", data_dir);
    if (count_entries(dir) > 2 || count_entries(data_dir) > 1 || count_entries(images) > 0)
        abort();
    unlink(tar);
    return 0;
}
