#!/usr/bin/env python3
"""Offline check of deploy/kubernetes/skilld.yaml (no cluster, no network).

A hand-written subset of the apps/v1 Deployment and v1 Service schemas:
every field the manifest uses must be a known field of the right type, the
required ones present; then the cross-references a cluster would resolve:
the selector matches the pod labels, the Service selects those pods and
targets a named container port, probes use that port and /healthz, and
SKILLD_STORE comes from a Secret. Prints PASS/FAIL lines.
"""
import sys
import yaml

S, I, B, L, M = "str", "int", "bool", "list", "map"

def obj(fields, required=()):
    return {"t": M, "f": fields, "req": set(required)}

def lst(item):
    return {"t": L, "item": item}

LABELS = {"t": "labels"}
META = obj({"name": S, "labels": LABELS, "namespace": S, "annotations": LABELS}, ["name"])
HTTPGET = obj({"path": S, "port": "intorstr", "scheme": S,
               "httpHeaders": lst(obj({"name": S, "value": S}, ["name", "value"]))}, ["port"])
PROBE = obj({"httpGet": HTTPGET, "periodSeconds": I, "failureThreshold": I,
             "initialDelaySeconds": I, "timeoutSeconds": I, "successThreshold": I})
ENVVAR = obj({"name": S, "value": S, "valueFrom": obj({
    "secretKeyRef": obj({"name": S, "key": S, "optional": B}, ["key"]),
    "fieldRef": obj({"fieldPath": S, "apiVersion": S}, ["fieldPath"]),
    "configMapKeyRef": obj({"name": S, "key": S}, ["key"])})}, ["name"])
CONTAINER = obj({
    "name": S, "image": S, "args": lst(S), "command": lst(S),
    "ports": lst(obj({"name": S, "containerPort": I, "protocol": S}, ["containerPort"])),
    "env": lst(ENVVAR), "readinessProbe": PROBE, "livenessProbe": PROBE,
    "volumeMounts": lst(obj({"name": S, "mountPath": S, "readOnly": B}, ["name", "mountPath"])),
    "resources": obj({"limits": LABELS, "requests": LABELS})}, ["name"])
PODSPEC = obj({
    "containers": lst(CONTAINER), "terminationGracePeriodSeconds": I,
    "volumes": lst(obj({"name": S, "persistentVolumeClaim": obj({"claimName": S}, ["claimName"]),
                        "emptyDir": obj({})}, ["name"]))}, ["containers"])
DEPLOYMENT = obj({
    "apiVersion": S, "kind": S, "metadata": META,
    "spec": obj({
        "replicas": I,
        "selector": obj({"matchLabels": LABELS}),
        "strategy": obj({"type": S, "rollingUpdate": obj({"maxUnavailable": "intorstr",
                                                          "maxSurge": "intorstr"})}),
        "template": obj({"metadata": obj({"labels": LABELS}), "spec": PODSPEC}, ["spec"]),
    }, ["selector", "template"])}, ["apiVersion", "kind", "metadata", "spec"])
SERVICE = obj({
    "apiVersion": S, "kind": S, "metadata": META,
    "spec": obj({"type": S, "selector": LABELS,
                 "ports": lst(obj({"name": S, "port": I, "targetPort": "intorstr",
                                   "protocol": S}, ["port"]))}, ["ports"])},
    ["apiVersion", "kind", "metadata", "spec"])

fails = 0

def report(ok, name, why=""):
    global fails
    print(("PASS k8s_check: %s" % name) if ok else ("FAIL k8s_check: %s: %s" % (name, why)))
    fails += not ok

def check(v, sch, path, errs):
    t = sch if isinstance(sch, str) else sch["t"]
    if t == S and not isinstance(v, str): errs.append("%s: want string" % path)
    elif t == I and (not isinstance(v, int) or isinstance(v, bool)): errs.append("%s: want integer" % path)
    elif t == B and not isinstance(v, bool): errs.append("%s: want boolean" % path)
    elif t == "intorstr" and not isinstance(v, (int, str)): errs.append("%s: want int or string" % path)
    elif t == "labels":
        if not isinstance(v, dict) or not all(isinstance(k, str) and isinstance(x, str) for k, x in v.items()):
            errs.append("%s: want a map of strings" % path)
    elif t == L:
        if not isinstance(v, list): errs.append("%s: want a list" % path)
        else:
            for i, x in enumerate(v): check(x, sch["item"], "%s[%d]" % (path, i), errs)
    elif t == M:
        if not isinstance(v, dict): errs.append("%s: want an object" % path); return
        for k in v:
            if k not in sch["f"]: errs.append("%s.%s: unknown field" % (path, k))
            else: check(v[k], sch["f"][k], "%s.%s" % (path, k), errs)
        for k in sch["req"]:
            if k not in v: errs.append("%s.%s: required" % (path, k))

docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
dep = [d for d in docs if d.get("kind") == "Deployment" and d.get("apiVersion") == "apps/v1"]
svc = [d for d in docs if d.get("kind") == "Service" and d.get("apiVersion") == "v1"]
report(len(dep) == 1 and len(svc) == 1, "one_apps_v1_deployment_and_one_v1_service", [d.get("kind") for d in docs])
if dep and svc:
    d, s = dep[0], svc[0]
    for name, doc, sch in (("deployment", d, DEPLOYMENT), ("service", s, SERVICE)):
        errs = []
        check(doc, sch, name, errs)
        report(not errs, "%s_fields_and_types" % name, "; ".join(errs))
    pod_labels = d["spec"]["template"]["metadata"]["labels"]
    sel = d["spec"]["selector"]["matchLabels"]
    report(all(pod_labels.get(k) == v for k, v in sel.items()), "selector_matches_pod_labels")
    report(all(pod_labels.get(k) == v for k, v in s["spec"]["selector"].items()), "service_selects_the_pods")
    c = d["spec"]["template"]["spec"]["containers"][0]
    ports = {p.get("name"): p["containerPort"] for p in c.get("ports", [])}
    tp = s["spec"]["ports"][0]["targetPort"]
    report(tp in ports or tp in ports.values(), "service_targets_a_container_port", tp)
    for probe in ("readinessProbe", "livenessProbe"):
        hg = c[probe]["httpGet"]
        report(hg["path"] == "/healthz" and (hg["port"] in ports or hg["port"] in ports.values()),
               "%s_on_healthz" % probe)
    env = {e["name"]: e for e in c.get("env", [])}
    report("secretKeyRef" in env.get("SKILLD_STORE", {}).get("valueFrom", {}), "store_url_from_a_secret")
    report("SKILLD_REPLICA_ID" in env, "replica_id_set")
    vols = {v["name"] for v in d["spec"]["template"]["spec"].get("volumes", [])}
    report(all(m["name"] in vols for m in c.get("volumeMounts", [])), "mounts_name_volumes")
    grace = d["spec"]["template"]["spec"].get("terminationGracePeriodSeconds", 30)
    drain = int(env.get("SKILLD_DRAIN_MS", {}).get("value", "0"))
    report(drain / 1000 < grace, "drain_fits_in_the_grace_period", (drain, grace))
sys.exit(1 if fails else 0)
