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
# As root, skilld runs as the system user skilld (made by deps.sh): its
# DATA_DIR (./var by default) must be reachable by that user.
if [ "$(id -u)" = 0 ] && [ -z "${DATA_DIR:-}" ] &&
    ! runuser -u "${SKILLD_USER:-skilld}" -- test -x "$PWD"; then
    export DATA_DIR=/var/lib/skilld
    echo "quickstart: $PWD is not reachable by user ${SKILLD_USER:-skilld}; DATA_DIR=$DATA_DIR"
fi
exec build/skilld serve "$@"
