"""Home module of the environments dace-ai builds from stored data.

DaCe names an environment by its class path (``dace_ai.environments.ai.<class>``)
and records the file of the module that defines it; classes built by
:mod:`dace_ai.environments.generated` are attached here so both resolve to a real
module. This module holds no code of its own and nothing is ever written to it.
"""
