"""The prompt for one node and the answer it asks for: the answer schema, the built-in
sections, rendering, and the feedback of a repair round.

May import the layers below it (``errors``, ``state``, ``compat``, ``plugins``, ``config``, ``storage``)
and its neighbours (``context``, ``targets``, ``environments``, ``performance``).
"""
