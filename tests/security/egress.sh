#!/usr/bin/env bash
# The egress proxy through the real binary (issue 15): sandboxed code with
# networkEnabled reaches the network only through the proxy skilld places on
# the sandbox's loopback, and every connection goes through the outbound
# guard. Runs in a network namespace of its own (tests/fixtures/net/netenv.sh)
# whose loopback carries every forbidden address, with a catch-all listener
# on [::]:8111 that records any connection reaching one of them. The allowed
# upstreams (the fixture app on 127.0.0.2:8222 and a PEP 503 index on
# 127.0.0.2:8333) are reachable only because SKILLS_OUTBOUND_ALLOW_CIDRS
# opens 127.0.0.2/32; allowed.test is pinned to them by
# SKILLS_OUTBOUND_RESOLVE.
# Before the network namespace: dockerd and the test image for the container
# providers (scripts/setup-containers.sh runs in the host's namespace).
if [ -z "${SKILLD_NETNS:-}" ]; then
    SETUP_LOG=$(mktemp /tmp/skilld-egress-setup.XXXXXX)
    if ! "$(dirname "$0")/../../scripts/setup-containers.sh" >"$SETUP_LOG" 2>&1; then
        echo "FAIL egress.sh: container setup: $(tail -3 "$SETUP_LOG" | tr '\n' ' ')"
    fi
    rm -f "$SETUP_LOG"
fi
source "$(dirname "$0")/../fixtures/net/netenv.sh"
source "$(dirname "$0")/../lib.sh"
net_start || { fail setup "network namespace set-up failed"; finish; }
P=$CATCH_PORT
IDX_PORT=8333

# --- a PEP 503 index with one wheel, for pip ---------------------------------
mkdir -p "$TMP/index"
python3 - "$TMP/index" <<'EOF'
import hashlib, os, sys, zipfile, base64
d = sys.argv[1]
name, ver = "skdegress", "1.0"
whl = "%s-%s-py3-none-any.whl" % (name, ver)
files = {
    "skdegress/__init__.py": b"VALUE = 42\n",
    "skdegress-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: skdegress\nVersion: 1.0\n",
    "skdegress-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}
rec = ""
for n, b in files.items():
    h = base64.urlsafe_b64encode(hashlib.sha256(b).digest()).rstrip(b"=").decode()
    rec += "%s,sha256=%s,%d\n" % (n, h, len(b))
rec += "skdegress-1.0.dist-info/RECORD,,\n"
files["skdegress-1.0.dist-info/RECORD"] = rec.encode()
with zipfile.ZipFile(os.path.join(d, whl), "w") as z:
    for n, b in files.items():
        z.writestr(n, b)
digest = hashlib.sha256(open(os.path.join(d, whl), "rb").read()).hexdigest()
os.makedirs(os.path.join(d, "simple", name), exist_ok=True)
with open(os.path.join(d, "simple", name, "index.html"), "w") as f:
    f.write('<!DOCTYPE html><html><body><a href="/%s#sha256=%s">%s</a></body></html>\n'
            % (whl, digest, whl))
with open(os.path.join(d, "simple", "index.html"), "w") as f:
    f.write('<!DOCTYPE html><html><body><a href="/simple/%s/">%s</a></body></html>\n' % (name, name))
EOF
# ... an npm registry document and tarball for the same package ...
python3 - "$TMP/index" "$IDX_PORT" <<'EOF'
import base64, hashlib, io, json, os, sys, tarfile
d, port = sys.argv[1], sys.argv[2]
buf = io.BytesIO()
with tarfile.open(fileobj=buf, mode="w:gz") as t:
    for n, b in (("package/package.json", b'{"name":"skdegress","version":"1.0.0","main":"index.js"}\n'),
                 ("package/index.js", b"module.exports = 42;\n")):
        i = tarfile.TarInfo(n); i.size = len(b); i.mode = 0o644
        t.addfile(i, io.BytesIO(b))
tgz = buf.getvalue()
open(os.path.join(d, "skdegress-1.0.0.tgz"), "wb").write(tgz)
doc = {"name": "skdegress", "dist-tags": {"latest": "1.0.0"}, "versions": {"1.0.0": {
    "name": "skdegress", "version": "1.0.0", "main": "index.js",
    "dist": {"tarball": "http://allowed.test:%s/skdegress-1.0.0.tgz" % port,
             "shasum": hashlib.sha1(tgz).hexdigest(),
             "integrity": "sha512-" + base64.b64encode(hashlib.sha512(tgz).digest()).decode()}}}}
open(os.path.join(d, "skdegress"), "w").write(json.dumps(doc))
EOF
# ... and a git repository over git's dumb HTTP protocol.
git init -q "$TMP/gitsrc" && echo egress-git >"$TMP/gitsrc/README" &&
    git -C "$TMP/gitsrc" add README && git -C "$TMP/gitsrc" -c user.name=t -c user.email=t@t commit -qm init &&
    git clone -q --bare "$TMP/gitsrc" "$TMP/index/repo.git" && git -C "$TMP/index/repo.git" update-server-info ||
    fail setup "a git repository for the dumb-HTTP case"
(cd "$TMP/index" && exec python3 -m http.server --bind "$APP" "$IDX_PORT") >"$TMP/index.log" 2>&1 &
IDX_PID=$!
trap 'kill "$FIX_PID" "$IDX_PID" 2>/dev/null; rm -rf "$TMP"' EXIT
for _ in $(seq 1 100); do
    curl -fsS -o /dev/null "http://$APP:$IDX_PORT/simple/" 2>/dev/null && break
    sleep 0.1
done

export SKILLS_SANDBOX_NETWORK_ENABLED=true
export SKILLS_SANDBOX_RUNTIME=native
PINS="allowed.test:$APP_PORT:$APP,allowed.test:$IDX_PORT:$APP,evil.test:$P:127.0.0.1"
PINS="$PINS,meta.test:$P:169.254.169.254,v6.test:$P:[::1],priv.test:$P:10.0.0.1"
PINS="$PINS,mapped.test:$P:[::ffff:127.0.0.1],other.test:$APP_PORT:$APP"
export SKILLS_OUTBOUND_RESOLVE=$PINS

# sbx SCRIPT [extra input JSON fields]: run SCRIPT with sh -c in a native
# sandbox with networkEnabled; prints the result JSON.
sbx() {
    local extra=${2:-}
    "$SKILLD" run execute_command --key t --input "$(python3 -c '
import json, sys
d = {"command": "sh", "args": ["-c", sys.argv[1]], "networkEnabled": True, "timeoutMs": 30000}
d.update(json.loads(sys.argv[2] or "{}"))
print(json.dumps(d))' "$1" "$extra")" 2>>"$TMP/stderr"
}
stdout_of() { json_get "$1" 'j.get("stdout","")'; }
# verdicts J HOST: the egress verdicts recorded for HOST, space-separated.
verdicts() { json_get "$1" '" ".join(sorted(set(r["verdict"] for r in j.get("egress",[]) if r.get("host")==sys.argv[3])))' "$2"; }
json_get() { python3 -c 'import json,sys; j=json.loads(sys.argv[1]); v=eval(sys.argv[2]); print(json.dumps(v) if not isinstance(v,str) else v)' "$@"; }

# --- the allowed cases: curl, python urllib, pip get the bytes ------------------
out=$(sbx "curl -sS http://allowed.test:$APP_PORT/text")
if [ "$(stdout_of "$out")" = "hello from the fixture" ] && [ "$(verdicts "$out" allowed.test)" = allowed ]; then
    pass "curl through HTTP_PROXY gets the bytes"
else
    fail "curl through HTTP_PROXY gets the bytes" "$out"
fi
out=$(sbx "curl -sS -p http://allowed.test:$APP_PORT/text")
if [ "$(stdout_of "$out")" = "hello from the fixture" ] && [ "$(verdicts "$out" allowed.test)" = allowed ]; then
    pass "curl through a CONNECT tunnel (as for https) gets the bytes"
else
    fail "curl through a CONNECT tunnel (as for https) gets the bytes" "$out"
fi
out=$(sbx "python3 -c 'import urllib.request; print(urllib.request.urlopen(\"http://allowed.test:$APP_PORT/text\").read().decode(), end=\"\")'")
if [ "$(stdout_of "$out")" = "hello from the fixture" ]; then
    pass "python urllib through the proxy gets the bytes"
else
    fail "python urllib through the proxy gets the bytes" "$out"
fi
out=$(sbx "cd /tmp && python3 -m pip download --no-deps --no-cache-dir --disable-pip-version-check --trusted-host allowed.test --index-url http://allowed.test:$IDX_PORT/simple/ -d /tmp/dl skdegress >/dev/null 2>&1; python3 -c 'import zipfile; print(zipfile.ZipFile(\"/tmp/dl/skdegress-1.0-py3-none-any.whl\").read(\"skdegress/__init__.py\").decode(), end=\"\")'")
if [ "$(stdout_of "$out")" = "VALUE = 42" ] && grep -q '"GET /skdegress-1.0-py3-none-any.whl' "$TMP/index.log"; then
    pass "pip download from a PEP 503 index through the proxy"
else
    fail "pip download from a PEP 503 index through the proxy" "$out $(tail -3 "$TMP/index.log")"
fi
out=$(sbx "cd /tmp && npm pack skdegress --registry http://allowed.test:$IDX_PORT/ --cache /tmp/npmc --no-update-notifier --no-audit --no-fund >/dev/null 2>/tmp/npm.err; tar xzf skdegress-1.0.0.tgz -O package/index.js || cat /tmp/npm.err")
if [ "$(stdout_of "$out")" = "module.exports = 42;" ]; then
    pass "npm pack from a registry through the proxy"
else
    fail "npm pack from a registry through the proxy" "$out"
fi
out=$(sbx "git clone -q http://allowed.test:$IDX_PORT/repo.git /tmp/r 2>&1 && cat /tmp/r/README")
if [ "$(stdout_of "$out")" = "egress-git" ]; then
    pass "git clone over HTTP through the proxy"
else
    fail "git clone over HTTP through the proxy" "$out"
fi
out=$(sbx "env | grep -i _proxy= | LC_ALL=C sort | tr '\n' ' '" '{"env": {"HTTP_PROXY": "http://10.0.0.1:1/", "NO_PROXY": "*"}}')
want="ALL_PROXY=http://127.0.0.1:3128 HTTPS_PROXY=http://127.0.0.1:3128 HTTP_PROXY=http://127.0.0.1:3128 NODE_USE_ENV_PROXY=1 NO_PROXY= all_proxy=http://127.0.0.1:3128 http_proxy=http://127.0.0.1:3128 https_proxy=http://127.0.0.1:3128 no_proxy= "
if [ "$(stdout_of "$out")" = "$want" ]; then
    pass "the proxy variables are set and the caller's cannot bypass them"
else
    fail "the proxy variables are set and the caller's cannot bypass them" "$(stdout_of "$out")"
fi

# --- every forbidden address form: refused by the proxy, nothing reaches them -----
forms="http://127.0.0.1:$P/ http://127.1:$P/ http://0x7f.0.0.1:$P/ http://0177.0.0.1:$P/
  http://2130706433:$P/ http://127.0.0.3:$P/ http://localhost:$P/ http://LOCALHOST.:$P/
  http://[::1]:$P/ http://[0:0:0:0:0:0:0:1]:$P/ http://[::ffff:127.0.0.1]:$P/
  http://[::127.0.0.1]:$P/ http://[64:ff9b::7f00:1]:$P/ http://[2002:7f00:1::]:$P/
  http://0.0.0.0:$P/ http://[::]:$P/ http://10.0.0.1:$P/ http://172.16.0.1:$P/
  http://192.168.0.1:$P/ http://100.64.0.1:$P/ http://169.254.169.254:$P/latest/meta-data/
  http://2852039166:$P/ http://[::ffff:a9fe:a9fe]:$P/ http://[64:ff9b::a9fe:a9fe]:$P/
  http://100.100.100.200:$P/ http://[fd00:ec2::254]:$P/ http://[fc00::1]:$P/
  http://198.18.0.1:$P/ http://240.0.0.1:$P/ http://evil.test:$P/ http://meta.test:$P/
  http://v6.test:$P/ http://priv.test:$P/ http://mapped.test:$P/"
script=""
for u in $forms; do
    script="$script echo \"\$(curl -s -o /dev/null -w '%{http_code}' '$u') $u\";"
    script="$script echo \"\$(curl -s -o /dev/null -w '%{http_connect}' -p '$u') CONNECT $u\";"
done
# a redirect from the allowed server to a forbidden address (curl -L makes
# the second request through the proxy too)
enc() { python3 -c 'import sys,urllib.parse; print(urllib.parse.quote(sys.argv[1], safe=""))' "$1"; }
for t in "http://127.0.0.1:$P/" "http://[::1]:$P/" "http://169.254.169.254:$P/" "http://evil.test:$P/"; do
    script="$script echo \"\$(curl -s -L -o /dev/null -w '%{http_code}' 'http://allowed.test:$APP_PORT/redirect?to=$(enc "$t")') redirect-to $t\";"
done
script="$script python3 -c 'import urllib.request
try:
    urllib.request.urlopen(\"http://169.254.169.254:$P/latest/meta-data/\"); print(\"200 python\")
except Exception as e:
    print(getattr(e, \"code\", 0), \"python\")';"
before=$(caught)
out=$(sbx "$script")
after=$(caught)
if [ "$before" = "$after" ]; then
    pass "no connection reached a forbidden listener"
else
    fail "no connection reached a forbidden listener" "$((after - before)) connections"
fi
n=0
while read -r code what; do
    [ -z "$what" ] && continue
    n=$((n + 1))
    if [ "$code" = 403 ]; then pass "refused: $what"; else fail "refused: $what" "got $code"; fi
done <<<"$(stdout_of "$out")"
[ "$n" -ge 70 ] || fail "every form was tried" "only $n lines: $out"
if json_get "$out" 'all(r["verdict"] in ("refused","allowed") for r in j["egress"]) and sum(r["connections"] for r in j["egress"] if r["verdict"]=="refused") >= 70' | grep -qx true; then
    pass "every refusal is in the run's egress record"
else
    fail "every refusal is in the run's egress record" "$(json_get "$out" 'j.get("egress")')"
fi

# --- a host outside the allow list: 403 with the reason ------------------------------
script="python3 -c 'import socket
s = socket.create_connection((\"127.0.0.1\", 3128))
s.sendall(b\"CONNECT other.test:$APP_PORT HTTP/1.1\\r\\nHost: other.test\\r\\n\\r\\n\")
print(s.recv(4096).decode())'; curl -sS http://other.test:$APP_PORT/text"
before_hits=$(app_hits /text)
out=$(SKILLS_SANDBOX_EGRESS_ALLOW_HOSTS="allowed.test,*.pypi.org" sbx "$script")
s=$(stdout_of "$out")
if [[ "$s" == "HTTP/1.1 403 Forbidden"* ]] && [[ "$s" == *"host other.test is not in the egress allow list (SKILLS_SANDBOX_EGRESS_ALLOW_HOSTS)"* ]] &&
    [ "$(app_hits /text)" = "$before_hits" ] && [ "$(verdicts "$out" other.test)" = refused ]; then
    pass "host outside the allow list: 403 with the reason (CONNECT and plain HTTP)"
else
    fail "host outside the allow list: 403 with the reason (CONNECT and plain HTTP)" "$out"
fi
out=$(SKILLS_SANDBOX_EGRESS_DENY_HOSTS="allowed.test" sbx "curl -sS http://allowed.test:$APP_PORT/text")
if [[ "$(stdout_of "$out")" == *"denied by the egress policy"* ]]; then
    pass "deny list refuses"
else
    fail "deny list refuses" "$out"
fi

# --- no way around the proxy ---------------------------------------------------
script="python3 -c 'import socket
for a in ((\"$APP\", $APP_PORT), (\"127.0.0.1\", $P), (\"10.0.0.1\", $P), (\"::1\", $P)):
    try:
        socket.create_connection(a, timeout=3); print(\"connected\", a)
    except OSError as e:
        print(\"failed\", a[0], e.errno)'; curl -sS --noproxy '*' -m 3 http://$APP:$APP_PORT/text || echo curl-failed"
before=$(caught)
before_hits=$(app_hits /text)
out=$(sbx "$script")
s=$(stdout_of "$out")
if [[ "$s" != *connected* ]] && [ "$(grep -c '^failed' <<<"$s")" = 4 ] && [[ "$s" == *curl-failed* ]] &&
    [ "$(caught)" = "$before" ] && [ "$(app_hits /text)" = "$before_hits" ]; then
    pass "a direct connect() without the proxy fails"
else
    fail "a direct connect() without the proxy fails" "$s"
fi

# --- the proxy socket is held by the unprivileged server, not by the spawner -------------
"$SKILLD" run execute_command --key t --input '{"command":"sleep","args":["6.0123"],"networkEnabled":true}' >/dev/null 2>&1 &
RUN_PID=$!
holders=""
for _ in $(seq 1 50); do
    sp=$(pgrep -f 'sleep 6.0123' | head -1)
    if [ -n "$sp" ]; then
        ino=$(awk '$2=="0100007F:0C38" && $4=="0A" {print $10}' "/proc/$sp/net/tcp" 2>/dev/null)
        # (the descriptor may still be in flight from the spawner to the server)
        if [ -n "$ino" ]; then
            holders=$(find /proc/[0-9]*/fd -lname "socket:\[$ino\]" 2>/dev/null | cut -d/ -f3 | sort -u)
            [ -n "$holders" ] && break
        fi
    fi
    sleep 0.1
done
ok=1
[ -n "$holders" ] || ok=0
for h in $holders; do
    [ "$(awk '/^Uid:/{print $3}' "/proc/$h/status" 2>/dev/null)" != 0 ] || ok=0
    [ "$(cat "/proc/$h/comm" 2>/dev/null)" = skilld ] || ok=0
    holders="$holders(uid $(awk '/^Uid:/{print $3}' "/proc/$h/status" 2>/dev/null) $(cat "/proc/$h/comm" 2>/dev/null))"
done
wait "$RUN_PID"
if [ $ok = 1 ]; then
    pass "the proxy socket is held only by the unprivileged server (uid != 0)"
else
    fail "the proxy socket is held only by the unprivileged server (uid != 0)" "holders: ${holders:-none}"
fi

# --- the byte cap ------------------------------------------------------------------
out=$(SKILLS_SANDBOX_EGRESS_MAX_BYTES_DOWN=1048576 sbx "curl -s -o /tmp/f 'http://allowed.test:$APP_PORT/big?n=10485760'; echo \$?; wc -c </tmp/f")
s=$(stdout_of "$out")
got=$(echo "$s" | sed -n 2p)
if [ "$(echo "$s" | head -1)" != 0 ] && [ "$got" -le 1048576 ] && [ "$got" -gt 1000000 ] &&
    json_get "$out" 'any(r["verdict"]=="cut" and "SKILLS_SANDBOX_EGRESS_MAX_BYTES_DOWN" in r["reason"] and r["bytesDown"]==1048576 for r in j["egress"])' | grep -qx true; then
    pass "a 1 MiB byte cap cuts a 10 MiB download and says so"
else
    fail "a 1 MiB byte cap cuts a 10 MiB download and says so" "$s $(json_get "$out" 'j.get("egress")')"
fi

out=$(sbx "env | grep -ci _proxy=; curl -s -m 3 http://allowed.test:$APP_PORT/text || echo no-network; curl -s -m 3 http://$APP:$APP_PORT/text || echo no-network" '{"networkEnabled": false}')
if [ "$(stdout_of "$out")" = "0
no-network
no-network" ] && [ "$(json_get "$out" '"egress" in j')" = false ]; then
    pass "without networkEnabled: no proxy, no network"
else
    fail "without networkEnabled: no proxy, no network" "$out"
fi

# --- eval_code, custom skills, per-key lists: the same switch and proxy ----------------------
out=$("$SKILLD" run eval_code --key t --input "{\"language\":\"python\",\"networkEnabled\":true,\"code\":\"import urllib.request\\nprint(urllib.request.urlopen('http://allowed.test:$APP_PORT/text').read().decode(), end='')\"}" 2>>"$TMP/stderr")
if [ "$(stdout_of "$out")" = "hello from the fixture" ] && [ "$(verdicts "$out" allowed.test)" = allowed ]; then
    pass "eval_code with networkEnabled goes through the proxy"
else
    fail "eval_code with networkEnabled goes through the proxy" "$out"
fi
out=$(SKILLS_SANDBOX_NETWORK_ENABLED=false "$SKILLD" run eval_code --key t --input '{"language":"sh","networkEnabled":true,"code":"echo no"}' 2>>"$TMP/stderr")
check "eval_code networkEnabled without the operator's switch: forbidden" test "$(code_of "$out")" = forbidden
cat >"$TMP/fetch.json" <<EOF2
{"name":"fetcher","version":"1.0.0","description":"d","inputSchema":{"type":"object"},
 "run":{"command":["sh","-c","curl -s -o /dev/null -w '%{http_code}' http://allowed.test:$APP_PORT/text; curl -s -o /dev/null -w ' %{http_code}' http://other.test:$APP_PORT/text"],
        "networkEnabled":true,"egressAllowHosts":"allowed.test"}}
EOF2
"$SKILLD" skills add "$TMP/fetch.json" >/dev/null 2>>"$TMP/stderr"
out=$("$SKILLD" run fetcher --key t --input '{}' 2>>"$TMP/stderr")
if [ "$(json_get "$out" 'j.get("output")')" = "200 403" ] && [ "$(verdicts "$out" other.test)" = refused ]; then
    pass "a custom skill's egressAllowHosts narrows the operator's list"
else
    fail "a custom skill's egressAllowHosts narrows the operator's list" "$out"
fi
out=$(SKILLS_SANDBOX_EGRESS_ALLOW_HOSTS=other.test "$SKILLD" run fetcher --key t --input '{}' 2>>"$TMP/stderr")
if [ "$(json_get "$out" 'j.get("output")')" = "403 403" ]; then
    pass "a custom skill cannot widen the operator's list"
else
    fail "a custom skill cannot widen the operator's list" "$out"
fi
out=$(SKILLS_SANDBOX_EGRESS_KEY_ALLOW_HOSTS="u=x.test;t=other.test" sbx "curl -s -o /dev/null -w '%{http_code}' http://allowed.test:$APP_PORT/text; curl -s -o /dev/null -w ' %{http_code}' http://other.test:$APP_PORT/text")
if [ "$(stdout_of "$out")" = "403 200" ]; then
    pass "the operator's per-key list narrows what the key reaches"
else
    fail "the operator's per-key list narrows what the key reaches" "$out"
fi

# --- the operator's switch ------------------------------------------------------------
out=$(SKILLS_SANDBOX_NETWORK_ENABLED=false sbx "echo should-not-run")
if [ "$(code_of "$out")" = forbidden ] && [[ "$out" != *should-not-run* ]]; then
    pass "networkEnabled without SKILLS_SANDBOX_NETWORK_ENABLED: forbidden"
else
    fail "networkEnabled without SKILLS_SANDBOX_NETWORK_ENABLED: forbidden" "$out"
fi

# --- doctor reports the proxy's state ----------------------------------------------------
d=$("$SKILLD" doctor --json 2>/dev/null)
if json_get "$d" '[c["status"] for c in j["checks"] if c["name"]=="egress_proxy"]==["ok"] and "169.254.169.254 was refused" in [c for c in j["checks"] if c["name"]=="egress_proxy"][0]["detail"]' | grep -qx true &&
    SKILLS_SANDBOX_NETWORK_ENABLED=false "$SKILLD" doctor --json 2>/dev/null | grep -q '"detail": "off: networkEnabled is refused'; then
    pass "doctor reports the egress proxy (on: probe refused; off)"
else
    fail "doctor reports the egress proxy (on: probe refused; off)" "$(echo "$d" | grep -A3 egress_proxy)"
fi

# --- the same for docker and podman: --network none, the proxy in the container ----------
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
for R in docker podman; do
    # cx SCRIPT: run SCRIPT with the busybox test image under runtime R.
    cx() {
        "$SKILLD" run execute_command --key t --input "$(python3 -c '
import json, sys
print(json.dumps({"command": "sh", "args": ["-c", sys.argv[1]], "image": "skilld-test:1",
                  "networkEnabled": True, "timeoutMs": 30000}))' "$1")" 2>>"$TMP/stderr"
    }
    export SKILLS_SANDBOX_RUNTIME=$R SKILLS_ALLOWED_SANDBOX_IMAGES=skilld-test
    out=$(cx "wget -q -O - http://allowed.test:$APP_PORT/text")
    if [ "$(stdout_of "$out")" = "hello from the fixture" ] && [ "$(verdicts "$out" allowed.test)" = allowed ] &&
        [ "$(json_get "$out" 'j.get("runtime")')" = "$R" ]; then
        pass "$R: wget through the proxy gets the bytes"
    else
        fail "$R: wget through the proxy gets the bytes" "$out"
    fi
    script=""
    for u in "http://127.0.0.1:$P/" "http://169.254.169.254:$P/" "http://10.0.0.1:$P/" \
        "http://localhost:$P/" "http://evil.test:$P/" "http://meta.test:$P/" "http://2130706433:$P/"; do
        script="$script wget -q -O /dev/null '$u' 2>&1 | grep -q '403 Forbidden' && echo 'refused $u' || echo 'not-refused $u';"
    done
    script="$script wget -q -O /dev/null http://other.test:$APP_PORT/text 2>&1 | grep -q '403 Forbidden' && echo 'refused other.test' || echo 'not-refused other.test';"
    script="$script wget -q -T 3 -O /dev/null -Y off http://$APP:$APP_PORT/text 2>/dev/null && echo direct-connected || echo 'refused direct';"
    before=$(caught)
    before_hits=$(app_hits /text)
    out=$(SKILLS_SANDBOX_EGRESS_ALLOW_HOSTS="allowed.test,*.test,127.0.0.1,169.254.169.254,10.0.0.1,localhost,2130706433" \
        SKILLS_SANDBOX_EGRESS_DENY_HOSTS=other.test cx "$script")
    s=$(stdout_of "$out")
    if [ "$(grep -c '^refused' <<<"$s")" = 9 ] && [ "$(caught)" = "$before" ] && [ "$(app_hits /text)" = "$before_hits" ]; then
        pass "$R: forbidden addresses, a denied host and a direct connect are refused, nothing reached"
    else
        fail "$R: forbidden addresses, a denied host and a direct connect are refused, nothing reached" "$s"
    fi
    out=$(SKILLS_SANDBOX_EGRESS_MAX_BYTES_DOWN=1048576 cx "wget -q -O /tmp/f 'http://allowed.test:$APP_PORT/big?n=10485760'; wc -c </tmp/f")
    got=$(stdout_of "$out" | tr -d ' ')
    if [ -n "$got" ] && [ "$got" -le 1048576 ] &&
        json_get "$out" 'any(r["verdict"]=="cut" and r["bytesDown"]==1048576 for r in j["egress"])' | grep -qx true; then
        pass "$R: the byte cap cuts a 10 MiB download"
    else
        fail "$R: the byte cap cuts a 10 MiB download" "$out"
    fi
    out=$(SKILLS_SANDBOX_NETWORK_ENABLED=false cx "echo should-not-run")
    check "$R: networkEnabled without the operator's switch: forbidden" test "$(code_of "$out")" = forbidden
    out=$(SKILLS_SANDBOX_RUNTIME=$R "$SKILLD" run execute_command --key t --input '{"command":"sh","args":["-c","env | grep -ci _proxy=; wget -q -T 3 -O - http://allowed.test:'"$APP_PORT"'/text 2>/dev/null || echo no-network; wget -q -T 3 -O - http://'"$APP:$APP_PORT"'/text 2>/dev/null || echo no-network"],"image":"skilld-test:1","networkEnabled":false}' 2>>"$TMP/stderr")
    if [ "$(stdout_of "$out")" = "0
no-network
no-network" ] && [ "$(json_get "$out" '"egress" in j')" = false ]; then
        pass "$R: without networkEnabled there is no network"
    else
        fail "$R: without networkEnabled there is no network" "$out"
    fi
done
export SKILLS_SANDBOX_RUNTIME=native
unset SKILLS_ALLOWED_SANDBOX_IMAGES

# --- through the server: no memory growth, /metrics ------------------------------------
source "$(dirname "$0")/../integration/server_common.sh"
start_server SKILLS_SANDBOX_EGRESS_MAX_BYTES_DOWN=1048576
A=(-H "Authorization: Bearer $ADMIN" -H 'Content-Type: application/json')
rss() { awk '/^VmRSS:/{print $2}' "/proc/$SRV_PID/status"; }
big_call() {
    req POST /v1/execute "${A[@]}" -d "{\"skill\":\"execute_command\",\"input\":{\"command\":\"sh\",\"args\":[\"-c\",\"curl -s -o /dev/null http://allowed.test:$APP_PORT/big?n=10485760; echo \$?\"],\"networkEnabled\":true}}"
}
big_call
rss0=$(rss)
for _ in 1 2 3 4 5; do big_call; done
rss1=$(rss)
if json_get "$BODY" '(j.get("result") or j)["egress"][0]["verdict"]' | grep -qx cut && [ $((rss1 - rss0)) -lt 8192 ]; then
    pass "cut downloads through the server: RSS grew $((rss1 - rss0)) KiB (< 8 MiB)"
else
    fail "cut downloads through the server" "rss $rss0 -> $rss1 KiB; $BODY"
fi
req POST /v1/execute "${A[@]}" -d "{\"skill\":\"execute_command\",\"input\":{\"command\":\"curl\",\"args\":[\"-s\",\"http://169.254.169.254:$P/\"],\"networkEnabled\":true}}"
xid=$(json_get "$BODY" 'j.get("executionId","")')
req GET "/v1/executions/$xid" "${A[@]}"
expect_json "the audit row holds the egress record" 'any(r["host"]=="169.254.169.254" and r["verdict"]=="refused" and "cloud metadata" in r["reason"] for r in (j.get("execution") or j).get("egress",[]))'
req GET /metrics "${A[@]}"
if echo "$BODY" | grep -Eq '^skilld_egress_cut_total [1-9][0-9]*$' &&
    echo "$BODY" | grep -Eq '^skilld_egress_refused_total [1-9][0-9]*$'; then
    pass "metrics count egress refusals and cuts"
else
    fail "metrics count egress refusals and cuts" "$(echo "$BODY" | grep egress)"
fi
stop_server
finish
