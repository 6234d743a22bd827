"""Built-in plugin: manual_provider."""
