"""Built-in plugin: environments."""
