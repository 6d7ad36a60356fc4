#!/usr/bin/env python3
"""A minimal MCP Streamable HTTP client for the VM ring (the guest has no
Node): initialize, notifications/initialized, one tools/call.

    mcp.py URL SECRET TOOL JSON-ARGUMENTS [TIMEOUT_S]

Prints the tool's result object (structuredContent, else the parsed text
content, else {"isError": true, "text": ...}) as one JSON line; exits 0
when the call got an answer, 1 on a transport or protocol failure."""
import json
import sys
import urllib.request


def post(url, secret, body, sid=None, timeout=60):
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "Authorization": "Bearer " + secret,
    }
    if sid:
        headers["Mcp-Session-Id"] = sid
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers)
    with urllib.request.urlopen(req, timeout=timeout) as r:
        raw = r.read().decode()
        sid = r.headers.get("Mcp-Session-Id", sid)
        ctype = r.headers.get("Content-Type", "")
    if not raw.strip():
        return None, sid
    if ctype.startswith("text/event-stream"):
        # The last data: event carrying our id is the answer (progress
        # notifications may come first).
        answer = None
        for block in raw.split("\n\n"):
            data = "\n".join(l[5:].lstrip() for l in block.split("\n") if l.startswith("data:"))
            if data:
                msg = json.loads(data)
                if msg.get("id") == body.get("id"):
                    answer = msg
        return answer, sid
    return json.loads(raw), sid


def main():
    url, secret, tool, args = sys.argv[1:5]
    timeout = float(sys.argv[5]) if len(sys.argv) > 5 else 60
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                       "clientInfo": {"name": "vm-ring", "version": "1"}}}
    try:
        rep, sid = post(url, secret, init, timeout=timeout)
        if not rep or "result" not in rep:
            print(json.dumps({"transportError": "initialize: %r" % (rep,)}))
            return 1
        post(url, secret, {"jsonrpc": "2.0", "method": "notifications/initialized"}, sid, timeout)
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                "params": {"name": tool, "arguments": json.loads(args)}}
        rep, _ = post(url, secret, call, sid, timeout)
    except Exception as e:  # noqa: BLE001 - any failure is the answer
        print(json.dumps({"transportError": str(e)}))
        return 1
    if not rep or "result" not in rep:
        print(json.dumps({"transportError": "tools/call: %r" % (rep,)}))
        return 1
    res = rep["result"]
    if "structuredContent" in res:
        out = res["structuredContent"]
    else:
        text = "".join(c.get("text", "") for c in res.get("content", []))
        try:
            out = json.loads(text)
        except ValueError:
            out = {"isError": bool(res.get("isError")), "text": text}
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
