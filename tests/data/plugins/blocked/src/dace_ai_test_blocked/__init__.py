"""Leaves a marker file when imported, so tests can prove it was never imported."""

import os
from pathlib import Path

from dace_ai.plugin import Provider, hookimpl

Path(os.environ["DACE_AI_TEST_IMPORT_MARKER"]).write_text("imported")


@hookimpl
def dace_ai_providers():
    yield Provider(name="blocked-provider", factory=lambda settings: None)
