"""Solving one node: the round engine (ask, parse, check, judge, record), the requests and the answer
source, an answer's checks (reused while nothing they depend on changed, or run), the checks as plain data
(what they depend on, what they report), the tasklet an answer becomes and its provenance.
May import ``runtime_check`` and every package below it; never ``dispatch``, ``expansion`` or above."""
