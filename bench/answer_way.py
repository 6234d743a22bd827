"""Which modules of dace_ai one answer crosses on its way to a tasklet.

One ``dace_ai.ai`` node with a reference, its answer replayed (no model, no key), expanded
asked for by ``dace_ai.generate`` with every default check, then built and called (run it in an empty folder: a cached answer
would skip the checks): the modules whose functions run in this process, from the
expansion to the placed tasklet and its first call, counted and listed by package.
The sandbox child's modules (``sandbox/child/``, a process of its own) are listed apart.

    .venv/bin/python bench/answer_way.py
"""

# No "from __future__ import annotations" here: DaCe reads the program's annotations as objects.
import json
import sys
from collections import defaultdict

import dace
import dace_ai
import numpy as np
from dace_ai.plugins.manager import get_plugin_manager
from dace_ai.testing import FakeProvider

N = dace.symbol("N")
ANSWER = {"code": "#pragma omp simd\nfor (int i = 0; i < N; ++i) _out[i] = 3.0 * _x[i] + 1.0;"}


def reference(x):
    return 3 * x + 1


@dace.program
def scale(x: dace.float64[N]):
    return dace_ai.ai("_out[i] = 3 * _x[i] + 1 for every i < N, vectorised", x=x, reference=reference)


def crossed(action):
    """The dace_ai modules whose functions were entered while ``action()`` ran."""
    seen = set()

    def profile(frame, event, arg):
        if event == "call":
            name = frame.f_globals.get("__name__", "")
            if name == "dace_ai" or name.startswith("dace_ai."):
                seen.add(name)

    sys.setprofile(profile)
    try:
        action()
    finally:
        sys.setprofile(None)
    return seen


def main() -> None:
    get_plugin_manager().register(FakeProvider([json.dumps(ANSWER)]).plugin("replayed"), "answer-way")
    dace.Config.set("ai", "provider", value="replayed")
    sdfg = scale.to_sdfg()
    x = np.random.rand(1000)
    modules = crossed(lambda: print(dace_ai.generate(sdfg)))
    modules |= crossed(lambda: np.testing.assert_allclose(sdfg(x=x, N=1000), 3 * x + 1))
    modules.discard("dace_ai.testing")  # the replaying provider of this script, not the product's way
    child = sorted(m for m in sys.modules if m.startswith("dace_ai.sandbox.child"))
    by_package = defaultdict(list)
    for module in sorted(modules):
        parts = module.split(".")
        package = len(parts) > 2 or hasattr(sys.modules[module], "__path__")
        if package and len(parts) > 1:
            by_package[parts[1]].append(".".join(parts[2:]) or "__init__")
        else:
            by_package["dace_ai"].append(parts[-1] if len(parts) > 1 else "__init__")
    print(f"\nOne answer's way: {len(modules)} modules of dace_ai in {len(by_package)} packages (this process)")
    for package, names in sorted(by_package.items()):
        print(f"  {package:14s} {len(names):3d}  {', '.join(names)}")
    print(
        f"The sandbox child runs its own package (sandbox/child/, {len(child) or 'its'} modules) in a process of its own."
    )


if __name__ == "__main__":
    main()
