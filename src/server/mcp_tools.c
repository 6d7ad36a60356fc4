/*
 * The MCP tool catalogue and tools/call (see mcp_int.h).
 *
 * Tools: three generic ones (skills_list, skills_execute, skills_executions)
 * and, when SKILLD_MCP_EXPOSE_SKILLS is on, every enabled skill the caller
 * can see as a tool named after it, with the skill's input schema. A skill
 * whose name clashes with a generic tool is reachable only through
 * skills_execute. Every call goes through skd_engine_execute with the
 * session's key id and scopes: the tool layer never decides who may do what.
 *
 * Results: a successful skill result is returned as structuredContent and
 * as its JSON text; a failed one is isError with "code: message" text.
 * Unknown tools and malformed params are JSON-RPC errors (-32602); invalid
 * arguments are tool errors, so the model sees them and can correct itself.
 */
#include "server/mcp_int.h"

#include "server/test_hooks.h"
#include "skilld/buf.h"
#include "skilld/store.h"
#include "skilld/tenancy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const generic[] = {"skills_list", "skills_execute", "skills_executions"};

static int is_generic(const char *name)
{
    for (size_t i = 0; i < sizeof(generic) / sizeof(generic[0]); i++)
        if (strcmp(name, generic[i]) == 0)
            return 1;
    return 0;
}

/* The output schema every skill result satisfies. New reference. */
static json_t *result_schema(void)
{
    return json_pack("{s:s, s:{s:{s:s}}, s:[s]}", "type", "object", "properties", "success", "type",
                     "boolean", "required", "success");
}

static json_t *generic_input_schema(const char *name)
{
    if (strcmp(name, "skills_execute") == 0)
        return json_pack("{s:s, s:{s:{s:s, s:s}, s:{s:s, s:s}, s:{s:s, s:s}}, s:[s], s:b}", "type",
                         "object", "properties", "skill", "type", "string", "description",
                         "skill name, or name@x.y.z", "input", "type", "object", "description",
                         "the skill's input object", "version", "type", "string", "description",
                         "version x.y.z (default: newest)", "required", "skill",
                         "additionalProperties", 0);
    if (strcmp(name, "skills_executions") == 0)
        return json_pack("{s:s, s:{s:{s:s, s:i, s:i}}, s:b}", "type", "object", "properties",
                         "limit", "type", "integer", "minimum", 1, "maximum", 500,
                         "additionalProperties", 0);
    return json_pack("{s:s, s:{}, s:b}", "type", "object", "properties", "additionalProperties", 0);
}

static const char *generic_description(const char *name)
{
    if (strcmp(name, "skills_list") == 0)
        return "List the skills this API key can run, with their input schemas.";
    if (strcmp(name, "skills_execute") == 0)
        return "Run any skill by name: {skill, input, version?}. Returns the skill's result "
               "object.";
    return "List this API key's recent skill executions (newest first).";
}

static json_t *generic_tool(const skd_mcp_session *s, const char *name)
{
    json_t *t = json_pack("{s:s, s:s, s:o}", "name", name, "description", generic_description(name),
                          "inputSchema", generic_input_schema(name));
    if (t && skd__mcp_has_structured(s)) {
        json_object_set_new(t, "outputSchema", result_schema());
        json_object_set_new(
            t, "annotations",
            json_pack("{s:b}", "readOnlyHint", strcmp(name, "skills_execute") != 0));
    }
    return t;
}

static json_t *skill_tool(const skd_mcp_session *s, const skd_skill *sk)
{
    char title[160];
    snprintf(title, sizeof(title), "%s %s", skd_skill_name(sk), skd_skill_version(sk));
    json_t *t =
        json_pack("{s:s, s:s, s:s, s:O}", "name", skd_skill_name(sk), "title", title, "description",
                  skd_skill_description(sk), "inputSchema", skd_skill_input_schema(sk));
    if (t && skd__mcp_has_structured(s)) {
        json_t *out = skd_skill_output_schema(sk);
        json_object_set_new(t, "outputSchema", out ? json_incref(out) : result_schema());
    }
    return t;
}

/* Every tool the session sees, in a stable order. New reference. */
static json_t *all_tools(skd_mcp_session *s)
{
    json_t *tools = json_array();
    for (size_t i = 0; tools && i < sizeof(generic) / sizeof(generic[0]); i++)
        json_array_append_new(tools, generic_tool(s, generic[i]));
    json_t *fixtures = skd__test_fixture_tools(s->m->e); /* empty unless test mode */
    json_array_extend(tools, fixtures);
    json_decref(fixtures);
    if (!tools || !s->m->expose_skills)
        return tools;
    size_t n = 0;
    skd_actor who = {.key_id = s->key_id, .scopes = s->scopes};
    skd_skill **list = skd_engine_visible_skills(s->m->e, &who, &n);
    for (size_t i = 0; i < n; i++)
        if (!is_generic(skd_skill_name(list[i])))
            json_array_append_new(tools, skill_tool(s, list[i]));
    skd_skill_list_free(list, n);
    return tools;
}

json_t *skd__mcp_tools_list(skd_mcp_session *s, const json_t *id, const json_t *params)
{
    int64_t off = 0;
    const json_t *cursor = json_object_get(params, "cursor");
    if (cursor && !json_is_null(cursor) &&
        (!json_is_string(cursor) ||
         skd_parse_i64(json_string_value(cursor), 0, 1000000, &off) != 0))
        return skd__rpc_error(id, SKD_RPC_INVALID_PARAMS, "invalid cursor");
    json_t *tools = all_tools(s);
    if (!tools)
        return skd__rpc_error(id, SKD_RPC_INTERNAL_ERROR, "out of memory");
    size_t total = json_array_size(tools);
    if ((size_t)off > total) {
        json_decref(tools);
        return skd__rpc_error(id, SKD_RPC_INVALID_PARAMS, "invalid cursor");
    }
    size_t end = (size_t)off + s->m->page_size;
    json_t *page = json_array();
    for (size_t i = (size_t)off; page && i < total && i < end; i++)
        json_array_append(page, json_array_get(tools, i));
    json_decref(tools);
    json_t *r = json_pack("{s:o}", "tools", page);
    if (r && end < total) {
        char next[32];
        snprintf(next, sizeof(next), "%zu", end);
        json_object_set_new(r, "nextCursor", json_string(next));
    }
    return skd__rpc_result(id, r);
}

/* ---- tools/call ------------------------------------------------------ */

/* The CallToolResult for a skill result (borrowed). New reference. */
static json_t *tool_result(const skd_mcp_session *s, const json_t *result)
{
    if (skd_result_success(result)) {
        char *text = json_dumps(result, JSON_COMPACT);
        json_t *r = json_pack("{s:[{s:s, s:s}], s:b}", "content", "type", "text", "text",
                              text ? text : "{}", "isError", 0);
        free(text);
        if (r && skd__mcp_has_structured(s))
            json_object_set(r, "structuredContent", (json_t *)result);
        return r;
    }
    /* A failure: "code: message" for the model; a command that ran and
     * failed also shows its exit code and output, which say why. */
    const json_t *e = json_object_get(result, "error");
    const json_t *code = json_object_get(result, "exitCode");
    skd_buf text;
    skd_buf_init(&text, 1u << 20);
    if (e || !code)
        skd_buf_printf(&text, "%s: %s", skd_json_str(e, "code", "internal_error"),
                       skd_json_str(e, "message", "the skill failed"));
    else
        skd_buf_printf(&text, "command_failed: exit code %lld\nstdout: %s\nstderr: %s",
                       (long long)json_integer_value(code), skd_json_str(result, "stdout", ""),
                       skd_json_str(result, "stderr", ""));
    json_t *r = json_pack("{s:[{s:s, s:s%}], s:b}", "content", "type", "text", "text",
                          text.data ? text.data : "", text.len, "isError", 1);
    skd_buf_free(&text);
    return r;
}

static json_t *run_skill(skd_mcp_session *s, struct mcp_call *c, const char *skill,
                         const char *version, const json_t *input)
{
    skd_call call = {
        .key_id = s->key_id,
        .scopes = s->scopes,
        .skill = skill,
        .version = version,
        .input = input,
        .cancel = c->cancel,
        .progress = skd__mcp_progress_cb,
        .progress_arg = c,
        .output = c->progress_token ? skd__mcp_output_cb : NULL,
        .output_arg = c,
    };
    int64_t t0 = skd_mono_ms();
    skd__mcp_log(s, c->io, MCP_LOG_DEBUG, "running %s", skill);
    json_t *result = skd_engine_execute(s->m->e, &call, NULL);
    int ok = skd_result_success(result);
    int64_t ms = skd_mono_ms() - t0;
    if (ok)
        skd__mcp_log(s, c->io, MCP_LOG_INFO, "%s succeeded in %lld ms", skill, (long long)ms);
    else
        skd__mcp_log(s, c->io, MCP_LOG_WARNING, "%s failed in %lld ms: %s", skill, (long long)ms,
                     skd_result_code(result) ? skd_result_code(result) : "?");
    return result;
}

static json_t *list_result(skd_mcp_session *s)
{
    skd_err err = {0};
    skd_actor who = {.key_id = s->key_id, .scopes = s->scopes};
    json_t *arr = skd_engine_list_skills(s->m->e, &who, &err);
    if (!arr)
        return skd_result_from_err(&err);
    json_t *r = skd_result_ok();
    if (r)
        json_object_set_new(r, "skills", arr);
    else
        json_decref(arr);
    return r;
}

static json_t *executions_result(skd_mcp_session *s, const json_t *args)
{
    skd_err err = {0};
    skd_actor who = {.key_id = s->key_id, .scopes = s->scopes};
    json_t *rows =
        skd_engine_list_executions(s->m->e, &who, NULL, (int)skd_json_int(args, "limit", 50), &err);
    if (!rows)
        return skd_result_from_err(&err);
    json_t *r = skd_result_ok();
    if (r)
        json_object_set_new(r, "executions", rows);
    else
        json_decref(rows);
    return r;
}

/* Run a generic tool after validating its arguments. New reference. */
static json_t *run_generic(skd_mcp_session *s, struct mcp_call *c, const char *name,
                           const json_t *args)
{
    skd_err err = {0};
    json_t *schema = generic_input_schema(name);
    int bad = skd_schema_validate(schema, args, &err);
    json_decref(schema);
    if (bad)
        return skd_result_from_err(&err);
    if (strcmp(name, "skills_list") == 0)
        return list_result(s);
    if (strcmp(name, "skills_executions") == 0)
        return executions_result(s, args);
    return run_skill(s, c, skd_json_str(args, "skill", ""), skd_json_str(args, "version", NULL),
                     json_object_get(args, "input"));
}

/* Is name a per-skill tool the session can see? */
static int skill_tool_exists(skd_mcp_session *s, const char *name)
{
    if (!s->m->expose_skills || is_generic(name) || !skd_skill_name_valid(name))
        return 0;
    skd_actor who = {.key_id = s->key_id, .scopes = s->scopes};
    skd_skill *sk = skd_engine_find_skill(s->m->e, &who, name, NULL);
    int ok = sk && skd_skill_enabled(sk);
    skd_skill_unref(sk);
    return ok;
}

json_t *skd__mcp_tool_schema(skd_mcp *m, const char *key_id, const char *name)
{
    if (!name)
        return NULL;
    json_t *fixtures = skd__test_fixture_tools(m->e), *found = NULL;
    size_t i;
    json_t *t;
    json_array_foreach (fixtures, i, t)
        if (strcmp(skd_json_str(t, "name", ""), name) == 0)
            found = json_incref(json_object_get(t, "inputSchema"));
    json_decref(fixtures);
    if (found || is_generic(name) || !m->expose_skills || !skd_skill_name_valid(name))
        return found;
    skd_skill *sk = skd_registry_lookup(skd_engine_registry(m->e), name, key_id, NULL);
    if (sk && skd_skill_enabled(sk))
        found = json_incref(skd_skill_input_schema(sk));
    skd_skill_unref(sk);
    return found;
}

json_t *skd__mcp_tools_call(skd_mcp_session *s, const json_t *id, const json_t *params,
                            skd_mcp_io *io)
{
    const char *name = skd_json_str(params, "name", NULL);
    const json_t *args = json_object_get(params, "arguments");
    if (!name)
        return skd__rpc_error(id, SKD_RPC_INVALID_PARAMS, "tools/call needs a tool name");
    if (args && !json_is_null(args) && !json_is_object(args))
        return skd__rpc_error(id, SKD_RPC_INVALID_PARAMS, "arguments must be an object");
    json_t *fixture = skd__test_fixture_call(s, id, params, io);
    if (fixture)
        return fixture;
    if (!is_generic(name) && !skill_tool_exists(s, name))
        return skd__rpc_error(id, SKD_RPC_INVALID_PARAMS, "unknown tool: %s", name);
    json_t *empty = NULL;
    if (!json_is_object(args))
        args = empty = json_object();
    struct mcp_call c = {
        .s = s,
        .id = id,
        .progress_token = json_object_get(json_object_get(params, "_meta"), "progressToken"),
        .cancel = skd_cancel_new(),
        .io = io,
    };
    json_t *reply = NULL;
    if (!c.cancel || !args) {
        reply = skd__rpc_error(id, SKD_RPC_INTERNAL_ERROR, "out of memory");
        goto out;
    }
    if (c.progress_token && !json_is_string(c.progress_token) && !json_is_integer(c.progress_token))
        c.progress_token = NULL;
    if (skd__mcp_call_begin(s->m, &c) != 0) {
        reply = skd__rpc_error(id, SKD_RPC_INTERNAL_ERROR, "the server is shutting down");
        goto out;
    }
    json_t *result =
        is_generic(name) ? run_generic(s, &c, name, args) : run_skill(s, &c, name, NULL, args);
    skd__mcp_call_end(s->m, &c);
    if (c.cancelled) {
        if (io)
            io->cancelled = 1;
        reply = skd__rpc_error(id, SKD_RPC_REQUEST_CANCELLED, "the request was cancelled");
    } else if (!result) {
        reply = skd__rpc_error(id, SKD_RPC_INTERNAL_ERROR, "out of memory");
    } else {
        reply = skd__rpc_result(id, tool_result(s, result));
    }
    json_decref(result);
out:
    skd_cancel_free(c.cancel);
    json_decref(empty);
    return reply;
}
