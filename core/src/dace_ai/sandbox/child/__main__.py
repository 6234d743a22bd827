"""The entry file of the sandbox child: ``python -I <this file> JOB.json``.

Loads its own folder as the package ``dace_ai_child`` (see the package's docstring:
``-I`` leaves the script's folder off ``sys.path``, and nothing is added to it), then
runs :func:`dace_ai_child.job.main`. Standard library only here.
"""

import importlib
import importlib.util
import os
import sys

PACKAGE = "dace_ai_child"


def load(name: str = PACKAGE) -> object:
    """This folder as the package ``name`` (its modules import each other relatively); its ``job`` module."""
    here = os.path.dirname(os.path.abspath(__file__))
    spec = importlib.util.spec_from_file_location(
        name, os.path.join(here, "__init__.py"), submodule_search_locations=[here]
    )
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load the sandbox child from {here}")
    package = importlib.util.module_from_spec(spec)
    sys.modules[name] = package
    spec.loader.exec_module(package)
    return importlib.import_module(f"{name}.job")


if __name__ == "__main__":
    sys.exit(load().main(sys.argv))  # type: ignore[attr-defined]  # a module loaded by path: its names are unknown statically
