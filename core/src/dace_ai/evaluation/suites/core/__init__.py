"""The ``core`` suite: task files under ``tasks/``, recorded answers under ``answers/``."""
