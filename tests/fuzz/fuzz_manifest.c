/* libFuzzer driver for the command-skill manifest checker
 * (src/skills/manifest.c). The input is parsed as JSON and checked: the
 * checker must survive any document, every refusal must carry a message
 * naming a manifest field, and an accepted manifest must also be accepted
 * by the registry (so nothing the checker lets through can fail later). */
#include "skilld/custom.h"
#include "skilld/json.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static json_t *noop(const skd_ctx *ctx, const json_t *input, void *udata)
{
    (void)ctx, (void)input, (void)udata;
    return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    skd_err e = {0};
    if (size > 300 * 1024)
        return 0;
    json_t *m = skd_json_parse((const char *)data, size, &e);
    if (!m)
        return 0;
    int rc = skd_manifest_check(m, NULL, &e);
    if (rc && strncmp(e.msg, "manifest", 8) != 0)
        abort();
    if (rc == 0) {
        skd_skill_def d;
        skd_registry *reg = skd_registry_new();
        if (skd__command_skill_def(m, NULL, NULL, &d, &e))
            abort();
        d.handler = noop;
        if (skd_registry_add(reg, &d, 0, &e) != 0)
            abort();
        skd_registry_free(reg);
    }
    json_decref(m);
    return 0;
}
