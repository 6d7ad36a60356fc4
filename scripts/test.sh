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
#      the integration scripts the store ring leaves out once more against
#      the ASan+UBSan binary
#   5. platform: tests/platform/ring.sh boots Debian 12 (kernel 6.1, cgroup
#      v2, systemd 252) under qemu and runs the sandbox there from a login
#      session, as skilld.service, as a user service and alone in a cgroup
#      without systemd (tests/platform/README.md)
#   6. store: the integration and node tests once more, with the store in
#      PostgreSQL 15 and the ASan+UBSan binary, and tests/store/,
#      tests/scale/ (block at the end)
# A test file a ring skips (not executable, and not a helper another test
# sources) is counted and named at the end ("N skipped", before the last line).
# SKILLD_TEST_FILTER=regex runs only matching programs (for development).
#
# What runs beside what (two cores): the ASan+UBSan and fuzz builds are made
# in the background while the release unit tests run; the valgrind ring and
# the fuzz replays run one program per core; the platform ring (its
# sandboxes inside a qemu guest) runs in the background beside the
# integration ring; every other program that starts servers or sandboxes
# runs one at a time, as each may assert on what is left behind on the host. Counts go to files ($LOG/counts), so a program run in the
# background counts like one in the foreground.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
# Debian's python3 (installed by deps.sh) first: a pyenv shim costs ~0.1 s a call.
export PATH="/usr/bin:/bin:$PATH"
scripts/deps.sh --test || { echo "dependency installation failed"; echo "0 passed, 1 failed"; exit 1; }

LOG=$(mktemp -d /tmp/skilld-test.XXXXXX)
: >"$LOG/counts"
skipped=0
skipped_names=()
filter=${SKILLD_TEST_FILTER:-.}
cores=$(nproc)

# count PASSED FAILED: add to the totals (one line a program; safe from a
# background job, each line one short O_APPEND write).
count() { echo "$1 $2" >>"$LOG/counts"; }

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
    count "$p" "$f"
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

# run_par LABEL CMD...: run_prog in the background, at most one a core;
# wait_par waits for all of them. Only for programs that start no server
# and no sandbox (valgrind'd unit tests of pure code, fuzz replays).
par_pids=()
run_par() {
    local n pid
    while :; do
        n=0
        for pid in "${par_pids[@]}"; do kill -0 "$pid" 2>/dev/null && n=$((n + 1)); done
        [ "$n" -lt "$cores" ] && break
        wait -n "${par_pids[@]}" 2>/dev/null || sleep 0.1
    done
    run_prog "$@" &
    par_pids+=($!)
}
wait_par() {
    [ ${#par_pids[@]} -eq 0 ] || wait "${par_pids[@]}"
    par_pids=()
}

# build_bg NAME CMD...: a build in the background (its log and status in
# $LOG/NAME.log and $LOG/NAME.rc); build_wait NAME: 0 when it succeeded,
# else its log's tail and one failure.
build_bg() {
    local name=$1; shift
    ("$@" >"$LOG/$name.log" 2>&1; echo $? >"$LOG/$name.rc") &
}
build_wait() {
    while [ ! -s "$LOG/$1.rc" ]; do sleep 0.5; done
    [ "$(cat "$LOG/$1.rc")" = 0 ] && return 0
    tail -n 30 "$LOG/$1.log"; count 0 1; return 1
}

echo "== build"
if ! make -j"$(nproc)" all >"$LOG/build.log" 2>&1; then
    tail -n 40 "$LOG/build.log"; echo "0 passed, 1 failed"; exit 1
fi
# The sanitizer and fuzz builds, beside the release unit tests: niced, so
# the tests come first and the builds take the cores the tests leave idle.
build_bg asan-build nice -n 10 make -j"$cores" asan
build_bg fuzz-build nice -n 10 make -j"$cores" fuzz
lint lint/banned scripts/check-banned.sh
lint lint/format scripts/check-format.sh
lint lint/layers scripts/check-layers.sh

echo "== unit (release)"
for t in build/tests/test_*; do run_prog "unit/$(basename "$t")" "$t"; done

echo "== unit (ASan+UBSan)"
if build_wait asan-build; then
    for t in build-asan/tests/test_*; do
        ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
            run_prog "asan/$(basename "$t")" "$t"
    done
fi

# Unit programs that start sandboxes or servers run alone under valgrind;
# the others, one a core.
echo "== unit (valgrind)"
for t in build/tests/test_*; do
    case $(basename "$t") in
    test_sandbox_* | test_server_* | test_store_* | test_workspace_*) runner=run_prog ;;
    *) runner=run_par ;;
    esac
    SKILLD_UNDER_VALGRIND=1 $runner "valgrind/$(basename "$t")" \
        valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite \
        --trace-children=no "$t"
done
wait_par

echo "== fuzz corpora"
if build_wait fuzz-build; then
    for f in build-fuzz/fuzz/fuzz_*; do
        n=$(basename "$f"); corpus=tests/fuzz/corpus/${n#fuzz_}
        if [ ! -d "$corpus" ]; then
            skipped=$((skipped + 1)); skipped_names+=("$f (no corpus $corpus)")
            echo "SKIP $f: no corpus $corpus"; continue
        fi
        run_par "fuzz/$n" tests/fuzz/replay.sh "$f" "$corpus"
    done
    wait_par
fi

# The platform ring runs in the background beside the integration ring:
# its sandboxes are inside a qemu guest, so nothing it starts or leaves is
# seen by the host's tests; its output is shown after the node tests.
plat_rings=()
for t in tests/platform/ring*.sh; do runnable "$t" && plat_rings+=("$t"); done
(
    for t in "${plat_rings[@]}"; do
        # A cold run builds the VM image first (debootstrap, a few minutes).
        SHOW_PASS=1 TEST_TIMEOUT=${SKILLD_RING_TIMEOUT:-2400} run_prog "${t#tests/}" "$t"
    done
) >"$LOG/platform.out" 2>&1 &
plat_pid=$!

echo "== integration"
export SKILLD="$ROOT/build/skilld" SKILLD_ROOT="$ROOT"
for t in tests/integration/*.sh tests/security/*.sh tests/providers/*.sh; do
    runnable "$t" || continue
    run_prog "${t#tests/}" "$t"
done
# The integration scripts the PostgreSQL ring leaves out (SQLite's own
# cases, or nothing of the store) run here against the ASan+UBSan binary;
# every other one runs against it in the PostgreSQL ring.
pg_skip='^(store_errors|exec_wal|echo_example|server_spawner_stress|lazy_libs|sandbox_stale_frozen)\.sh$'
echo "== integration (ASan+UBSan binary; the rest in the PostgreSQL ring)"
for t in tests/integration/*.sh; do
    [ -x "$t" ] || continue # counted as skipped above
    basename "$t" | grep -Eq "$pg_skip" || continue
    SKILLD="$ROOT/build-asan/skilld" ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
        UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 run_prog "asan-${t#tests/}" "$t"
done
for t in tests/node/*.test.mjs; do
    [ -f "$t" ] || continue
    run_prog "${t#tests/}" node "$t"
done

echo "== platform (Debian 12 VM under qemu; ran beside the integration ring)"
wait "$plat_pid"
cat "$LOG/platform.out"

# ---- store ring: the functional suite against PostgreSQL (src/store, docs/store.md) ----
# One PostgreSQL 15 cluster started here (tests/store/pg_lib.sh); every test
# program sees SKILLD=tests/store/skilld-pg, which gives each data directory
# a database of its own in that cluster. tests/store/*.sh start their own
# clusters (outages, several replicas). store_errors.sh is SQLite's own.
echo "== store: PostgreSQL"
# Left out ($pg_skip, run against the ASan binary above): store_errors.sh
# and exec_wal.sh (SQLite's own failure cases and WAL), echo_example.sh (the
# C API example finds itself beside the binary), lazy_libs.sh (inspects the
# binary, and the PostgreSQL SKILLD is a wrapper script),
# server_spawner_stress.sh and sandbox_stale_frozen.sh (the spawner's own
# stress and cgroup clean-up, nothing of the store).
pg_labels=(pg/unit/test_store_concurrency pg/unit/test_store_audit)
for t in tests/integration/*.sh; do
    basename "$t" | grep -Eq "$pg_skip" && continue
    [ -x "$t" ] && pg_labels+=("pg/${t#tests/}")
done
for t in tests/node/*.test.mjs; do [ -f "$t" ] && pg_labels+=("pg/${t#tests/}"); done
for t in tests/store/*.sh tests/scale/*.sh; do runnable "$t" && pg_labels+=("${t#tests/}"); done
if printf '%s\n' "${pg_labels[@]}" | grep -Eq "$filter"; then
    . tests/store/pg_lib.sh
    if pg_start; then
        PG_STATE=$(mktemp -d /tmp/skilld-pgstate.XXXXXX)
        # The ASan+UBSan binary: the PostgreSQL ring is also the sanitizer
        # ring of the integration scripts (one build, one pass).
        export SKILLD_REAL="$ROOT/build-asan/skilld" SKILLD_TEST_PG_STATE="$PG_STATE" \
            SKILLD_TEST_PG_HOST="$PG_DIR" SKILLD_TEST_PG_PORT="$PG_PORT"
        SKILLD_TEST_STORE="$PG_URL" run_prog pg/unit/test_store_concurrency \
            build/tests/test_store_concurrency
        SKILLD_TEST_STORE="$PG_URL" run_prog pg/unit/test_store_audit build/tests/test_store_audit
        export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
        for label in "${pg_labels[@]}"; do
            case $label in
            pg/integration/*) SKILLD="$ROOT/tests/store/skilld-pg" run_prog "$label" "tests/${label#pg/}" ;;
            pg/node/*) SKILLD="$ROOT/tests/store/skilld-pg" run_prog "$label" node "tests/${label#pg/}" ;;
            esac
        done
        pg_stop
        rm -rf "$PG_STATE"
        unset SKILLD_REAL SKILLD_TEST_PG_STATE SKILLD_TEST_PG_HOST SKILLD_TEST_PG_PORT ASAN_OPTIONS UBSAN_OPTIONS
    else
        echo "FAIL [store] PostgreSQL did not start"; count 0 1
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
read -r passed failed < <(awk '{p += $1; f += $2} END {print p + 0, f + 0}' "$LOG/counts")
echo "$skipped skipped"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
