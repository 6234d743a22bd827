"""A separate process that generates and expands AI nodes on a shared build root (multi-process tests).

Usage: ``python -m tests.hardening_worker NAME [NAME ...]``; the build root, provider and
endpoint come from the environment (DACE_default_build_folder, DACE_ai_*). With
``DACE_AI_TEST_HANG_IN_WRITE=1`` every atomic write stops after writing its temporary
file, so the process can be killed mid-write. Prints the tasklet code of each node as JSON.
"""

import json
import os
import sys
import time

import dace
import dace_ai


def sdfg_for(names: list[str]):
    sdfg = dace.SDFG("shared")  # one name in every process: their sessions overlap too
    sdfg.add_array("A", [8], dace.float64)
    state = sdfg.add_state()
    for name in names:
        sdfg.add_array(f"out_{name}", [8], dace.float64)
        node = dace_ai.AINode(name, f"Copy _in0 to _out ({name}).", inputs={"_in0"}, outputs={"_out"})
        state.add_edge(state.add_read("A"), None, node, "_in0", dace.Memlet("A[0:8]"))
        state.add_edge(node, "_out", state.add_write(f"out_{name}"), None, dace.Memlet(f"out_{name}[0:8]"))
    return sdfg


def main(names: list[str]) -> None:
    if os.environ.get("DACE_AI_TEST_HANG_IN_WRITE"):
        real_fsync = os.fsync

        def hanging_fsync(fd):  # the temporary file is written; the rename never comes
            real_fsync(fd)
            print("in-write", flush=True)
            time.sleep(600)

        os.fsync = hanging_fsync
    sdfg = sdfg_for(names)
    summary = dace_ai.generate(sdfg)
    summary.raise_for_failures()
    sdfg.expand_library_nodes()
    codes = {n.label: n.code.as_string for n, _ in sdfg.all_nodes_recursive() if isinstance(n, dace.nodes.Tasklet)}
    print(json.dumps({"codes": codes, "generated": summary.generated, "cached": summary.cached}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
