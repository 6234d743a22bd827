"""The DaCe integration: ``AINode`` and ``ai()``, the ``'ai'`` implementation on every library node
class (and the takeover of DaCe's own AI library), pending nodes, the expansion pass, the manual
exchange and the native fallback. May import ``solving`` and every package below it; never ``dispatch``
(sending checks to an executor is the workflows' business)."""
