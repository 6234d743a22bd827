"""Spot checks of generated tasklets inside the user's own program (setting ``runtime_check``).

:mod:`~dace_ai.runtime_check.plan` decides whether a node can be checked where it runs and
what is recorded; :mod:`~dace_ai.runtime_check.cpp` writes the C++ that records one call's
inputs and outputs; :mod:`~dace_ai.runtime_check.instrument` puts it into a placed tasklet
(and takes it out again for sessions); :mod:`~dace_ai.runtime_check.judge` compares a
recorded call with the node's reference; :mod:`~dace_ai.runtime_check.hook` arms the check
around DaCe's calls of a compiled program and reports what it found. docs/user/checks.md
tells the whole story.

May import ``checking``, ``context`` and the packages below them; never ``solving`` or above.
"""
