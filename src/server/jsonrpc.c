/*
 * JSON-RPC 2.0 framing (see jsonrpc.h). Everything here comes from a client
 * and is checked: the "jsonrpc" member, the id type (string or integer;
 * null is refused as MCP requires), the method type, params being an
 * object. Parsing goes through skd_json_parse, which bounds nesting and
 * refuses invalid UTF-8 and duplicate keys.
 */
#include "server/jsonrpc.h"

#include "skilld/json.h"
#include "skilld/util.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

json_t *skd__rpc_parse(const char *data, size_t len, json_t **err_reply)
{
    skd_err err = {0};
    *err_reply = NULL;
    json_t *v = skd_json_parse(data, len, &err);
    if (!v) {
        *err_reply =
            skd__rpc_error(NULL, SKD_RPC_PARSE_ERROR, "parse error: %s", skd_err_msg(&err));
        return NULL;
    }
    if (json_is_array(v)) {
        json_decref(v);
        *err_reply = skd__rpc_error(NULL, SKD_RPC_INVALID_REQUEST,
                                    "batch requests are not supported; send one message");
        return NULL;
    }
    if (!json_is_object(v)) {
        json_decref(v);
        *err_reply =
            skd__rpc_error(NULL, SKD_RPC_INVALID_REQUEST, "a JSON-RPC message must be an object");
        return NULL;
    }
    return v;
}

static int id_valid(const json_t *id)
{
    return json_is_string(id) || json_is_integer(id);
}

static enum skd_rpc_kind invalid(const json_t *id, json_t **err_reply, const char *why)
{
    if (err_reply)
        *err_reply = skd__rpc_error(id_valid(id) ? id : NULL, SKD_RPC_INVALID_REQUEST,
                                    "invalid request: %s", why);
    return SKD_RPC_INVALID;
}

enum skd_rpc_kind skd__rpc_classify(const json_t *msg, json_t **err_reply)
{
    if (err_reply)
        *err_reply = NULL;
    if (!json_is_object(msg))
        return invalid(NULL, err_reply, "not an object");
    const json_t *id = json_object_get(msg, "id");
    const json_t *ver = json_object_get(msg, "jsonrpc");
    if (!json_is_string(ver) || strcmp(json_string_value(ver), "2.0") != 0)
        return invalid(id, err_reply, "\"jsonrpc\" must be \"2.0\"");
    if (id && !id_valid(id))
        return invalid(NULL, err_reply, "\"id\" must be a string or an integer");
    const json_t *method = json_object_get(msg, "method");
    if (method) {
        if (!json_is_string(method) || !json_string_length(method))
            return invalid(id, err_reply, "\"method\" must be a non-empty string");
        const json_t *params = json_object_get(msg, "params");
        if (params && !json_is_object(params))
            return invalid(id, err_reply, "\"params\" must be an object");
        return id ? SKD_RPC_REQUEST : SKD_RPC_NOTIFICATION;
    }
    int has_result = json_object_get(msg, "result") != NULL;
    int has_error = json_is_object(json_object_get(msg, "error"));
    if (id && has_result != has_error)
        return SKD_RPC_RESPONSE;
    return invalid(id, err_reply, "neither a request, a notification nor a response");
}

json_t *skd__rpc_result(const json_t *id, json_t *result)
{
    json_t *o = json_object();
    if (!o) {
        json_decref(result);
        return NULL;
    }
    json_object_set_new(o, "jsonrpc", json_string("2.0"));
    json_object_set_new(o, "id", id ? json_copy((json_t *)id) : json_null());
    json_object_set_new(o, "result", result ? result : json_object());
    return o;
}

json_t *skd__rpc_error(const json_t *id, int code, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    skd_vformat(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return json_pack("{s:s, s:o, s:{s:i, s:s}}", "jsonrpc", "2.0", "id",
                     id ? json_copy((json_t *)id) : json_null(), "error", "code", code, "message",
                     msg);
}

json_t *skd__rpc_notification(const char *method, json_t *params)
{
    json_t *o = json_pack("{s:s, s:s}", "jsonrpc", "2.0", "method", method);
    if (o && params)
        json_object_set(o, "params", params);
    json_decref(params);
    return o;
}
