"""The sanitizers' machinery (clang's AddressSanitizer, UndefinedBehaviorSanitizer and ThreadSanitizer): the
tools and flags, the builds started beside the main compile, the runs of the fixed driver and the reading of
their reports. The ``sanitizers`` checker (:mod:`dace_ai.checkers.sanitizers`) judges what they find."""

from dace_ai.sandbox.sanitizers.builds import (
    SANITIZER_BUILDS,
    SanitizerBuild,
    SanitizerBuilds,
    start_sanitizer_builds,
)
from dace_ai.sandbox.sanitizers.reports import read_report
from dace_ai.sandbox.sanitizers.runs import SanitizerRun, sanitizer_cases, write_job
from dace_ai.sandbox.sanitizers.tools import NAME, clang_flags, libomp_problem, sanitizer_flags

__all__ = [
    "NAME",
    "SANITIZER_BUILDS",
    "SanitizerBuild",
    "SanitizerBuilds",
    "SanitizerRun",
    "clang_flags",
    "libomp_problem",
    "read_report",
    "sanitizer_cases",
    "sanitizer_flags",
    "start_sanitizer_builds",
    "write_job",
]
