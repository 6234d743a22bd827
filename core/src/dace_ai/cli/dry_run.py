"""``--dry-run`` of ``dace-ai generate`` and ``optimize``: the job script the chosen executor would start.
Loaded when the option is given."""

from __future__ import annotations

import argparse
from typing import Any

from dace_ai.config.settings import resolve_settings
from dace_ai.dispatch.dispatcher import executor_options
from dace_ai.execution.jobs import ExecutorOptions
from dace_ai.plugins.manager import get_plugin_manager
from dace_ai.plugins.registrations import Executor


def show(args: argparse.Namespace, overrides: dict[str, Any]) -> int:
    """Print what the executor of these options (and settings ``overrides``) would start, without starting it."""
    settings = resolve_settings(overrides)
    given = (
        ExecutorOptions(workers=args.workers, scheduler=args.scheduler) if (args.workers or args.scheduler) else None
    )
    name, options = executor_options(settings, args.executor, given)
    runner = get_plugin_manager().get_as("executors", name, Executor).factory(options)
    preview = getattr(runner, "dry_run", None)
    text = preview() if callable(preview) else f"# executor {name!r} writes no job script"
    print(text.rstrip("\n"))
    return 0
