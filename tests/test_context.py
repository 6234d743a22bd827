"""Context collection on real SDFGs: connector views, scopes, symbols, GPU flags, environments."""

import copy
from typing import ClassVar

import dace
import numpy as np
import pytest
from dace_ai import compat
from dace_ai.context.collect import ContextError, collect_sdfg_context
from dace_ai.environments.installed import check_environment, environment_infos

from .context_sdfgs import Probe, map_nest_sdfg, nested_sdfg, strided_sdfg
from .dace_versions import DACE2


def _flat_index(formula: str, name: str, **indices: int) -> int:
    """Evaluate an index formula such as ``_a[i0*10 + i1]`` for concrete indices."""
    expr = formula.removeprefix(name + "[").removesuffix("]")
    return eval(expr, {}, dict(indices))


def test_strided_offset_subset_gives_view_strides_offset_and_formula():
    sdfg, state, probe = strided_sdfg(rows=20, cols=5)
    a, b = collect_sdfg_context(sdfg).node_context(state, probe).connectors

    assert (a.name, a.direction, a.ctype, a.is_pointer) == ("_a", "in", "const double *", True)
    assert a.container == "A" and a.storage == "CPU_Heap" and a.subset == "2:10:2, 1:5"
    assert a.shape == ("4", "4")
    assert a.container_shape == ("20", "5") and a.container_strides == ("5", "1")
    assert a.strides == ("10", "1")  # step 2 over rows of 5 elements
    assert a.offset == "11"  # A[2, 1]
    assert a.index_formula == "_a[i0*10 + i1]"
    # The formula plus the offset address exactly the elements of the subset.
    full = np.arange(100).reshape(20, 5)
    for i0 in range(4):
        for i1 in range(4):
            assert (
                full.flat[int(a.offset) + _flat_index(a.index_formula, "_a", i0=i0, i1=i1)] == full[2:10:2, 1:5][i0, i1]
            )

    assert (b.name, b.direction, b.ctype, b.is_pointer) == ("_b", "out", "double", False)
    assert b.index_formula == "_b" and b.offset == "3" and b.volume == "1"


def test_symbolic_strides_appear_in_the_formula():
    M = dace.symbol("M")
    sdfg = dace.SDFG("symbolic")
    sdfg.add_array("A", [30, M], dace.float32)
    sdfg.add_array("B", [1], dace.float32)
    state = sdfg.add_state()
    probe = Probe("probe", ["_a"], ["_b"])
    state.add_edge(state.add_read("A"), None, probe, "_a", dace.Memlet("A[2:10:2, 1:M]"))
    state.add_edge(probe, "_b", state.add_write("B"), None, dace.Memlet("B[0]"))
    a = collect_sdfg_context(sdfg).node_context(state, probe).inputs[0]
    assert a.ctype == "const float *" and a.dtype == "float"
    assert a.strides == ("(2 * M)", "1")
    assert a.index_formula == "_a[i0*(2 * M) + i1]"
    assert a.offset == "((2 * M) + 1)"


def test_index_formula_is_what_dace_generates(tmp_path):
    """A tasklet typed and indexed as the context says reads exactly the subset (one real compile)."""
    sdfg, state, probe = strided_sdfg(rows=20, cols=5)
    ctx = collect_sdfg_context(sdfg).node_context(state, probe)
    a, b = ctx.connectors
    body = (
        f"double s = 0.0;\nfor (int i0 = 0; i0 < 4; ++i0)\n  for (int i1 = 0; i1 < 4; ++i1)\n"
        f"    s += {a.index_formula} * (i0 * 4 + i1 + 1);\n{b.index_formula} = s;"
    )
    tasklet = state.add_tasklet(
        "weighted", {"_a": dace.pointer(dace.float64)}, {"_b": dace.float64}, body, language=dace.Language.CPP
    )
    for e in list(state.in_edges(probe)):
        state.add_edge(e.src, e.src_conn, tasklet, e.dst_conn, copy.deepcopy(e.data))
    for e in list(state.out_edges(probe)):
        state.add_edge(tasklet, e.src_conn, e.dst, e.dst_conn, copy.deepcopy(e.data))
    state.remove_node(probe)
    A = np.random.default_rng(0).random((20, 5))
    B = np.zeros(10)
    sdfg(A=A, B=B)
    weights = np.arange(1, 17).reshape(4, 4)
    assert B[3] == pytest.approx(float((A[2:10:2, 1:5] * weights).sum()))


def test_map_nesting_with_resolved_schedules_and_symbols():
    sdfg, state, probe, (outer, inner) = map_nest_sdfg()
    ctx = collect_sdfg_context(sdfg).node_context(state, probe)
    assert [(s.kind, s.label, s.params, s.ranges, s.schedule) for s in ctx.scopes] == [
        ("map", "outer", ("i",), ("0:N",), "CPU_Multicore"),
        ("map", "inner", ("j",), ("0:8",), "Sequential"),
    ]
    assert set(ctx.symbols) == {"N", "i", "j"} and ctx.symbols["N"] == "int"
    assert not ctx.in_gpu_kernel and ctx.gpu_notes == ""
    assert ctx.target.kind == "cpu"
    a = ctx.inputs[0]
    assert a.subset == "i, 0:8" and a.shape == ("1", "8") and a.offset == "(8 * i)"
    assert a.index_formula == "_a[i1]"  # the size-1 row dimension needs no index
    # Inference ran on a copy: the user's SDFG still has default schedules and untyped connectors.
    assert outer.map.schedule == dace.ScheduleType.Default and inner.map.schedule == dace.ScheduleType.Default
    assert probe.in_connectors["_a"].type is None


def test_gpu_device_map_sets_the_kernel_flag_and_names_host_containers():
    sdfg, state, probe, _ = map_nest_sdfg(dace.ScheduleType.GPU_Device, dace.StorageType.GPU_Global)
    ctx = collect_sdfg_context(sdfg).node_context(state, probe)
    assert [s.schedule for s in ctx.scopes] == ["GPU_Device", "GPU_ThreadBlock"]
    assert ctx.in_gpu_kernel
    assert "`_h` -> H (CPU_Heap)" in ctx.gpu_notes and "`_a`" not in ctx.gpu_notes
    # A single GPU element is a pointer (DaCe does not allocate GPU_Global data as scalars).
    b = ctx.outputs[0]
    assert b.storage == "GPU_Global" and b.is_pointer and b.index_formula == "_b[0]"


def test_nested_sdfg_scope_outermost_first():
    outer, inner_state, probe = nested_sdfg()
    ctx = collect_sdfg_context(outer).node_context(inner_state, probe)
    assert [(s.kind, s.label) for s in ctx.scopes] == [("map", "rows"), ("nested_sdfg", "inner")]
    assert ctx.scopes[0].schedule == "CPU_Multicore"
    assert ctx.sdfg_name == "inner" and ctx.state_label == "inner_body"
    assert ctx.key.startswith("outer/1/0/")  # cfg id 1: the nested SDFG
    # Collecting from the nested SDFG itself collects the whole tree (enclosing scopes stay known).
    again = collect_sdfg_context(inner_state.sdfg).node_context(inner_state, probe)
    assert again.scopes == ctx.scopes and again.key == ctx.key


N = dace.symbol("N")


@dace.program
def loop_mm(A: dace.float64[N, N], B: dace.float64[N, N], C: dace.float64[N, N]):
    for t in range(3):  # noqa: B007 - the context names the loop by its variable (read below)
        C[:] = A @ B


def test_program_loop_and_library_node_from_the_frontend():
    sdfg = loop_mm.to_sdfg()
    sctx = collect_sdfg_context(sdfg)
    ((state, node),) = sctx.library_nodes()
    ctx = sctx.node_context(state, node)
    assert ctx.node_type == "MatMul" and ctx.library == "dace.libraries.blas"
    assert [(s.kind, s.params) for s in ctx.scopes] == [("loop", ("t",))]
    assert "t < 3" in ctx.scopes[0].ranges[0]
    assert "t" in ctx.symbols and "N" in ctx.symbols
    assert [c.name for c in ctx.inputs] == ["_a", "_b"] and ctx.outputs[0].container == "C"
    assert "MatMul" in ctx.description and ctx.doc.startswith("This is a")
    # The user's SDFG keeps its state-machine loop: loops are lifted on the copy only.
    from dace.sdfg.state import LoopRegion

    # (DaCe 2's frontend builds loop regions itself.)
    assert DACE2 or not any(isinstance(r, LoopRegion) for r in sdfg.all_control_flow_regions(recursive=True))


def test_ainode_description_and_properties():
    from dace_ai.expansion.ainode import AINode

    sdfg, state, probe = strided_sdfg()
    node = AINode("fma", "Compute _b as the sum of all elements of _a.", inputs={"_a"}, outputs={"_b"})
    state.add_node(node)
    for e in list(state.in_edges(probe)):
        state.add_edge(e.src, e.src_conn, node, e.dst_conn, copy.deepcopy(e.data))
    for e in list(state.out_edges(probe)):
        state.add_edge(node, e.src_conn, e.dst, e.dst_conn, copy.deepcopy(e.data))
    state.remove_node(probe)
    ctx = collect_sdfg_context(sdfg).node_context(state, node)
    assert ctx.node_type == "AINode" and ctx.description == "Compute _b as the sum of all elements of _a."
    assert "description" not in ctx.properties and "guid" not in ctx.properties


def test_one_copy_per_sdfg_and_stable_keys(monkeypatch):
    sdfg = dace.SDFG("many")
    sdfg.add_array("A", [4], dace.float64)
    placed = []
    for k in range(5):
        state = sdfg.add_state(f"s{k}")
        probe = Probe(f"probe{k}", ["_a"], ["_b"])
        state.add_edge(state.add_read("A"), None, probe, "_a", dace.Memlet("A[0:4]"))
        state.add_edge(probe, "_b", state.add_write("A"), None, dace.Memlet("A[0:4]"))
        placed.append((state, probe))
    copies = []
    original = dace.SDFG.__deepcopy__

    def counting(self, memo):
        copies.append(self.name)
        return original(self, memo)

    monkeypatch.setattr(dace.SDFG, "__deepcopy__", counting)
    sctx = collect_sdfg_context(sdfg)
    contexts = [sctx.node_context(state, probe) for state, probe in placed]
    assert copies == ["many"]  # one deep copy for all five nodes
    inferred_nodes = {id(n) for s in sctx.inferred.states() for n in s.nodes()}
    for c, (_, probe) in zip(contexts, placed):  # every node is read from the one inferred copy
        assert id(c.live["inferred_node"]) in inferred_nodes and c.live["inferred_node"].label == probe.label
        assert c.live["inferred_node"].in_connectors["_a"] == dace.pointer(dace.float64)
    keys = [c.key for c in contexts]
    assert len(set(keys)) == 5 and keys[2] == f"many/0/2/{placed[2][0].node_id(placed[2][1])}/probe2"
    assert keys == [c.key for c in (collect_sdfg_context(sdfg).node_context(s, p) for s, p in placed)]
    assert [n for _, n in sctx.library_nodes()] == [p for _, p in placed]
    assert contexts[0].live["node"] is placed[0][1] and contexts[0].live["sdfg"] is sdfg


def test_unknown_node_is_a_clear_error():
    sdfg, state, probe = strided_sdfg()
    sctx = collect_sdfg_context(sdfg)
    stranger = Probe("stranger", ["_a"], ["_b"])
    with pytest.raises(ContextError, match="node 'stranger' is not in state 'compute'"):
        sctx.node_context(state, stranger)
    _, other_state, _ = strided_sdfg()
    with pytest.raises(ContextError, match="state 'compute' is not part of SDFG 'strided'"):
        sctx.node_context(other_state, probe)
    # Expanding (removing) one node does not lose the context of the others.
    state.add_node(stranger)
    assert sctx.node_context(state, probe).name == "probe"


@dace.library.environment
class _HeaderPresent:
    cmake_minimum_version = None
    cmake_packages = ()
    cmake_variables: ClassVar[dict] = {}
    cmake_includes = ()
    cmake_libraries = ()
    cmake_compile_flags = ()
    cmake_link_flags = ()
    cmake_files = ()
    headers = ("stdio.h",)
    state_fields = ()
    init_code = ""
    finalize_code = ""
    dependencies = ()


@dace.library.environment
class _HeaderMissing(_HeaderPresent):
    headers = ("surely_not_installed_dace_ai.h",)
    cmake_libraries = ("surely_not_installed_dace_ai",)


def test_environments_are_split_by_installation_check():
    present = check_environment("present", _HeaderPresent)
    missing = check_environment("missing", _HeaderMissing)
    assert present.available and present.headers == ("stdio.h",)
    assert not missing.available
    assert "surely_not_installed_dace_ai.h" in missing.reason and "surely_not_installed_dace_ai" in missing.reason
    infos = {e.name: e for e in environment_infos()}
    assert set(infos) == set(compat.registered_environments())
    assert infos[_HeaderPresent.full_class_path()].available
    assert not infos[_HeaderMissing.full_class_path()].available
    assert "dace.libraries.blas.environments.openblas.OpenBLAS" in infos
    sdfg, state, probe = strided_sdfg()
    listed = {e.name for e in collect_sdfg_context(sdfg).node_context(state, probe).environments}
    assert _HeaderPresent.full_class_path() in listed


def test_what_the_checks_remember_per_node_is_asked_again_for_a_new_context_or_new_live_objects():
    from dace_ai.context.per_node import PerNode

    from .test_checking import node_context

    asked: list[object] = []

    def make(node):
        asked.append(node)
        if node.name == "broken":
            raise ValueError("cannot tell")
        return len(asked)

    remembered = PerNode(make, size=2)
    first = node_context()
    assert remembered(first) == remembered(first) == 1  # asked once for one context
    first.live = {"sdfg": None}  # live objects given afresh (a revision's reference node, a rebuilt program)
    assert remembered(first) == 2
    assert remembered(node_context()) == 3  # another context
    broken = node_context(name="broken")
    for _ in range(2):
        with pytest.raises(ValueError):
            remembered(broken)
    assert len(asked) == 5  # a failure is not kept
    for _ in range(3):
        remembered(node_context())
    assert len(remembered._held) == 2  # only the last few contexts are kept
