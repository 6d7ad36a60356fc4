# Helpers for the server integration tests (sourced after ../lib.sh; not a
# test itself, so not executable). Starts the real `skilld serve` on a free
# loopback port with the test skills, and wraps curl.
#   start_server [ENV=VALUE...]   sets PORT, URL, SRV_PID, ADMIN (secret)
#   stop_server                   SIGTERM, waits, returns the exit status
#   new_key NAME SCOPES           prints "id secret"
#   req METHOD PATH [curl args]   sets STATUS and BODY (and HDRS file)
#   store_sql SQL                 runs SQL on the server's store, as another
#                                 client (SQLite, or tests/store/skilld-pg's
#                                 PostgreSQL database of DATA_DIR)

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

start_server() {
    DATA="$TMP/data"
    PORT=$(free_port)
    URL="http://127.0.0.1:$PORT"
    env SKILLD_TEST_SKILLS=true "$@" "$SKILLD_TEST_BIN" --data-dir "$DATA" serve --listen "127.0.0.1:$PORT" \
        >"$TMP/serve.out" 2>"$TMP/serve.err" &
    SRV_PID=$!
    # Ready when /healthz answers and the server has logged "listening on"
    # (after the first start's admin key is made and its secret printed on
    # stdout; a later start prints none).
    ADMIN=""
    for _ in $(seq 1 200); do
        if grep -q 'listening on http' "$TMP/serve.err" && curl -fsS "$URL/healthz" >/dev/null 2>&1; then
            ADMIN=$(awk '/^  secret: /{print $2}' "$TMP/serve.out")
            break
        fi
        kill -0 "$SRV_PID" 2>/dev/null || break
        sleep 0.05
    done
}

stop_server() {
    kill -TERM "$SRV_PID" 2>/dev/null
    local rc=0
    wait "$SRV_PID" || rc=$?
    return $rc
}

new_key() {
    "$SKILLD" --data-dir "$DATA" keys create "$1" --scopes "$2" --json |
        python3 -c 'import json,sys; k=json.load(sys.stdin); print(k["id"], k["secret"])'
}

# req METHOD PATH [extra curl args...]: STATUS, BODY; headers in $TMP/hdrs.
req() {
    local m=$1 p=$2; shift 2
    BODY=$(curl -sS -X "$m" -o - -D "$TMP/hdrs" -w '\n%{http_code}' "$@" "$URL$p" 2>/dev/null)
    STATUS=${BODY##*$'\n'}
    BODY=${BODY%$'\n'*}
}

# expect_status NAME WANT: pass when STATUS == WANT.
expect_status() {
    if [ "$STATUS" = "$2" ]; then pass "$1"; else fail "$1" "status $STATUS, want $2; body: ${BODY:0:200}"; fi
}

# jq-like check with python: expect_json NAME EXPR (j is the parsed BODY).
expect_json() {
    if python3 -c 'import json,sys; j=json.loads(sys.argv[1]); sys.exit(0 if eval(sys.argv[2]) else 1)' "$BODY" "$2" 2>/dev/null; then
        pass "$1"
    else
        fail "$1" "expression $2 false on: ${BODY:0:300}"
    fi
}

header() { grep -i "^$1:" "$TMP/hdrs" | head -1 | cut -d' ' -f2- | tr -d '\r'; }

MCP_H=(-H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream')

# mcp_init SECRET: prints the session id of a new initialized session.
mcp_init() {
    local sid
    sid=$(curl -sS -D - -o /dev/null "${MCP_H[@]}" -H "Authorization: Bearer $1" \
        -d '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"it","version":"1"}}}' \
        "$URL/mcp" | awk 'tolower($1)=="mcp-session-id:"{print $2}' | tr -d '\r')
    curl -sS -o /dev/null "${MCP_H[@]}" -H "Authorization: Bearer $1" -H "Mcp-Session-Id: $sid" \
        -d '{"jsonrpc":"2.0","method":"notifications/initialized"}' "$URL/mcp"
    echo "$sid"
}

# wait_in_flight SECRET N: wait until N skill calls run in the server.
wait_in_flight() {
    for _ in $(seq 1 200); do
        curl -sS -H "Authorization: Bearer $1" "$URL/metrics" | grep -q "^skilld_calls_in_flight $2\$" && return 0
        sleep 0.05
    done
    return 1
}

store_sql() {
    if [ -n "${SKILLD_TEST_PG_HOST:-}" ]; then
        local d
        d=skd_$(printf '%s' "$(realpath -m -- "$DATA")" | sha256sum | cut -c1-24)
        psql -X -tA -h "$SKILLD_TEST_PG_HOST" -p "$SKILLD_TEST_PG_PORT" -U skilld -d "$d" -c "$1"
    else
        sqlite3 "$DATA/skilld.db" "$1"
    fi
}
