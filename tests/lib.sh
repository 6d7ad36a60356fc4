# Shared helpers for shell integration tests. Source it, then use:
#   pass NAME | fail NAME WHY | check NAME CMD... | json_get JSON JQPATH
# Each test prints "PASS <file>: <name>" or "FAIL <file>: <name>: <why>".
# $SKILLD is the binary under test (set by scripts/test.sh); $SKILLD_TEST_BIN
# is the same with the test fixtures (debug_sleep, the MCP conformance
# fixtures; tests/fixtures/), "$SKILLD-test" unless set: what a test that
# turns on SKILLD_TEST_SKILLS or SKILLD_MCP_TEST_FIXTURES runs.
set -u
: "${SKILLD:=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/build/skilld}"
: "${SKILLD_TEST_BIN:=$SKILLD-test}"
export SKILLD_TEST_BIN
TEST_NAME=$(basename "$0")
TEST_FAILS=0
TMP=$(mktemp -d /tmp/skilld-it.XXXXXX)
# Started as root, skilld drops to SKILLD_USER: its DATA_DIR under $TMP
# must be reachable by that user (the data directory itself stays 0700).
chmod 0755 "$TMP"
# A test that names no DATA_DIR gets its own (as root the default would be
# the machine's /var/lib/skilld).
export DATA_DIR=${DATA_DIR:-$TMP/var}
trap 'rm -rf "$TMP"' EXIT
pass() { echo "PASS $TEST_NAME: $1"; }
fail() { echo "FAIL $TEST_NAME: $1: ${2:-}"; TEST_FAILS=$((TEST_FAILS + 1)); }
# check NAME CMD...: pass when CMD exits 0.
check() { local n=$1; shift; if "$@" >/dev/null 2>&1; then pass "$n"; else fail "$n" "command failed: $*"; fi; }
# json_get JSON EXPR: evaluate a python expression over parsed JSON bound to j.
json_get() { python3 -c 'import json,sys; j=json.loads(sys.argv[1]); v=eval(sys.argv[2]); print(json.dumps(v) if not isinstance(v,str) else v)' "$1" "$2"; }
# jget [-l] .PATH [FILE]: a field of JSON on stdin or in FILE (tests/tools/jget.c:
# a string as is, anything else as JSON; -l its length; nothing and status 1
# when it is missing or the input is not JSON).
JGET=${JGET:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/build/tools/jget}
[ -x "$JGET" ] || { echo "FAIL $TEST_NAME: $JGET missing (make tests builds it)"; exit 1; }
finish() { exit $((TEST_FAILS > 0)); }
