/*
 * Where a test build of skilld plugs in what only tests get: the
 * debug_sleep skill (SKILLD_TEST_SKILLS) and the MCP conformance suite's
 * fixture tools and resources (SKILLD_MCP_TEST_FIXTURES). Their code is in
 * tests/fixtures/, linked into the unit tests and into build/skilld-test,
 * never into build/skilld or libskilld; it installs its hooks when the
 * program starts. Without them the functions below serve nothing, and a
 * server asked for test mode refuses to start.
 */
#ifndef SKILLD_SERVER_TEST_HOOKS_H
#define SKILLD_SERVER_TEST_HOOKS_H

#include "skilld/skilld.h"

struct sockaddr;
struct skd_mcp_session;
struct skd_mcp_io;

typedef struct skd__test_hooks {
    int (*skills_register)(skd_engine *e, const struct sockaddr *listen, skd_err *err);
    json_t *(*fixture_tools)(skd_engine *e);
    json_t *(*fixture_call)(struct skd_mcp_session *s, const json_t *id, const json_t *params,
                            struct skd_mcp_io *io);
    json_t *(*resources_list)(skd_engine *e);
    json_t *(*resource_templates)(skd_engine *e);
    json_t *(*resource_read)(skd_engine *e, const char *uri);
} skd__test_hooks;

/* Install h (static storage, borrowed for the life of the process); called
 * once by the test fixtures before main. */
void skd__test_hooks_install(const skd__test_hooks *h);

/* Register debug_sleep into e's registry when SKILLD_TEST_SKILLS is on;
 * 0 otherwise. Registering twice is fine. Test mode is for tests only: it
 * is refused (SKD_ECONFIG) by a binary without the test fixtures, and for
 * a server listening on listen (NULL: stdio, always local) unless that is
 * a loopback address. */
int skd__test_skills_register(skd_engine *e, const struct sockaddr *listen, skd_err *err);

/* The conformance suite's fixture tools (test_simple_text, ...), served
 * over MCP in test mode only. skd__test_fixture_tools: their Tool objects
 * (new reference; empty when test mode is off). skd__test_fixture_call:
 * the reply to tools/call for a fixture name, or NULL when name is none. */
json_t *skd__test_fixture_tools(skd_engine *e);
json_t *skd__test_fixture_call(struct skd_mcp_session *s, const json_t *id, const json_t *params,
                               struct skd_mcp_io *io);

/* The conformance suite's fixture resources in test mode (empty arrays
 * otherwise). New references. */
json_t *skd__test_resources_list(skd_engine *e);
json_t *skd__test_resource_templates(skd_engine *e);
/* The ReadResourceResult for a fixture URI, or NULL (not test mode, or not
 * a fixture). New reference. */
json_t *skd__test_resource_read(skd_engine *e, const char *uri);

#endif
