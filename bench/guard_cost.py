"""What the guards on untrusted answers cost, side by side with doing without them.

* parse: :func:`~dace_ai.prompt.answer.parse_answer` (size bound, nesting scan,
  control-character scan, schema) vs plain ``json.loads`` + ``Answer.model_validate``
  on a realistic answer (a packed Gemm, ~6 KB of code).
* refuse: refusing a reply of 100 MB (over the ``max_tokens`` bound, refused unread)
  vs parsing it as plain JSON would.
* cache read: :meth:`AnswerCache.get` (shape-checked entry) vs ``json.loads`` of the same file.
* redact: :func:`~dace_ai.errors.redact` on a 300-character error message.

Prints microseconds per call and the ratios (guarded / unguarded).

    python bench/guard_cost.py [--repeat 2000]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from dace_ai.errors import redact
from dace_ai.prompt.answer import Answer, parse_answer

CODE = "\n".join(
    f"    for (int j = 0; j < N; ++j) C[i * N + j] += alpha * A[i * K + {k}] * B[{k} * N + j];" for k in range(64)
)
ANSWER = json.dumps(
    {
        "code": "for (int i = 0; i < M; ++i) {\n" + CODE + "\n}",
        "notes": "packed, unrolled by 64",
        "code_global": "#include <cmath>\nstatic inline double sq(double x) { return x * x; }",
    }
)


def _per_call(function, repeat: int) -> float:
    samples = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(repeat):
            function()
        samples.append((time.perf_counter() - start) / repeat)
    return statistics.median(samples) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=2000)
    repeat = parser.parse_args().repeat

    guarded = _per_call(lambda: parse_answer(ANSWER, origin="bench", max_tokens=16000), repeat)
    plain = _per_call(lambda: Answer.model_validate(json.loads(ANSWER)), repeat)
    print(f"parse {len(ANSWER)} chars: guarded {guarded:8.1f} us  plain {plain:8.1f} us  ratio {guarded / plain:.2f}")

    huge = json.dumps({"code": "x;", "notes": "n" * 100_000_000})

    def refuse() -> None:
        try:
            parse_answer(huge, max_tokens=16000)
        except ValueError:
            pass

    refused = _per_call(refuse, 20)
    loaded = _per_call(lambda: json.loads(huge), 1)
    print(
        f"refuse 100 MB reply: guarded {refused:8.1f} us  plain json.loads {loaded:10.1f} us  "
        f"ratio {refused / loaded:.6f}"
    )

    with tempfile.TemporaryDirectory() as folder:
        from dace_ai.storage.cache import AnswerCache

        cache = AnswerCache(Path(folder))
        key = "ab" * 32
        cache.put(
            key,
            "bench",
            {
                "text": ANSWER,
                "usage": {"input_tokens": 1, "output_tokens": 2, "cost_usd": None},
                "model": "m",
                "stop_reason": "end",
            },
        )
        path = cache.path(key)
        read = _per_call(lambda: cache.get(key), repeat)
        raw = _per_call(lambda: json.loads(path.read_text(encoding="utf-8")), repeat)
        print(f"cache read:          guarded {read:8.1f} us  plain {raw:8.1f} us  ratio {read / raw:.2f}")

    message = (
        "provider 'openai' (model gpt at https://user:pass-123456@gateway.example/v1): HTTP 401 "
        "(invalid_api_key: Incorrect API key provided: sk-abc...xyz), Authorization: Bearer sk-1234567890"
    )
    redacted = _per_call(lambda: redact(message), repeat)
    print(f"redact {len(message)} chars:  {redacted:8.1f} us per message")


if __name__ == "__main__":
    main()
