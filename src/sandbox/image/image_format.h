/*
 * Library-internal: the image archive formats (see image_format.c).
 */
#ifndef SKILLD_SANDBOX_IMAGE_FORMAT_H
#define SKILLD_SANDBOX_IMAGE_FORMAT_H

#include <jansson.h>

#include "sandbox/image/image_internal.h"

#define SKD__IMG_MAX_LAYERS 256

typedef enum { SKD__IMG_EXPORT, SKD__IMG_DOCKER_SAVE, SKD__IMG_OCI } skd__image_format;

typedef struct skd__image_layer {
    char member[PATH_MAX]; /* normalised name of the layer tar in the archive */
    char hex[65];          /* expected SHA-256 of the member, "" when unknown */
} skd__image_layer;

typedef struct skd__image_plan {
    skd__image_format format;
    int nlayers;
    skd__image_layer layers[SKD__IMG_MAX_LAYERS];
    json_t *config; /* owned: runtime part of the image config, or NULL */
} skd__image_plan;

/* Detect the format of the archive at tar_path (one pass over its headers,
 * at most max_entries). Sets plan->format. Returns 0 or SKD_E*. */
int skd__image_scan(const char *tar_path, int64_t max_entries, skd__image_plan *plan, skd_err *err);

/* Fill plan->layers (in application order) and plan->config from the
 * archive's manifests. Nothing to do for an export tarball. */
int skd__image_plan_layers(const char *tar_path, skd__image_plan *plan, skd_err *err);
void skd__image_plan_free(skd__image_plan *plan); /* NULL ok; frees config only */

/* Apply one layer member of the archive to c, checking its digest. */
int skd__image_apply_layer(skd__layer_ctx *c, const char *tar_path, const skd__image_layer *l,
                           skd_err *err);

/* Apply the whole archive as one root filesystem (docker export). */
int skd__image_apply_export(skd__layer_ctx *c, const char *tar_path, skd_err *err);

#endif
