#!/usr/bin/env bash
# The Kubernetes manifest, checked offline (never run against a cluster
# here): tests/scale/k8s_check.py. Also: the HAProxy config parses.
. "$(dirname "$0")/../lib.sh"
: "${SKILLD_ROOT:=$(cd "$(dirname "$0")/../.." && pwd)}"
python3 "$SKILLD_ROOT/tests/scale/k8s_check.py" "$SKILLD_ROOT/deploy/kubernetes/skilld.yaml" || TEST_FAILS=$((TEST_FAILS + 1))
if SKILLD_LB_BIND=127.0.0.1:1 SKILLD_LB_STATS=127.0.0.1:2 SKILLD_R1=127.0.0.1:3 SKILLD_R2=127.0.0.1:4 \
    SKILLD_R3=127.0.0.1:5 haproxy -c -f "$SKILLD_ROOT/deploy/haproxy.cfg" >"$TMP/hc.out" 2>&1; then
    pass "haproxy_cfg_is_valid"
else fail "haproxy_cfg_is_valid" "$(cat "$TMP/hc.out")"; fi
finish
