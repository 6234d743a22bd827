"""Solving one node: the round engine (ask, parse, check, judge, record), the requests and the answer
source, the checks of an answer (reused, or sent as check jobs to an executor) and its provenance.
May import ``runtime_check``, ``execution`` and every package below them; never ``expansion``."""
