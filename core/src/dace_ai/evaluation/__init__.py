"""The evaluation harness behind ``dace-ai bench``: task suites, attempts, results and reports.

May import ``solving``, ``expansion`` and every package below them; never ``workflows`` or ``cli``.
"""
