"""Which hardware the code is written for: this machine's CPU, the build's compiler and
flags, the built-in ``host`` target and the choice among installed target packs.

May import the layers below it (``errors``, ``state``, ``compat``, ``plugins``, ``config``, ``storage``).
"""
