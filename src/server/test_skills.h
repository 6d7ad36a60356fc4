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

#endif
