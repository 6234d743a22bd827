"""The sandboxed run's plan on its own (no compiles): which cases get thread runs, when a bench is timed."""

from types import SimpleNamespace

from dace_ai.sandbox.run_plan import all_cores, case_key, plan_threads, thread_counts


def _case(seed, n, elements):
    return {
        "seed": seed,
        "sizes": {"N": n},
        "values": {"N": n},
        "connectors": [],
        "containers": [{"name": "A", "elements": elements, "output": False}],
    }


def test_thread_runs_go_to_the_first_seed_of_every_large_size_only():
    cases = [_case(s, n, e) for n, e in ((13, 13), (5000, 5000), (70000, 70000)) for s in (0, 1, 2)]
    plan_threads(cases, 6)
    marked = [(c["seed"], c["sizes"]["N"]) for c in cases if c.get("threads")]
    assert marked == [(0, 5000), (0, 70000)]
    assert cases[3]["threads"] == thread_counts(6) == [1, 6, 6]


def test_without_a_large_size_the_largest_gets_the_thread_runs():
    cases = [_case(s, n, n) for n in (13, 67) for s in (0, 1)]
    plan_threads(cases, 2)
    assert [(c["seed"], c["sizes"]["N"]) for c in cases if c.get("threads")] == [(0, 67)]


def test_all_cores_is_the_setting_or_the_affinity_mask():
    import os

    assert all_cores(SimpleNamespace(check_threads=8)) == 8
    assert all_cores(SimpleNamespace(check_threads=0)) == len(os.sched_getaffinity(0))


def test_a_case_key_ignores_what_does_not_change_the_reference_outputs():
    case = _case(0, 13, 13)
    same = {**case, "threads": [1, 4, 4], "id": 7, "reference_cache": {"A": "x"}}
    assert case_key(case) == case_key(same) != case_key(_case(1, 13, 13))
