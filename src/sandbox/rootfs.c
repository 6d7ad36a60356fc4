/*
 * Image names to root filesystems for the runner. "host" is the host image
 * (built by the native provider from the host's /usr and a minimal /etc);
 * any other image is "name[:tag]" imported by `skilld image import` into
 * $DATA_DIR/images/<name>/<tag>/rootfs and may run only when listed in
 * SKILLS_ALLOWED_SANDBOX_IMAGES. The naming rules and the allow-list live in
 * one place, src/sandbox/image/image.c (skd_image_rootfs); this is the runner's
 * entry point to them.
 */
#include "skilld/image.h"
#include "skilld/sandbox.h"

int skd_sandbox_image_rootfs(const char *data_dir, const char *allowed, const char *image,
                             char **rootfs, skd_err *err)
{
    return skd_image_rootfs(data_dir, allowed, image, rootfs, err);
}
