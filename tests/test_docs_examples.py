"""The worked examples of the plugin guides (docs/examples/*), built and installed as real distributions.

Each guide page includes its example's files verbatim, so what is tested here is
exactly what a plugin author reads. Every example is built into a wheel, installed
into a private folder and exercised in a fresh interpreter, as after ``pip install``:
the provider answers a real expansion over HTTP, the target is listed and described
in a prompt, the prompt sections appear in a rendered prompt, the checker refuses a
candidate and the repaired one runs, and the environment generator's library is
linked into a program that runs.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.distributions import REPO, build_wheel, install_wheels
from tests.distributions import run_json as _run_code
from tests.fakes.llm_server import Reply, fake_llm_server_fixture  # noqa: F401 - the fake_llm_server fixture

#: One worker runs the module (xdist --dist loadgroup), so the example distributions are built and installed once.
pytestmark = pytest.mark.xdist_group("docs-examples")

EXAMPLES = REPO / "docs" / "examples"
NAMES = ("provider", "target", "prompt_sections", "checker", "environment_generator")


@pytest.fixture(scope="session")
def examples_site(tmp_path_factory) -> Path:
    """All example distributions built (from copies, so the docs folder stays clean) and installed."""
    root = tmp_path_factory.mktemp("doc-examples")
    wheels = []
    for name in NAMES:
        source = shutil.copytree(
            EXAMPLES / name, root / "src" / name, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__")
        )
        wheels.append(build_wheel(Path(source), root))
    return install_wheels(wheels, root / "site")


def run_json(script: str, site: Path, env: dict[str, str] | None = None) -> dict:
    """Run ``script`` from a file (DaCe parses programs from their source) and return its last JSON line."""
    path = Path.cwd() / f"script_{abs(hash(script))}.py"
    path.write_text(script)
    return _run_code(f"import runpy; runpy.run_path({str(path)!r}, run_name='__main__')", site, env)


#: A program with one AI node, as a user writes it (DaCe reads the annotations: no __future__ import).
PROGRAM = """
import json, sys
import numpy as np
import dace
import dace_ai

N = dace.symbol("N")

@dace.program
def double_it(A: dace.float64[N]):
    return dace_ai.ai("Write _out[i] = 2 * _in0[i] for every i < N.", A, name="double_it")
"""

DOUBLE = {"code": "for (int i = 0; i < N; ++i) _out[i] = 2.0 * _in0[i];", "notes": "scalar loop"}


def test_every_guide_includes_its_example_files():
    """The guides show the files under test (snippets), not copies that could drift."""
    guides = {
        "provider": "write-a-provider.md",
        "target": "write-a-target-pack.md",
        "prompt_sections": "prompt-sections.md",
        "checker": "checkers.md",
        "environment_generator": "environment-generators.md",
    }
    for name, page in guides.items():
        text = (REPO / "docs" / "guides" / page).read_text()
        for path in sorted((EXAMPLES / name).rglob("*")):
            if path.suffix in (".py", ".toml") and "egg-info" not in str(path) and "build" not in path.parts:
                assert f'--8<-- "docs/examples/{path.relative_to(EXAMPLES)}"' in text, (page, path)


def test_provider_example_answers_a_real_expansion(examples_site, fake_llm_server):
    fake_llm_server.push(Reply(text=json.dumps(DOUBLE), input_tokens=800, output_tokens=30))
    out = run_json(
        PROGRAM
        + """
A = np.arange(11, dtype=np.float64)
B = double_it(A)
from dace_ai.plugins.manager import get_plugin_manager
print(json.dumps({"ok": bool(np.allclose(B, 2 * A)),
                  "origin": get_plugin_manager().get("providers", "labgateway").origin}))
""",
        examples_site,
        env={
            "DACE_ai_provider": "labgateway",
            "DACE_ai_base_url": fake_llm_server.openai_url,
            "DACE_ai_labgateway_temperature": "0.25",
            "DACE_ai_compile_check": "0",
            "LABGATEWAY_TOKEN": "lab-secret-token",
        },
    )
    assert out["ok"] and "dace-ai-labgateway 0.1.0" in out["origin"]
    [request] = fake_llm_server.requests
    assert request.path == "/v1/chat/completions"
    body = request.body
    assert body["temperature"] == 0.25 and body["model"] == "lab-coder"  # the plugin-owned setting arrived
    assert body["response_format"]["json_schema"]["strict"] is True
    assert "double_it" in body["messages"][1]["content"]
    assert "lab-secret-token" not in json.dumps(request.headers)


def test_provider_example_without_base_url_says_what_to_set(examples_site):
    out = run_json(
        """
import json
from dace_ai.config.settings import resolve_settings
from dace_ai.plugins.manager import get_plugin_manager
from dace_ai.providers.select import make_client
try:
    make_client(get_plugin_manager().get("providers", "labgateway"), resolve_settings({"provider": "labgateway"}))
except Exception as exc:
    print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}))
""",
        examples_site,
    )
    assert "needs the gateway's address: set base_url" in out["error"]


PROMPTS = """
import json
from pathlib import Path
sdfg = double_it.to_sdfg()
dace_ai.generate_prompts(sdfg, "prompts")
[prompt] = sorted(Path("prompts").glob("*_prompt.md"))
print(json.dumps({"prompt": prompt.read_text()}))
"""


def test_target_example_is_listed_and_describes_the_node_in_the_prompt(examples_site):
    listing = run_json(
        """
import io, json, contextlib
from dace_ai.cli.main import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    main(["targets", "--json"])
print(json.dumps(json.loads(out.getvalue())))
""",
        examples_site,
    )
    rows = listing if isinstance(listing, list) else listing.get("targets", listing)
    text = json.dumps(rows)
    assert "labnode" in text and ("has AVX-512" in text or "is not a lab node" in text)
    prompt = run_json(PROGRAM + PROMPTS, examples_site, env={"DACE_ai_target": "labnode"})["prompt"]
    assert "Target: `labnode` (cpu)" in prompt and "A lab cluster node:" in prompt
    assert "prefer 256-bit vectors (`__m256d`)" in prompt


def test_prompt_sections_example_appears_in_a_rendered_prompt(examples_site):
    prompt = run_json(PROGRAM + PROMPTS, examples_site)["prompt"]
    assert (
        "## House rules" in prompt and "- Prefix every helper function or type in `code_global` with `lab_`" in prompt
    )
    assert "Accumulate sums of doubles" in prompt  # the node writes doubles
    assert prompt.index("## Target guidance") < prompt.index("## House rules") < prompt.index("## DaCe environments")
    assert "prefer code that is fast single-threaded" in prompt  # the replaced guidance section
    listing = run_json(
        """
import io, json, contextlib
from dace_ai.cli.main import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    main(["plugins", "list", "--json"])
print(json.dumps(json.loads(out.getvalue())))
""",
        examples_site,
    )
    labrules = next(r for r in listing if r["name"] == "labrules")
    assert {
        "name": "target-guidance",
        "order": 800,
        "title": "Target guidance",
        "replaces": "'target-guidance' from dace-ai 0.1.0 (plugin 'prompt-sections')",
    } in labrules["prompt_sections"]


SCRIPTED = """
from dace_ai.plugins.manager import get_plugin_manager
from dace_ai.testing import FakeProvider
fake = FakeProvider(ANSWERS)
get_plugin_manager().register(fake.plugin("scripted"), "scripted")
"""


def test_checker_example_refuses_a_warning_and_the_repair_runs(examples_site):
    bad = {"code": "double unused = 0;\nfor (int i = 0; i < N; ++i) _out[i] = 2.0 * _in0[i];"}
    out = run_json(
        PROGRAM
        + f"ANSWERS = [{json.dumps(json.dumps(bad))}, {json.dumps(json.dumps(DOUBLE))}]\n"
        + SCRIPTED
        + """
A = np.arange(5, dtype=np.float64)
B = double_it(A)
print(json.dumps({"ok": bool(np.allclose(B, 2 * A)), "requests": len(fake.requests),
                  "repair": fake.requests[-1].messages[-1].content}))
""",
        examples_site,
        env={"DACE_ai_provider": "scripted", "DACE_ai_checkers": "+lab-warnings"},
    )
    assert out["ok"] and out["requests"] == 2
    assert "lab-warnings" in out["repair"] and "unused variable" in out["repair"]
    assert "the lab accepts no warnings" in out["repair"]


def test_environment_generator_example_is_offered_and_links_zlib(examples_site):
    if not Path("/usr/include/zlib.h").is_file():
        pytest.skip("zlib headers are not installed (Debian: zlib1g-dev)")
    prompt = run_json(PROGRAM + PROMPTS, examples_site)["prompt"]
    assert "### `zlib`\nzlib 1." in prompt and "`crc32`" in prompt
    answer = {
        "code": "for (int i = 0; i < N; ++i) _out[i] = (double)crc32(0L, (const Bytef*)(_in0 + i), sizeof(double));",
        "environments": [{"name": "zlib", "generator": "zlib"}],
    }
    out = run_json(
        PROGRAM
        + f"ANSWERS = [{json.dumps(json.dumps(answer))}]\n"
        + SCRIPTED
        + """
import zlib
A = np.arange(1, 8, dtype=np.float64) / 2
B = double_it(A)
expected = [float(zlib.crc32(a.tobytes())) for a in A]
print(json.dumps({"ok": B.tolist() == expected, "got": B.tolist(), "expected": expected}))
""",
        examples_site,
        env={"DACE_ai_provider": "scripted"},
    )
    assert out["ok"], out
