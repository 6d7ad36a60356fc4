#!/usr/bin/env python3
"""A minimal MCP Streamable HTTP client for the VM ring (the guest has no
Node): initialize, notifications/initialized, one tools/call.

    mcp.py [--parallel N] URL SECRET TOOL JSON-ARGUMENTS [TIMEOUT_S]

Prints the tool's result object (structuredContent, else the parsed text
content, else {"isError": true, "text": ...}) as one JSON line; exits 0
when the call got an answer, 1 on a transport or protocol failure.

With --parallel N, N clients run at once, each in its own thread with its
own connection and MCP session, and N lines are printed (in the order the
clients were started); the exit status is 1 if any of them failed. One
process instead of N: under TCG a Python start costs about a second.

http.client rather than urllib.request: the latter imports ssl, email and
more, which the emulated CPU pays for on every start."""
import http.client
import json
import sys
import threading
from urllib.parse import urlsplit


def post(conn, path, secret, body, sid=None):
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "Authorization": "Bearer " + secret,
    }
    if sid:
        headers["Mcp-Session-Id"] = sid
    conn.request("POST", path, body=json.dumps(body).encode(), headers=headers)
    r = conn.getresponse()
    raw = r.read().decode()
    if r.status >= 400:
        raise RuntimeError("HTTP %d: %s" % (r.status, raw[:200]))
    sid = r.getheader("Mcp-Session-Id", sid)
    ctype = r.getheader("Content-Type", "")
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


def call(url, secret, tool, args, timeout):
    """One client: a session and one tools/call. Returns (ok, result)."""
    u = urlsplit(url)
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                       "clientInfo": {"name": "vm-ring", "version": "1"}}}
    conn = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=timeout)
    try:
        rep, sid = post(conn, u.path, secret, init)
        if not rep or "result" not in rep:
            return False, {"transportError": "initialize: %r" % (rep,)}
        post(conn, u.path, secret, {"jsonrpc": "2.0", "method": "notifications/initialized"}, sid)
        req = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
               "params": {"name": tool, "arguments": json.loads(args)}}
        rep, _ = post(conn, u.path, secret, req, sid)
    except Exception as e:  # noqa: BLE001 - any failure is the answer
        return False, {"transportError": str(e)}
    finally:
        conn.close()
    if not rep or "result" not in rep:
        return False, {"transportError": "tools/call: %r" % (rep,)}
    res = rep["result"]
    if "structuredContent" in res:
        return True, res["structuredContent"]
    text = "".join(c.get("text", "") for c in res.get("content", []))
    try:
        return True, json.loads(text)
    except ValueError:
        return True, {"isError": bool(res.get("isError")), "text": text}


def main():
    argv = sys.argv[1:]
    n = 1
    if argv[:1] == ["--parallel"]:
        n = int(argv[1])
        argv = argv[2:]
    url, secret, tool, args = argv[:4]
    timeout = float(argv[4]) if len(argv) > 4 else 60
    results = [None] * n

    def one(i):
        results[i] = call(url, secret, tool, args, timeout)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for ok, out in results:
        print(json.dumps(out))
    sys.stdout.flush()
    return 0 if all(ok for ok, _ in results) else 1


if __name__ == "__main__":
    sys.exit(main())
