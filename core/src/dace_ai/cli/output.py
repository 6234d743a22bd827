"""What the commands print: JSON for ``--json``."""

from __future__ import annotations

import json
import sys
from typing import Any


def print_json(data: Any) -> None:
    """``data`` as indented JSON on standard output (what JSON cannot hold, as text)."""
    json.dump(data, sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")
