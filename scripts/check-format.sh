#!/usr/bin/env bash
# Report files that clang-format would change (src/ and include/).
set -u
cd "$(dirname "$0")/.."
fail=0
for f in $(git ls-files 'src/*.c' 'src/*.h' 'include/*.h'); do
    if ! clang-format --dry-run --Werror "$f" >/dev/null 2>&1; then
        echo "needs clang-format: $f"
        fail=1
    fi
done
exit $fail
