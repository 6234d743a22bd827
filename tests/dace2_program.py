"""A program written for DaCe 2.0's own AI library, and nothing else: it never imports dace_ai.

``(A + 1) @ B``: the ``+ 1`` is a ``dace.ai(...)`` node, the product a ``MatMul`` library
node with the ``'ai'`` implementation. Answers are given as DaCe's manual exchange wants
them: a response file in DaCe's own format next to each prompt that
``dace.libraries.ai.generate_prompts`` wrote, read back by ``read_prompt_responses``.

Run as a script (``python tests/dace2_program.py FOLDER [wrong]``) it does all of that
and prints one JSON line describing what implemented each node, so the same program
can be run in a fresh process under each setting.
"""

import json
import sys
from pathlib import Path

import dace
import dace.libraries.ai
import numpy as np

PLUS_ONE = "for (int i = 0; i < 8; ++i) for (int j = 0; j < 6; ++j) _out[i * 6 + j] = _a[i * 6 + j] + 1.0;"
MATMUL = (
    "for (int i = 0; i < 8; ++i) for (int j = 0; j < 5; ++j) { double s = 0.0; "
    "for (int k = 0; k < 6; ++k) s += _a[i * 6 + k] * _b[k * 5 + j]; _c[i * 5 + j] = s; }"
)
#: Compiles, and is off by one in every element: a verification must refuse it.
WRONG_MATMUL = MATMUL.replace("_c[i * 5 + j] = s;", "_c[i * 5 + j] = s + 1.0;")


@dace.program
def plus_one_matmul(A: dace.float64[8, 6], B: dace.float64[6, 5], C: dace.float64[8, 5]):
    C[:] = dace.ai("Write _out[i][j] = _a[i][j] + 1 for every i < 8, j < 6.", a=A) @ B


def response(code: str) -> str:
    """A response file as DaCe 2.0's manual exchange expects it (every field of its schema)."""
    return json.dumps(
        {
            "notes": "",
            "language": "CPP",
            "code": code,
            "code_global": "",
            "code_init": "",
            "code_exit": "",
            "state_fields": [],
            "side_effects": False,
            "ignored_symbols": [],
            "use_environments": [],
            "environments": [],
        }
    )


def program_sdfg() -> dace.SDFG:
    """The program's SDFG with its matrix product set to the ``'ai'`` implementation (named ``matmul``)."""
    sdfg = plus_one_matmul.to_sdfg()
    for node, _ in sdfg.all_nodes_recursive():
        if type(node).__name__ == "MatMul":
            node.implementation = "ai"
            node.name = node.label = "matmul"
    return sdfg


def answer_prompts(sdfg: dace.SDFG, folder: Path, wrong: bool = False) -> list[str]:
    """Write prompts with DaCe's API, and a response in DaCe's format next to each; the prompt paths."""
    prompts = dace.libraries.ai.generate_prompts(sdfg, str(folder))
    for prompt in prompts:
        node = Path(prompt).name.rsplit("_", 2)[0]
        code = {"matmul": WRONG_MATMUL if wrong else MATMUL}.get(node, PLUS_ONE)
        Path(prompt.replace("_prompt.md", "_response.json")).write_text(response(code))
    return prompts


def run(sdfg: dace.SDFG) -> tuple[np.ndarray, np.ndarray]:
    """(computed, expected) on random inputs."""
    rng = np.random.default_rng(0)
    A, B, C = rng.random((8, 6)), rng.random((6, 5)), np.zeros((8, 5))
    sdfg(A=A, B=B, C=C)
    return C, (A + 1) @ B


def tasklets(sdfg: dace.SDFG) -> dict[str, dace.nodes.Tasklet]:
    """The tasklets that replaced the program's two nodes, by label."""
    return {
        n.label: n
        for n, _ in sdfg.all_nodes_recursive()
        if isinstance(n, dace.nodes.Tasklet) and n.label in ("ai", "matmul")
    }


def main(folder: str, wrong: bool = False) -> None:
    sdfg = program_sdfg()
    answer_prompts(sdfg, Path(folder), wrong)
    dace.libraries.ai.read_prompt_responses(sdfg, folder)
    found = tasklets(sdfg)
    computed, expected = run(sdfg)
    print(
        json.dumps(
            {
                "classes": {label: type(t).__module__ + "." + type(t).__name__ for label, t in found.items()},
                "code": {label: t.code.as_string for label, t in found.items()},
                "correct": bool(np.allclose(computed, expected)),
            }
        )
    )


if __name__ == "__main__":
    main(sys.argv[1], wrong=len(sys.argv) > 2 and sys.argv[2] == "wrong")
