"""Run the checkers on a candidate answer, stage by stage, and word the repair request.

Checkers are plugins (``dace_ai_checkers``). Which ones run:

* by default, every registration with ``default=True`` plus those the node's target
  names in its ``checkers`` field;
* the ``checkers`` setting, when it lists plain names, names them exactly (a site swaps
  checkers by configuration alone); when every entry is ``+name`` or ``-name`` it adds
  to or removes from the defaults (``checkers = "+faithful,-probe"``). An unknown name
  is an error listing the installed ones; mixing both forms is an error too.

Each checker's ``applies(request)`` may skip a candidate. Stages run in the order
``compile`` -> ``verify`` -> ``bench``; within a stage a checker runs after the checkers
that give what it needs (``Checker(needs=..., gives=...)``, :func:`~dace_ai.checking.artefacts.order_checkers`),
then by ``order`` (a tie-break: lower first; equal orders keep the selection's order: name
order for the defaults, the setting's order for a list), so ``sanitizers`` runs after
``verify`` and reads its run. Each checker reads only what it declared, on
``request.artefacts``, and gives its own on its report (an undeclared one makes the report
inconclusive). Artefacts no selected checker gives are made by the runner when they say
how: background work (the sanitizer builds) starts as soon as a selected checker needs it,
and is stopped when the checks end or a stage fails. After the first stage with a failure the
later ones are skipped (there is no point timing code that does not build). A
checker that raises becomes an ``inconclusive`` report naming its distribution:
a broken plugin must never take the user's program down with it.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import traceback
from pathlib import Path

from dace_ai.checking.api import CheckReport, CheckRequest, stable_paths
from dace_ai.checking.artefacts import Artefacts, order_checkers
from dace_ai.compat import dace_runtime_include
from dace_ai.config.settings import AISettings
from dace_ai.context.types import NodeContext
from dace_ai.errors import CheckFailed, SettingsError
from dace_ai.plugins.manager import PluginManager, get_plugin_manager
from dace_ai.plugins.registrations import STAGES, Checker
from dace_ai.prompt.answer import Answer
from dace_ai.prompt.feedback import where_the_time_goes
from dace_ai.storage.files import ai_folder, build_root, lock_for


def check_workdir(node_ctx: NodeContext, answer: Answer) -> Path:
    """``<build root>/ai-check/<hash>``: one folder per (node, target, answer), so reruns reuse it."""
    key = {
        "sdfg": node_ctx.sdfg_name,
        "node": node_ctx.key,
        "target": [node_ctx.target.name, list(node_ctx.target.compiler), list(node_ctx.target.flags)],
        "answer": answer.model_dump(mode="json"),
    }
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:20]
    return ai_folder("ai-check") / digest


def select_checkers(
    node: NodeContext, settings: AISettings, manager: PluginManager | None = None
) -> tuple[list[Checker], list[CheckReport]]:
    """The checkers to run for ``node``, in run order, and reports for names that are missing.

    Run order: by stage, givers before the checkers that need their artefacts, then ``order``
    (:func:`~dace_ai.checking.artefacts.order_checkers`, which raises ``CheckerGraphError``
    naming the checkers for a cycle or an artefact given twice).

    A checker named by the ``checkers`` setting but not installed is an error (the user
    asked for it); one named by a target but not installed is reported as inconclusive
    (the target pack's problem, not a reason to stop the user's program).
    """
    manager = manager or get_plugin_manager()
    registered = manager.checkers()
    missing: list[CheckReport] = []
    entries = list(settings.checkers or ())
    signed = [e for e in entries if e[:1] in "+-"]
    where = f"setting 'checkers' from {settings.source('checkers')}"
    if signed and len(signed) != len(entries):
        raise SettingsError(
            f"{where} mixes plain names with +name/-name entries ({', '.join(entries)}): either "
            "list the checkers to run, or add (+) to and remove (-) from the defaults"
        )
    unknown = [e.lstrip("+-") for e in entries if e.lstrip("+-") not in registered]
    if unknown:
        raise SettingsError(
            f"{where} names unknown checker(s) {', '.join(map(repr, unknown))}; "
            f"installed: {', '.join(registered) or 'none'}"
        )
    if entries and not signed:
        names = list(dict.fromkeys(entries))
    else:
        names = [name for name, checker in registered.items() if checker.default]
        target = manager.targets().get(node.target.name)
        if target is not None:
            for name in target.checkers:
                if name not in registered:
                    missing.append(
                        CheckReport(
                            name,
                            "inconclusive",
                            f"checker {name!r} named by target {node.target.name!r} "
                            f"({target.origin}) is not installed; installed: {', '.join(registered)}",
                            stage="compile",
                        )
                    )
                elif name not in names:
                    names.append(name)
        for entry in signed:
            if entry[0] == "+" and entry[1:] not in names:
                names.append(entry[1:])
            elif entry[0] == "-" and entry[1:] in names:
                names.remove(entry[1:])
    chosen = [registered[name] for name in names]
    return order_checkers(chosen), missing


def any_checker_applies(request: CheckRequest, manager: PluginManager | None = None) -> bool:
    """True when :func:`run_checks` would give ``request`` at least one report (never raises)."""
    if not request.settings.compile_check:
        return False
    try:
        checkers, missing = select_checkers(request.node, request.settings, manager)
    except Exception:  # noqa: BLE001 - a bad setting fails the real run; here it only means "reports expected"
        return True
    if missing:
        return True
    for checker in checkers:
        try:
            if checker.applies is None or checker.applies(request):
                return True
        except Exception:  # noqa: BLE001 - a broken applies() is reported by the real run
            return True
    return False


def _stable_replacements(workdir: Path) -> dict[str, str]:
    return {
        str(workdir) + os.sep: "",
        str(workdir): ".",
        dace_runtime_include() + os.sep: "",
        str(build_root()) + os.sep: ".dacecache/",
    }


def _run_one(checker: Checker, request: CheckRequest, store: Artefacts) -> CheckReport | None:
    """Run one checker on a request limited to its needs; ``None`` when it does not apply. Never raises
    (except interrupts). What its report gives goes into ``store``; an undeclared artefact makes the
    report inconclusive."""
    start = time.perf_counter()
    request = store.request_for(request, checker.name, checker.needs)
    try:
        if checker.applies is not None and not checker.applies(request):
            return None
        report = checker.check(request)
        if not isinstance(report, CheckReport):
            raise TypeError(f"check() returned {type(report).__name__}, not CheckReport")
    except Exception as exc:  # noqa: BLE001 - a broken checker is reported, never fatal
        report = CheckReport(
            checker.name,
            "inconclusive",
            f"checker {checker.name!r} from {checker.origin} raised {type(exc).__name__}: {exc}",
            details={"traceback": traceback.format_exc()},
        )
    undeclared = [a for a in report.artefacts if a not in checker.gives]
    if undeclared:
        report = CheckReport(
            checker.name,
            "inconclusive",
            f"checker {checker.name!r} from {checker.origin} gave {', '.join(map(repr, undeclared))}, which it "
            f"does not declare in its gives (declared: {', '.join(a.name for a in checker.gives) or 'none'})",
            reason="undeclared artefact",
        )
    store.given.update(report.artefacts)
    report.artefacts = {}
    if not report.seconds:
        report.seconds = time.perf_counter() - start
    report.fields_from_details()
    report.stage = report.stage or checker.stage
    report.details.setdefault("origin", checker.origin)
    report.diagnostics = stable_paths(report.diagnostics, _stable_replacements(request.workdir))
    return report


def _start_background(request: CheckRequest, checkers: list[Checker], store: Artefacts) -> None:
    """Start the background artefacts (``make`` with ``background=True``) a selected checker needs and
    none gives, once their own needs are given. Never raises: a start is an optimisation."""
    given = {a for c in checkers for a in c.gives}
    for artefact in dict.fromkeys(a for c in checkers for a in c.needs):
        if not artefact.background or artefact in given or artefact in store.made:
            continue
        if all(n in store.given or n.make is not None for n in artefact.needs):
            try:
                store.value(request, artefact)
            except Exception:  # noqa: BLE001, S112 - the checker that needs it reports what went wrong
                continue


def run_checks(
    request: CheckRequest, manager: PluginManager | None = None, *, artefacts: Artefacts | None = None
) -> list[CheckReport]:
    """Every applicable checker's report, stopping after the first stage with a failure.

    ``compile_check=false`` turns checking off (no reports). The workdir is created here.
    ``artefacts``: the store the checkers give to (a fresh one by default); a caller passes its
    own to read what they gave afterwards (``artefacts.get(SANDBOX_RUN)``).
    """
    if not request.settings.compile_check:
        return []
    checkers, reports = select_checkers(request.node, request.settings, manager)
    store = Artefacts() if artefacts is None else artefacts
    store.selected = tuple(checkers)
    Path(request.workdir).mkdir(parents=True, exist_ok=True)
    # Identical answers for one node share this folder (reruns reuse it), whether they come from
    # threads, worker processes or cluster jobs: their checks run one at a time.
    try:
        with lock_for(request.workdir, timeout=3600.0):
            for stage in STAGES:
                stage_reports: list[CheckReport] = []
                for checker in (c for c in checkers if c.stage == stage):
                    _start_background(request, checkers, store)
                    report = _run_one(checker, request, store)
                    if report is None:
                        continue
                    stage_reports.append(report)
                    if report.failed:  # the later stages will not run: their background work is useless
                        store.stop_background()
                reports.extend(stage_reports)
                if any(r.failed for r in stage_reports):
                    break
    finally:
        store.stop_background()
    return reports


def failed(reports: list[CheckReport]) -> bool:
    return any(r.failed for r in reports)


def repair_message(reports: list[CheckReport]) -> str:
    """The failed checks' diagnostics, worded for the model; "" when nothing failed.

    A candidate the bench gate refused as too slow also gets the "Where the time goes"
    section (:func:`dace_ai.prompt.feedback.where_the_time_goes`): its figures, the
    fraction of speed of light and the compiler's remarks on its loops.

    Byte-stable across runs (no temporary paths), because it becomes part of the
    conversation and therefore of the answer cache key; only a bench refusal quotes
    measured times, which vary from run to run.
    """
    failures = [r for r in reports if r.failed]
    if not failures:
        return ""
    replacements = {str(build_root()) + os.sep: ".dacecache/"}
    parts = [
        (
            "Your code did not pass the checks below. Fix every reported problem and answer again "
            "with the complete corrected answer in the same JSON format."
        )
    ]
    for report in failures:
        stage = report.stage or "compile"
        text = stable_paths(report.diagnostics.strip(), replacements) or "(no diagnostics)"
        parts.append(f"Check {report.checker!r} (stage {stage}) failed:\n```\n{text}\n```")
    if any(r.rule == "gate" for r in failures):  # too slow: say where the time goes
        section = where_the_time_goes(reports).strip()
        if section:
            parts.append(section)
    return "\n\n".join(parts) + "\n"


def failure_error(
    node: NodeContext,
    reports: list[CheckReport],
    attempts: int,
    session_folder: str | os.PathLike | None = None,
    *,
    max_lines: int = 12,
) -> CheckFailed:
    """The short error raised when a node still fails after ``attempts`` repair rounds.

    It names the node, the failed checks and the session, and quotes the first
    ``max_lines`` lines of the last diagnostics (the session holds them all).
    """
    where = f"; session: {session_folder}" if session_folder else ""
    failures = [r for r in reports if r.failed]
    lines: list[str] = []
    for r in failures:
        lines += [f"[{r.checker}] {line}" for line in r.diagnostics.strip().splitlines()]
    cut = len(lines) - max_lines
    last = "\n".join(lines[:max_lines]) + (f"\n... ({cut} more lines in the session)" if cut > 0 else "")
    names = ", ".join(sorted({r.checker for r in failures})) or "none"
    return CheckFailed(
        f"node {node.name!r} ({node.node_type}) in SDFG {node.sdfg_name!r} still fails its checks "
        f"({names}) after {attempts} repair attempt(s){where}. Last diagnostics:\n{last}",
        node=node.name,
        session=str(session_folder or ""),
    )


def inconclusive_error(
    node: NodeContext, reports: list[CheckReport], session_folder: str | os.PathLike | None = None
) -> CheckFailed:
    """The error when checks could not decide and ``on_inconclusive=reject`` refuses the answer."""
    where = f"; session: {session_folder}" if session_folder else ""
    what = "; ".join(
        f"{r.checker}: " + ((r.reason or r.diagnostics.strip() or "no reason given").splitlines()[0]) for r in reports
    )
    return CheckFailed(
        f"node {node.name!r} ({node.node_type}) in SDFG {node.sdfg_name!r}: the answer was refused "
        f"because {len(reports)} check(s) could not decide ({what}) and on_inconclusive=reject{where}",
        node=node.name,
        session=str(session_folder or ""),
    )
