"""The tasklets a model wrote in an SDFG, and the sessions they came from.

A generated tasklet finds its session through its provenance comment
(:mod:`dace_ai.solving.provenance`); the session is read from the build folder root it
was written to. The sessions API (:mod:`dace_ai.workflows.sessions`) and the revisions
that change a tasklet (:mod:`dace_ai.workflows.revision`) select tasklets here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from dace_ai import compat
from dace_ai.errors import AIUsageError
from dace_ai.solving.provenance import provenance, session_round
from dace_ai.storage.files import build_root
from dace_ai.storage.session_store import Session, session_by_id


@dataclass
class Generated:
    """A generated tasklet in an SDFG and its session (None when not in this build folder)."""

    sdfg: Any
    state: Any
    tasklet: Any
    fields: dict[str, str]
    session: Session | None
    round: int | None

    @property
    def name(self) -> str:
        return self.fields.get("node") or self.tasklet.label

    @property
    def session_id(self) -> str:
        found = session_round(self.fields)
        return found[0] if found else ""

    def describe(self) -> str:
        return f"{self.name} (tasklet {self.tasklet.label!r}, session {self.session_id or 'unknown'})"


def generated_tasklets(sdfg: Any) -> list[Generated]:
    """Every tasklet of ``sdfg`` (nested SDFGs included) that dace-ai generated."""
    from dace.sdfg import nodes

    return [
        of_tasklet(parent, node)
        for node, parent in sdfg.all_nodes_recursive()
        if isinstance(node, nodes.Tasklet) and provenance(node) is not None
    ]


def of_tasklet(state: Any, tasklet: Any) -> Generated:
    """The generated ``tasklet`` of ``state`` with its session (None when not under this build folder root)."""
    fields = provenance(tasklet) or {}
    where = session_round(fields)
    session = None
    if where is not None:
        try:
            candidate = session_by_id(where[0])
        except ValueError:
            candidate = None
        session = candidate if candidate is not None and candidate.exists() else None
    return Generated(state.sdfg, state, tasklet, fields, session, where[1] if where else None)


def select(sdfg: Any, name: Any = None) -> Generated:
    """The generated tasklet named ``name`` (node name, tasklet label, session id or the tasklet object)."""
    from dace.sdfg import nodes

    candidates = generated_tasklets(sdfg)
    listing = "; ".join(g.describe() for g in candidates) or "none"
    if name is None:
        if len(candidates) == 1:
            return candidates[0]
        raise AIUsageError(
            f"SDFG {sdfg.name!r} has {len(candidates)} generated tasklets, so name one; candidates: {listing}"
        )
    if isinstance(name, nodes.Node):
        chosen = [g for g in candidates if g.tasklet is name]
        if not chosen:
            raise AIUsageError(
                f"tasklet {getattr(name, 'label', name)!r} is not a generated tasklet of SDFG "
                f"{sdfg.name!r}; candidates: {listing}"
            )
        return chosen[0]
    text = str(name)
    for matches in (
        [g for g in candidates if g.name == text],
        [g for g in candidates if g.tasklet.label == text],
        [g for g in candidates if g.session_id == text],
    ):
        if len(matches) == 1:
            return matches[0]
        if len(matches) > 1:
            raise AIUsageError(
                f"{text!r} names {len(matches)} generated tasklets of SDFG {sdfg.name!r}; "
                f"pass a session id or the tasklet object instead: "
                f"{'; '.join(g.describe() for g in matches)}"
            )
    raise AIUsageError(f"SDFG {sdfg.name!r} has no generated tasklet named {text!r}; candidates: {listing}")


def session_of(g: Generated) -> Session:
    """The session of the generated tasklet ``g``; a clear error when it is not under this build folder root."""
    if g.session is None:
        raise AIUsageError(
            f"the session of {g.describe()} is not under the build folder root {build_root()}: "
            "run where the SDFG was generated, or set DaCe's default_build_folder to that root"
        )
    return g.session


def replaced_node(session: Session, g: Any) -> Any:
    """The library node the tasklet replaced, rebuilt from the session's ``node.json`` (None when absent)."""
    try:
        data = json.loads((session.folder / "node.json").read_text(encoding="utf-8"))
        return compat.library_node_from_json(data, g.sdfg, g.state)
    except Exception:  # noqa: BLE001 - an old or damaged record only means no native reference
        return None
