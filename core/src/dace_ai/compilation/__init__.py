"""Building a candidate exactly as the real build compiles it: the standalone unit, the shared compile
(artefact ``COMPILED``), the candidate's library, the tasklet-only program DaCe builds, diagnostics and the
vectoriser's remarks. May import ``checking``, ``targets``, ``context``, ``prompt`` and every package below
them; never ``sandbox``, ``checkers``, ``solving`` or above."""
