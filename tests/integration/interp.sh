#!/usr/bin/env bash
# Interpreter contexts of live sandboxes (docs/sandbox.md, "Interpreter
# contexts") through the real binary, REST /v1/execute and MCP:
#   1. Python: a variable, an import and a function defined in one call are
#      there in the next; a final expression comes back as result (repr);
#      stdout, stderr and a child process's output are the call's.
#   2. JavaScript: the same with util.inspect; top-level let persists.
#   3. two contexts of one sandbox, and the two languages, share nothing.
#   4. a failure carries the error's name, value and traceback.
#   5. `while True: pass` with a timeout is interrupted (SIGINT) and the
#      context keeps its state; in JavaScript too.
#   6. an interpreter killed from outside (and one that exits) is started
#      again on the next call, which says contextRestarted: true.
#   7. another key gets not_found (404) for the sandbox; a bad context
#      name, sh, a context without sandboxId are invalid_input (400).
#   8. the cap on contexts per sandbox (SKILLS_INTERP_MAX_CONTEXTS) is busy.
#   9. over MCP tools/call the same context answers with its state.
#  10. what the driver may not do: a frame past SKILLS_INTERP_MAX_LINE_BYTES
#      ends it (too_large, then a restart); a malformed frame is ignored;
#      code longer than a line is too_large; output is capped at the
#      sandbox's outputLimit (truncated); input() does not read requests;
#      two calls to one context run one after the other.
#  11. deleting the sandbox ends its interpreters: no process is left.
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/server_common.sh"

start_server SKILLS_INTERP_MAX_CONTEXTS=3 SKILLS_INTERP_MAX_LINE_BYTES=65536
[ -n "$ADMIN" ] || { fail "server starts" "$(tail -5 "$TMP/serve.err")"; finish; }
K1=$(new_key i1 skills:execute | cut -d' ' -f2)
K2=$(new_key i2 skills:execute | cut -d' ' -f2)
J=(-H 'Content-Type: application/json')
as() { local k=$1; shift; req "$@" -H "Authorization: Bearer $k" "${J[@]}"; }
# ev KEY INPUT-JSON: POST /v1/execute eval_code.
ev() { as "$1" POST /v1/execute -d "{\"skill\":\"eval_code\",\"input\":$2}"; }
# evp KEY SANDBOX CONTEXT LANG CODE [TIMEOUT]: the input built by python (quoting).
evp() {
    local input
    input=$(python3 -c 'import json,sys; d={"sandboxId":sys.argv[1],"context":sys.argv[2],"language":sys.argv[3],"code":sys.argv[4]}
if len(sys.argv) > 5: d["timeoutMs"]=int(sys.argv[5])
print(json.dumps(d))' "${@:2}")
    ev "$1" "$input"
}
cg_dirs() { find /sys/fs/cgroup -maxdepth 9 -type d -name "$1" 2>/dev/null; }
live_procs() { for d in $(cg_dirs "$1"); do cat "$d/cgroup.procs" 2>/dev/null; done | sort -u; }

as "$K1" POST /v1/sandboxes -d '{"timeoutMs":20000}'
expect_status "a live sandbox is made" 201
SB=$(echo "$BODY" | "$JGET" .id)

# ---- 1 ----
evp "$K1" "$SB" default python $'import math\nx = 41\ndef double(v):\n    return v * 2\nprint("defined")'
expect_json "python: the first call defines a variable, an import and a function" \
    'j["success"] and j["stdout"] == "defined\n" and j["result"] is None and j["contextRestarted"] is False and j["context"] == "default"'
evp "$K1" "$SB" default python $'import sys, os\nprint("e", file=sys.stderr)\nos.system("echo child")\ndouble(x + 1) + math.floor(0.5)'
expect_json "python: the next call sees them; the final expression is the result (repr)" \
    'j["success"] and j["result"] == "84" and j["stderr"] == "e\n" and "child\n" in j["stdout"]'
evp "$K1" "$SB" default python '{"a": [1, "b"]}'
expect_json "python: the result is the repr" "j['result'] == \"{'a': [1, 'b']}\""
evp "$K1" "$SB" default python 'import os; os.getuid()'
expect_json "python: the interpreter runs as the sandbox user" 'j["result"] == "1000"'

# ---- 2 ----
evp "$K1" "$SB" default javascript $'let n = 20;\nconst util2 = require("util");\nfunction twice(v) { return v * 2; }\nconsole.log("js defined")'
expect_json "javascript: the first call defines a let, a require and a function" \
    'j["success"] and j["stdout"] == "js defined\n" and j["result"] is None and j["language"] == "javascript"'
evp "$K1" "$SB" default javascript $'console.error("warn");\ntwice(n + 1)'
expect_json "javascript: the next call sees them; the final expression is the result" \
    'j["success"] and j["result"] == "42" and j["stderr"] == "warn\n"'
evp "$K1" "$SB" default javascript '({a: [1, "b"]})'
expect_json "javascript: the result is util.inspect's" "j['result'] == \"{ a: [ 1, 'b' ] }\""

# ---- 3 ----
evp "$K1" "$SB" other python 'x'
expect_json "another context of the same sandbox does not see x (NameError)" \
    'not j["success"] and j["error"]["name"] == "NameError" and j["context"] == "other"'
evp "$K1" "$SB" other python 'x = "other"; x'
evp "$K1" "$SB" default python 'x'
expect_json "each context keeps its own x" 'j["result"] == "41"'
evp "$K1" "$SB" default javascript 'typeof x'
expect_json "javascript does not see python's x" "j['result'] == \"'undefined'\""

# ---- 4 ----
evp "$K1" "$SB" default python $'def boom():\n    raise ValueError("bad value")\nboom()'
expect_status "a failing call answers (REST status of command_failed)" "$STATUS"
expect_json "python: the error has name, value and a traceback of the code" \
    'not j["success"] and j["error"]["code"] == "command_failed" and j["error"]["name"] == "ValueError" and j["error"]["value"] == "bad value" and "boom" in j["error"]["traceback"] and "<cell>" in j["error"]["traceback"]'
evp "$K1" "$SB" default javascript 'null.x'
expect_json "javascript: the error has name and stack" \
    'not j["success"] and j["error"]["name"] == "TypeError" and "cell:1" in j["error"]["traceback"]'

# ---- 5 ----
t0=$(date +%s%N)
evp "$K1" "$SB" default python 'while True: pass' 1000
t1=$(date +%s%N)
expect_json "python: while True with timeoutMs 1000 is interrupted (timeout, KeyboardInterrupt)" \
    'not j["success"] and j["timedOut"] and j["error"]["code"] == "timeout" and j["error"]["name"] == "KeyboardInterrupt"'
ms=$(((t1 - t0) / 1000000))
[ "$ms" -lt 4000 ] && pass "the interrupted call answers soon after its timeout (${ms} ms)" || fail "the interrupted call answers soon after its timeout" "${ms} ms"
evp "$K1" "$SB" default python 'x + 1'
expect_json "python: the context keeps its state after the interrupt" 'j["success"] and j["result"] == "42" and not j["contextRestarted"]'
evp "$K1" "$SB" default javascript 'while (true) {}' 1000
expect_json "javascript: while(true) is interrupted" 'not j["success"] and j["timedOut"] and j["error"]["code"] == "timeout"'
evp "$K1" "$SB" default javascript 'n'
expect_json "javascript: the context keeps its state after the interrupt" 'j["success"] and j["result"] == "20" and not j["contextRestarted"]'
evp "$K1" "$SB" default python $'import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True: pass' 1000
expect_json "code that ignores SIGINT: the interpreter is ended (timeout, state lost)" \
    'not j["success"] and j["timedOut"] and j["error"]["code"] == "timeout" and "ended" in j["error"]["message"]'
evp "$K1" "$SB" default python 'x'
expect_json "the next call starts a new interpreter and says so" \
    'not j["success"] and j["contextRestarted"] is True and j["error"]["name"] == "NameError"'

# ---- 6 ----
evp "$K1" "$SB" default python 'import os; y = 5; os.getpid()'
# drivers PATTERN: the pids of the sandbox's interpreters whose command
# line matches (seen from the host: an exec has a pid namespace of its own).
drivers() {
    for p in $(live_procs "$SB"); do
        [ "$(head -c ${#1} "/proc/$p/cmdline" 2>/dev/null | tr "\\0" " ")" = "$1" ] &&
            grep -qa skilld-interp-driver "/proc/$p/cmdline" 2>/dev/null && echo "$p"
    done
}
PYP=$(drivers python3)
[ -n "$PYP" ] && kill -9 $PYP && pass "the python interpreter is killed from outside" || fail "the python interpreter is killed from outside" "none found"
evp "$K1" "$SB" default python 'y'
expect_json "a killed interpreter is restarted on the next call: contextRestarted true, state gone" \
    'j["contextRestarted"] is True and not j["success"] and j["error"]["name"] == "NameError"'
evp "$K1" "$SB" default python 'y = 6; y'
expect_json "and the new one keeps state again" 'j["success"] and j["result"] == "6" and not j["contextRestarted"]'
evp "$K1" "$SB" default python 'import os; os._exit(3)'
expect_json "code that ends its interpreter: the call says so" \
    'not j["success"] and j["error"]["code"] == "command_failed" and "exited with code 3" in j["error"]["message"]'
evp "$K1" "$SB" default python '1'
expect_json "the next call says contextRestarted" 'j["success"] and j["contextRestarted"] is True'

# ---- 7 ----
evp "$K2" "$SB" default python '1'
expect_status "another key's sandbox is 404" 404
expect_json "another key's sandbox is not_found" 'j["error"]["code"] == "not_found"'
evp "$K1" "00000000-0000-4000-8000-000000000000" default python '1'
expect_status "an unknown sandbox is 404" 404
evp "$K1" "$SB" 'bad name!' python '1'
expect_status "a bad context name is 400" 400
expect_json "a bad context name is invalid_input" 'j["error"]["code"] == "invalid_input" and "context" in j["error"]["message"]'
evp "$K1" "$SB" default sh 'echo hi'
expect_json "sh has no context: invalid_input" 'j["error"]["code"] == "invalid_input"'
ev "$K1" '{"language":"python","code":"1","context":"default"}'
expect_json "a context without sandboxId: invalid_input" 'j["error"]["code"] == "invalid_input"'
ev "$K1" '{"language":"python","code":"print(6*7)"}'
expect_json "without sandboxId eval_code stays one-shot" 'j["success"] and j["stdout"] == "42\n" and "exitCode" in j'

# ---- 8 ----
# default/python, default/javascript and other/python exist: 3, the cap.
evp "$K1" "$SB" third python '1'
expect_status "past SKILLS_INTERP_MAX_CONTEXTS a new context is 429" 429
expect_json "and busy, naming the setting" 'j["error"]["code"] == "busy" and "SKILLS_INTERP_MAX_CONTEXTS" in j["error"]["message"]'

# ---- 9 ----
evp "$K1" "$SB" default python 'def double(v): return v * 2
y = 6'
SID=$(mcp_init "$K1")
MB=$(python3 -c 'import json,sys; print(json.dumps({"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"eval_code","arguments":{"sandboxId":sys.argv[1],"language":"python","code":"double(y)"}}}))' "$SB")
OUT=$(curl -sS "${MCP_H[@]}" -H "Authorization: Bearer $K1" -H "Mcp-Session-Id: $SID" -d "$MB" "$URL/mcp")
echo "$OUT" | grep -q '"result": *"12"\|\\"result\\": *\\"12\\"\|"result":"12"' && pass "over MCP tools/call the context answers with its state" ||
    fail "over MCP tools/call the context answers with its state" "${OUT:0:400}"
MB2=$(python3 -c 'import json,sys; print(json.dumps({"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"eval_code","arguments":{"sandboxId":sys.argv[1],"language":"python","code":"1"}}}))' "$SB")
SID2=$(mcp_init "$K2")
OUT=$(curl -sS "${MCP_H[@]}" -H "Authorization: Bearer $K2" -H "Mcp-Session-Id: $SID2" -d "$MB2" "$URL/mcp")
echo "$OUT" | grep -q 'not_found' && pass "over MCP another key gets not_found" || fail "over MCP another key gets not_found" "${OUT:0:400}"

# ---- 10 ----
as "$K1" POST /v1/sandboxes -d '{"outputLimit":1000}'
SB2=$(echo "$BODY" | "$JGET" .id)
evp "$K1" "$SB2" default python $'import __main__, os\nos.write(__main__.proto, b"\\x1e{not json\\n")\nv = 7\nv'
expect_json "a malformed frame from the driver is ignored; the real answer comes" 'j["success"] and j["result"] == "7"'
evp "$K1" "$SB2" default python $'import __main__, os\nos.write(__main__.proto, b"\\x1e" + b"x" * 70000)\nimport time; time.sleep(5)'
expect_json "a frame past SKILLS_INTERP_MAX_LINE_BYTES ends the interpreter: too_large" \
    'not j["success"] and j["error"]["code"] == "too_large" and "SKILLS_INTERP_MAX_LINE_BYTES" in j["error"]["message"] and j["durationMs"] < 4000'
evp "$K1" "$SB2" default python 'v'
expect_json "and the next call restarts it" 'j["contextRestarted"] is True and j["error"]["name"] == "NameError"'
CODE=$(python3 -c 'print("#" * 70000)')
evp "$K1" "$SB2" default python "$CODE"
expect_json "code longer than a line may be is too_large" 'j["error"]["code"] == "too_large"'
evp "$K1" "$SB2" default python $'print("y" * 5000)\n"z" * 5000'
expect_json "output is capped at the sandbox's outputLimit and marked truncated" \
    'j["success"] and j["truncated"] and len(j["stdout"]) <= 1000 and len(j["result"]) <= 1010'
evp "$K1" "$SB2" default python $'try:\n    input()\nexcept EOFError:\n    print("eof")'
expect_json "input() reads nothing of the protocol (EOF)" 'j["success"] and j["stdout"] == "eof\n"'
evp "$K1" "$SB2" default python '1 + 1'
expect_json "and the context still answers" 'j["result"] == "2" and not j["contextRestarted"]'
( evp "$K1" "$SB2" default python $'import time\ntime.sleep(1.5)\n"first"'; echo "$BODY" >"$TMP/first.json" ) &
FIRST=$!
sleep 0.3
t0=$(date +%s%N)
evp "$K1" "$SB2" default python '"second"'
t1=$(date +%s%N)
wait "$FIRST" # only that call: the server is a job of this shell too
ms=$(((t1 - t0) / 1000000))
BODY2=$BODY
BODY=$(cat "$TMP/first.json")
expect_json "two calls to one context: the first answers" 'j["success"] and j["result"] == "\x27first\x27"'
BODY=$BODY2
[ "$ms" -ge 900 ] && expect_json "the second waits for it, then answers (${ms} ms)" 'j["success"] and j["result"] == "\x27second\x27"' ||
    fail "the second call waits for the first" "answered after ${ms} ms: ${BODY:0:200}"
as "$K1" DELETE "/v1/sandboxes/$SB2"

# ---- paused: refused, never resumed behind the caller's back; after a
# resume the interpreter is new and says so ----
as "$K1" POST /v1/sandboxes -d '{}'
SB3=$(json_get "$BODY" 'j["id"]')
evp "$K1" "$SB3" default python 'kept = 7'
expect_json "a context in a sandbox that will be paused" 'j["success"]'
as "$K1" POST "/v1/sandboxes/$SB3/pause"
expect_status "the sandbox pauses" 200
evp "$K1" "$SB3" default python 'kept'
expect_json "eval_code in a paused sandbox is sandbox_paused and says how to resume" \
    'not j["success"] and j["error"]["code"] == "sandbox_paused" and "resume" in j["error"]["message"]'
as "$K1" GET "/v1/sandboxes/$SB3"
expect_json "the refused eval left it paused" 'j["state"] == "paused"'
as "$K1" POST "/v1/sandboxes/$SB3/resume"
evp "$K1" "$SB3" default python '1 + 1'
expect_json "after a resume the context is a new interpreter, and says so" \
    'j["success"] and j["result"] == "2" and j["contextRestarted"]'
as "$K1" DELETE "/v1/sandboxes/$SB3"

# ---- 11 ----
before=$(live_procs "$SB" | wc -l)
[ "$before" -ge 3 ] && pass "the interpreters run in the sandbox's cgroup ($before processes)" || fail "the interpreters run in the sandbox's cgroup" "$before"
as "$K1" DELETE "/v1/sandboxes/$SB"
expect_status "the sandbox is deleted" 200
left=1
for _ in $(seq 1 40); do
    left=$(pgrep -f 'skilld-interp-driver' | wc -l)
    [ "$left" = 0 ] && [ -z "$(cg_dirs "$SB")" ] && break
    sleep 0.05
done
[ "$left" = 0 ] && [ -z "$(cg_dirs "$SB")" ] && pass "deleting the sandbox ends its interpreters (no process, no cgroup)" ||
    fail "deleting the sandbox ends its interpreters" "$left left; $(cg_dirs "$SB")"
evp "$K1" "$SB" default python 'x'
expect_status "a context of a deleted sandbox is 404" 404

stop_server
rc=$?
[ "$rc" = 0 ] && pass "the server stops cleanly" || fail "the server stops cleanly" "exit $rc: $(tail -5 "$TMP/serve.err")"
finish
