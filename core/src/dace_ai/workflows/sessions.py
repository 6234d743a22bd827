"""The sessions API: list, show, history, refine, rollback, pin and unpin generated tasklets.

Every function takes an SDFG (built here or loaded with ``SDFG.from_file`` in
another process) and selects one generated tasklet by the library node it
replaced (``"twice"``), its tasklet label, its session id, the tasklet object
itself, or nothing when the SDFG has exactly one. A generated tasklet finds its
session through its provenance comment (:mod:`dace_ai.solving.provenance`);
the session is read from the build folder root it was written to.

* ``refine`` continues the round's conversation with the user's feedback, runs
  the usual checks (and repair rounds) and only then changes the tasklet; a
  failed round leaves the tasklet and the SDFG exactly as they were. Code edited
  by hand since the last answer is what the model is asked to revise, and the
  request says so.
* ``rollback`` puts an earlier accepted round's answer back; it asks no model.
* ``pin`` marks a tasklet (in its provenance and its session) so that refine,
  rollback, build repairs and optimize leave it alone.

After a change of code the program's build folder is removed, so the next
``compile()`` builds the new code.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dace_ai import compat
from dace_ai.compat.gpu_host import answer_text
from dace_ai.errors import AIUsageError
from dace_ai.expansion.expansion_pass import resolve
from dace_ai.prompt.answer import Answer
from dace_ai.prompt.feedback import where_the_time_goes
from dace_ai.runtime_check.instrument import strip
from dace_ai.solving.provenance import Provenance, body, is_pinned, with_fields
from dace_ai.solving.tasklet import update_tasklet
from dace_ai.storage.session_store import Session
from dace_ai.workflows.generated import Generated, generated_tasklets, select, session_of
from dace_ai.workflows.revision import Revision, revise

if TYPE_CHECKING:
    from dace_ai.config.settings import AISettings


# ---------------------------------------------------------------------------------------- reading
def hand_edits(tasklet: Any, session: Session | None, number: int | None) -> tuple[str | None, str | None]:
    """(code, code_global) of ``tasklet`` where they differ from round ``number``'s answer (edited by hand).

    ``code`` is None when nothing was edited; ``code_global`` is None when only ``code`` was.
    """
    answer = session.answer(number) if session is not None and number is not None else None
    if answer is None:
        return None, None
    code = body(tasklet)
    global_code = answer_text(strip(getattr(tasklet.code_global, "as_string", "") or ""))[0]
    code_changed = code.strip() != str(answer.get("code", "")).strip()
    global_changed = global_code.strip() != str(answer.get("code_global", "")).strip()
    if not code_changed and not global_changed:
        return None, None
    return code, (global_code if global_changed else None)


def hand_edit_note(code: str, code_global: str | None) -> str:
    """The words telling the model that the code it revises is the hand-edited one."""
    parts = [
        (
            "The code of this tasklet was edited by hand after your last answer. The edited version below is "
            "what the program contains now: revise it (not your previous answer), keeping the hand edits "
            f"unless told otherwise.\n\n`code`:\n```cpp\n{code.rstrip()}\n```"
        )
    ]
    if code_global is not None:
        parts.append(f"`code_global`:\n```cpp\n{code_global.rstrip()}\n```")
    return "\n\n".join(parts)


def _edited(g: Generated) -> bool:
    """True when the tasklet's code differs from its session round's answer (edited by hand)."""
    return hand_edits(g.tasklet, g.session, g.round)[0] is not None


def _totals(rounds: list[dict[str, Any]]) -> tuple[dict[str, int], float | None]:
    tokens = {"input": 0, "output": 0}
    cost: float | None = None
    for entry in rounds:
        for side in ("input", "output"):
            value = (entry.get("tokens") or {}).get(side)
            tokens[side] += value if isinstance(value, int) else 0
        if isinstance(entry.get("cost_usd"), (int, float)):
            cost = (cost or 0.0) + entry["cost_usd"]
    return {**tokens, "total": tokens["input"] + tokens["output"]}, cost


def _row(g: Generated) -> dict[str, Any]:
    summary = g.session.summary() if g.session is not None else {"rounds": []}
    entry: dict[str, Any] = next((r for r in summary["rounds"] if r["number"] == g.round), {})
    level = g.fields.get("verification") or entry.get("verification") or ""
    tokens, cost = _totals(summary["rounds"])
    return {
        "name": g.name,
        "label": g.tasklet.label,
        "state": g.state.label,
        "sdfg": g.sdfg.name,
        "session": g.session_id,
        "round": g.round,
        "rounds": len(summary["rounds"]),
        "pinned": is_pinned(g.tasklet),
        "edited": _edited(g),
        "verification": level,
        "tokens": tokens,
        "cost_usd": cost,
        "provider": g.fields.get("provider", ""),
        "model": g.fields.get("model", ""),
        "folder": str(g.session.folder) if g.session is not None else None,
    }


def sessions(sdfg: Any) -> list[dict[str, Any]]:
    """One row per generated tasklet: name, session, round, pinned, edited by hand, verification, tokens."""
    return [_row(g) for g in generated_tasklets(sdfg)]


def show(sdfg: Any, name: Any = None) -> dict[str, Any]:
    """The selected tasklet's row plus its code as it is now, the round's answer and the session's events."""
    g = select(sdfg, name)
    answer = g.session.answer(g.round) if g.session is not None and g.round is not None else None

    def text(block: Any) -> str:
        return getattr(block, "as_string", "") or ""

    return {
        **_row(g),
        "code": body(g.tasklet),
        "code_global": text(g.tasklet.code_global),
        "code_init": text(g.tasklet.code_init),
        "code_exit": text(g.tasklet.code_exit),
        "notes": (answer or {}).get("notes", ""),
        "answer": answer,
        "provenance": g.fields,
        "events": g.session.summary().get("events", []) if g.session is not None else [],
    }


def history(sdfg: Any, name: Any = None) -> list[dict[str, Any]]:
    """Every recorded round of the selected tasklet's session, oldest first (``in_use`` marks its round)."""
    g = select(sdfg, name)
    session = session_of(g)
    rounds = []
    for entry in session.summary()["rounds"]:
        answer = session.answer(entry["number"]) or {}
        rounds.append(
            {
                **entry,
                "in_use": entry["number"] == g.round,
                "code": answer.get("code"),
                "folder": str(session.round_folder(entry["number"])),
            }
        )
    return rounds


def _refuse_pinned(g: Generated, what: str) -> None:
    if is_pinned(g.tasklet):
        raise AIUsageError(
            f"{g.describe()} is pinned, so {what} leaves it alone; unpin it first (dace_ai.unpin or `dace-ai unpin`)"
        )


# ---------------------------------------------------------------------------------------- changing
def refine_message(feedback: str, edited_code: str | None, edited_global: str | None, time_section: str = "") -> str:
    """The user message of a refine round: hand edits (when any) first, then the feedback, then where the time goes.

    ``time_section`` (:func:`dace_ai.prompt.feedback.where_the_time_goes` of the round's
    recorded checks) tells the model what was measured about the code it is asked to improve.
    """
    parts = [hand_edit_note(edited_code, edited_global)] if edited_code is not None else []
    parts.append(f"Feedback on the implementation:\n\n{feedback.strip()}")
    if time_section.strip():
        parts.append(time_section.strip())
    parts.append("Answer again with the complete improved answer in the same JSON format.")
    return "\n\n".join(parts) + "\n"


def _time_section(session: Session, number: int | None, edited: bool) -> str:
    """Where the time goes in the code of round ``number`` (nothing for hand-edited code: it was not measured)."""
    if number is None or edited:
        return ""
    return where_the_time_goes(session.checks(number))


def refine(
    sdfg: Any, name: Any = None, feedback: str | None = None, *, settings: AISettings | dict[str, Any] | None = None
) -> Any:
    """Ask for a new round of the selected tasklet's conversation with ``feedback``; return the tasklet.

    The message carries the feedback and, when the round's checks measured its code, the
    "Where the time goes" section (times, speedups, speed of light, the compiler's remarks
    on its loops). The answer goes through the usual checks and repair rounds
    (:func:`dace_ai.workflows.revision.revise`). Only an accepted answer changes the tasklet;
    otherwise the error is raised and the SDFG is left as it was (the rejected rounds are
    recorded in the session).
    """
    if not isinstance(feedback, str) or not feedback.strip():
        raise AIUsageError("refine needs feedback: the text telling the model what to improve")
    g = select(sdfg, name)
    session = session_of(g)
    _refuse_pinned(g, "refine")
    edited_code, edited_global = hand_edits(g.tasklet, session, g.round)
    edited = edited_code is not None
    message = refine_message(feedback, edited_code, edited_global, _time_section(session, g.round, edited))
    return revise(sdfg, g, Revision(message, "refine", feedback=feedback, edited_by_hand=edited), resolve(settings))


def rollback(sdfg: Any, name: Any = None, round: int | None = None) -> Any:
    """Put the answer of an earlier accepted ``round`` back into the selected tasklet (no model is asked)."""
    g = select(sdfg, name)
    session = session_of(g)
    summary = session.summary()
    accepted = [r["number"] for r in summary["rounds"] if r.get("status") == "accepted"]
    if not isinstance(round, int) or isinstance(round, bool):
        raise AIUsageError(f"rollback needs round=<number>; accepted rounds of {g.describe()}: {accepted}")
    _refuse_pinned(g, "rollback")
    entry = next((r for r in summary["rounds"] if r["number"] == round), None)
    if entry is None or entry.get("status") != "accepted":
        why = "does not exist" if entry is None else f"was {entry.get('status')}"
        raise AIUsageError(f"round {round} of {g.describe()} {why}; accepted rounds: {accepted}")
    data = session.answer(round)
    if data is None:
        raise AIUsageError(
            f"round {round} of {g.describe()} has no readable answer.json in {session.round_folder(round)}"
        )
    answer = Answer.model_validate(data)
    stored = entry.get("provenance")
    if isinstance(stored, (list, dict)):
        fields = Provenance.from_fields(stored)
    else:
        fields = Provenance(
            node=g.name,
            source=str(entry.get("source") or ""),
            cache_key=str(entry.get("cache_key") or "")[:16],
            verification=str(entry.get("verification") or ""),
        )
    fields = fields.replace(session=f"ai-sessions/{session.id}/round-{round}")
    environments = set(entry.get("environments") or ())
    update_tasklet(g.tasklet, answer, fields, environments, sdfg=g.sdfg)
    session.set_current(round, "rollback")
    compat.discard_build_folder(sdfg)
    return g.tasklet


def pin(sdfg: Any, name: Any = None) -> Any:
    """Pin the selected tasklet: refine, rollback, build repairs and optimize leave it alone."""
    g = select(sdfg, name)
    with_fields(g.tasklet, pinned="true")
    if g.session is not None:
        g.session.set_pinned(True)
    return g.tasklet


def unpin(sdfg: Any, name: Any = None) -> Any:
    """Undo :func:`pin`."""
    g = select(sdfg, name)
    with_fields(g.tasklet, pinned=None)
    if g.session is not None:
        g.session.set_pinned(False)
    return g.tasklet
