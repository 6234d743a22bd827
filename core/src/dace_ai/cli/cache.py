"""``dace-ai cache list|stats|clear|verify``: see and tidy the answer cache of a build root.

The build root is DaCe's ``default_build_folder`` (``.dacecache``), or ``--root``.
``verify`` exits 1 when an entry is unusable; ``--fix`` moves such entries to
``ai-cache/quarantine/`` and removes the temporary files of writes a killed
process never finished. Nothing here needs a provider, an SDK or a key.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from dace_ai.cli.help import add_example
from dace_ai.errors import AIUsageError

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400, "": 86400}


def parse_duration(text: str) -> float:
    """Seconds in ``30m``, ``12h``, ``7d``, ``2w`` or a bare number of days."""
    match = _DURATION.match(text)
    if not match:
        raise AIUsageError(f"--older-than {text!r}: expected a number with a unit s, m, h, d or w (e.g. 7d, 12h)")
    return float(match.group(1)) * _UNITS[match.group(2)]


def _cache(args: argparse.Namespace) -> Any:
    from dace_ai.storage.cache import AnswerCache  # local: CLI startup (loaded when the command runs)

    return AnswerCache(Path(args.root).resolve() if args.root else None)


def _age(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f}{unit}"
    return f"{seconds:.0f}s"


def cmd_list(args: argparse.Namespace) -> int:
    now = time.time()
    rows = [
        {
            "key": e.key,
            "provider": e.provider,
            "model": e.model,
            "node": e.node,
            "bytes": e.size,
            "age_seconds": round(now - e.modified, 1),
            "problem": e.problem,
        }
        for e in _cache(args).entries()
    ]
    if args.json:
        json.dump(rows, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    for r in rows:
        what = f"INVALID: {r['problem']}" if r["problem"] else f"{r['provider']:<10} {r['model']:<28} {r['node']}"
        print(f"{r['key'][:16]}  {_age(r['age_seconds']):>5}  {r['bytes']:>8}  {what}".rstrip())
    return 0


def stats(cache: Any) -> dict[str, Any]:
    entries = list(cache.entries())
    providers: dict[str, int] = {}
    for e in entries:
        if not e.problem:
            providers[e.provider] = providers.get(e.provider, 0) + 1
    return {
        "folder": str(cache.folder),
        "entries": len(entries),
        "bytes": sum(e.size for e in entries),
        "invalid": sum(1 for e in entries if e.problem),
        "by_provider": providers,
        "quarantined": len(cache.quarantined()),
        "unfinished_writes": len(cache.leftovers()),
        "oldest_seconds": round(time.time() - min((e.modified for e in entries), default=time.time()), 1),
    }


def cmd_stats(args: argparse.Namespace) -> int:
    report = stats(_cache(args))
    if args.json:
        json.dump(report, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    print(f"folder:            {report['folder']}")
    print(f"entries:           {report['entries']} ({report['bytes']} bytes), {report['invalid']} invalid")
    for provider, count in sorted(report["by_provider"].items()):
        print(f"  {provider:<16} {count}")
    print(f"quarantined:       {report['quarantined']}")
    print(f"unfinished writes: {report['unfinished_writes']}")
    return 0


def cmd_clear(args: argparse.Namespace) -> int:
    cache = _cache(args)
    cutoff = time.time() - parse_duration(args.older_than) if args.older_than else None
    removed = 0
    for entry in list(cache.entries()):
        if cutoff is None or entry.modified < cutoff:
            try:
                entry.path.unlink()
                removed += 1
            except FileNotFoundError:
                pass
    extra = 0
    if cutoff is None:
        for path in cache.leftovers():
            path.unlink(missing_ok=True)
            extra += 1
        quarantine = cache.folder / "quarantine"
        if quarantine.is_dir():
            extra += len(cache.quarantined())
            shutil.rmtree(quarantine, ignore_errors=True)
    for folder in sorted(cache.folder.glob("??")):
        try:
            folder.rmdir()  # only when empty
        except OSError:
            pass
    age = f" older than {args.older_than}" if args.older_than else ""
    print(
        f"removed {removed} entr{'y' if removed == 1 else 'ies'}{age}"
        + (f" and {extra} quarantined or unfinished file(s)" if extra else "")
        + f" from {cache.folder}"
    )
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    cache = _cache(args)
    bad = [e for e in cache.entries() if e.problem]
    leftovers = cache.leftovers()
    for e in bad:
        if args.fix:
            moved = cache.quarantine(e.path)
            print(f"invalid: {e.path}: {e.problem}; moved to {moved}")
        else:
            print(f"invalid: {e.path}: {e.problem}")
    for path in leftovers:
        if args.fix:
            path.unlink(missing_ok=True)
        print(f"unfinished write: {path}" + ("; removed" if args.fix else ""))
    total = sum(1 for _ in cache.entries()) if args.fix else None
    if not bad and not leftovers:
        print(f"ok: every entry in {cache.folder} is valid")
        return 0
    if args.fix:
        print(
            f"fixed: {len(bad)} invalid entr{'y' if len(bad) == 1 else 'ies'} moved aside, "
            f"{len(leftovers)} unfinished write(s) removed; {total} valid entr{'y' if total == 1 else 'ies'} left"
        )
        return 0
    print(
        f"{len(bad)} invalid entr{'y' if len(bad) == 1 else 'ies'}, {len(leftovers)} unfinished write(s); "
        "run 'dace-ai cache verify --fix' to move them aside"
    )
    return 1


def add_cache_parser(sub: Any) -> None:
    """Register ``dace-ai cache ...`` on the main command's subparsers."""
    cache = sub.add_parser(
        "cache",
        help="see and tidy the answer cache",
        description="Inspect, verify and clear the answer cache (<build root>/ai-cache).",
    )
    cache_sub = cache.add_subparsers(dest="cache_command", metavar="SUBCOMMAND")
    cache_sub.required = True

    def common(parser: argparse.ArgumentParser, json_flag: bool = True) -> None:
        parser.add_argument("--root", help="build root (default: DaCe's default_build_folder)")
        if json_flag:
            parser.add_argument("--json", action="store_true", help="machine-readable output")

    listing = cache_sub.add_parser(
        "list",
        help="one line per cached answer",
        description="List cached answers: key, age, size, provider, model and node, and entries that are invalid.",
    )
    common(listing)
    listing.set_defaults(func=cmd_list)
    add_example(listing, "dace-ai cache list --json")
    stat = cache_sub.add_parser(
        "stats",
        help="counts and sizes",
        description="Entries, bytes, invalid entries, entries per provider, quarantined files and unfinished writes.",
    )
    common(stat)
    stat.set_defaults(func=cmd_stats)
    add_example(stat, "dace-ai cache stats --root .dacecache")
    clear = cache_sub.add_parser(
        "clear",
        help="remove cached answers",
        description="Remove cached answers (all, or those older than a duration); "
        "without --older-than also quarantined and unfinished files.",
    )
    common(clear, json_flag=False)
    clear.add_argument("--older-than", metavar="AGE", help="only entries older than AGE, e.g. 30m, 12h, 7d, 2w")
    clear.set_defaults(func=cmd_clear)
    add_example(clear, "dace-ai cache clear --older-than 7d")
    verify = cache_sub.add_parser(
        "verify",
        help="check every entry; exit 1 when one is invalid",
        description="Check that every entry is a valid cache entry for its key; report "
        "unfinished writes. Exit 1 when something is wrong.",
    )
    common(verify, json_flag=False)
    verify.add_argument("--fix", action="store_true", help="move invalid entries aside, remove unfinished writes")
    verify.set_defaults(func=cmd_verify)
    add_example(verify, "dace-ai cache verify --fix")
    add_example(cache, "dace-ai cache stats")
