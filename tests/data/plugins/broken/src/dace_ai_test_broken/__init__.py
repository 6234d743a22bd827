"""A plugin whose import fails, as when a native dependency is missing."""

raise ImportError("libvendor.so.3: cannot open shared object file")
