"""A device tasklet verified on its CPU twin: the same code at the same map points, run on the host.

:func:`check_cpu_twin` makes the twin's request (:func:`~dace_ai.compilation.cpu_twin.twin_node`: the
node's context with CPU storages, schedules and target; the answer as host C++; the unit opened by
:data:`~dace_ai.compilation.cpu_twin.TWIN_HEADER`) and runs it through
:func:`~dace_ai.sandbox.harness.run_against_reference` like any host candidate: the size ladder, seeds,
input distributions, poisoned outputs, inputs unchanged, second and concurrent calls, against the
node's reference. The report says it ran on the twin (``Coverage.twin``), so the level reads
``verified on the CPU twin (3 seeds, 5 sizes, 6 distributions; not run on a GPU)``.

Code the twin cannot run (:func:`~dace_ai.compilation.cpu_twin.twin_blockers`), code the host
compiler cannot build with the header (a CUDA name it does not give, which says nothing against the
answer) and accumulating outputs (write-conflict resolution) of a node whose reference is a function
(it gives one point's value; device code adds into the output) stay ``compile-only`` with the reason;
wrong results are refusals naming the element.
"""

from __future__ import annotations

from pathlib import Path

from dace_ai.checking.api import CheckReport, CheckRequest
from dace_ai.compilation.cpu_twin import TWIN, TWIN_HEADER, twin_answer, twin_blockers, twin_node
from dace_ai.compilation.diagnostics import summarize_output
from dace_ai.sandbox.cases import parse_sizes_setting
from dace_ai.sandbox.harness import run_against_reference
from dace_ai.sandbox.reference import reference_kind
from dace_ai.sandbox.run_report import sandbox_report


def has_reference(request: CheckRequest) -> bool:
    """The node has a reference to run the twin against (its native expansion or ``reference=``); without
    one the twin has nothing to compare, and the device tasklet stays ``compile-only`` as its build left it."""
    return reference_kind(request)[0] is not None


def twin_request(request: CheckRequest) -> CheckRequest:
    """The request of the candidate's CPU twin, with its own folder (``<workdir>/cpu-twin``) and compile."""
    return CheckRequest(
        twin_answer(request.answer),
        twin_node(request.node),
        request.settings,
        Path(request.workdir) / "cpu-twin",
        environments=set(request.environments),
        prelude=TWIN_HEADER,
    )


def _compile_only(checker: str, why: str, diagnostics: str) -> CheckReport:
    return CheckReport(
        checker,
        "inconclusive",
        diagnostics,
        0.0,
        {"twin": True},
        stage="verify",
        reason=f"compile-only: {why}",
        compile_only=True,
    )


def check_cpu_twin(request: CheckRequest, checker: str) -> CheckReport:
    """Verify a device tasklet on its CPU twin (see the module docstring)."""
    blockers = twin_blockers(request.answer)
    if blockers:
        why = f"{'; '.join(blockers)}, which {TWIN} cannot run"
        return _compile_only(checker, why, f"Not run on {TWIN}: the code {why}. Only the compile stage checked it.")
    accumulating = [c.name for c in request.node.outputs if c.wcr]
    if accumulating and reference_kind(request)[0] == "function":
        # device code adds into an accumulating output (atomicAdd), while a reference function gives each map
        # point's own value: comparing the two would refuse right answers
        why = (
            f"output {', '.join(accumulating)} accumulates (write-conflict resolution) and the reference is a "
            f"function of one map point's inputs, which {TWIN} does not compare yet"
        )
        return _compile_only(checker, why, f"Not run on {TWIN}: {why}. Only the compile stage checked it.")
    twin = twin_request(request)
    settings = request.settings
    result = run_against_reference(
        twin, mode="verify", seeds=settings.verify_seeds, sizes=parse_sizes_setting(settings.verify_sizes)
    )
    if result.status == "failed" and result.reason in ("compile", "link"):
        first = next(iter(summarize_output(result.message, max_lines=3).splitlines()[1:2]), "").strip()
        why = f"{TWIN} cannot build it with the host compiler" + (f" ({first[:160]})" if first else "")
        return _compile_only(checker, why, f"Not run: {why}.\n{result.message}")
    message = result.message
    if result.status == "passed":
        message = f"on {TWIN} (the same code and map points on the host; not run on a GPU): {message}"
    elif result.status == "failed":
        message = f"On {TWIN} (the same device code run on the host at the same map points): {message}"
    return sandbox_report(checker, request, result, message, result.seconds["total"], {"twin": True})
