#!/usr/bin/env bash
# The folders of src/ form layers: no cycle among them (DESIGN.md, the
# components table). Reads the built objects (build/obj/src/<folder>/**/*.o,
# BUILD=dir for another build), takes the global symbols each defines and
# the ones each leaves undefined, and draws an arrow from a folder to every
# other folder whose symbols it uses. A folder is the first path component
# under src/; src/cli (the binary, a client of everything) may use any
# folder, so its arrows are left out. Prints each cycle with the symbols
# behind its arrows and exits 1 if there is one; silent and 0 otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."
obj=${BUILD:-build}/obj/src
[ -d "$obj" ] || { echo "check-layers: $obj missing (run make first)" >&2; exit 2; }
command -v nm >/dev/null || { echo "check-layers: nm not found" >&2; exit 2; }

bad=0
while IFS= read -r hit; do
    file=${hit%%:*}
    inc=${hit#*#include \"}
    inc=${inc%%\"*}
    from=${file#src/}
    from=${from%%/*}
    [ "$from" = cli ] || [ "$from" = "${inc%%/*}" ] && continue
    echo "$file includes another folder's internal header $inc"
    bad=1
done < <(grep -rnE '#include "[a-z_]+/.*_int(ernal)?\.h"' src || true)

# One nm over every object (-A names the object on each line): its global
# symbols, defined ("T", "D", ...) and undefined ("U"). Only the objects of
# sources that exist: a build directory may keep those of files since moved
# or removed.
objs=()
while IFS= read -r o; do
    rel=${o#"$obj"/}
    [ -f "src/${rel%.o}.c" ] && objs+=("$o")
done < <(find "$obj" -name '*.o' | sort)
nm -A -g "${objs[@]}" | OBJ="$obj/" python3 -c '
import os
import sys
from collections import defaultdict
owner, uses = {}, defaultdict(set)
prefix = os.environ["OBJ"]
for line in sys.stdin:
    path, _, rest = line.partition(":")
    fields = rest.split()
    if len(fields) < 2:
        continue
    folder = path[len(prefix):].split("/")[0]
    kind, sym = fields[-2], fields[-1]
    if kind == "U":
        uses[folder].add(sym)
    else:
        owner[sym] = folder
edges = defaultdict(lambda: defaultdict(list))  # from -> to -> symbols
for f, syms in uses.items():
    if f == "cli":
        continue
    for s in sorted(syms):
        t = owner.get(s)
        if t and t != f:
            edges[f][t].append(s)
# Strongly connected components (Tarjan); one of more than one folder is a cycle.
index, low, stack, on, comps, n = {}, {}, [], set(), [], [0]
def visit(v):
    index[v] = low[v] = n[0]; n[0] += 1; stack.append(v); on.add(v)
    for w in edges[v]:
        if w not in index:
            visit(w); low[v] = min(low[v], low[w])
        elif w in on:
            low[v] = min(low[v], index[w])
    if low[v] == index[v]:
        comp = []
        while True:
            w = stack.pop(); on.discard(w); comp.append(w)
            if w == v:
                break
        comps.append(sorted(comp))
for v in sorted(set(edges) | set(owner.values())):
    if v not in index:
        visit(v)
bad = [c for c in comps if len(c) > 1]
for c in bad:
    print("cycle among src/ folders: " + " <-> ".join(c))
    for f in c:
        for t in c:
            if t in edges[f]:
                s = edges[f][t]
                more = " ..." if len(s) > 4 else ""
                print("  %s -> %s: %s%s" % (f, t, ", ".join(s[:4]), more))
sys.exit(1 if bad else 0)
' || bad=1
exit $bad
