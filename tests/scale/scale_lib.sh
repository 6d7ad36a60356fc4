# Helpers for tests/scale (sourced): PostgreSQL 15 (tests/store/pg_lib.sh),
# three `skilld serve` replicas r1..r3 on one store and one shared DATA_DIR,
# and HAProxy 2.6 with deploy/haproxy.cfg, all on loopback.
#   scale_up                 everything; sets LB (HAProxy URL), R_PORT[1..3],
#                            R_PID[1..3], ADMIN (secret), PG_URL
#   start_replica N          (re)start replica N on its port, wait for /healthz
#   wait_lb_up N [secs]      until HAProxy sees N replicas UP
#   scale_down               stop everything (trap)
#   rreq N METHOD PATH ...   req against replica N directly (STATUS, BODY)
. "$(dirname "${BASH_SOURCE[0]}")/../store/pg_lib.sh"

declare -a R_PORT R_PID
# SKILLD_AUDIT_SYNC=1: S4 asserts one audit row per successful call across a
# kill -9, which only per-call durability promises (batched rows of the
# last SKILLD_AUDIT_FLUSH_MS may be lost by a crash; docs/store.md).
# SKILLD_REPLICA_SECRET: the replicas forward live sandbox calls to each
# other (each at its own SKILLD_REPLICA_URL, set in start_replica).
REPLICA_ENV=(SKILLD_RUN_LEASE_MS=3000 SKILLD_DRAIN_MS=1500 SKILLS_SANDBOX_MAX_PER_KEY=2
    SKILLD_SHUTDOWN_GRACE_MS=5000 SKILLD_AUDIT_SYNC=1
    SKILLD_REPLICA_SECRET="scale-ring-$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')")

start_replica() {
    local n=$1
    env SKILLD_STORE="$PG_URL" SKILLD_REPLICA_ID="r$n" "${REPLICA_ENV[@]}" \
        SKILLD_REPLICA_URL="http://127.0.0.1:${R_PORT[$n]}" ${REPLICA_EXTRA:-} \
        "$SKILLD" --data-dir "$TMP/data" serve --listen "127.0.0.1:${R_PORT[$n]}" \
        >>"$TMP/r$n.out" 2>>"$TMP/r$n.err" &
    R_PID[$n]=$!
    for _ in $(seq 1 200); do
        curl -fsS "http://127.0.0.1:${R_PORT[$n]}/healthz" >/dev/null 2>&1 && return 0
        kill -0 "${R_PID[$n]}" 2>/dev/null || return 1
        sleep 0.05
    done
    return 1
}

lb_up_count() {
    curl -fsS "http://$LB_STATS/stats;csv" 2>/dev/null |
        awk -F, '$1=="replicas" && $2 ~ /^r[0-9]$/ && $18 ~ /^UP/ {n++} END {print n+0}'
}

wait_lb_up() {
    local want=$1 secs=${2:-10} i
    for i in $(seq 1 $((secs * 20))); do
        [ "$(lb_up_count)" -ge "$want" ] && return 0
        sleep 0.05
    done
    return 1
}

scale_up() {
    pg_start || return 1
    mkdir -p "$TMP/data"
    local n
    for n in 1 2 3; do R_PORT[$n]=$(pg_free_port); done
    start_replica 1 || { cat "$TMP/r1.err" >&2; return 1; }
    ADMIN=$(awk '/^  secret: /{print $2}' "$TMP/r1.out")
    start_replica 2 || return 1
    start_replica 3 || return 1
    LB_PORT=$(pg_free_port)
    LB_STATS="127.0.0.1:$(pg_free_port)"
    LB="http://127.0.0.1:$LB_PORT"
    SKILLD_LB_BIND="127.0.0.1:$LB_PORT" SKILLD_LB_STATS="$LB_STATS" \
        SKILLD_R1="127.0.0.1:${R_PORT[1]}" SKILLD_R2="127.0.0.1:${R_PORT[2]}" \
        SKILLD_R3="127.0.0.1:${R_PORT[3]}" \
        haproxy -db -f "$SKILLD_ROOT/deploy/haproxy.cfg" >"$TMP/haproxy.log" 2>&1 &
    LB_PID=$!
    wait_lb_up 3 10
}

scale_down() {
    [ -n "${LB_PID:-}" ] && kill "$LB_PID" 2>/dev/null
    local n
    for n in 1 2 3; do [ -n "${R_PID[$n]:-}" ] && kill -9 "${R_PID[$n]}" 2>/dev/null; done
    wait 2>/dev/null
    pg_stop
}

rreq() {
    local n=$1 m=$2 p=$3; shift 3
    BODY=$(curl -sS -X "$m" -o - -w '\n%{http_code}' "$@" "http://127.0.0.1:${R_PORT[$n]}$p" 2>/dev/null)
    STATUS=${BODY##*$'\n'}
    BODY=${BODY%$'\n'*}
}

now_ms() { echo $(($(date +%s%N) / 1000000)); }
