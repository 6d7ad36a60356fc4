#!/usr/bin/env bash
# Build skilld and run every test ring; the README's test command and what
# .ci/run calls. Ends with "N passed, N failed" and exits non-zero on any
# failure.
#
# Rings (each program prints "PASS name" / "FAIL name: why" lines):
#   1. lint: banned functions, clang-format, no cycle among src/ folders
#      (each a counted test)
#   2. unit: build/tests/test_* (release), then under ASan+UBSan, then valgrind
#   3. fuzz corpora replayed through the libFuzzer drivers
#   4. integration: tests/integration/*.sh, tests/security/*.sh,
#      tests/providers/*.sh, tests/node/*.test.mjs — driving the real binary;
#      tests/integration/*.sh once more against the ASan+UBSan binary
#   5. platform: tests/platform/ring.sh boots Debian 12 (kernel 6.1, cgroup
#      v2, systemd 252) under qemu and runs the sandbox there from a login
#      session, as skilld.service and as a user service (tests/platform/README.md)
#   6. store: the integration and node tests once more with the store in
#      PostgreSQL 15, and tests/store/, tests/scale/ (block at the end)
# A test file a ring skips (not executable, and not a helper another test
# sources) is counted and named at the end ("N skipped", before the last line).
# SKILLD_TEST_FILTER=regex runs only matching programs (for development).
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
# Debian's python3 (installed by deps.sh) first: a pyenv shim costs ~0.1 s a call.
export PATH="/usr/bin:/bin:$PATH"
scripts/deps.sh --test || { echo "dependency installation failed"; echo "0 passed, 1 failed"; exit 1; }

LOG=$(mktemp -d /tmp/skilld-test.XXXXXX)
passed=0
failed=0
skipped=0
skipped_names=()
filter=${SKILLD_TEST_FILTER:-.}

# run_prog LABEL CMD...: run one test program, count its PASS/FAIL lines.
# A program that exits non-zero without printing a FAIL line counts as one
# failure of its own.
run_prog() {
    local label=$1; shift
    echo "$label" | grep -Eq "$filter" || return 0
    local out="$LOG/$(echo "$label" | tr '/ ' '__').log"
    local rc=0 t0=$SECONDS
    timeout "${TEST_TIMEOUT:-600}" "$@" >"$out" 2>&1 || rc=$?
    local p f
    p=$(grep -c '^PASS ' "$out")
    f=$(grep -c '^FAIL ' "$out")
    # SHOW_PASS=1: the program's PASS lines and "#" notes too (the VM ring).
    grep -E "^(FAIL${SHOW_PASS:+|PASS|#}) " "$out" | sed "s|^|[$label] |"
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        echo "FAIL [$label] exited with status $rc; last lines:"
        tail -n 15 "$out" | sed 's/^/    /'
        f=1
    fi
    passed=$((passed + p))
    failed=$((failed + f))
    printf '%-48s %4d passed %4d failed %5ds\n' "$label" "$p" "$f" $((SECONDS - t0))
}

# runnable FILE: 0 when FILE is a test program a ring should run. A file
# that is not executable is skipped and counted, unless a sibling test
# sources it (a helper such as tests/integration/server_common.sh).
runnable() {
    [ -x "$1" ] && return 0
    grep -qsE "^[[:space:]]*(source|\.) .*/$(basename "$1")\"?\$" "$(dirname "$1")"/*.sh && return 1
    echo "$1" | grep -Eq "$filter" || return 1
    skipped=$((skipped + 1))
    skipped_names+=("$1")
    echo "SKIP $1: not executable"
    return 1
}

# lint LABEL SCRIPT: a lint script prints no PASS line; a clean run is one pass.
lint() { run_prog "$1" bash -c "$2 && echo 'PASS $1: clean'"; }

echo "== build"
if ! make -j"$(nproc)" all >"$LOG/build.log" 2>&1; then
    tail -n 40 "$LOG/build.log"; echo "0 passed, 1 failed"; exit 1
fi
lint lint/banned scripts/check-banned.sh
lint lint/format scripts/check-format.sh
lint lint/layers scripts/check-layers.sh

echo "== unit (release)"
for t in build/tests/test_*; do run_prog "unit/$(basename "$t")" "$t"; done

echo "== unit (ASan+UBSan)"
if make -j"$(nproc)" asan >"$LOG/asan-build.log" 2>&1; then
    for t in build-asan/tests/test_*; do
        ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
            run_prog "asan/$(basename "$t")" "$t"
    done
else
    tail -n 30 "$LOG/asan-build.log"; failed=$((failed + 1))
fi

echo "== unit (valgrind)"
for t in build/tests/test_*; do
    SKILLD_UNDER_VALGRIND=1 run_prog "valgrind/$(basename "$t")" \
        valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite \
        --trace-children=no "$t"
done

echo "== fuzz corpora"
if ls tests/fuzz/fuzz_*.c >/dev/null 2>&1; then
    if make fuzz >"$LOG/fuzz-build.log" 2>&1; then
        for f in build-fuzz/fuzz/fuzz_*; do
            n=$(basename "$f"); corpus=tests/fuzz/corpus/${n#fuzz_}
            if [ ! -d "$corpus" ]; then
                skipped=$((skipped + 1)); skipped_names+=("$f (no corpus $corpus)")
                echo "SKIP $f: no corpus $corpus"; continue
            fi
            run_prog "fuzz/$n" tests/fuzz/replay.sh "$f" "$corpus"
        done
    else
        tail -n 30 "$LOG/fuzz-build.log"; failed=$((failed + 1))
    fi
fi

echo "== integration"
export SKILLD="$ROOT/build/skilld" SKILLD_ROOT="$ROOT"
for t in tests/integration/*.sh tests/security/*.sh tests/providers/*.sh; do
    runnable "$t" || continue
    run_prog "${t#tests/}" "$t"
done
echo "== integration (ASan+UBSan binary)"
for t in tests/integration/*.sh; do
    [ -x "$t" ] || continue # counted as skipped above
    SKILLD="$ROOT/build-asan/skilld" ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
        UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 run_prog "asan-${t#tests/}" "$t"
done
for t in tests/node/*.test.mjs; do
    [ -f "$t" ] || continue
    run_prog "${t#tests/}" node "$t"
done

echo "== platform (Debian 12 VM under qemu)"
for t in tests/platform/ring*.sh; do
    runnable "$t" || continue
    # A cold run builds the VM image first (debootstrap, a few minutes).
    SHOW_PASS=1 TEST_TIMEOUT=${SKILLD_RING_TIMEOUT:-2400} run_prog "${t#tests/}" "$t"
done

# ---- store ring: the functional suite against PostgreSQL (src/store, docs/store.md) ----
# One PostgreSQL 15 cluster started here (tests/store/pg_lib.sh); every test
# program sees SKILLD=tests/store/skilld-pg, which gives each data directory
# a database of its own in that cluster. tests/store/*.sh start their own
# clusters (outages, several replicas). store_errors.sh is SQLite's own.
echo "== store: PostgreSQL"
pg_labels=(pg/unit/test_store_concurrency pg/unit/test_store_audit)
for t in tests/integration/*.sh; do
    case $(basename "$t") in
    store_errors.sh) continue ;; # SQLite's own failure cases
    exec_wal.sh) continue ;; # SQLite's WAL across skilld exec processes
    echo_example.sh) continue ;; # the C API example finds itself beside build/skilld
    server_spawner_stress.sh) continue ;; # the spawner's own stress, nothing of the store (95 s)
    lazy_libs.sh) continue ;; # inspects the binary itself (the PostgreSQL SKILLD is a wrapper script)
    sandbox_stale_frozen.sh) continue ;; # cgroup clean-up of the spawner, nothing of the store
    esac
    [ -x "$t" ] && pg_labels+=("pg/${t#tests/}")
done
for t in tests/node/*.test.mjs; do [ -f "$t" ] && pg_labels+=("pg/${t#tests/}"); done
for t in tests/store/*.sh tests/scale/*.sh; do runnable "$t" && pg_labels+=("${t#tests/}"); done
if printf '%s\n' "${pg_labels[@]}" | grep -Eq "$filter"; then
    . tests/store/pg_lib.sh
    if pg_start; then
        PG_STATE=$(mktemp -d /tmp/skilld-pgstate.XXXXXX)
        export SKILLD_REAL="$ROOT/build/skilld" SKILLD_TEST_PG_STATE="$PG_STATE" \
            SKILLD_TEST_PG_HOST="$PG_DIR" SKILLD_TEST_PG_PORT="$PG_PORT"
        SKILLD_TEST_STORE="$PG_URL" run_prog pg/unit/test_store_concurrency \
            build/tests/test_store_concurrency
        SKILLD_TEST_STORE="$PG_URL" run_prog pg/unit/test_store_audit build/tests/test_store_audit
        for label in "${pg_labels[@]}"; do
            case $label in
            pg/integration/*) SKILLD="$ROOT/tests/store/skilld-pg" run_prog "$label" "tests/${label#pg/}" ;;
            pg/node/*) SKILLD="$ROOT/tests/store/skilld-pg" run_prog "$label" node "tests/${label#pg/}" ;;
            esac
        done
        pg_stop
        rm -rf "$PG_STATE"
        unset SKILLD_REAL SKILLD_TEST_PG_STATE SKILLD_TEST_PG_HOST SKILLD_TEST_PG_PORT
    else
        echo "FAIL [store] PostgreSQL did not start"; failed=$((failed + 1))
    fi
    for label in "${pg_labels[@]}"; do
        case $label in store/* | scale/*) run_prog "$label" "tests/$label" ;; esac
    done
fi
# ---- end of the store ring ----

echo
echo "logs: $LOG"
if [ "$skipped" -gt 0 ]; then
    echo "skipped test programs ($skipped):"
    printf '    %s\n' "${skipped_names[@]}"
fi
echo "$skipped skipped"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
