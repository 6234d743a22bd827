"""Checking one candidate answer: the checkers (compile, verify, bench, sanitizers, GPU), the stage
runner that orders them by the artefacts they need and give, the sandbox child and the verdict.
May import ``targets``, ``environments``, ``context``, ``prompt``, ``performance`` and every package
below them; never ``solving``, ``expansion`` or above."""
