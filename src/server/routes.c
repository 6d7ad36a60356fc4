/*
 * The route table: every HTTP endpoint of skilld in one place. Rows are
 * matched in order; a path that matches with another method gets 405 with
 * an Allow header. Scopes: skills:read to look, skills:execute to run
 * (checked again by the engine), skills:admin for keys.
 */
#include "server/custom_http.h"
#include "server/http.h"

#define R SKD_SCOPE_READ
#define A SKD_SCOPE_ADMIN

const skd_route skd__routes[] = {
    {"GET", "/healthz", 0, 0, skd__rest_healthz},
    {"GET", "/metrics", 1, R, skd__rest_metrics},
    {"POST", "/mcp", 1, 0, skd__mcp_http_post},
    {"GET", "/mcp", 1, 0, skd__mcp_http_get},
    {"DELETE", "/mcp", 1, 0, skd__mcp_http_delete},
    {"GET", "/v1/skills", 1, R, skd__rest_skills},
    {"GET", "/v1/skills/{}", 1, R, skd__rest_skill},
    {"POST", "/v1/execute", 1, 0, skd__rest_execute},
    {"GET", "/v1/executions", 1, R, skd__rest_executions},
    {"GET", "/v1/executions/{}", 1, R, skd__rest_execution},
    {"GET", "/v1/runs", 1, R, skd__rest_runs},
    {"DELETE", "/v1/runs/{}", 1, 0, skd__rest_run_cancel},
    {"GET", "/v1/keys", 1, A, skd__rest_keys_list},
    {"POST", "/v1/keys", 1, A, skd__rest_keys_create},
    {"DELETE", "/v1/keys/{}", 1, A, skd__rest_keys_revoke},
    /* custom skills and A2A (custom_rest.c, a2a_http.c); scopes checked by src/lib/custom.c */
    {"POST", "/v1/skills", 1, 0, skd__rest_skill_register},
    {"DELETE", "/v1/skills/{}", 1, 0, skd__rest_skill_delete},
    {"PATCH", "/v1/skills/{}", 1, 0, skd__rest_skill_patch},
    {"GET", "/.well-known/agent-card.json", 0, 0, skd__a2a_http_card},
    {"GET", "/.well-known/agent.json", 0, 0, skd__a2a_http_card_legacy},
    {"POST", "/a2a", 1, 0, skd__a2a_http_post},
    {NULL, NULL, 0, 0, NULL},
};
