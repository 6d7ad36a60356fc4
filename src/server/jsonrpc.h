/*
 * JSON-RPC 2.0 framing shared by every JSON-RPC transport (MCP over stdio
 * and HTTP, A2A): parse one message, classify it, build replies. Knows
 * nothing about methods; a dispatcher sits on top.
 */
#ifndef SKILLD_SERVER_JSONRPC_H
#define SKILLD_SERVER_JSONRPC_H

#include <jansson.h>
#include <stddef.h>

#define SKD_RPC_PARSE_ERROR -32700
#define SKD_RPC_INVALID_REQUEST -32600
#define SKD_RPC_METHOD_NOT_FOUND -32601
#define SKD_RPC_INVALID_PARAMS -32602
#define SKD_RPC_INTERNAL_ERROR -32603
#define SKD_RPC_REQUEST_CANCELLED -32800

enum skd_rpc_kind { SKD_RPC_REQUEST, SKD_RPC_NOTIFICATION, SKD_RPC_RESPONSE, SKD_RPC_INVALID };

/* Parse one message of len bytes. Returns a new reference to a JSON object,
 * or NULL with *err_reply set to a new error response: -32700 (id null) for
 * bytes that are not JSON (or invalid UTF-8, or nested too deep), -32600 for
 * a batch array or any other non-object value. */
json_t *skd__rpc_parse(const char *data, size_t len, json_t **err_reply);

/* Classify a parsed message (borrowed). For SKD_RPC_INVALID, *err_reply
 * (when err_reply is not NULL) receives a new -32600 error response whose id
 * is the message's id when that id is valid, else null. */
enum skd_rpc_kind skd__rpc_classify(const json_t *msg, json_t **err_reply);

/* {"jsonrpc":"2.0","id":id,"result":result}. id borrowed (NULL: null);
 * result stolen. New reference. */
json_t *skd__rpc_result(const json_t *id, json_t *result);

/* {"jsonrpc":"2.0","id":id,"error":{"code","message"}}. id borrowed (NULL:
 * null). New reference. */
json_t *skd__rpc_error(const json_t *id, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* {"jsonrpc":"2.0","method":method,"params":params}. params stolen (may be
 * NULL). New reference. */
json_t *skd__rpc_notification(const char *method, json_t *params);

#endif
