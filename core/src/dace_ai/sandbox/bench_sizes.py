"""What a timing run is sized by: the ``bench_sizes`` setting and the bytes per call.

The bench section of a candidate's sandboxed run (:mod:`dace_ai.sandbox.run_plan`)
runs at the ladder's bench rung (:func:`dace_ai.sandbox.ladder.bench_sizes`): the
user's ``bench_sizes`` (``dace_ai.optimize(sizes=...)`` sets it), else about 2**16
elements per container. The bytes one call streams
through its connectors feed the bandwidth rule of :mod:`dace_ai.sandbox.deception`.
Nothing here builds or runs code.
"""

from __future__ import annotations

from dace_ai.checking.api import CheckRequest


def parse_sizes(text: str | None) -> dict[str, int]:
    """``"N=4096, M=512"`` -> ``{"N": 4096, "M": 512}`` (the ``bench_sizes`` setting)."""
    sizes: dict[str, int] = {}
    for part in (text or "").split(","):
        if not part.strip():
            continue
        name, sep, value = part.partition("=")
        if not sep or not name.strip().isidentifier() or not value.strip().isdigit():
            raise ValueError(f"bench sizes: {part.strip()!r} is not SYMBOL=INTEGER")
        sizes[name.strip()] = int(value)
    return sizes


def connector_bytes(request: CheckRequest, values: dict[str, int]) -> int | None:
    """Bytes one call must read and write through its connectors (their memlet volumes), or None.

    A tasklet inside a map sees a tile of its containers, so the containers' sizes
    would overstate what one call streams.
    """
    from dace import symbolic

    sdfg = (request.node.live or {}).get("sdfg")
    if sdfg is None:
        return None
    total = 0
    for conn in request.node.connectors:
        desc = sdfg.arrays.get(conn.container)
        if desc is None:
            return None
        try:
            volume = symbolic.pystr_to_symbolic(conn.volume or "1")
            scope = {str(s): values.get(str(s), 0) for s in getattr(volume, "free_symbols", ())}
            total += int(symbolic.evaluate(volume, scope)) * desc.dtype.bytes
        except Exception:  # noqa: BLE001 - an unknown volume: the bandwidth rule is not applied
            return None
    return total
