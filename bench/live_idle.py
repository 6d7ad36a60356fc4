"""bench/live-exec --idle N: N idle live sandboxes held by one server.

Creates them one after the other (one key per 4,096, the ceiling of
SKILLS_SANDBOX_MAX_LIVE_PER_KEY; the server's live caps raised to N), stopping at the first create that fails; then, while they are held,
REST file_read p50/p99 on one keep-alive connection, the RSS of the server,
its zygote and its spawner, and the drop of MemAvailable per sandbox; then
deletes them all and checks that no process of theirs and no cgroup named
after one of them is left. Imported by bench/live-exec (its Server, Client,
pct and mem_available)."""
import json
import os
import resource
import sys
import time


def rss_kib(pid):
    try:
        for line in open("/proc/%d/status" % pid):
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def descendants(pid):
    kids = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                ppid = int(open("/proc/%s/stat" % d).read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            kids.setdefault(ppid, []).append(int(d))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        for k in kids.get(p, []):
            out.append(k)
            todo.append(k)
    return out


def comm(pid):
    try:
        return open("/proc/%d/comm" % pid).read().strip()
    except OSError:
        return "?"


def cgroups_named(ids):
    left = []
    for root, dirs, _ in os.walk("/sys/fs/cgroup"):
        if os.path.basename(root) in ids:
            left.append(root)
            dirs[:] = []
        elif root.count("/") > 10:
            dirs[:] = []
    return left


def file_reads(le, cl, n):
    lat = []
    for _ in range(n):
        t = time.perf_counter()
        st, r = cl.req("POST", "/v1/execute", {"skill": "file_read", "input": {"path": "bench.txt"}})
        lat.append((time.perf_counter() - t) * 1000)
        assert st == 200 and r.get("success"), r
    return {"n": n, "p50": le.pct(lat, 50), "p99": le.pct(lat, 99)}


def run(a, le):
    # The server and its spawner raise their own descriptor limits (to the
    # hard one): nothing is raised for them here.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    n = a.idle
    data = le.data_dir()
    # SKILLS_SANDBOX_MAX_LIVE_PER_KEY's ceiling is 4096: more keys past it.
    per_key = min(n, 4096)
    keys = [le.new_key(a.skilld, data) for _ in range((n + per_key - 1) // per_key)]
    srv = le.Server(a.skilld, data, SKILLS_SANDBOX_MAX_LIVE_PER_KEY=str(per_key),
                    SKILLS_SANDBOX_MAX_LIVE=str(n + 8),
                    SKILLS_SANDBOX_IDLE_TIMEOUT_MS="3600000")
    cls = [le.Client(srv.port, k["secret"]) for k in keys]
    cl = cls[0]
    out = {"asked": n, "nofile_soft": soft, "nofile_hard": hard}
    ids = []
    try:
        st, r = cl.req("POST", "/v1/execute", {"skill": "file_write",
                                               "input": {"path": "bench.txt", "content": "x" * 1024}})
        assert st == 200 and r.get("success"), r
        file_reads(le, cl, 50)  # warm-up
        out["file_read_before"] = file_reads(le, cl, 500)
        procs0 = set(descendants(srv.proc.pid))
        rss0 = {p: rss_kib(p) for p in [srv.proc.pid] + sorted(procs0)}
        time.sleep(1)
        mem0 = le.mem_available()
        t0 = time.perf_counter()
        create_ms = []
        for i in range(n):
            t = time.perf_counter()
            st, r = cls[i // per_key].req("POST", "/v1/sandboxes", {})
            create_ms.append((time.perf_counter() - t) * 1000)
            if st != 201:
                out["first_failure"] = {"at": i, "status": st, "body": r}
                break
            ids.append((cls[i // per_key], r["id"]))
            if (i + 1) % 100 == 0:
                sys.stderr.write("%d held, %.0f s, load %.2f\n"
                                 % (i + 1, time.perf_counter() - t0, os.getloadavg()[0]))
        out["held"] = len(ids)
        out["create_ms"] = {"p50": le.pct(create_ms, 50), "p99": le.pct(create_ms, 99)}
        time.sleep(2)
        mem1 = le.mem_available()
        held = [p for p in descendants(srv.proc.pid) if p not in procs0]
        out["processes_held"] = len(held)
        sp = [p for p in procs0 if comm(p) == "skilld-spawner"]
        out["spawner_fds_held"] = {str(p): len(os.listdir("/proc/%d/fd" % p)) for p in sp}
        rss1 = {p: rss_kib(p) for p in rss0}
        out["rss_kib_before"] = {"%s/%d" % (comm(p), p): v for p, v in rss0.items()}
        out["rss_kib_held"] = {"%s/%d" % (comm(p), p): v for p, v in rss1.items()}
        k = max(1, len(ids))
        out["rss_growth_per_sandbox_kib"] = (sum(rss1.values()) - sum(rss0.values())) / k
        out["memavailable_drop_per_sandbox_kib"] = (mem0 - mem1) / 1024.0 / k
        out["file_read_held"] = file_reads(le, cl, 500)
        out["load_average"] = os.getloadavg()[0]
        st, r = cl.req("GET", "/v1/sandboxes")
        out["listed_first_key"] = len(r.get("sandboxes", r.get("items", []))) if isinstance(r, dict) else None
        for c, i in ids:
            st, r = c.req("DELETE", "/v1/sandboxes/" + i)
            assert st in (200, 204), (st, r)
        time.sleep(2)
        left = [p for p in descendants(srv.proc.pid) if p not in procs0]
        out["processes_left"] = ["%d %s" % (p, comm(p)) for p in left]
        out["cgroups_left"] = cgroups_named(set(i for _, i in ids))
        ids = []
    finally:
        for c, i in ids:
            try:
                c.req("DELETE", "/v1/sandboxes/" + i)
            except OSError:
                break
        srv.stop()
        srv.err.seek(0)
        out["server_log_tail"] = srv.err.read()[-2000:].decode("utf-8", "replace")
    print(json.dumps(out, indent=1))
