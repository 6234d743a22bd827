"""``build(sdfg)`` and ``repair(sdfg, error)``: compile a whole program and repair what broke it.

A generated tasklet can pass its own checks and still break the program: two
tasklets define the same helper in ``code_global`` (both land in one file), or
code only fails next to the rest of the program. ``build`` compiles, parses the
compiler's diagnostics, maps every diagnosed line of a generated file to the
node that produced it through DaCe's ``////__DACE:cfg:state:node`` markers, and
asks only the blamed generated tasklets for repairs (pinned ones are left as
they are), each with its own conversation plus the diagnostics. When one error
involves several tasklets (an error in one, a note in another), each is told,
and told about the others.

``sdfg.compile()`` itself never repairs: only ``build``/``repair`` do.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dace_ai import compat
from dace_ai.checking.api import stable_paths
from dace_ai.compilation.diagnostics import Diagnostic, errors_with_notes, format_diagnostics, parse_diagnostics
from dace_ai.config.settings import AISettings
from dace_ai.errors import CheckFailed
from dace_ai.expansion.expansion_pass import expansion_pass, resolve
from dace_ai.expansion.pending import pending_nodes
from dace_ai.expansion.pipeline import implement
from dace_ai.solving.provenance import is_pinned, level_from_code, provenance
from dace_ai.workflows.generated import of_tasklet
from dace_ai.workflows.revision import Revision, revise
from dace_ai.workflows.sessions import hand_edit_note, hand_edits

__all__ = ["blame", "build", "is_pinned", "provenance", "repair"]

_MARKER = re.compile(r"////__DACE:(\d+):(\d+):(\d+)(?![\d,])")


@dataclass
class Blame:
    """A generated tasklet and the diagnostic blocks (error + notes) that involve it."""

    sdfg: Any
    state: Any
    tasklet: Any
    blocks: list[list[Diagnostic]] = field(default_factory=list)
    #: Labels of other generated tasklets that share one of these errors.
    shared_with: set[str] = field(default_factory=set)


# ---------------------------------------------------------------------------------------- blame
def _blocks(diagnostics: list[Diagnostic]) -> list[list[Diagnostic]]:
    """Errors grouped with the notes that follow them."""
    blocks: list[list[Diagnostic]] = []
    for diag in errors_with_notes(diagnostics):
        if diag.is_error or not blocks:
            blocks.append([diag])
        else:
            blocks[-1].append(diag)
    return blocks


def _owner_by_line(code: str) -> dict[int, tuple[int, int, int]]:
    """Line number (1-based) -> innermost node marker on that line."""
    owners = {}
    for number, line in enumerate(code.split("\n"), start=1):
        m = _MARKER.search(line)
        if m:
            owners[number] = (int(m.group(1)), int(m.group(2)), int(m.group(3)))
    return owners


def blame(sdfg: Any, output: str) -> tuple[list[Blame], list[list[Diagnostic]]]:
    """Generated tasklets blamed by the compiler ``output``, and the error blocks blamed on none."""
    from dace.sdfg import nodes

    generated, files = compat.generated_code(sdfg)
    owners = {path.replace("\\", "/"): _owner_by_line(code) for path, code in files}
    originals = {
        node.guid: (state, node) for node, state in sdfg.all_nodes_recursive() if isinstance(node, nodes.Tasklet)
    }
    found: dict[str, Blame] = {}
    unblamed: list[list[Diagnostic]] = []
    for block in _blocks(parse_diagnostics(output)):
        involved: list[Blame] = []
        for diag in block:
            path = next((p for p in owners if diag.file.replace("\\", "/").endswith(p)), None)
            marker = owners[path].get(diag.line) if path else None
            located = compat.node_at_marker(generated, *marker) if marker else None
            if located is None or not isinstance(located[1], nodes.Tasklet):
                continue
            original = originals.get(located[1].guid)
            if original is None or provenance(original[1]) is None:
                continue  # not a generated tasklet: nothing to ask
            state, tasklet = original
            entry = found.setdefault(tasklet.guid, Blame(state.sdfg, state, tasklet))
            if entry not in involved:
                involved.append(entry)
        if not involved:
            unblamed.append(block)
        for entry in involved:
            entry.blocks.append(block)
            entry.shared_with |= {other.tasklet.label for other in involved if other is not entry}
    return list(found.values()), unblamed


def _stable(text: str, sdfg: Any) -> str:
    return stable_paths(text, {str(Path(sdfg.build_folder).resolve()) + "/": "", str(sdfg.build_folder) + "/": ""})


def blame_message(entry: Blame, sdfg: Any) -> str:
    """The repair request for one blamed tasklet (byte-stable: paths relative to the build folder)."""
    text = _stable("\n".join(format_diagnostics(block) for block in entry.blocks), sdfg)
    parts = [
        (
            f"The whole program did not compile, and these compiler errors involve your code (tasklet "
            f"{entry.tasklet.label!r}). The file is generated by DaCe from all tasklets of the program."
        )
    ]
    if entry.shared_with:
        others = ", ".join(sorted(entry.shared_with))
        parts.append(
            f"Some of these errors come from code of other generated tasklets in the same file ({others}): "
            "everything in code_global shares one file scope, so give your helpers, types and macros "
            "names that cannot collide (for example prefixed with your tasklet's name)."
        )
    parts.append(f"```\n{text}\n```")
    parts.append(
        "Fix every reported problem and answer again with the complete corrected answer in the same JSON format."
    )
    return "\n\n".join(parts) + "\n"


# ---------------------------------------------------------------------------------------- repair
def repair_tasklet(entry: Blame, message: str, settings: AISettings, program: Any = None) -> Any:
    """Continue the blamed tasklet's conversation with ``message`` (the errors that involve it); return the tasklet.

    The repaired answer is held to the standard of the first one: the checks of the node's
    context and repair rounds (:func:`dace_ai.workflows.revision.revise`); only an accepted
    answer replaces the tasklet's code, with the level it reached. Hand edits since the
    round's answer are what the model is asked to repair. ``program`` is the SDFG being built.
    """
    g = of_tasklet(entry.state, entry.tasklet)
    if g.session is None or g.round is None or not g.session.round_folder(g.round).is_dir():
        raise CheckFailed(
            f"tasklet {entry.tasklet.label!r}: its session ({g.fields.get('session', 'not recorded')}) "
            "is not in this build folder, so its conversation cannot be continued"
        )
    edited_code, edited_global = hand_edits(g.tasklet, g.session, g.round)
    if edited_code is not None:  # what the program contains is what must be repaired
        message = hand_edit_note(edited_code, edited_global) + "\n\n" + message
    revision = Revision(message, "program build repair", edited_by_hand=edited_code is not None)
    return revise(program if program is not None else entry.sdfg, g, revision, settings)


def compiler_output(sdfg: Any, error: BaseException) -> str:
    """The compiler's output for ``error``; compiles again without debugprint when DaCe hid it."""
    text = str(error)
    if parse_diagnostics(text):
        return text
    compilation_error, _ = compat.compilation_error_types()
    try:
        with compat.debugprint_off():
            compat.compile_without_loading(sdfg)
    except compilation_error as again:
        return str(again)
    return text


def implement_pending(sdfg: Any, settings: AISettings) -> None:
    """Implement the SDFG's pending ``'ai'`` nodes in place.

    ``sdfg.compile()`` expands them on a copy, so after a failed compile the user's
    SDFG still holds the library nodes; the tasklets to blame must be its own. The
    answers come from the cache when the compile asked before.
    """
    with expansion_pass():
        for nsdfg, state, node in pending_nodes(sdfg):
            implement(nsdfg, state, node, settings)


def repair(sdfg: Any, error: BaseException, settings: AISettings | dict[str, Any] | None = None) -> list[str]:
    """Ask the generated tasklets blamed by ``error`` (a ``CompilationError``) for repairs.

    Returns the labels of the repaired tasklets. Raises :class:`CheckFailed` when no
    unpinned generated tasklet can be blamed (the error is elsewhere, or pinned).
    """
    settings = resolve(settings)
    implement_pending(sdfg, settings)
    output = compiler_output(sdfg, error)
    blamed, unblamed = blame(sdfg, output)
    repairable = [b for b in blamed if not is_pinned(b.tasklet)]
    if not repairable:
        pinned = [b.tasklet.label for b in blamed]
        why = (
            f"the blamed tasklet(s) {', '.join(pinned)} are pinned"
            if pinned
            else "no generated tasklet produced the failing lines"
        )
        text = format_diagnostics([d for block in unblamed or [b for e in blamed for b in e.blocks] for d in block])
        raise CheckFailed(f"SDFG {sdfg.name!r} does not compile and {why}:\n{_stable(text, sdfg)}") from error
    for entry in repairable:
        repair_tasklet(entry, blame_message(entry, sdfg), settings, sdfg)
    return [entry.tasklet.label for entry in repairable]


def build(sdfg: Any, rounds: int = 2, settings: AISettings | dict[str, Any] | None = None) -> Any:
    """Compile ``sdfg``; on compiler errors, repair the blamed generated tasklets, up to ``rounds`` times.

    Pending ``'ai'`` nodes are implemented first (in place), so the tasklets that the
    compiler blames are the SDFG's own. Returns the compiled program. ``debugprint`` is
    off while compiling, because DaCe hides the compiler's output when it is on.
    """
    settings = resolve(settings)
    implement_pending(sdfg, settings)
    compilation_error, _ = compat.compilation_error_types()
    for attempt in range(rounds + 1):
        try:
            with compat.debugprint_off():
                program = sdfg.compile()
            print_verification_summary(sdfg)
            return program
        except compilation_error as exc:
            if attempt == rounds:
                text = _stable("\n".join(format_diagnostics(b) for b in _blocks(parse_diagnostics(str(exc)))), sdfg)
                raise CheckFailed(
                    f"SDFG {sdfg.name!r} still does not compile after {rounds} repair round(s):\n{text}"
                ) from exc
            repair(sdfg, exc, settings)
    raise AssertionError("unreachable")


def verification_summary(sdfg: Any) -> list[tuple[str, str]]:
    """(tasklet label, verification level) of every generated tasklet in ``sdfg``, nested SDFGs included."""
    from dace.sdfg import nodes

    found = []
    for node, _ in sdfg.all_nodes_recursive():
        if isinstance(node, nodes.Tasklet):
            level = level_from_code(node.code.as_string)
            if level is not None:
                found.append((node.label, level))
    return found


def print_verification_summary(sdfg: Any, file: Any = None) -> None:
    """One line per generated tasklet saying how far it was checked (on stderr by default)."""
    import sys

    rows = verification_summary(sdfg)
    if rows:
        print(
            f"dace-ai build of {sdfg.name!r}: " + "; ".join(f"{label}: {level}" for label, level in rows),
            file=file or sys.stderr,
        )
