"""The DaCe environment of zlib: a fixed, reviewed class (no text from a model ends up in Python)."""

import dace.library


@dace.library.environment
class LabZlib:
    cmake_minimum_version = None
    cmake_packages = []
    cmake_variables = {}
    cmake_includes = []
    cmake_libraries = ["z"]
    cmake_compile_flags = []
    cmake_link_flags = []
    cmake_files = []
    headers = ["zlib.h"]
    state_fields = []
    init_code = ""
    finalize_code = ""
    dependencies = []
