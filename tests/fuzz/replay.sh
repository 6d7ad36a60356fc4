#!/usr/bin/env bash
# Replay a fuzz corpus through a libFuzzer driver: one PASS line per input
# that runs clean, one FAIL line per input that crashes or trips a sanitizer.
set -u
driver=$1 corpus=$2
for f in "$corpus"/*; do
    [ -f "$f" ] || continue
    if "$driver" "$f" >/dev/null 2>&1; then
        echo "PASS $(basename "$driver"): $(basename "$f")"
    else
        echo "FAIL $(basename "$driver"): $(basename "$f") crashed"
    fi
done
