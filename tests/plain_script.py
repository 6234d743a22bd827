# A user's program as DaCe's samples are written: no `if __name__ == "__main__":` guard.
# tests/test_cluster_plain.py runs it in a subprocess (argv: executor); it prints one JSON line.
import hashlib
import json
import os
import re
import sys

import dace
import dace_ai
from dace_ai.plugins.manager import get_plugin_manager
from dace_ai.testing import FakeProvider

with open("top-level-runs.txt", "a") as runs:  # every run of this file's top level leaves a line
    runs.write(f"{os.getpid()}\n")


def answer(request):
    """Correct code for the node the request is about (its description names the constant)."""
    text = " ".join(m.content for m in request.messages)
    k = re.search(r"plus (\d+) for every i", text).group(1)
    return json.dumps({"code": f"for (int i = 0; i < 64; ++i) _out[i] = _x[i] + {k}.0;"})


get_plugin_manager().register(FakeProvider([answer] * 6).plugin("plain"), "plain-script-provider")
dace.Config.set("ai", "provider", value="plain")


def plus1(x):
    return x + 1


def plus2(x):
    return x + 2


def plus3(x):
    return x + 3


def plus4(x):
    return x + 4


def plus5(x):
    return x + 5


def plus6(x):
    return x + 6


@dace.program
def six(
    a: dace.float64[64],
    b: dace.float64[64],
    c: dace.float64[64],
    d: dace.float64[64],
    e: dace.float64[64],
    f: dace.float64[64],
):
    a1 = dace_ai.ai("_out[i] = _x[i] plus 1 for every i < 64", x=a, reference=plus1)
    b1 = dace_ai.ai("_out[i] = _x[i] plus 2 for every i < 64", x=b, reference=plus2)
    c1 = dace_ai.ai("_out[i] = _x[i] plus 3 for every i < 64", x=c, reference=plus3)
    d1 = dace_ai.ai("_out[i] = _x[i] plus 4 for every i < 64", x=d, reference=plus4)
    e1 = dace_ai.ai("_out[i] = _x[i] plus 5 for every i < 64", x=e, reference=plus5)
    f1 = dace_ai.ai("_out[i] = _x[i] plus 6 for every i < 64", x=f, reference=plus6)
    return a1 + b1 + c1 + d1 + e1 + f1


sdfg = six.to_sdfg()
summary = dace_ai.generate(sdfg, executor=sys.argv[1], progress=False)
sdfg.expand_library_nodes()
tasklets = sorted(
    hashlib.sha256(n.code.as_string.split("\n", 1)[1].encode()).hexdigest()[:16]
    for n, _ in sdfg.all_nodes_recursive()
    if isinstance(n, dace.nodes.Tasklet) and n.code.as_string.startswith("// dace-ai")
)
print(
    json.dumps(
        {
            "levels": sorted((n.name, n.status, n.verification) for n in summary.nodes),
            "workers": sorted({n.worker for n in summary.nodes}),
            "tasklets": tasklets,
        }
    )
)
