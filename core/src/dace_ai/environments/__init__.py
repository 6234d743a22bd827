"""External libraries as DaCe environments: the ones installed here, those generated from
an answer's request (data only, allow-listed fields), and their resolution to class paths.

May import the layers below it (``errors``, ``state``, ``compat``, ``plugins``, ``config``, ``storage``).
"""
