/*
 * Test-only skills (see test_skills.c), registered by the transports when
 * SKILLD_TEST_SKILLS is true.
 */
#ifndef SKILLD_SERVER_TEST_SKILLS_H
#define SKILLD_SERVER_TEST_SKILLS_H

#include "skilld/skilld.h"

/* Register debug_sleep into e's registry when SKILLD_TEST_SKILLS is on;
 * 0 otherwise. Registering twice is fine. */
int skd__test_skills_register(skd_engine *e, skd_err *err);

/* The conformance suite's fixture resources when SKILLD_TEST_SKILLS is on
 * (empty arrays otherwise). New references. */
json_t *skd__test_resources_list(skd_engine *e);
json_t *skd__test_resource_templates(skd_engine *e);
/* The ReadResourceResult for a fixture URI, or NULL (not test mode, or not
 * a fixture). New reference. */
json_t *skd__test_resource_read(skd_engine *e, const char *uri);

#endif
