#!/usr/bin/env bash
# Reject functions the house style bans (STYLE.md rule 11) in src/, include/
# and examples/. Tests may use them to build hostile input.
set -u
cd "$(dirname "$0")/.."
bad=$(git grep -nE '\b(strcpy|strcat|sprintf|vsprintf|strtok|atoi|atol|gets|system|popen)\s*\(' \
      -- 'src/*.c' 'src/*.h' 'include/*.h' 'examples/*.c' 2>/dev/null)
if [ -n "$bad" ]; then
    echo "banned functions (use snprintf, skd_strlcpy, skd_parse_i64, strtok_r, fork+exec):"
    echo "$bad"
    exit 1
fi
echo "banned-function check: clean"
