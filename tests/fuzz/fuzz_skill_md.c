/* libFuzzer driver for the hand-written SKILL.md front-matter parser
 * (src/skills/skill_folder.c, skd__skill_md_parse). Any bytes: the parser
 * must never crash or read out of bounds; a refusal comes with a message;
 * an acceptance yields a valid skill name and a description, and parsing
 * again gives the same result. */
#include "skilld/custom.h"
#include "skilld/json.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    skd_err e = {0};
    json_t *a = NULL, *b = NULL;
    int rc = skd__skill_md_parse((const char *)data, size, &a, &e);
    if (rc && (!e.msg[0] || a))
        abort();
    if (rc == 0) {
        if (!skd_skill_name_valid(skd_json_str(a, "name", "")) ||
            !*skd_json_str(a, "description", ""))
            abort();
        if (skd__skill_md_parse((const char *)data, size, &b, NULL) != 0 || !json_equal(a, b))
            abort();
    }
    json_decref(a);
    json_decref(b);
    return 0;
}
