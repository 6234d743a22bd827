"""Built-in plugin: prompt_sections."""
