"""What a model, a checker and a target must know about one node: the typed records
(:mod:`~dace_ai.context.types`) and their collection from the SDFG (:mod:`~dace_ai.context.collect`); what
the checks remember per context object (:mod:`~dace_ai.context.per_node`).

May import the layers below it (``errors``, ``state``, ``compat``, ``plugins``, ``config``, ``storage``)
and its neighbours ``targets`` and ``environments``.
"""
