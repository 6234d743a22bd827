"""Running a candidate against its node's reference and wording what went wrong: the sandbox child and its
process, the harness, the cases and the size ladder, inputs, references, baselines, the run plan, the
sanitizers' machinery and the run's record with its typed parts (artefacts ``SANDBOX_RUN``, ``BENCH_RUN``, ``GPU_RUN``).
May import ``compilation``, ``checking``, ``targets``, ``environments``, ``context``, ``prompt``,
``performance`` and every package below them; never ``checkers``, ``solving`` or above."""
