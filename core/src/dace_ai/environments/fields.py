"""Allow-lists for the fields of an environment, which come from a model's answer.

DaCe hands an environment's headers to the C++ code generator and its packages,
include folders, libraries and flags to CMake through a shell command line. A
model's text therefore only ever reaches those places after it matched one of
the forms below: identifiers, plain header and library names, absolute paths
made of path characters, and compiler/linker flags of a few known shapes.
Quotes, spaces, newlines, ``;``, ``$``, backticks and the like never match, so
nothing a model writes can become a shell word, a CMake statement or Python.

Each check takes a string (pydantic has checked the type) and returns it, or raises
``ValueError`` with a short reason (pydantic turns it into an error naming the field).
"""

from __future__ import annotations

import re

#: Longest accepted single value (a path, a flag, a header name).
MAX_VALUE = 200
#: Longest accepted init/finalize code of an environment.
MAX_CODE = 20_000

_IDENTIFIER = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,63}")
#: One path component: a hidden folder (``.venv``) is fine, ``.`` and ``..`` are not.
_PATH_PART = r"(?!\.\.?(?:/|$))[A-Za-z0-9_.+][A-Za-z0-9_.+\-]*"
_HEADER = re.compile(rf"{_PATH_PART}(?:/{_PATH_PART})*")
_ABS_PATH = re.compile(rf"(?:/{_PATH_PART})+/?")
_LIBRARY = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+\-]*")
_LIBRARY_FILE = re.compile(rf"(?:/{_PATH_PART})+\.(?:so(?:\.[0-9]+)*|a)")
_PACKAGE = re.compile(r"[A-Za-z][A-Za-z0-9_\-]{0,63}")
_DEFINITION = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:=[A-Za-z0-9_.\-]*)?")
_STATE_FIELD = re.compile(r"[A-Za-z_][A-Za-z0-9_:<>, *&\[\]]*;?")

#: Compiler flag forms that only tune code generation or name folders; nothing that loads
#: or runs other programs (``-fplugin=``, ``-wrapper``, ``-specs=``, ``@file`` never match).
_COMPILE_FLAGS = (
    re.compile(r"-O[0-3sz]?"),
    re.compile(r"-std=(?:c|gnu)\+\+[0-9][0-9a-z]"),
    re.compile(r"-m[a-z0-9][a-z0-9\-]*(?:=[a-z0-9\-.]+)?"),
    re.compile(r"-f(?!plugin)[a-z][a-z0-9\-]*(?:=[a-z0-9\-.]+)?"),
    re.compile(r"-W(?!l,|a,|p,)[a-z][a-z0-9\-]*(?:=[a-z0-9\-]+)?"),
    re.compile(r"-D[A-Za-z_][A-Za-z0-9_]*(?:=[A-Za-z0-9_.\-]*)?"),
    re.compile(rf"-I(?:/{_PATH_PART})+/?"),
    re.compile(r"-pthread|-fopenmp|-g[0-3]?"),
)
#: Linker flag forms: libraries, library folders, run paths.
_LINK_FLAGS = (
    re.compile(r"-l[A-Za-z0-9_][A-Za-z0-9_.+\-]*"),
    re.compile(rf"-L(?:/{_PATH_PART})+/?"),
    re.compile(rf"-Wl,-rpath,(?:/{_PATH_PART})+/?"),
    re.compile(r"-pthread|-fopenmp"),
)

COMPILE_FLAG_FORMS = "-O2, -std=c++17, -m<option>, -f<option>, -W<warning>, -D<NAME>[=<value>], -I/<absolute path>"
LINK_FLAG_FORMS = "-l<library>, -L/<absolute path>, -Wl,-rpath,/<absolute path>, -pthread, -fopenmp"


def _plain(value: str, what: str) -> str:
    if len(value) > MAX_VALUE:
        raise ValueError(f"{what} is longer than {MAX_VALUE} characters")
    if not value:
        raise ValueError(f"{what} is empty")
    return value


def _no_parent(value: str, what: str) -> str:
    if ".." in value.split("/"):
        raise ValueError(f"{what} {value[:60]!r} contains '..'")
    return value


def identifier(value: str) -> str:
    """An environment name: a C/Python identifier (letters, digits, '_'), at most 64 characters."""
    if not _IDENTIFIER.fullmatch(_plain(value, "name")):
        raise ValueError(f"{value[:60]!r} is not an identifier (letters, digits and '_', starting with a letter)")
    return value


def header(value: str) -> str:
    """A header as written between ``<>`` (``cblas.h``, ``sys/mman.h``); no quotes, spaces or '..'."""
    value = _plain(value, "header")
    if value.startswith("<") and value.endswith(">"):
        value = value[1:-1]
    if not _HEADER.fullmatch(value):
        raise ValueError(f"{value[:60]!r} is not a header name (letters, digits, '_', '.', '+', '-', '/')")
    return _no_parent(value, "header")


def absolute_path(value: str) -> str:
    """An absolute folder of path characters only."""
    if not _ABS_PATH.fullmatch(_plain(value, "path")):
        raise ValueError(f"{value[:60]!r} is not an absolute path of letters, digits, '_', '.', '+', '-', '/'")
    return _no_parent(value, "path")


def library(value: str) -> str:
    """A library to link: a name (``openblas``, ``fftw3``) or an absolute ``.so``/``.a`` file."""
    value = _plain(value, "library")
    if value.startswith("/"):
        if not _LIBRARY_FILE.fullmatch(value):
            raise ValueError(f"{value[:60]!r} is not an absolute path to a .so or .a file")
        return _no_parent(value, "library")
    if not _LIBRARY.fullmatch(value):
        raise ValueError(f"{value[:60]!r} is not a library name (letters, digits, '_', '.', '+', '-')")
    return value


def cmake_package(value: str) -> str:
    """A CMake package name for ``find_package`` (``CUDA``, ``OpenMP``)."""
    if not _PACKAGE.fullmatch(_plain(value, "CMake package")):
        raise ValueError(f"{value[:60]!r} is not a CMake package name")
    return value


def definition(value: str) -> str:
    """A preprocessor definition ``NAME`` or ``NAME=value`` (value: letters, digits, '_', '.', '-')."""
    if not _DEFINITION.fullmatch(_plain(value, "definition")):
        raise ValueError(f"{value[:60]!r} is not NAME or NAME=value")
    return value


def compile_flag(value: str) -> str:
    """A compiler flag of an allowed form (see :data:`COMPILE_FLAG_FORMS`)."""
    value = _plain(value, "compile flag")
    if not any(form.fullmatch(value) for form in _COMPILE_FLAGS):
        raise ValueError(f"{value[:60]!r} is not an allowed compile flag (allowed forms: {COMPILE_FLAG_FORMS})")
    return _no_parent(value, "compile flag")


def link_flag(value: str) -> str:
    """A linker flag of an allowed form (see :data:`LINK_FLAG_FORMS`)."""
    value = _plain(value, "link flag")
    if not any(form.fullmatch(value) for form in _LINK_FLAGS):
        raise ValueError(f"{value[:60]!r} is not an allowed link flag (allowed forms: {LINK_FLAG_FORMS})")
    return _no_parent(value, "link flag")


def state_field(value: str) -> str:
    """One C++ member declaration on one line (``fftw_plan plan;``)."""
    value = _plain(value, "state field")
    if not _STATE_FIELD.fullmatch(value.strip()):
        raise ValueError(f"{value[:60]!r} is not a one-line C++ declaration such as 'fftw_plan plan;'")
    return value.strip() if value.strip().endswith(";") else value.strip() + ";"


def cpp_code(value: str) -> str:
    """C++ statements for init or finalize code: kept as text for the C++ compiler only."""
    if "\x00" in value:
        raise ValueError("code contains a NUL byte")
    if len(value) > MAX_CODE:
        raise ValueError(f"code is longer than {MAX_CODE} characters")
    return value
