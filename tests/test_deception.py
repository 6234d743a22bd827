"""The anti-deception rules' judgement on their own (the bench runs that feed them are in test_optimize)."""

import pytest
from dace_ai.checkers.bench import describe, figures
from dace_ai.prompt.answer import parse_answer
from dace_ai.sandbox import deception
from dace_ai.sandbox.bench_sizes import parse_sizes


def test_a_forbidden_library_is_named_only_when_the_description_forbids_it():
    answer = parse_answer(
        '{"code": "cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.0, _a, K, '
        '_b, N, 0.0, _c, N);", "use_environments": ["OpenBLAS"]}'
    )
    assert deception.library_calls(answer) == ["cblas_dgemm", "environment OpenBLAS"]
    assert deception.forbidden_library_reason(answer, "Multiply A and B. Do not call BLAS.")
    assert deception.forbidden_library_reason(answer, "Multiply without any vendor library.")
    assert deception.forbidden_library_reason(answer, "Multiply A and B, as fast as you can.") is None
    plain = parse_answer('{"code": "for (int i = 0; i < N; ++i) _out[i] = 2 * _in0[i];"}')
    assert deception.forbidden_library_reason(plain, "Do not call BLAS.") is None


def test_bandwidth_rule_needs_a_megabyte_and_a_quarter_of_the_bound():
    run = {"bytes": 32 << 20, "bandwidth": 10e9, "candidate": [1e-6] * 5}  # bound: 3.4 ms
    reason = deception.bandwidth_reason(run)
    assert reason and "1.0 µs per call" in reason and "33.6 MB" in reason and "10.0 GB/s" in reason
    assert deception.bandwidth_reason({**run, "candidate": [1e-3] * 5}) is None  # within a factor 4 of the bound
    assert deception.bandwidth_reason({**run, "bytes": 1000}) is None  # too small to judge
    assert deception.bandwidth_reason({**run, "bytes": None}) is None  # volume unknown


def test_run_reasons_word_each_finding():
    reasons = deception.run_reasons(
        {"input_independent": True, "inputs_modified": ["A"], "writes_outside": ["C"], "reads_outside": ["C"]}
    )
    assert len(reasons) == 4 and "do not depend on its inputs" in reasons[0]
    assert "writes to its input data (A)" in reasons[1] and "bytes around C" in reasons[2]


def test_figures_give_the_speedup_and_its_range_from_interleaved_pairs():
    fig = figures({"native": [4.0, 4.4, 3.6], "candidate": [2.0, 2.0, 2.0], "sizes": {"N": 7}})
    assert fig.speedup == pytest.approx(2.0) and fig.speedup_range == pytest.approx((1.8, 2.2))
    assert fig.candidate_seconds == (2.0, 2.0, 2.0) and fig.sizes == {"N": 7} and fig.repeats == 3
    assert describe(fig).startswith("speedup 2.00x (1.80-2.20) over the native expansion")


def test_bench_sizes_setting_is_parsed_or_named_as_wrong():
    assert parse_sizes("N=4096, M=512") == {"N": 4096, "M": 512}
    with pytest.raises(ValueError, match="'N=x' is not SYMBOL=INTEGER"):
        parse_sizes("N=x")


def test_bench_settings_have_their_defaults_and_refuse_bad_values(monkeypatch):
    from dace_ai.config.settings import resolve_settings
    from dace_ai.errors import SettingsError

    settings = resolve_settings()
    assert (settings.bench, settings.min_speedup, settings.check_concurrency) == ("report", 1.03, 0)
    monkeypatch.setenv("DACE_ai_bench", "fast")
    with pytest.raises(SettingsError, match="'bench' = 'fast' from environment variable DACE_ai_bench"):
        resolve_settings()
