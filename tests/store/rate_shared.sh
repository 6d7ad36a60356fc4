#!/usr/bin/env bash
# The per-key rate limit holds over replicas (issue 11 part 3): two
# `skilld serve` on one PostgreSQL with SKILLD_RATE_LIMIT_PER_KEY=2 and a
# burst of 4 share each key's bucket, so requests spread over both get at
# most burst + rate x elapsed through, not twice that; refusals are 429
# with Retry-After on both replicas.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../scale/scale_lib.sh"
trap 'scale_down; rm -rf "$TMP"' EXIT

pg_start || { fail "pg_start" "cannot start PostgreSQL"; finish; }
mkdir -p "$TMP/data"
REPLICA_ENV+=(SKILLD_RATE_LIMIT_PER_KEY=2 SKILLD_RATE_LIMIT_BURST=4)
R_PORT[1]=$(pg_free_port); R_PORT[2]=$(pg_free_port)
start_replica 1 || { fail "start_r1" "$(tail -3 "$TMP/r1.err")"; finish; }
ADMIN=$(awk '/^  secret: /{print $2}' "$TMP/r1.out")
start_replica 2 || { fail "start_r2" "$(tail -3 "$TMP/r2.err")"; finish; }
H=(-H "Authorization: Bearer $ADMIN")
t0=$(date +%s%N); ok=0; codes=""
for i in $(seq 1 16); do
    n=$((i % 2 + 1))
    s=$(curl -sS -o /dev/null -D "$TMP/h$n" -w '%{http_code}' "${H[@]}" "http://127.0.0.1:${R_PORT[$n]}/v1/skills")
    codes="$codes r$n:$s"
    [ "$s" = 200 ] && ok=$((ok + 1))
    [ "$s" = 429 ] && grep -qi '^retry-after: [1-9]' "$TMP/h$n" && touch "$TMP/ra$n"
done
ms=$((($(date +%s%N) - t0) / 1000000))
bound=$((4 + 2 * ms / 1000 + 1))
echo "# $ok of 16 allowed in ${ms} ms (shared bound $bound; one bucket per replica would allow about twice the burst)"
if [ "$ok" -ge 4 ] && [ "$ok" -le "$bound" ]; then pass "one_bucket_for_both_replicas"; else fail "one_bucket_for_both_replicas" "$ok allowed in ${ms} ms:$codes"; fi
if [ -e "$TMP/ra1" ] && [ -e "$TMP/ra2" ]; then pass "both_replicas_answer_429_with_retry_after"; else fail "both_replicas_answer_429_with_retry_after" "$codes"; fi
sleep 1.2
s=$(curl -sS -o /dev/null -w '%{http_code}' "${H[@]}" "http://127.0.0.1:${R_PORT[1]}/v1/skills")
if [ "$s" = 200 ]; then pass "the_bucket_refills"; else fail "the_bucket_refills" "status $s"; fi
finish
