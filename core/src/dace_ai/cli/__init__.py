"""The ``dace-ai`` command line: one module per subcommand, each a thin layer over a user API.

``main`` builds every subcommand's options from modules that import little; what a command runs
loads when it runs (``doctor``, ``bench_run``, ``targets``, the session workflows), so the
command starts fast whatever is installed.

May import every other package (it is the top layer); nothing in the package imports it.
"""
