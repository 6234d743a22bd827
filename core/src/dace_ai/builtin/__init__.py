"""Built-in plugins, registered through the ``dace_ai`` entry-point group like any other."""
