"""The check protocol: what a checker is asked and answers (``api``), the artefacts checkers hand on, the
stage runner that orders them by those artefacts, and the verdict on a candidate's reports.
May import ``context``, ``prompt``, ``performance`` (the typed results' records) and every package below
them; never ``compilation``, ``sandbox``, ``checkers``, ``solving``, ``expansion`` or above."""
