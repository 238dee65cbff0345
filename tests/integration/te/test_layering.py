# SPDX-License-Identifier: Apache-2.0
"""libte's layering (docs/design.md, "libte layering"), read from the
symbols of the built library: calls between its files run one way (the
graph has no cycle), transports call only the core files meant for them
(task.c, memreg.c, copy.c, gpu.c, and hs_client.c for rdma's Connection
handshake) and files of their own folder, and only the
registry (transport.c) refers to a transport's files."""
import collections
import os
import re
import subprocess

from mctest import BUILD

SRC = os.path.join(os.path.dirname(__file__), "..", "..", "..", "libte")
FOR_TRANSPORTS = {"task.c", "memreg.c", "copy.c", "gpu.c", "hs_client.c",
                  "shm_tag.c"}


def transports():
    """{file name: transport} from transport/registry.h and the folders."""
    with open(os.path.join(SRC, "transport", "registry.h")) as f:
        names = re.findall(r"X\([A-Z0-9_]+, *([a-z0-9_]+)\)", f.read())
    assert names, "no transport in transport/registry.h"
    files = {}
    for name in names:
        for fn in os.listdir(os.path.join(SRC, "transport", name)):
            if fn.endswith(".c"):
                files[fn] = name
    return files


def call_graph():
    """{file: files whose symbols it uses}, from nm over libte.a."""
    out = subprocess.run(["nm", "-A", os.path.join(BUILD, "libte", "libte.a")],
                         check=True, capture_output=True, text=True).stdout
    defs, uses = {}, collections.defaultdict(set)
    for line in out.splitlines():
        member, _, rest = line.partition(".o:")
        member = member.rsplit(":", 1)[-1]
        parts = rest.split()
        if len(parts) == 3 and parts[1] in "TDRB":
            defs[parts[2]] = member
        elif len(parts) == 2 and parts[0] == "U":
            uses[member].add(parts[1])
    graph = collections.defaultdict(set)
    for member, syms in uses.items():
        for s in syms:
            if s in defs and defs[s] != member:
                graph[member].add(defs[s])
    return graph


def find_cycle(graph):
    state = {}

    def visit(v, path):
        state[v] = 1
        for w in graph.get(v, ()):
            if state.get(w) == 1:
                return path[path.index(w):] + [w]
            if w not in state:
                c = visit(w, path + [w])
                if c:
                    return c
        state[v] = 2
        return None

    for v in list(graph):
        if v not in state:
            c = visit(v, [v])
            if c:
                return c
    return None


def test_calls_run_one_way():
    cycle = find_cycle(call_graph())
    assert cycle is None, "libte files call in a circle: " + " -> ".join(cycle)


def test_transports_are_plug_ins():
    graph, tp = call_graph(), transports()
    for f, callees in graph.items():
        for c in callees:
            if f in tp:
                assert c in FOR_TRANSPORTS or tp.get(c) == tp[f], \
                    f"transport file {f} calls {c}"
            elif c in tp:
                assert f == "transport.c", \
                    f"{f} calls {c} of transport {tp[c]} (use its ops)"
