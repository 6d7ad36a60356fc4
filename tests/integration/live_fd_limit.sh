#!/usr/bin/env bash
# Live sandboxes under a server started with a low descriptor limit
# (`ulimit -n 128`, soft and hard), through the real binary and REST:
#   1. a sandbox, one-shot or live, starts at all: its processes get the
#      server's hard limit when that is below the 1024 they are given
#      otherwise (raising it would need a capability the spawner does not
#      have);
#   2. creating sandboxes until the descriptors run out answers every
#      request (no dropped connection): 201, then 503 sandbox_unavailable
#      or 429 busy, with a message;
#   3. a sandbox made before the limit still runs commands, and its
#      processes see the lower limit;
#   4. deleting them all leaves no cgroup of any sandbox, made or refused,
#      and then a create succeeds again.
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/server_common.sh"

ulimit -Sn 128
ulimit -Hn 128
start_server SKILLS_SANDBOX_MAX_LIVE_PER_KEY=200 SKILLS_SANDBOX_MAX_LIVE=200
[ -n "$ADMIN" ] || { fail "server starts under ulimit -n 128" "$(tail -5 "$TMP/serve.err")"; finish; }
K1=$(new_key fd1 skills:execute | cut -d' ' -f2)
J=(-H 'Content-Type: application/json' -H "Authorization: Bearer $K1")
cg_dirs() { find /sys/fs/cgroup -maxdepth 9 -type d -name "$1" 2>/dev/null; }

# ---- 1, 2 ----
req POST /v1/execute "${J[@]}" -d '{"skill":"execute_command","input":{"command":"sh","args":["-c","ulimit -Hn"]}}'
expect_json "a one-shot run starts, with the server's hard limit of 128" 'j["success"] and j["stdout"] == "128\n"'

MADE=() SEEN=() first_fail="" dropped=""
for i in $(seq 1 80); do
    req POST /v1/sandboxes "${J[@]}" -d '{}'
    if [ "$STATUS" = 201 ]; then
        MADE+=("$(echo "$BODY" | "$JGET" .id)")
        continue
    fi
    [ "$STATUS" = 000 ] && dropped="$i"
    first_fail="$STATUS $BODY"
    # Refused ids show in the message when a cgroup was being made.
    for u in $(echo "$BODY" | grep -oE '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}'); do SEEN+=("$u"); done
    break
done
[ "${#MADE[@]}" -gt 0 ] && pass "sandboxes start under a hard limit of 128 descriptors (${#MADE[@]} made)" ||
    fail "sandboxes start under a hard limit of 128 descriptors" "$first_fail"
[ -z "$dropped" ] && pass "no create dropped its connection" || fail "no create dropped its connection" "request $dropped"
[ -n "$first_fail" ] && pass "the descriptors run out before 80 sandboxes" || fail "the descriptors run out before 80 sandboxes" "${#MADE[@]} made"
echo "$first_fail" | python3 -c '
import json, sys
line = sys.stdin.read()
status, _, body = line.partition(" ")
j = json.loads(body)
assert status in ("503", "429"), status
assert j["success"] is False and j["error"]["code"] in ("sandbox_unavailable", "busy"), j
assert len(j["error"]["message"]) > 10, j
' && pass "past the limit a create answers 503 or 429 with a code and a message" ||
    fail "past the limit a create answers 503 or 429 with a code and a message" "$first_fail"
[ "${#MADE[@]}" -gt 0 ] || finish
# More refusals, each answered.
for i in 1 2 3; do
    req POST /v1/sandboxes "${J[@]}" -d '{}'
    case "$STATUS" in
    503 | 429) ;;
    201) MADE+=("$(echo "$BODY" | "$JGET" .id)") ;;
    *) dropped="again $i: $STATUS" ;;
    esac
done
[ -z "$dropped" ] && pass "creates past the limit go on being answered" || fail "creates past the limit go on being answered" "$dropped"

# ---- 3 ----
ok=""
for _ in 1 2 3 4 5; do
    req POST "/v1/sandboxes/${MADE[0]}/exec" "${J[@]}" -d '{"command":"sh","args":["-c","ulimit -Hn"]}'
    [ "$STATUS" = 200 ] && { ok=1; break; }
    # At the limit an exec may be refused too; free one sandbox and retry.
    last=$((${#MADE[@]} - 1))
    [ "$last" -gt 0 ] && req DELETE "/v1/sandboxes/${MADE[$last]}" "${J[@]}" && unset "MADE[$last]"
done
[ -n "$ok" ] && echo "$BODY" | python3 -c 'import json,sys; j=json.load(sys.stdin); assert j["success"] and j["stdout"] == "128\n", j' &&
    pass "a sandbox runs commands, with the server's hard limit of 128" ||
    fail "a sandbox runs commands, with the server's hard limit of 128" "$STATUS $BODY"

# ---- 4 ----
for id in "${MADE[@]}"; do
    req DELETE "/v1/sandboxes/$id" "${J[@]}"
    [ "$STATUS" = 200 ] || fail "delete $id answers 200" "$STATUS $BODY"
done
left=""
for id in "${MADE[@]}" "${SEEN[@]}"; do [ -n "$(cg_dirs "$id")" ] && left="$left $id"; done
[ -z "$left" ] && pass "no cgroup is left of a sandbox made or refused" || fail "no cgroup is left of a sandbox made or refused" "$left"
req POST /v1/sandboxes "${J[@]}" -d '{}'
expect_status "once they are deleted a create succeeds again" 201
req DELETE "/v1/sandboxes/$(echo "$BODY" | "$JGET" .id)" "${J[@]}"
stop_server
finish
