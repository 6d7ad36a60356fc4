/*
 * The product's side of the test hooks (test_hooks.h): each call goes to
 * the fixtures of a test build, or serves nothing. One pointer read per
 * MCP listing or call; no fixture code is in the product.
 */
#include "server/test_hooks.h"

#include <stdatomic.h>

static _Atomic(const skd__test_hooks *) hooks;

void skd__test_hooks_install(const skd__test_hooks *h)
{
    atomic_store(&hooks, h);
}

int skd__test_skills_register(skd_engine *e, const struct sockaddr *listen, skd_err *err)
{
    const skd__test_hooks *h = atomic_load(&hooks);
    if (h)
        return h->skills_register(e, listen, err);
    const skd_config *cfg = skd_engine_config(e);
    if (skd_config_bool(cfg, "SKILLD_TEST_SKILLS") ||
        skd_config_bool(cfg, "SKILLD_MCP_TEST_FIXTURES"))
        return skd_err_set(err, SKD_ECONFIG,
                           "SKILLD_TEST_SKILLS and SKILLD_MCP_TEST_FIXTURES need the test build "
                           "of skilld (make builds it as build/skilld-test)");
    return 0;
}

json_t *skd__test_fixture_tools(skd_engine *e)
{
    const skd__test_hooks *h = atomic_load(&hooks);
    return h ? h->fixture_tools(e) : json_array();
}

json_t *skd__test_fixture_call(struct skd_mcp_session *s, const json_t *id, const json_t *params,
                               struct skd_mcp_io *io)
{
    const skd__test_hooks *h = atomic_load(&hooks);
    return h ? h->fixture_call(s, id, params, io) : NULL;
}

json_t *skd__test_resources_list(skd_engine *e)
{
    const skd__test_hooks *h = atomic_load(&hooks);
    return h ? h->resources_list(e) : json_array();
}

json_t *skd__test_resource_templates(skd_engine *e)
{
    const skd__test_hooks *h = atomic_load(&hooks);
    return h ? h->resource_templates(e) : json_array();
}

json_t *skd__test_resource_read(skd_engine *e, const char *uri)
{
    const skd__test_hooks *h = atomic_load(&hooks);
    return h ? h->resource_read(e, uri) : NULL;
}
