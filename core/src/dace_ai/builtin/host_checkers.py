"""Built-in plugin: host_checkers."""
