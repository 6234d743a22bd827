"""The built-in checkers, one module each (compile, verify, sanitizers, bench, the static rules, the GPU
checkers and the GPU packs' base), each a plugin of its own; they hand work on only through declared
artefacts. May import ``sandbox``, ``compilation``, ``checking``, ``targets``, ``environments``,
``context``, ``prompt``, ``performance`` and every package below them; never another module of
``checkers``, nor ``solving`` or above."""
