#!/usr/bin/env bash
# Build skilld and start the server on its embedded defaults: native
# sandbox, SQLite under DATA_DIR (/var/lib/skilld as root, else ./var),
# listening on 127.0.0.1:8080. On first start
# the server creates an admin API key and prints it once, with a
# ready-to-paste MCP client configuration. Installs what it needs (Debian
# packages) when run as root.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
make -j"$(nproc)" build/skilld
# As root, skilld runs as the system user skilld (made by deps.sh), with
# DATA_DIR /var/lib/skilld unless one is given.
exec build/skilld serve "$@"
