/*
 * The A2A agent card and the two wire dialects.
 *
 * The card lists one AgentSkill per enabled skill the caller may see
 * (global skills for an anonymous fetch), each with an example message
 * data part showing how to call it. /.well-known/agent-card.json gets the
 * 1.0 card (supportedInterfaces, proto-JSON security schemes);
 * /.well-known/agent.json the 0.3 card (url, protocolVersion,
 * preferredTransport, OpenAPI-style security schemes).
 *
 * Tasks are built in the 1.0 shape; skd__a2a_to_v03 rewrites one for a 0.3
 * client: "kind" discriminators, lower-case kebab states ("completed"),
 * roles "user"/"agent", parts {"kind":"text"|"data"|"file"}, and stream
 * events unwrapped with "final" on the last status update.
 */
#include "server/a2a_int.h"
#include "skilld/oauth.h"
#include "skilld/tenancy.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#define A2A_PROTOCOL_V1 "1.0"
#define A2A_PROTOCOL_V03 "0.3.0"

static json_t *agent_skill(const skd_skill *s)
{
    char example[256];
    snprintf(example, sizeof(example), "{\"skill\": \"%s\", \"input\": {}}", skd_skill_name(s));
    json_t *tags = json_deep_copy(skd_skill_tags(s));
    if (tags && json_array_size(tags) == 0)
        json_array_append_new(tags, json_string(skd_mode_name(skd_skill_mode(s))));
    return json_pack("{s:s, s:s, s:s, s:o, s:[s], s:[s], s:[s, s]}", "id", skd_skill_name(s),
                     "name", skd_skill_name(s), "description", skd_skill_description(s), "tags",
                     tags ? tags : json_array(), "examples", example, "inputModes",
                     "application/json", "outputModes", "application/json", "text/plain");
}

static json_t *skills_json(skd_a2a *a, const char *key_id)
{
    size_t n = 0;
    skd_actor who = {.key_id = key_id}; /* NULL: the public card, global skills only */
    skd_skill **list = skd_engine_visible_skills(a->e, &who, &n);
    json_t *arr = json_array();
    for (size_t i = 0; arr && i < n; i++)
        json_array_append_new(arr, agent_skill(list[i]));
    skd_skill_list_free(list, n);
    return arr;
}

/* What the bearer scheme takes: an API key, or with OAuth on an access
 * token too, whose metadata says where to get one. */
static void bearer_text(skd_a2a *a, char *buf, size_t cap)
{
    struct skd_oauth *o = skd_engine_oauth(a->e);
    if (o)
        snprintf(buf, cap, "a skilld API key, or an OAuth access token for %s (%s)",
                 skd_oauth_resource(o), skd_oauth_metadata_url(o));
    else
        snprintf(buf, cap, "a skilld API key");
}

json_t *skd__a2a_card(skd_a2a *a, const char *base_url, const char *key_id, int legacy)
{
    char url[512], bearer[1200];
    snprintf(url, sizeof(url), "%s/a2a", base_url);
    bearer_text(a, bearer, sizeof(bearer));
    json_t *card = json_pack(
        "{s:s, s:s, s:s, s:{s:b, s:b}, s:[s, s], s:[s, s], s:o}", "name", "skilld", "description",
        "skilld runs skills (file, web and sandboxed command skills) for agents. Name the skill "
        "in a data part: {\"skill\": \"<name>\", \"input\": {...}}.",
        "version", SKD_VERSION, "capabilities", "streaming", 1, "pushNotifications", 0,
        "defaultInputModes", "application/json", "text/plain", "defaultOutputModes",
        "application/json", "text/plain", "skills", skills_json(a, key_id));
    if (!card)
        return NULL;
    if (legacy) {
        json_object_set_new(card, "url", json_string(url));
        json_object_set_new(card, "protocolVersion", json_string(A2A_PROTOCOL_V03));
        json_object_set_new(card, "preferredTransport", json_string("JSONRPC"));
        json_object_set_new(card, "securitySchemes",
                            json_pack("{s:{s:s, s:s, s:s}}", "bearer", "type", "http", "scheme",
                                      "bearer", "description", bearer));
        json_object_set_new(card, "security", json_pack("[{s:[]}]", "bearer"));
        return card;
    }
    json_object_set_new(card, "supportedInterfaces",
                        json_pack("[{s:s, s:s, s:s}, {s:s, s:s, s:s}]", "url", url,
                                  "protocolBinding", "JSONRPC", "protocolVersion", A2A_PROTOCOL_V1,
                                  "url", url, "protocolBinding", "JSONRPC", "protocolVersion",
                                  A2A_PROTOCOL_V03));
    json_object_set_new(card, "securitySchemes",
                        json_pack("{s:{s:{s:s, s:s}}}", "bearer", "httpAuthSecurityScheme",
                                  "scheme", "Bearer", "description", bearer));
    json_object_set_new(card, "securityRequirements",
                        json_pack("[{s:{s:{s:[]}}}]", "schemes", "bearer", "list"));
    return card;
}

static const char *const states[][2] = {
    {"TASK_STATE_SUBMITTED", "submitted"}, {"TASK_STATE_WORKING", "working"},
    {"TASK_STATE_COMPLETED", "completed"}, {"TASK_STATE_FAILED", "failed"},
    {"TASK_STATE_CANCELED", "canceled"},   {"TASK_STATE_INPUT_REQUIRED", "input-required"},
    {"TASK_STATE_REJECTED", "rejected"},   {"TASK_STATE_AUTH_REQUIRED", "auth-required"},
};

const char *skd__a2a_state_v1(const char *s)
{
    for (size_t i = 0; s && i < sizeof(states) / sizeof(states[0]); i++)
        if (strcmp(s, states[i][0]) == 0 || strcmp(s, states[i][1]) == 0)
            return states[i][0];
    return NULL;
}

static const char *state_v03(const char *s)
{
    for (size_t i = 0; s && i < sizeof(states) / sizeof(states[0]); i++)
        if (strcmp(s, states[i][0]) == 0)
            return states[i][1];
    return "unknown";
}

json_t *skd__a2a_part_v1(const json_t *p)
{
    if (!json_is_object(p))
        return NULL;
    json_t *out = NULL;
    json_t *text = json_object_get(p, "text"), *data = json_object_get(p, "data");
    json_t *file = json_object_get(p, "file");
    if (json_is_string(text))
        out = json_pack("{s:O}", "text", text);
    else if (data)
        out = json_pack("{s:O}", "data", data);
    else if (json_is_object(file) || json_object_get(p, "url") || json_object_get(p, "raw"))
        out = json_pack("{s:s}", "url", ""); /* a file: kept only as "not text or data" */
    if (!out)
        return NULL;
    json_t *meta = json_object_get(p, "metadata"), *mt = json_object_get(p, "mediaType");
    if (json_is_object(meta))
        json_object_set(out, "metadata", meta);
    if (json_is_string(mt))
        json_object_set(out, "mediaType", mt);
    return out;
}

static json_t *parts_v03(const json_t *parts)
{
    json_t *out = json_array();
    size_t i;
    json_t *p;
    json_array_foreach (parts, i, p) {
        json_t *q = NULL;
        if (json_object_get(p, "text"))
            q = json_pack("{s:s, s:O}", "kind", "text", "text", json_object_get(p, "text"));
        else if (json_object_get(p, "data"))
            q = json_pack("{s:s, s:O}", "kind", "data", "data", json_object_get(p, "data"));
        if (q && json_object_get(p, "metadata"))
            json_object_set(q, "metadata", json_object_get(p, "metadata"));
        if (q)
            json_array_append_new(out, q);
    }
    return out;
}

static json_t *message_v03(const json_t *m)
{
    json_t *o = json_deep_copy(m);
    if (!o)
        return NULL;
    json_object_set_new(o, "kind", json_string("message"));
    const char *role = skd_json_str(m, "role", "ROLE_AGENT");
    json_object_set_new(o, "role", json_string(strcmp(role, "ROLE_USER") == 0 ? "user" : "agent"));
    json_object_set_new(o, "parts", parts_v03(json_object_get(m, "parts")));
    return o;
}

static json_t *status_v03(const json_t *s)
{
    json_t *o = json_deep_copy(s);
    if (!o)
        return NULL;
    json_object_set_new(o, "state", json_string(state_v03(skd_json_str(s, "state", ""))));
    if (json_object_get(s, "message"))
        json_object_set_new(o, "message", message_v03(json_object_get(s, "message")));
    return o;
}

static json_t *artifact_v03(const json_t *a)
{
    json_t *o = json_deep_copy(a);
    if (o)
        json_object_set_new(o, "parts", parts_v03(json_object_get(a, "parts")));
    return o;
}

static json_t *task_v03(const json_t *t)
{
    json_t *o = json_deep_copy(t);
    if (!o)
        return NULL;
    json_object_set_new(o, "kind", json_string("task"));
    json_object_set_new(o, "status", status_v03(json_object_get(t, "status")));
    json_t *hist = json_array(), *arts = json_array();
    size_t i;
    json_t *v;
    json_array_foreach (json_object_get(t, "history"), i, v)
        json_array_append_new(hist, message_v03(v));
    json_array_foreach (json_object_get(t, "artifacts"), i, v)
        json_array_append_new(arts, artifact_v03(v));
    json_object_set_new(o, "history", hist);
    json_object_set_new(o, "artifacts", arts);
    return o;
}

json_t *skd__a2a_to_v03(const json_t *v)
{
    json_t *ev;
    if ((ev = json_object_get(v, "task")) != NULL)
        return task_v03(ev);
    if ((ev = json_object_get(v, "message")) != NULL && json_object_get(ev, "parts"))
        return message_v03(ev);
    if ((ev = json_object_get(v, "statusUpdate")) != NULL) {
        json_t *o = json_deep_copy(ev);
        const char *st = skd_json_str(json_object_get(ev, "status"), "state", "");
        json_object_set_new(o, "kind", json_string("status-update"));
        json_object_set_new(o, "status", status_v03(json_object_get(ev, "status")));
        json_object_set_new(o, "final", json_boolean(skd__a2a_state_terminal(st)));
        return o;
    }
    if ((ev = json_object_get(v, "artifactUpdate")) != NULL) {
        json_t *o = json_deep_copy(ev);
        json_object_set_new(o, "kind", json_string("artifact-update"));
        json_object_set_new(o, "artifact", artifact_v03(json_object_get(ev, "artifact")));
        return o;
    }
    if (json_object_get(v, "status") && json_object_get(v, "id"))
        return task_v03(v);
    return json_deep_copy(v);
}
