"""Examples at the end of every command's ``--help``: a scientist copies a working line instead of guessing."""

from __future__ import annotations

import argparse


def add_example(parser: argparse.ArgumentParser, *commands: str) -> argparse.ArgumentParser:
    """End ``parser``'s help with ``commands`` under "example:" (kept as written, one per line).

    The description keeps its own line breaks too (argparse's raw-description
    formatter), so the commands stay copyable.
    """
    lines = "\n".join(f"  {command}" for command in commands)
    parser.epilog = f"example{'s' if len(commands) > 1 else ''}:\n{lines}"
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    return parser
