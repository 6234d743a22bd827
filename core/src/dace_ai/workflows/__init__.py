"""The user APIs over whole programs: ``generate``, ``optimize`` (and its report), ``build`` and its
repairs, and the sessions API over the tasklets a model wrote (revisions included).
May import ``expansion``, ``dispatch``, ``solving`` and every package below them; never ``evaluation`` or ``cli``."""
