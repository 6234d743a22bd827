"""Environments stored as data and turned into DaCe environment classes by our own code.

When an answer asks for an external library (``environments`` in the answer), its
generator returns an :class:`~dace_ai.environments.spec.EnvironmentSpec`. The spec is
stored as JSON under ``<build root>/ai-environments/<name>_<digest>.json`` and a DaCe
environment class ``dace_ai.environments.ai.<name>_<digest>`` is built from its
validated fields (:func:`dace_ai.compat.define_environment`). Nothing from an answer
is ever written into a Python file or evaluated: the only code that runs is ours.

``import dace_ai`` registers every stored spec again, so an SDFG saved with such a
tasklet compiles in a later process. A file that cannot be read or fails validation
is skipped with a warning naming it.

This module is also the built-in ``generic`` environment generator: it copies the
fields of the answer's request into a spec.
"""

from __future__ import annotations

import json
import threading
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from dace_ai import compat
from dace_ai.environments import fields
from dace_ai.environments.spec import EnvironmentSpec
from dace_ai.plugins.hookspecs import hookimpl
from dace_ai.plugins.registrations import EnvironmentGenerator
from dace_ai.storage.files import atomic_write, lock_for

if TYPE_CHECKING:
    from dace_ai.context.types import NodeContext
    from dace_ai.prompt.answer import EnvironmentRequest

#: The module that generated classes belong to (a real module file, see ``environments/ai.py``).
HOME_MODULE = "dace_ai.environments.ai"
FOLDER = "ai-environments"
#: Version of the stored record layout.
FORMAT = 1
#: Serialises class registration (nodes are generated concurrently).
_register_lock = threading.RLock()


class StoredEnvironmentError(ValueError):
    """A stored environment file that cannot be used (unreadable, invalid, renamed)."""


def folder(root: Path | None = None) -> Path:
    """``<build root>/ai-environments`` (not created)."""
    return Path(root if root is not None else compat.build_folder_root()) / FOLDER


def class_path(spec: EnvironmentSpec) -> str:
    return f"{HOME_MODULE}.{spec.class_name()}"


def _register(spec: EnvironmentSpec) -> str:
    """Build the DaCe environment class for ``spec`` (once per process); return its class path."""
    import importlib

    path = class_path(spec)
    with _register_lock:
        if compat.registered_environment(path) is None:
            importlib.import_module(HOME_MODULE)
            _define(spec)
    return path


def _define(spec: EnvironmentSpec) -> None:
    dependencies = []
    for dep in spec.dependencies:
        env = compat.registered_environment(dep)
        if env is None:
            compat.registered_environments()  # registers DaCe's bundled environments
            env = compat.registered_environment(dep)
        if env is None:
            raise StoredEnvironmentError(f"environment {spec.name!r} depends on {dep!r}, which is not registered")
        dependencies.append(env)
    compile_flags = [*spec.compile_flags, *(f"-D{d}" for d in spec.compile_definitions)]
    compat.define_environment(
        HOME_MODULE,
        spec.class_name(),
        {
            "cmake_packages": list(spec.cmake_packages),
            "cmake_includes": list(spec.include_dirs),
            "cmake_libraries": list(spec.libraries),
            "cmake_compile_flags": compile_flags,
            "cmake_link_flags": list(spec.link_flags),
            "headers": _headers(spec.headers, dependencies),
            "state_fields": list(spec.state_fields),
            "init_code": spec.init_code,
            "finalize_code": spec.finalize_code,
            "dependencies": dependencies,
        },
    )


def materialise(spec: EnvironmentSpec, root: Path | None = None) -> str:
    """Store ``spec`` as JSON (once) and register its DaCe environment; return the class path."""
    path = folder(root) / f"{spec.class_name()}.json"
    text = (
        json.dumps(
            {"format": FORMAT, "class": spec.class_name(), "spec": spec.model_dump(mode="json")},
            indent=2,
            sort_keys=True,
        )
        + "\n"
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    with lock_for(path):
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            atomic_write(path, text)
    return _register(spec)


def read_spec(path: Path) -> EnvironmentSpec:
    """The spec stored in ``path``; :class:`StoredEnvironmentError` says what is wrong with it."""
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise StoredEnvironmentError(f"not readable as JSON: {exc}") from None
    if not isinstance(record, dict) or record.get("format") != FORMAT or not isinstance(record.get("spec"), dict):
        raise StoredEnvironmentError(f"not a dace-ai environment record (format {FORMAT})")
    try:
        spec = EnvironmentSpec.model_validate(record["spec"])
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise StoredEnvironmentError(f"field {where!r}: {first['msg']}") from None
    if record.get("class") != spec.class_name() or path.stem != spec.class_name():
        raise StoredEnvironmentError(f"its contents do not match its name (expected {spec.class_name()}.json)")
    return spec


def stored_specs(root: Path | None = None) -> list[tuple[Path, EnvironmentSpec | StoredEnvironmentError]]:
    """Every stored record with its spec, or the reason it cannot be used."""
    found: list[tuple[Path, EnvironmentSpec | StoredEnvironmentError]] = []
    base = folder(root)
    if not base.is_dir():
        return found
    for path in sorted(base.glob("*.json")):
        try:
            found.append((path, read_spec(path)))
        except StoredEnvironmentError as exc:
            found.append((path, exc))
    return found


def load_generated(root: Path | None = None) -> list[str]:
    """Register every stored environment under the build root; return their class paths.

    A file that cannot be used is skipped with a warning naming it: one damaged file
    must not stop ``import dace_ai`` nor hide the other environments.
    """
    loaded = []
    for path, spec in stored_specs(root):
        try:
            if isinstance(spec, StoredEnvironmentError):
                raise spec
            loaded.append(_register(spec))
        except Exception as exc:  # noqa: BLE001 - reported, never fatal
            warnings.warn(f"dace-ai: stored environment {path} was skipped: {exc}", stacklevel=2)
    return loaded


# ------------------------------------------------------------------------ the generic generator
def _offer(ctx: NodeContext) -> str | None:
    if getattr(ctx, "in_gpu_kernel", False):
        return (
            "Inside this GPU kernel an environment may only add headers whose functions are `__device__` "
            "functions (no libraries, no link flags); any other request is refused."
        )
    return (
        "If the code needs an installed library that nothing above provides, request it in `environments` "
        'with `generator` "generic": `name` (an identifier), `headers` (e.g. "zlib.h"), `libraries` to '
        'link (e.g. "z"), optionally `include_dirs` (absolute paths), `cmake_packages`, '
        "`compile_definitions` (NAME or NAME=value), `compile_flags` (forms: "
        f"{fields.COMPILE_FLAG_FORMS}), `link_flags` (forms: {fields.LINK_FLAG_FORMS}), `state_fields` "
        "(one C++ declaration each), `init_code`/`finalize_code` (C++ run once at program start/end). "
        "Every field is checked against these forms; anything else is refused."
    )


def _generate(request: EnvironmentRequest) -> EnvironmentSpec:
    data = request.model_dump(mode="json") if hasattr(request, "model_dump") else dict(request)
    return EnvironmentSpec.model_validate({key: data[key] for key in EnvironmentSpec.model_fields if key in data})


@hookimpl
def dace_ai_environment_generators():
    yield EnvironmentGenerator(
        name="generic",
        offer=_offer,
        generate=_generate,
        description="Any installed library, described field by field and stored as data",
    )


#: DaCe's GPU runtime environments: an environment built on one is used by code in the GPU file too.
_GPU_RUNTIMES = ("CUDA", "HIP", "ROCm")


def _headers(headers: Any, dependencies: list[Any]) -> Any:
    """The environment's ``headers``: for GPU libraries, included in DaCe's GPU file as well as its C++ file.

    A library handle in a state field (``cublasHandle_t``) is declared in the state
    struct, which both files hold, so both need the library's header.
    """
    if any(getattr(dep, "__name__", "") in _GPU_RUNTIMES for dep in dependencies):
        return {"frame": list(headers), "cuda": list(headers)}
    return list(headers)
