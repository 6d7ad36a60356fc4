#!/usr/bin/env bash
# The escape battery's cross-sandbox cases between two live sandboxes of
# different keys (docs/sandbox.md, "Live sandboxes"): from the attacker's
# sandbox, `kill -9 -1`, `pkill -9`, PTRACE_ATTACH on every pid it can name,
# a look at every /proc/N/cmdline and a read of the victim's /tmp file.
# The victim's background process runs on as the same host process, stays
# invisible, its /tmp file is read only by the victim's own sandbox, and
# both sandboxes live on.
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/../integration/server_common.sh"
# dash has no exec -a: the victim is told apart by a unique sleep length.
VICTIM="600.$((RANDOM % 9000 + 1000))"
SECRET="secret-$$-$RANDOM"

start_server
[ -n "$ADMIN" ] || { fail "server starts" "$(tail -5 "$TMP/serve.err")"; finish; }
read -r _ KA < <(new_key attacker skills:execute)
read -r _ KV < <(new_key victim skills:execute)
J=(-H 'Content-Type: application/json')
as() { local k=$1; shift; req "$@" -H "Authorization: Bearer $k" "${J[@]}"; }
# ex KEY ID SCRIPT: sh -c SCRIPT in the live sandbox; the result in BODY.
ex() {
    local in
    in=$(python3 -c 'import json,sys; print(json.dumps({"command":"sh","args":["-c",sys.argv[1]]}))' "$3")
    as "$1" POST "/v1/sandboxes/$2/exec" -d "$in"
}
out() { echo "$BODY" | "$JGET" .stdout; }

as "$KV" POST /v1/sandboxes -d '{}'
SV=$(echo "$BODY" | "$JGET" .id)
as "$KA" POST /v1/sandboxes -d '{}'
SA=$(echo "$BODY" | "$JGET" .id)
[ -n "$SV" ] && [ -n "$SA" ] && pass "two live sandboxes of two keys" || fail "two live sandboxes of two keys" "$BODY"

ex "$KV" "$SV" "echo $SECRET > /tmp/secret"
as "$KV" POST "/v1/sandboxes/$SV/exec" -d "{\"command\":\"sleep\",\"args\":[\"$VICTIM\"],\"background\":true}"
for _ in $(seq 1 200); do pgrep -f "^sleep $VICTIM\$" >/dev/null && break; sleep 0.05; done
before=$(pgrep -f "^sleep $VICTIM\$")
[ -n "$before" ] && pass "the victim's background process runs" || fail "the victim's background process runs" "$BODY"

ex "$KA" "$SA" "kill -9 -1; pkill -9 sleep; python3 -c '
import ctypes
libc = ctypes.CDLL(None)
print(\"attached\", sum(1 for p in range(1, 4096) if libc.ptrace(16, p, 0, 0) == 0))
'; cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' '; echo; cat /tmp/secret 2>&1; ls -A /tmp; true"
ATTACK=$(out)
after=$(pgrep -f "^sleep $VICTIM\$")
[ -n "$before" ] && [ "$before" = "$after" ] && pass "cannot signal the other key's live sandbox" ||
    fail "cannot signal the other key's live sandbox" "before '$before' after '$after'"
echo "$ATTACK" | grep -q '^attached 0$' && pass "cannot ptrace any process it can name" ||
    fail "cannot ptrace any process it can name" "$ATTACK"
if echo "$ATTACK" | grep -q "sleep $VICTIM"; then fail "cannot see the other sandbox's processes" "$ATTACK"; else
    pass "cannot see the other sandbox's processes"; fi
if echo "$ATTACK" | grep -q "$SECRET"; then fail "cannot read the other sandbox's /tmp" "$ATTACK"; else
    pass "cannot read the other sandbox's /tmp"; fi
as "$KA" POST "/v1/sandboxes/$SV/exec" -d '{"command":"cat","args":["/tmp/secret"]}'
expect_status "the other key's sandbox id is not_found to the attacker" 404

ex "$KV" "$SV" "cat /tmp/secret"
[ "$(out)" = "$SECRET" ] && pass "the victim's sandbox lives on with its /tmp" || fail "the victim's sandbox lives on with its /tmp" "$BODY"
ex "$KA" "$SA" "echo still"
[ "$(out)" = still ] && pass "the attacker's own sandbox lives on (kill -9 -1 reached only its own exec)" ||
    fail "the attacker's own sandbox lives on" "$BODY"
as "$KV" DELETE "/v1/sandboxes/$SV"
as "$KA" DELETE "/v1/sandboxes/$SA"
stop_server
finish
