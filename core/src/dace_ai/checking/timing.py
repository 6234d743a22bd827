"""What a timing run is sized by: the ``bench_sizes`` setting, default sizes, bytes per call.

The bench section of a candidate's sandboxed run (:mod:`dace_ai.checking.runner`)
runs at these sizes: the user's ``bench_sizes`` (``dace_ai.optimize(sizes=...)``
sets it), else about 2**16 elements per container. The bytes one call streams
through its connectors feed the bandwidth rule of :mod:`dace_ai.checking.deception`.
Nothing here builds or runs code.
"""

from __future__ import annotations

from typing import Any

from dace_ai.checking.api import CheckRequest

#: Default working-set target per container when sizes are not given (elements).
DEFAULT_ELEMENTS = 2 ** 16


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


def default_sizes(sdfg: Any, given: dict[str, int]) -> dict[str, int]:
    """A value for every free symbol: ``given`` first, else about 2**16 elements per container."""
    values = dict(given)
    ranks: dict[str, int] = {}
    for desc in sdfg.arrays.values():
        rank = len(desc.shape)
        for dim in desc.shape:
            for sym in getattr(dim, "free_symbols", ()):
                ranks[str(sym)] = max(ranks.get(str(sym), 0), rank)
    for name in sorted(set(map(str, sdfg.free_symbols)) | set(sdfg.symbols)):
        if name in values:
            continue
        rank = ranks.get(name)
        values[name] = round(DEFAULT_ELEMENTS ** (1 / rank)) if rank else 0
    return values


def bench_values(request: CheckRequest, given: dict[str, int]) -> dict[str, int]:
    """Values of the node's size symbols at the bench sizes (``given`` first)."""
    sdfg = (request.node.live or {}).get("sdfg")
    values = default_sizes(sdfg, given) if sdfg is not None else dict(given)
    chosen = dict(given)  # the user's order first, as they wrote them
    integers = [name for name, ctype in request.node.symbols.items()
                if not any(t in ctype for t in ("float", "double", "complex"))]
    chosen.update({name: int(values.get(name) or 64) for name in integers if name not in given})
    return chosen


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
