/* libFuzzer driver for the JSON-Schema subset (src/core/schema.c). The
 * input is a JSON document {"schema": ..., "instance": ...}; the schema is
 * checked with skd_schema_check and the instance validated against it
 * (also when the check failed: validation must survive any schema). A
 * verdict must come with a message, and validating twice must agree. */
#include "skilld/json.h"
#include "skilld/registry.h"

#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    skd_err e = {0};
    if (size > 64 * 1024)
        return 0;
    json_t *doc = skd_json_parse((const char *)data, size, &e);
    if (!doc)
        return 0;
    json_t *schema = json_object_get(doc, "schema");
    json_t *instance = json_object_get(doc, "instance");
    if (schema && instance) {
        skd_err e1 = {0}, e2 = {0};
        (void)skd_schema_check(schema, &e);
        int r1 = skd_schema_validate(schema, instance, &e1);
        int r2 = skd_schema_validate(schema, instance, &e2);
        if (r1 != r2 || (r1 && (r1 != SKD_EINVAL || !e1.msg[0])))
            abort();
    }
    json_decref(doc);
    return 0;
}
