/*
 * The route table: every HTTP endpoint of skilld in one place. Rows are
 * matched in order; a path that matches with another method gets 405 with
 * an Allow header. Scopes: skills:read to look, skills:execute to run
 * (checked again by the engine), skills:admin for keys; a key's secrets
 * are read with skills:read and set with skills:execute. Flags: handlers run
 * on a worker unless SKD_ROUTE_INLINE (they must then never block) or
 * SKD_ROUTE_QUICK and the call is a quick one (http.h); refusals
 * made before a SKD_ROUTE_JSONRPC handler are JSON-RPC errors.
 */
#include "server/custom_http.h"
#include "server/http.h"

#define R SKD_SCOPE_READ
#define X SKD_SCOPE_EXECUTE
#define A SKD_SCOPE_ADMIN
#define X SKD_SCOPE_EXECUTE

const skd_route skd__routes[] = {
    {"GET", "/healthz", 0, 0, skd__rest_healthz, SKD_ROUTE_INLINE},
    /* the operator console (console.c): its files, and its session */
    {"GET", "/ui", 0, 0, skd__ui_index, SKD_ROUTE_INLINE},
    {"POST", "/ui/session", 0, 0, skd__ui_signin, 0},
    {"GET", "/ui/session", 1, A, skd__ui_whoami, 0},
    {"DELETE", "/ui/session", 1, A, skd__ui_signout, 0},
    {"GET", "/ui/{}", 0, 0, skd__ui_file, SKD_ROUTE_INLINE},
    {"GET", "/metrics", 1, R, skd__rest_metrics, 0},
    {"POST", "/mcp", 1, 0, skd__mcp_http_post, SKD_ROUTE_JSONRPC},
    {"GET", "/mcp", 1, 0, skd__mcp_http_get, SKD_ROUTE_JSONRPC},
    {"DELETE", "/mcp", 1, 0, skd__mcp_http_delete, SKD_ROUTE_JSONRPC},
    {"GET", "/v1/skills", 1, R, skd__rest_skills, 0},
    {"GET", "/v1/skills/{}", 1, R, skd__rest_skill, 0},
    {"POST", "/v1/execute", 1, 0, skd__rest_execute, SKD_ROUTE_QUICK},
    {"GET", "/v1/executions", 1, R, skd__rest_executions, 0},
    {"GET", "/v1/executions/{}", 1, R, skd__rest_execution, 0},
    {"GET", "/v1/runs", 1, R, skd__rest_runs, 0},
    {"GET", "/v1/usage", 1, R, skd__rest_usage, 0},
    {"DELETE", "/v1/runs/{}", 1, 0, skd__rest_run_cancel, 0},
    /* a call another replica forwarded (replica_http.c): the replicas' secret */
    {"POST", "/v1/replica/call", 0, 0, skd__replica_call, 0},
    /* live sandboxes (rest_sandboxes.c): skills:execute, checked by the engine */
    {"POST", "/v1/sandboxes", 1, X, skd__rest_sandbox_create, 0},
    {"GET", "/v1/sandboxes", 1, X, skd__rest_sandbox_list, 0},
    {"GET", "/v1/sandboxes/{}", 1, X, skd__rest_sandbox_get, 0},
    {"DELETE", "/v1/sandboxes/{}", 1, X, skd__rest_sandbox_delete, 0},
    {"POST", "/v1/sandboxes/{}/exec", 1, X, skd__rest_sandbox_exec, 0},
    {"GET", "/v1/sandboxes/{}/processes", 1, X, skd__rest_sandbox_processes, 0},
    {"GET", "/v1/sandboxes/{}/processes/{}/output", 1, X, skd__rest_sandbox_process_output, 0},
    {"DELETE", "/v1/sandboxes/{}/processes/{}", 1, X, skd__rest_sandbox_process_kill, 0},
    /* pause, resume, fork (rest_sandboxes.c) */
    {"POST", "/v1/sandboxes/{}/pause", 1, X, skd__rest_sandbox_pause, 0},
    {"POST", "/v1/sandboxes/{}/resume", 1, X, skd__rest_sandbox_resume, 0},
    {"POST", "/v1/sandboxes/{}/fork", 1, X, skd__rest_sandbox_fork, 0},
    {"GET", "/v1/keys", 1, A, skd__rest_keys_list, 0},
    {"POST", "/v1/keys", 1, A, skd__rest_keys_create, 0},
    {"DELETE", "/v1/keys/{}", 1, A, skd__rest_keys_revoke, 0},
    /* secrets of the calling key (secrets_rest.c); ?key= with skills:admin */
    {"GET", "/v1/secrets", 1, R, skd__rest_secret_list, 0},
    {"POST", "/v1/secrets", 1, X, skd__rest_secret_set, 0},
    {"DELETE", "/v1/secrets/{}", 1, X, skd__rest_secret_delete, 0},
    /* custom skills and A2A (custom_rest.c, a2a_http.c); scopes checked by src/skills/custom.c */
    {"POST", "/v1/skills", 1, 0, skd__rest_skill_register, 0},
    {"DELETE", "/v1/skills/{}", 1, 0, skd__rest_skill_delete, 0},
    {"PATCH", "/v1/skills/{}", 1, 0, skd__rest_skill_patch, 0},
    /* OAuth protected-resource metadata (RFC 9728; auth.c) */
    {"GET", "/.well-known/oauth-protected-resource", 0, 0, skd__auth_resource_metadata,
     SKD_ROUTE_INLINE},
    {"GET", "/.well-known/oauth-protected-resource/mcp", 0, 0, skd__auth_resource_metadata,
     SKD_ROUTE_INLINE},
    {"GET", "/.well-known/agent-card.json", 0, 0, skd__a2a_http_card, 0},
    {"GET", "/.well-known/agent.json", 0, 0, skd__a2a_http_card_legacy, 0},
    {"POST", "/a2a", 1, 0, skd__a2a_http_post, SKD_ROUTE_JSONRPC},
    {NULL, NULL, 0, 0, NULL, 0},
};
