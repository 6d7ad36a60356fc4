/*
 * The list of built-in skills. Each built-in lives in its own file with its
 * schema, limits and result shape, and exposes one skd__builtin_<name>_def()
 * that fills a skd_skill_def; this file only registers them in order.
 */
#include "builtins/builtins.h"

int skd__builtins_register(skd_registry *reg, skd_err *err)
{
    static void (*const defs[])(skd_skill_def *) = {
        SKD__BUILTIN_LIST NULL,
    };
    for (size_t i = 0; defs[i]; i++) {
        skd_skill_def d = {0};
        defs[i](&d);
        int rc = skd_registry_add(reg, &d, 0, err);
        json_decref(d.input_schema);
        json_decref(d.output_schema);
        if (rc)
            return rc;
    }
    return 0;
}
