#!/usr/bin/env bash
# Build skilld and start the server on its embedded defaults: native
# sandbox, SQLite under ./var, listening on 127.0.0.1:8080. On first start
# the server creates an admin API key and prints it once, with a
# ready-to-paste MCP client configuration. Installs what it needs (Debian
# packages) when run as root.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
make -j"$(nproc)" build/skilld
exec build/skilld serve "$@"
