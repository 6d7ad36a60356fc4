#!/usr/bin/env bash
# MCP over stdio (`skilld mcp`) driven by a small Python client: one JSON
# message per line, nothing else on stdout, concurrent requests (a ping
# and a cancellation are handled while a long call runs), progress, exit at
# end of input, --key identity.
source "$(dirname "$0")/../lib.sh"
DATA="$TMP/data"
KEY=$("$SKILLD" --data-dir "$DATA" keys create stdio --scopes skills:read,skills:execute --json |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')

python3 - "$SKILLD_TEST_BIN" "$DATA" "$KEY" <<'PY'
import json, subprocess, sys, time, os, select
skilld, data, key = sys.argv[1:4]
name = "server_stdio.sh"
fails = 0
def ok(c, n, why=""):
    global fails
    if c: print(f"PASS {name}: {n}")
    else:
        fails += 1
        print(f"FAIL {name}: {n}: {why}")

env = dict(os.environ, SKILLD_TEST_SKILLS="true", SKILLD_MCP_PAGE_SIZE="2")
# Unbuffered: recv() selects on the descriptor, so no line may wait in a
# Python buffer where select cannot see it (several lines often arrive in
# one read: progress notifications, then the result).
p = subprocess.Popen([skilld, "--data-dir", data, "mcp", "--key", key], stdin=subprocess.PIPE,
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, bufsize=0)
raw_lines = []
def send(obj):
    p.stdin.write((json.dumps(obj) if not isinstance(obj, bytes) else obj.decode()).encode() + b"\n")
    p.stdin.flush()
def recv(timeout=20):
    r, _, _ = select.select([p.stdout], [], [], timeout)
    if not r: return None
    line = p.stdout.readline()
    if not line: return None
    raw_lines.append(line)
    return json.loads(line)
def until(pred, timeout=20):
    seen = []
    end = time.time() + timeout
    while time.time() < end:
        m = recv(end - time.time())
        if m is None: break
        seen.append(m)
        if pred(m): return m, seen
    return None, seen

send({"jsonrpc": "2.0", "id": 1, "method": "initialize",
      "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "py", "version": "1"}}})
m = recv()
ok(m and m["result"]["protocolVersion"] == "2025-11-25", "initialize", m)
send({"jsonrpc": "2.0", "method": "notifications/initialized"})

tools, cursor = [], None
for _ in range(50):
    send({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": ({"cursor": cursor} if cursor else {})})
    m = recv()
    tools += [t["name"] for t in m["result"]["tools"]]
    cursor = m["result"].get("nextCursor")
    if not cursor: break
ok(tools[:3] == ["skills_list", "skills_execute", "skills_executions"] and tools[3:] == sorted(set(tools[3:]))
   and "debug_sleep" in tools and "file_read" in tools, "tools/list pages", tools)

send({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
      "params": {"name": "debug_sleep", "arguments": {"ms": 60, "steps": 3}, "_meta": {"progressToken": 5}}})
m, seen = until(lambda m: m.get("id") == 3)
prog = [s["params"]["progress"] for s in seen if s.get("method") == "notifications/progress"]
ok(m and m["result"]["structuredContent"]["slept"] == 60, "tools/call result", m)
ok(prog == [1, 2, 3], "progress notifications before the result", prog)

# A long call does not block a ping; a cancellation stops it without a reply.
send({"jsonrpc": "2.0", "id": "long", "method": "tools/call",
      "params": {"name": "debug_sleep", "arguments": {"ms": 60000}}})
time.sleep(0.2)
send({"jsonrpc": "2.0", "id": 4, "method": "ping"})
m, seen = until(lambda m: m.get("id") == 4, 10)
ok(m and m["result"] == {}, "ping answered while a call runs", seen)
send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "long", "reason": "test"}})
send({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "skills_executions", "arguments": {"limit": 1}}})
m, seen = until(lambda m: m.get("id") == 5, 10)
ok(not any(s.get("id") == "long" for s in seen), "a cancelled call gets no reply", seen)
# The cancelled run is audited once it ends; poll the history.
for _ in range(50):
    send({"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {"name": "skills_executions", "arguments": {"limit": 1}}})
    m, _ = until(lambda m: m.get("id") == 6, 10)
    ex = m["result"]["structuredContent"]["executions"]
    if ex and ex[0].get("errorCode") == "cancelled": break
    time.sleep(0.05)
ok(ex and ex[0]["errorCode"] == "cancelled" and ex[0]["keyId"] == key, "the run was cancelled, under the --key identity", ex)

# Malformed lines get errors and the session goes on.
send(b'{"jsonrpc":"2.0","id":7,')
m = recv()
ok(m and m["error"]["code"] == -32700 and m["id"] is None, "broken line is -32700", m)
send(b'[{"jsonrpc":"2.0","id":8,"method":"ping"}]')
m = recv()
ok(m and m["error"]["code"] == -32600, "batch line is -32600", m)
send({"jsonrpc": "2.0", "id": 9, "method": "nope"})
m = recv()
ok(m and m["error"]["code"] == -32601 and m["id"] == 9, "unknown method is -32601", m)

# End of input: a running call still answers, then the process exits 0.
send({"jsonrpc": "2.0", "id": 10, "method": "tools/call", "params": {"name": "debug_sleep", "arguments": {"ms": 200}}})
p.stdin.close()
m, _ = until(lambda m: m.get("id") == 10, 10)
ok(m and m["result"]["isError"] is False, "a call in flight at EOF still answers", m)
rest = p.stdout.read()
raw_lines += rest.splitlines(keepends=True)
code = p.wait(10)
ok(code == 0, "exits 0 at end of input", code)
def is_json(l):
    try:
        json.loads(l); return l.endswith(b"\n")
    except Exception: return False
ok(all(is_json(l) for l in raw_lines), "stdout carries nothing but JSON lines", [l for l in raw_lines if not is_json(l)][:3])

# --key must name a live key; errors go to stderr only.
r = subprocess.run([skilld, "--data-dir", data, "mcp", "--key", "no-such-key"], input=b"", capture_output=True, env=env)
ok(r.returncode != 0 and r.stdout == b"" and r.stderr, "unknown --key is refused on stderr", (r.returncode, r.stdout, r.stderr))

# SIGTERM cancels a running call and exits.
p = subprocess.Popen([skilld, "--data-dir", data, "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
# A ping's answer shows the server is up (its signal handling installed)
# before the call and the signal; a slow start would otherwise be killed.
send({"jsonrpc": "2.0", "id": 0, "method": "ping"})
m, _ = until(lambda m: m.get("id") == 0, 60)
send({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "debug_sleep", "arguments": {"ms": 60000}}})
time.sleep(0.3)
p.terminate()
try:
    code = p.wait(10)
    ok(code == 0, "SIGTERM stops a running stdio server", code)
except subprocess.TimeoutExpired:
    p.kill()
    ok(False, "SIGTERM stops a running stdio server", "still running after 10 s")
sys.exit(1 if fails else 0)
PY
rc=$?
[ $rc -eq 0 ] || TEST_FAILS=1
finish
