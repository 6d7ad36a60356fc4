#!/usr/bin/env python3
"""HTTP load for tests/scale (stdlib only).

  load.py par URL SECRET N BODY     N concurrent POST /v1/execute; BODY may
                                    hold {i}; prints one JSON line per call
  load.py mcp URL SECRET N CONC      N MCP sessions (5 requests each), CONC
                                    at once; one JSON line per session
  load.py stateless URL SECRET N CONC
                                    N MCP 2026-07-28 stateless tools/call
                                    (no initialize, no session): file_write
                                    of a path then file_read of it as the
                                    next call; one JSON line per call
  load.py loop URL SECRET STOPFILE WORKERS OUT
                                    WORKERS threads call file_write then
                                    file_read of their own path in a loop
                                    until STOPFILE exists; one JSON line per
                                    call in OUT: {t, ms, status, code, replica, ok, eid}
"""
import http.client, json, os, sys, threading, time, urllib.parse


def call(url, secret, body, timeout=60):
    u = urllib.parse.urlparse(url)
    t0 = time.time()
    try:
        c = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
        c.request("POST", "/v1/execute", body=body, headers={
            "Authorization": "Bearer " + secret, "Content-Type": "application/json"})
        r = c.getresponse()
        data = r.read()
        replica = r.getheader("Skilld-Replica") or ""
        status = r.status
        c.close()
        try:
            j = json.loads(data)
        except ValueError:
            j = {}
    except Exception as e:  # connection refused, reset, timeout
        return {"t": t0, "ms": int((time.time() - t0) * 1000), "status": 0,
                "code": type(e).__name__, "replica": "", "ok": False, "result": None}
    code = (j.get("error") or {}).get("code") if isinstance(j, dict) else None
    ok = status == 200 and isinstance(j, dict) and j.get("success") is True
    return {"t": t0, "ms": int((time.time() - t0) * 1000), "status": status, "code": code,
            "replica": replica, "ok": ok, "result": j}


def par(url, secret, n, template):
    out = [None] * n
    def one(i):
        out[i] = call(url, secret, template.replace("{i}", str(i)))
    ts = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for r in out:
        print(json.dumps(r))


def loop(url, secret, stopfile, workers, outpath):
    lock = threading.Lock()
    f = open(outpath, "w")
    def worker(w):
        i = 0
        while not os.path.exists(stopfile):
            i += 1
            content = "w%d-%d" % (w, i)
            r = call(url, secret, json.dumps({"skill": "file_write", "input": {
                "path": "load/w%d.txt" % w, "content": content, "mkdirs": True}}), timeout=30)
            if r["ok"]:
                r2 = call(url, secret, json.dumps({"skill": "file_read", "input": {
                    "path": "load/w%d.txt" % w}}), timeout=30)
                # a wrong result is a failure too
                if r2["ok"] and (r2["result"] or {}).get("content") != content:
                    r2["ok"] = False
                    r2["code"] = "wrong_result"
                rs = [r, r2]
            else:
                rs = [r]
            with lock:
                for x in rs:
                    x = dict(x)
                    x["eid"] = (x.pop("result", None) or {}).get("executionId")
                    f.write(json.dumps(x) + "\n")
                f.flush()
    ts = [threading.Thread(target=worker, args=(w,)) for w in range(workers)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    f.close()


def mcp_sessions(url, secret, n, conc):
    """n MCP (2025-11-25) sessions through url, conc at once: initialize,
    notifications/initialized, file_write, file_read of the same path,
    tools/list. One JSON line per session: {ok, replicas, why}."""
    u = urllib.parse.urlparse(url)
    H = {"Authorization": "Bearer " + secret, "Content-Type": "application/json",
         "Accept": "application/json, text/event-stream"}
    def post(body, sid=None):
        h = dict(H)
        if sid:
            h["Mcp-Session-Id"] = sid
            h["MCP-Protocol-Version"] = "2025-11-25"
        c = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
        c.request("POST", "/mcp", json.dumps(body), h)
        r = c.getresponse()
        data = r.read()
        c.close()
        j = json.loads(data) if data else None
        return r.status, j, r.getheader("Mcp-Session-Id"), r.getheader("Skilld-Replica") or ""
    out = [None] * n
    def one(i):
        reps, why = set(), ""
        try:
            st, j, sid, rep = post({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "scale", "version": "1"}}})
            reps.add(rep)
            if st != 200 or not sid:
                raise RuntimeError("initialize %s" % st)
            st, _, _, rep = post({"jsonrpc": "2.0", "method": "notifications/initialized"}, sid)
            reps.add(rep)
            text = "session %d" % i
            for k, (name, args) in enumerate([
                    ("file_write", {"path": "s1/%d.txt" % i, "content": text, "mkdirs": True}),
                    ("file_read", {"path": "s1/%d.txt" % i})]):
                st, j, _, rep = post({"jsonrpc": "2.0", "id": 2 + k, "method": "tools/call",
                                      "params": {"name": name, "arguments": args}}, sid)
                reps.add(rep)
                res = (j or {}).get("result") or {}
                if st != 200 or res.get("isError"):
                    raise RuntimeError("%s: %s %s" % (name, st, str(j)[:200]))
                if name == "file_read":
                    sc = res.get("structuredContent") or {}
                    if sc.get("content") != text and text not in json.dumps(res):
                        raise RuntimeError("file_read gave %s" % str(res)[:200])
            st, j, _, rep = post({"jsonrpc": "2.0", "id": 9, "method": "tools/list"}, sid)
            reps.add(rep)
            if st != 200 or not (j or {}).get("result", {}).get("tools"):
                raise RuntimeError("tools/list %s" % st)
            out[i] = {"ok": True, "replicas": sorted(reps), "why": ""}
        except Exception as e:
            out[i] = {"ok": False, "replicas": sorted(reps), "why": str(e)[:300]}
    sem = threading.Semaphore(conc)
    def guarded(i):
        with sem:
            one(i)
    ts = [threading.Thread(target=guarded, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for r in out:
        print(json.dumps(r))


def stateless(url, secret, n, conc):
    """n stateless 2026-07-28 calls, conc at once: call 2k writes
    s1x/k.txt, call 2k+1 reads it back (each a request of its own, through
    whichever replica the balancer picks). One JSON line per call."""
    u = urllib.parse.urlparse(url)
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}}
    def post(i, name, args):
        h = {"Authorization": "Bearer " + secret, "Content-Type": "application/json",
             "Accept": "application/json, text/event-stream",
             "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": name}
        body = {"jsonrpc": "2.0", "id": i, "method": "tools/call",
                "params": {"name": name, "arguments": args, "_meta": meta}}
        c = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
        c.request("POST", "/mcp", json.dumps(body), h)
        r = c.getresponse()
        data = r.read()
        c.close()
        return r.status, (json.loads(data) if data else None), r.getheader("Skilld-Replica") or ""
    out = [None] * n
    def pair(k):
        text = "stateless %d" % k
        for i, (name, args) in ((2 * k, ("file_write", {"path": "s1x/%d.txt" % k, "content": text,
                                                        "mkdirs": True})),
                                (2 * k + 1, ("file_read", {"path": "s1x/%d.txt" % k}))):
            if i >= n:
                return
            try:
                st, j, rep = post(i, name, args)
                res = (j or {}).get("result") or {}
                ok = (st == 200 and not res.get("isError") and res.get("resultType") == "complete"
                      and (name != "file_read" or text in json.dumps(res)))
                out[i] = {"ok": ok, "replica": rep, "why": "" if ok else "%s %s" % (st, str(j)[:200])}
            except Exception as e:
                out[i] = {"ok": False, "replica": "", "why": str(e)[:200]}
    sem = threading.Semaphore(conc)
    def guarded(k):
        with sem:
            pair(k)
    ts = [threading.Thread(target=guarded, args=(k,)) for k in range((n + 1) // 2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for r in out:
        print(json.dumps(r))


if __name__ == "__main__":
    if sys.argv[1] == "par":
        par(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5])
    elif sys.argv[1] == "mcp":
        mcp_sessions(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
    elif sys.argv[1] == "stateless":
        stateless(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
    elif sys.argv[1] == "loop":
        loop(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), sys.argv[6])
    else:
        sys.exit("usage: see the docstring")
