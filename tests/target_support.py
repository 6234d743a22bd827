"""Hand-built node contexts and recorded answers for the target-pack tests.

The contexts mirror what DaCe gives a tasklet for three shapes of node: a Gemm
on the CPU (pointer connectors with strides), one element of a vector sum inside
a GPU map (scalar connectors, map parameter ``i``), and a host tasklet over GPU
arrays (device pointers).
"""

from __future__ import annotations

from pathlib import Path

from dace_ai.checking.api import CheckReport, CheckRequest
from dace_ai.config.settings import resolve_settings
from dace_ai.context.types import ConnectorInfo, NodeContext, ScopeInfo, TargetInfo
from dace_ai.plugins.manager import get_plugin_manager
from dace_ai.prompt.answer import Answer, parse_answer
from dace_ai.targets.select import resolve_target, target_info

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data" / "targets"


def target(name: str, **overrides: object) -> TargetInfo:
    """The TargetInfo the core resolves when the ``target`` setting names ``name``."""
    from dace_ai.plugins.manager import get_plugin_manager

    settings = resolve_settings({"target": name, **overrides})
    kind = get_plugin_manager().get("targets", name).kind
    return target_info(*resolve_target(settings, kind=kind))


def answer(pack: str, name: str) -> Answer:
    path = DATA / pack / f"{name}.json"
    return parse_answer(path.read_text(), origin=str(path))


def _conn(
    name: str,
    direction: str,
    ctype: str,
    shape: tuple[str, ...] = (),
    strides: tuple[str, ...] = (),
    storage: str = "CPU_Heap",
) -> ConnectorInfo:
    pointer = ctype.endswith("*")
    return ConnectorInfo(
        name=name,
        direction=direction,
        ctype=ctype,
        dtype="double",
        is_pointer=pointer,
        container=name.strip("_").upper(),
        storage=storage,
        subset="",
        shape=shape,
        strides=strides,
        container_shape=shape,
        container_strides=strides,
        offset="0",
        index_formula="",
        volume="1",
    )


def gemm_node(info: TargetInfo) -> NodeContext:
    """C[M,N] = A[M,K] @ B[K,N] (row-major, alpha=1, beta=0)."""
    return NodeContext(
        key="gemm",
        name="gemm",
        node_type="Gemm",
        library="dace.libraries.blas",
        doc="",
        properties={},
        description="C = A @ B for row-major A (M x K), B (K x N), C (M x N)",
        inputs=[
            _conn("_a", "in", "const double *", ("M", "K"), ("K", "1")),
            _conn("_b", "in", "const double *", ("K", "N"), ("N", "1")),
        ],
        outputs=[_conn("_c", "out", "double *", ("M", "N"), ("N", "1"))],
        scopes=[],
        symbols={"M": "int", "N": "int", "K": "int"},
        in_gpu_kernel=False,
        gpu_notes="",
        target=info,
    )


def axpy_node(info: TargetInfo) -> NodeContext:
    """z[0:N] = 2 * x[0:N] + y[0:N] on the CPU (one tasklet over whole vectors)."""
    return NodeContext(
        key="axpy",
        name="axpy",
        node_type="AINode",
        library=None,
        doc="",
        properties={},
        description="z = 2 * x + y",
        inputs=[
            _conn("_x", "in", "const double *", ("N",), ("1",)),
            _conn("_y", "in", "const double *", ("N",), ("1",)),
        ],
        outputs=[_conn("_z", "out", "double *", ("N",), ("1",))],
        scopes=[],
        symbols={"N": "int"},
        in_gpu_kernel=False,
        gpu_notes="",
        target=info,
    )


def gpu_element_node(info: TargetInfo) -> NodeContext:
    """One element z[i] = x[i] + i * y[i] inside a GPU_Device map over i in 0:N."""
    return NodeContext(
        key="elem",
        name="elem",
        node_type="AINode",
        library=None,
        doc="",
        properties={},
        description="z = x + i * y",
        inputs=[_conn("_x", "in", "double", storage="GPU_Global"), _conn("_y", "in", "double", storage="GPU_Global")],
        outputs=[_conn("_z", "out", "double", storage="GPU_Global")],
        scopes=[ScopeInfo(kind="map", label="elem_map", params=("i",), ranges=("0:N",), schedule="GPU_Device")],
        symbols={"N": "int"},
        in_gpu_kernel=True,
        gpu_notes="device code: no __state, no host pointers",
        target=info,
    )


def gpu_host_node(info: TargetInfo) -> NodeContext:
    """A host tasklet that computes z = x + y over whole GPU arrays of length N."""
    return NodeContext(
        key="hostgpu",
        name="hostgpu",
        node_type="AINode",
        library=None,
        doc="",
        properties={},
        description="z = x + y on the GPU",
        inputs=[
            _conn("_x", "in", "const double *", ("N",), ("1",), storage="GPU_Global"),
            _conn("_y", "in", "const double *", ("N",), ("1",), storage="GPU_Global"),
        ],
        outputs=[_conn("_z", "out", "double *", ("N",), ("1",), storage="GPU_Global")],
        scopes=[],
        symbols={"N": "int"},
        in_gpu_kernel=False,
        gpu_notes="",
        target=info,
    )


def run_checker(name: str, ans: Answer, node: NodeContext, workdir: Path, **settings: object) -> CheckReport:
    """Run one registered checker directly, after asserting it applies to the request."""
    checker = get_plugin_manager().checkers()[name]
    request = CheckRequest(
        answer=ans, node=node, settings=resolve_settings({"target": node.target.name, **settings}), workdir=workdir
    )
    assert checker.applies is None or checker.applies(request), f"{name} does not apply to {node.key}"
    report = checker.check(request)
    assert report.checker == name
    return report


def gemm_sdfg():
    """A real SDFG holding one BLAS Gemm node: C[M,N] = A[M,K] @ B[K,N]. Returns (sdfg, state, node)."""
    import dace
    from dace.libraries.blas import Gemm

    M, N, K = (dace.symbol(s) for s in "MNK")
    sdfg = dace.SDFG("gemm_targets")
    for name, shape in (("A", [M, K]), ("B", [K, N]), ("C", [M, N])):
        sdfg.add_array(name, shape, dace.float64)
    state = sdfg.add_state("compute")
    node = Gemm("gemm", alpha=1.0, beta=0.0)
    state.add_node(node)
    state.add_edge(state.add_read("A"), None, node, "_a", dace.Memlet("A[0:M, 0:K]"))
    state.add_edge(state.add_read("B"), None, node, "_b", dace.Memlet("B[0:K, 0:N]"))
    state.add_edge(node, "_c", state.add_write("C"), None, dace.Memlet("C[0:M, 0:N]"))
    return sdfg, state, node


def gemm_prompt_sections(target_name: str) -> dict[str, str]:
    """The rendered prompt sections for the Gemm of :func:`gemm_sdfg` with the ``target`` setting."""
    from dace_ai.context.collect import collect_sdfg_context
    from dace_ai.prompt.render import render_prompt

    sdfg, state, node = gemm_sdfg()
    settings = resolve_settings({"target": target_name})
    ctx = collect_sdfg_context(sdfg, settings).node_context(state, node)
    return dict(render_prompt(ctx, settings).sections)
