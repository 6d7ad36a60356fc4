#!/usr/bin/env bash
# Custom skills against the real server: a command skill registered over
# REST is called through REST, MCP and A2A with identical results; another
# key can neither see nor call it; a SKILL.md folder with a Python script is
# registered and run (read-only at /skill); invalid manifests are each
# refused with a precise error; enable/disable and delete; a restart keeps
# the registered skills; the agent card lists them.
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/server_common.sh"
# REST /v1/execute answers the result object plus its executionId.
expect_result() { expect_json "$1" "(lambda R: $2)(lambda j: {k: v for k, v in j.items() if k != 'executionId'})"; }

start_server SKILLS_ALLOWED_SANDBOX_IMAGES=alpine:3
read -r AID ASEC < <(new_key alice skills:read,skills:execute)
read -r BID BSEC < <(new_key bob skills:read,skills:execute)
A=(-H "Authorization: Bearer $ASEC" -H 'Content-Type: application/json')
B=(-H "Authorization: Bearer $BSEC" -H 'Content-Type: application/json')

UPPER='{"name":"upper","version":"1.0.0","description":"Upper-case text","tags":["text"],
 "inputSchema":{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]},
 "run":{"command":["/usr/bin/python3","-c","import json,sys; d=json.load(sys.stdin); print(json.dumps({\"text\": d[\"text\"].upper(), \"n\": len(d[\"text\"])}))"],"timeoutMs":20000}}'

req POST /v1/skills "${A[@]}" -d "$UPPER"
expect_status "alice registers a command skill (201)" 201
expect_json "the skill is alice's, sandbox mode" "j['owner']=='$AID' and j['mode']=='sandbox' and j['name']=='upper'"
req POST /v1/skills "${A[@]}" -d "$UPPER"
expect_status "registering the same name@version again is 409" 409
req POST /v1/skills "${A[@]}" -d "{\"manifest\":$UPPER,\"replace\":true}"
expect_status "replace:true replaces it (201)" 201

# The same call through REST, MCP and A2A.
req POST /v1/execute "${A[@]}" -d '{"skill":"upper","input":{"text":"hello skills"}}'
expect_status "REST runs it" 200
REST=$(json_get "$BODY" '{k: v for k, v in j.items() if k != "executionId"}')
expect_result "REST result is the command's JSON plus success" "R(j)['text']=='HELLO SKILLS' and R(j)['success'] is True"

SID=$(mcp_init "$ASEC")
req POST /mcp -H 'Content-Type: application/json' -H 'Accept: application/json' -H "Authorization: Bearer $ASEC" -H "Mcp-Session-Id: $SID" \
    -d '{"jsonrpc":"2.0","id":2,"method":"tools/list"}'
expect_json "MCP tools/list shows the new skill" "any(t['name']=='upper' for t in j['result']['tools'])"
req POST /mcp -H 'Content-Type: application/json' -H 'Accept: application/json' -H "Authorization: Bearer $ASEC" -H "Mcp-Session-Id: $SID" \
    -d '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"upper","arguments":{"text":"hello skills"}}}'
MCP=$(json_get "$BODY" 'j["result"]["structuredContent"]')

req POST /a2a "${A[@]}" -H 'A2A-Version: 1.0' \
    -d '{"jsonrpc":"2.0","id":4,"method":"SendMessage","params":{"message":{"role":"ROLE_USER","messageId":"m1","parts":[{"data":{"skill":"upper","input":{"text":"hello skills"}}}]}}}'
expect_json "A2A task completed" "j['result']['task']['status']['state']=='TASK_STATE_COMPLETED'"
A2A=$(json_get "$BODY" 'j["result"]["task"]["artifacts"][0]["parts"][0]["data"]')
same=$(python3 -c 'import json,sys; a,b,c=(json.loads(x) for x in sys.argv[1:4]); print(a==b==c)' "$REST" "$MCP" "$A2A" 2>&1)
[ "$same" = "True" ] && pass "REST, MCP and A2A give identical results" || fail "REST, MCP and A2A give identical results" "rest=$REST mcp=$MCP a2a=$A2A"

req POST /a2a "${A[@]}" -d '{"jsonrpc":"2.0","id":5,"method":"message/send","params":{"message":{"kind":"message","role":"user","messageId":"m2","parts":[{"kind":"data","data":{"skill":"upper","input":{"text":"hello skills"}}}]}}}'
expect_json "A2A 0.3 message/send gives the same result" "j['result']['status']['state']=='completed' and j['result']['artifacts'][0]['parts'][0]['data']==json.loads('$A2A')"

# A private skill is invisible to another key.
req GET /v1/skills "${B[@]}"
expect_json "bob does not see alice's skill" "all(s['name']!='upper' for s in j['skills'])"
req POST /v1/execute "${B[@]}" -d '{"skill":"upper","input":{"text":"x"}}'
expect_result "bob cannot call it (not_found)" "R(j)['error']['code']=='not_found'"
req POST /a2a "${B[@]}" -H 'A2A-Version: 1.0' \
    -d '{"jsonrpc":"2.0","id":6,"method":"SendMessage","params":{"message":{"role":"ROLE_USER","parts":[{"data":{"skill":"upper","input":{"text":"x"}}}]}}}'
expect_json "bob cannot call it over A2A" "j['error']['code']==-32602"
req GET /.well-known/agent-card.json -H "Authorization: Bearer $BSEC"
expect_json "bob's agent card does not list it" "all(s['id']!='upper' for s in j['skills'])"
req GET /.well-known/agent-card.json -H "Authorization: Bearer $ASEC"
expect_json "alice's agent card lists it" "any(s['id']=='upper' for s in j['skills'])"
req DELETE /v1/skills/upper "${B[@]}"
expect_status "bob cannot delete it (404)" 404

# Invalid manifests, each with a precise error.
bad() { # NAME JSON WANT_PREFIX
    req POST /v1/skills "${A[@]}" -d "$2"
    if [ "$STATUS" -ge 400 ] && [ "$STATUS" -lt 500 ] && json_get "$BODY" 'j["error"]["message"]' | grep -q "^$3"; then
        pass "invalid manifest: $1"
    else fail "invalid manifest: $1" "status $STATUS body ${BODY:0:200}"; fi
}
OKS='"description":"d","inputSchema":{"type":"object"}'
bad "bad name" "{\"name\":\"Bad Name\",\"version\":\"1.0.0\",$OKS,\"run\":{\"command\":[\"true\"]}}" "manifest.name:"
bad "bad version" "{\"name\":\"a\",\"version\":\"1\",$OKS,\"run\":{\"command\":[\"true\"]}}" "manifest.version:"
bad "schema not well-formed" "{\"name\":\"a\",\"version\":\"1.0.0\",\"description\":\"d\",\"inputSchema\":{\"type\":\"object\",\"required\":\"x\"},\"run\":{\"command\":[\"true\"]}}" "manifest.inputSchema:"
bad "image not allowed" "{\"name\":\"a\",\"version\":\"1.0.0\",$OKS,\"run\":{\"command\":[\"true\"],\"image\":\"ubuntu\"}}" "manifest.run.image:"
bad "image allowed but not imported" "{\"name\":\"a\",\"version\":\"1.0.0\",$OKS,\"run\":{\"command\":[\"true\"],\"image\":\"alpine:3\"}}" "manifest.run.image:"
bad "empty command" "{\"name\":\"a\",\"version\":\"1.0.0\",$OKS,\"run\":{\"command\":[]}}" "manifest.run.command:"
bad "unknown field" "{\"name\":\"a\",\"version\":\"1.0.0\",$OKS,\"run\":{\"command\":[\"true\"]},\"privileged\":true}" "manifest.privileged: unknown field"
bad "unknown run field" "{\"name\":\"a\",\"version\":\"1.0.0\",$OKS,\"run\":{\"command\":[\"true\"],\"mounts\":[\"/\"]}}" "manifest.run.mounts: unknown field"
bad "timeout out of range" "{\"name\":\"a\",\"version\":\"1.0.0\",$OKS,\"run\":{\"command\":[\"true\"],\"timeoutMs\":-1}}" "manifest.run.timeoutMs:"
bad "missing run" "{\"name\":\"a\",\"version\":\"1.0.0\",$OKS}" "manifest.run: is required"

# Non-JSON output, non-zero exit.
req POST /v1/skills "${A[@]}" -d "{\"name\":\"shout\",\"version\":\"1.0.0\",$OKS,\"run\":{\"command\":[\"/bin/sh\",\"-c\",\"echo plain text; echo warn >&2\"],\"stdin\":\"none\"}}"
req POST /v1/execute "${A[@]}" -d '{"skill":"shout","input":{}}'
expect_result "text stdout becomes output" "R(j)=={'success':True,'output':'plain text\n'}"
req POST /v1/skills "${A[@]}" -d "{\"name\":\"broken\",\"version\":\"1.0.0\",$OKS,\"run\":{\"command\":[\"/bin/sh\",\"-c\",\"echo bad input >&2; exit 3\"]}}"
req POST /v1/execute "${A[@]}" -d '{"skill":"broken","input":{}}'
expect_result "non-zero exit is command_failed with stderr" "R(j)['error']['code']=='command_failed' and R(j)['stderr']=='bad input\n' and R(j)['exitCode']==3"

# Disable, enable, delete.
req PATCH /v1/skills/shout "${A[@]}" -d '{"enabled":false}'
expect_json "PATCH disables" "j['enabled'] is False"
req POST /v1/execute "${A[@]}" -d '{"skill":"shout","input":{}}'
expect_result "a disabled skill is refused" "R(j)['error']['code']=='skill_disabled'"
req DELETE /v1/skills/broken@1.0.0 "${A[@]}"
expect_status "alice deletes her skill (204)" 204
req POST /v1/execute "${A[@]}" -d '{"skill":"broken","input":{}}'
expect_result "a deleted skill is gone" "R(j)['error']['code']=='not_found'"

# skills_register as an MCP tool.
req POST /mcp -H 'Content-Type: application/json' -H 'Accept: application/json' -H "Authorization: Bearer $ASEC" -H "Mcp-Session-Id: $SID" \
    -d "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{\"name\":\"skills_register\",\"arguments\":{\"manifest\":{\"name\":\"viamcp\",\"version\":\"2.0.0\",$OKS,\"run\":{\"command\":[\"/bin/echo\",\"{}\"]}}}}}"
expect_json "skills_register over MCP registers" "j['result']['structuredContent']['skill']['name']=='viamcp'"
req POST /mcp -H 'Content-Type: application/json' -H 'Accept: application/json' -H "Authorization: Bearer $ASEC" -H "Mcp-Session-Id: $SID" \
    -d '{"jsonrpc":"2.0","id":8,"method":"tools/list"}'
expect_json "and it is in tools/list at once" "any(t['name']=='viamcp' for t in j['result']['tools'])"

# Restart: registered skills and their state survive.
stop_server
# An Agent Skills folder with a Python script, registered from the command line.
mkdir -p "$TMP/wc/scripts"
cat >"$TMP/wc/SKILL.md" <<'MD'
---
name: word-count
description: Count the words of a text
tags: [text]
---
# Word count
Reads {"text": ...} on stdin and prints {"words": N}.
MD
cat >"$TMP/wc/scripts/run.py" <<'PY'
import json, os, sys
d = json.load(sys.stdin)
try:
    open("/skill/x", "w"); ro = False
except OSError:
    ro = True
print(json.dumps({"words": len(d.get("text", "").split()), "script": __file__, "readOnly": ro}))
PY
# A private folder of the server's user (skilld drops to SKILLD_USER when
# started as root): only the idmapped mount lets the sandbox user read it.
chmod 700 "$TMP/wc" "$TMP/wc/scripts"
chown -R skilld: "$TMP/wc"
"$SKILLD" --data-dir "$DATA" skills add "$TMP/wc" >/dev/null 2>"$TMP/add.err" &&
    pass "skills add DIR registers a SKILL.md folder" || fail "skills add DIR registers a SKILL.md folder" "$(cat "$TMP/add.err")"
start_server
req POST /v1/execute "${A[@]}" -d '{"skill":"upper","input":{"text":"again"}}'
expect_result "after a restart alice's skill still runs" "R(j)['text']=='AGAIN'"
req GET /v1/skills/shout "${A[@]}"
expect_json "after a restart the disabled state is kept" "j['enabled'] is False"
req GET /v1/skills "${B[@]}"
expect_json "after a restart bob still does not see it" "all(s['name']!='upper' for s in j['skills'])"
req POST /v1/execute "${B[@]}" -d '{"skill":"word-count","input":{"text":"one two three"}}'
expect_result "the SKILL.md skill runs its script from /skill, read-only" "R(j)=={'words':3,'script':'/skill/scripts/run.py','readOnly':True,'success':True}"
req GET /.well-known/agent-card.json
expect_json "the public agent card lists the global folder skill" "any(s['id']=='word-count' for s in j['skills']) and j['supportedInterfaces'][0]['url'].endswith('/a2a')"
req GET /.well-known/agent.json
expect_json "the 0.3 card is served too" "j['protocolVersion'].startswith('0.3') and j['url'].endswith('/a2a')"
stop_server
finish
