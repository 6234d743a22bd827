"""The ``dace-ai`` command line: one module per subcommand, each a thin layer over a user API.

May import every other package (it is the top layer); nothing in the package imports it.
"""
