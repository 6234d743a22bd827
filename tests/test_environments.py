"""Environments: registered ones reused, library packs offered only when installed, and
generated environments stored as data and rebuilt by our code, with real DaCe compiles.

Answers are scripted (FakeProvider by node name) or supplied with
``node.read_prompt_response``; the programs are real DaCe builds linked with the
Debian libraries (libopenblas-dev, libfftw3-dev, zlib).
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import dace
import dace_ai
import numpy as np
import pytest
from dace_ai.context.types import NodeContext, TargetInfo
from dace_ai.environments.generated import FOLDER, HOME_MODULE, load_generated, read_spec
from dace_ai.environments.resolve import detect_generator, resolve_environments
from dace_ai.errors import AnswerError, CheckFailed
from dace_ai.expansion.pending import pending_nodes
from dace_ai.plugins.manager import get_plugin_manager
from dace_ai.prompt.answer import Answer, parse_answer
from dace_ai.prompt.sections import render_environments
from dace_ai.providers.api import current_node
from dace_ai.testing import FakeProvider

from tests.system_libraries import needs

N = dace.symbol("N")
CUDA_ENV = "dace.libraries.standard.environments.cuda.CUDA"


def _generators():
    return get_plugin_manager().environment_generators()


def _installed(name: str) -> bool:
    generator = _generators().get(name)
    return generator is not None and detect_generator(generator).matched


needs_openblas = needs("openblas")
needs_fftw = needs("fftw")


@pytest.fixture
def provider(register_dace_ai_plugin):
    """A scripted provider answering by node name."""
    answers: dict[str, dict] = {}
    fake = FakeProvider()
    fake.queue(*[lambda request: json.dumps(answers.get(current_node().name) or answers["*"])] * 20)
    register_dace_ai_plugin(fake.plugin("scripted"), "scripted-provider")
    dace.Config.set("ai", "provider", value="scripted")
    fake.answers = answers
    yield fake
    dace.Config.set("ai", "provider", value="")
    dace.Config.set("ai", "compile_check", value=True)


def _context(kind: str = "cpu", *, in_gpu_kernel: bool = False) -> NodeContext:
    target = TargetInfo(
        name="cuda" if kind == "gpu" else "host", kind=kind, description="", language="cuda" if in_gpu_kernel else "cpp"
    )
    return NodeContext(
        key="n_0",
        name="n",
        node_type="AINode",
        library=None,
        doc="",
        description="",
        properties={},
        inputs=[],
        outputs=[],
        scopes=[],
        symbols={},
        in_gpu_kernel=in_gpu_kernel,
        gpu_notes="",
        target=target,
        sdfg_name="prog",
    )


def _tasklets(sdfg):
    return [n for n, _ in sdfg.all_nodes_recursive() if isinstance(n, dace.nodes.Tasklet)]


def _fresh_env(root: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DACE_ai_") and not k.endswith("_API_KEY")}
    env["DACE_default_build_folder"] = str(root)
    return env


# ------------------------------------------------------------------------------- end to end
@needs_openblas
def test_gemm_through_ai_calls_cblas_sgemm_via_the_openblas_pack(provider, monkeypatch):
    """A @ B -> MatMul -> Gemm implemented by 'ai' with cblas_sgemm; checks run (probe + faithful) and pass."""
    from dace.libraries import blas

    monkeypatch.setattr(blas, "default_implementation", "ai")

    @dace.program
    def prog(A: dace.float32[64, 48], B: dace.float32[48, 32]):
        return A @ B

    sdfg = prog.to_sdfg()
    provider.answers["*"] = {  # the Gemm node exists only once MatMul has specialized
        "code": "cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 64, 32, 48, 1.0f, _a, 48, _b, 32, "
        "0.0f, _c, 32);",
        "environments": [{"name": "openblas", "generator": "openblas"}],
        "notes": "OpenBLAS SGEMM",
    }
    A = np.random.rand(64, 48).astype(np.float32)
    B = np.random.rand(48, 32).astype(np.float32)
    C = sdfg(A=A, B=B)
    np.testing.assert_allclose(C, A @ B, rtol=1e-4)
    prompt = provider.requests[0].messages[0].content
    assert "`Gemm`" in prompt and "### `openblas`" in prompt and "cblas_sgemm(CblasRowMajor" in prompt
    (path,) = (Path(dace.Config.get("default_build_folder")) / FOLDER).glob("openblas_*.json")
    stored = read_spec(path)  # the compiled copy's tasklet named it; the class is registered in this process
    assert dace.library.get_environment(f"{HOME_MODULE}.{path.stem}").headers == ["cblas.h"]
    assert stored.headers == ["cblas.h"] and stored.libraries == ["openblas"]


@needs_fftw
def test_ai_node_fft_with_fftw_plan_made_once_in_init_code(tmp_path):
    """1-D complex FFT through the fftw pack: plan in code_init, fftw_execute_dft in the body, destroyed at exit."""
    dace.Config.set("ai", "provider", value="manual")
    dace.Config.set("ai", "compile_check", value=False)
    try:

        @dace.program
        def prog(X: dace.complex128[96], Y: dace.complex128[96]):
            dace_ai.ai("Y = the forward discrete Fourier transform of X (unnormalised).", x=X, out=Y, name="fft")

        sdfg = prog.to_sdfg()
        ((_, state, node),) = pending_nodes(sdfg)
        answer = {
            "code": "fftw_execute_dft(__state->plan, (fftw_complex *)_x, (fftw_complex *)_out);",
            "state_fields": ["fftw_plan plan;"],
            "code_init": (
                "fftw_complex *in_ = fftw_alloc_complex(96), *out_ = fftw_alloc_complex(96);\n"
                "__state->plan = fftw_plan_dft_1d(96, in_, out_, FFTW_FORWARD, "
                "FFTW_ESTIMATE | FFTW_UNALIGNED);\nfftw_free(in_); fftw_free(out_);"
            ),
            "code_exit": "fftw_destroy_plan(__state->plan);",
            "side_effects": True,
            "environments": [{"name": "fftw", "generator": "fftw"}],
        }
        tasklet = node.read_prompt_response(state, json.dumps(answer))
    finally:
        dace.Config.set("ai", "provider", value="")
        dace.Config.set("ai", "compile_check", value=True)
    assert "fftw_plan_dft_1d" in tasklet.code_init.as_string and "fftw_plan_dft" not in tasklet.code.as_string
    assert "fftw_destroy_plan" in tasklet.code_exit.as_string
    compiled = sdfg.compile()
    rng = np.random.default_rng(0)
    for _ in range(2):  # the one plan from init code serves every call
        X = rng.random(96) + 1j * rng.random(96)
        Y = np.zeros(96, dtype=np.complex128)
        compiled(X=X, Y=Y)
        np.testing.assert_allclose(Y, np.fft.fft(X), rtol=1e-9, atol=1e-9)


ZLIB_ANSWER = {
    "code": (
        "for (int i = 0; i < N; ++i) _out[i] = __state->env_scale * _a[i] + AI_ENV_OFFSET"
        " + (crc32(0L, Z_NULL, 0) == 0 ? 0 : 1000);"
    ),
    "environments": [
        {
            "name": "zlib",
            "headers": ["zlib.h"],
            "libraries": ["z"],
            "compile_definitions": ["AI_ENV_OFFSET=2"],
            "state_fields": ["double env_scale;"],
            "init_code": "__state->env_scale = 3.0;",
            "finalize_code": "__state->env_scale = 0.0;",
        }
    ],
}


def test_model_requested_environment_is_stored_as_data_and_a_saved_sdfg_runs_in_a_fresh_process(provider, tmp_path):
    dace.Config.set("ai", "compile_check", value=False)
    provider.answers["zscale"] = ZLIB_ANSWER

    @dace.program
    def prog(A: dace.float64[N], B: dace.float64[N]):
        dace_ai.ai("Write _out[i] = 3 * _a[i] + 2.", a=A, out=B, name="zscale")

    sdfg = prog.to_sdfg()
    ((_, state, node),) = pending_nodes(sdfg)
    dace_ai.expand(sdfg, state, node)
    (tasklet,) = [t for t in _tasklets(sdfg) if t.label == "zscale"]
    (env,) = tasklet.environments
    root = Path(dace.Config.get("default_build_folder"))
    stored = sorted((root / FOLDER).glob("*.json"))
    assert len(stored) == 1 and not list((root / FOLDER).glob("*.py"))  # data only: no Python file is written
    assert stored[0].stem == env.rsplit(".", 1)[1]
    record = json.loads(stored[0].read_text())
    assert record["spec"]["init_code"] == "__state->env_scale = 3.0;"
    path = tmp_path / "zscale.sdfg"
    sdfg.save(str(path))

    script = (
        "import dace  # (DaCe 2's own import warns on Python 3.11; what follows must not)\n"
        "import warnings; warnings.simplefilter('error')\n"
        "import dace_ai, numpy as np\n"
        f"sdfg = dace.SDFG.from_file({str(path)!r})\n"
        "A = np.arange(7.0); B = np.zeros(7)\n"
        "sdfg(A=A, B=B, N=7)\n"
        "assert np.allclose(B, 3 * A + 2), B\n"
        "print('fresh-ok')\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=tmp_path,
        env=_fresh_env(root),
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "fresh-ok" in result.stdout


# ------------------------------------------------------------------------------- untrusted text
HOSTILE = [
    ("name", 'x"""; import os; os.system("touch {marker}")'),
    ("headers", 'zlib.h"\n#include "/etc/passwd'),
    ("headers", "zlib.h; touch {marker}"),
    ("libraries", "z; touch {marker}"),
    ("libraries", "$(touch {marker})"),
    ("include_dirs", "/tmp/$(touch {marker})"),
    ("compile_flags", "-O2 `touch {marker}`"),
    ("compile_flags", "-fplugin=/tmp/evil.so"),
    ("compile_flags", '-DX="$(touch {marker})"'),
    ("link_flags", "-Wl,--version;touch {marker}"),
    ("cmake_packages", "CUDA)\nexecute_process(COMMAND touch {marker})"),
    ("compile_definitions", "X=1'; touch {marker}; '"),
    ("state_fields", 'int x; }; int main() { system("touch {marker}"); }'),
]


@pytest.mark.parametrize(("field", "value"), HOSTILE, ids=[f"{f}-{i}" for i, (f, _) in enumerate(HOSTILE)])
def test_environment_fields_with_python_or_shell_syntax_are_refused(field, value, tmp_path):
    marker = tmp_path / "marker"
    value = value.replace("{marker}", str(marker))
    request = {"name": "zlib", "headers": ["zlib.h"], "libraries": ["z"]}
    request[field] = value if field == "name" else [value]
    with pytest.raises(AnswerError) as info:
        parse_answer(json.dumps({"code": "x = 1;", "environments": [request]}))
    assert f"environments.0.{field}" in str(info.value)
    assert not marker.exists()


def test_code_fields_are_stored_inertly_and_never_executed_even_by_a_fresh_import(tmp_path):
    """init/finalize code is C++ for the compiler only: stored in JSON, never run as Python or by a shell."""
    marker = tmp_path / "marker"
    payload = f'"""\nimport os; os.system("touch {marker}")\n"""; $(touch {marker}); `touch {marker}`'
    answer = Answer(
        code="x = 1;",
        environments=[
            {"name": "inert", "headers": ["zlib.h"], "libraries": ["z"], "init_code": payload, "finalize_code": payload}
        ],
    )
    resolution = resolve_environments(answer, _context())
    assert not resolution.problems
    (path,) = resolution.paths
    env = dace.library.get_environment(path)
    assert env.init_code == payload and env.finalize_code == payload
    from dace.codegen.compiler import get_environment_flags

    flags, _ = get_environment_flags([env])  # what DaCe puts on its CMake shell command line
    assert not any(ch in " ".join(flags).replace('"', "") for ch in "`$;\n'")
    root = Path(dace.Config.get("default_build_folder"))
    assert len(list((root / FOLDER).glob("*.json"))) == 1 and not list((root / FOLDER).glob("*.py"))
    script = (
        "import dace, dace_ai\n"
        f"env = dace.library.get_environment({path!r})\n"
        f"assert env.init_code == {payload!r}\n"
        "print('loaded-ok')\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=tmp_path,
        env=_fresh_env(root),
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "loaded-ok" in result.stdout
    assert not marker.exists()


def test_damaged_or_tampered_stored_environment_warns_naming_the_file_and_import_still_works(tmp_path):
    root = Path(dace.Config.get("default_build_folder"))
    answer = Answer(code="x = 1;", environments=[{"name": "zgood", "headers": ["zlib.h"], "libraries": ["z"]}])
    (good,) = resolve_environments(answer, _context()).paths
    folder = root / FOLDER
    (folder / "broken_0123456789ab.json").write_text("{not json")
    genuine = next(folder.glob("zgood_*.json"))
    record = json.loads(genuine.read_text())
    record["spec"]["libraries"] = ["z; touch /tmp/x"]
    (folder / "zbad_0123456789ab.json").write_text(json.dumps(record))
    with pytest.warns(UserWarning) as caught:
        loaded = load_generated()
    messages = " ".join(str(w.message) for w in caught)
    assert "broken_0123456789ab.json" in messages and "zbad_0123456789ab.json" in messages
    assert "'spec.libraries.0'" not in messages or "library" in messages
    assert loaded == [good]
    script = "import warnings\nimport dace_ai\nprint('import-ok')\n"
    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=tmp_path,
        env=_fresh_env(root),
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0 and "import-ok" in result.stdout, result.stderr[-2000:]
    assert "broken_0123456789ab.json" in result.stderr and "zbad_0123456789ab.json" in result.stderr


# ------------------------------------------------------------------------------- offers and refusals
@needs_openblas  # DaCe's own BLAS environment is installed only with a CBLAS
def test_registered_environments_reused_unknown_listed_gpu_ones_not_offered_to_cpu_code():
    cpu = _context()  # no environments collected: those of this machine
    text = render_environments(cpu)
    assert CUDA_ENV not in text  # installed (nvcc is here) but not for CPU code
    gpu_text = render_environments(_context("gpu"))
    assert (CUDA_ENV in gpu_text) == (shutil.which("nvcc") is not None)
    unknown = resolve_environments(Answer(code="x;", use_environments=["NoSuchEnv"]), cpu)
    assert (
        unknown.problems and "'NoSuchEnv' is not a registered DaCe environment; installed here:" in unknown.problems[0]
    )
    assert "dace.libraries.blas.environments.blas.BLAS" in unknown.problems[0]
    refused = resolve_environments(Answer(code="x;", use_environments=[CUDA_ENV]), cpu)
    assert refused.problems and not refused.paths
    reused = resolve_environments(Answer(code="x;", use_environments=["BLAS"]), cpu)  # short names resolve
    assert reused.paths == {"dace.libraries.blas.environments.blas.BLAS"} and not reused.problems


@needs_fftw  # the error lists the installed generators, fftw among them
def test_a_pack_whose_library_is_missing_is_not_offered_and_a_request_for_it_is_a_clear_error(tmp_path):
    if _installed("cublas"):
        pytest.skip("cuBLAS is installed here; this test needs a machine without it")
    detection = detect_generator(_generators()["cublas"])
    assert "cublas_v2.h" in detection.reason
    gpu_host = _context("gpu")
    assert "cublas" not in render_environments(gpu_host).lower().replace("dace.libraries.blas.environments.cublas", "")
    result = resolve_environments(Answer(code="x;", environments=[{"name": "cublas", "generator": "cublas"}]), gpu_host)
    (problem,) = result.problems
    assert (
        "'environments' entry 'cublas' (generator 'cublas'): the library is not installed on this machine" in problem
        and "cublas_v2.h" in problem
    )
    # Through the pipeline: the node is not expanded and the error names the reason.
    dace.Config.set("ai", "provider", value="manual")
    dace.Config.set("ai", "compile_check", value=False)
    try:

        @dace.program
        def prog(A: dace.float64[N], B: dace.float64[N]):
            dace_ai.ai("B = A", a=A, out=B, name="copy")

        sdfg = prog.to_sdfg()
        ((_, state, node),) = pending_nodes(sdfg)
        with pytest.raises(CheckFailed, match="not installed on this machine"):
            node.read_prompt_response(state, {"code": "x;", "environments": [{"name": "c", "generator": "cublas"}]})
        assert len(pending_nodes(sdfg)) == 1
        with pytest.raises(CheckFailed, match="no such environment generator; installed here: .*fftw"):
            node.read_prompt_response(state, {"code": "x;", "environments": [{"name": "c", "generator": "mkl"}]})
    finally:
        dace.Config.set("ai", "provider", value="")
        dace.Config.set("ai", "compile_check", value=True)


@needs_openblas
def test_packs_are_offered_by_target_and_refused_inside_gpu_kernels():
    cpu, gpu_host, kernel = _context(), _context("gpu"), _context("gpu", in_gpu_kernel=True)
    assert "### `openblas`" in render_environments(cpu) and "### `fftw`" in render_environments(cpu)
    assert "### `openblas`" not in render_environments(gpu_host)
    kernel_text = render_environments(kernel)
    assert "### `" not in kernel_text and "__device__" in kernel_text
    pack = resolve_environments(Answer(code="x;", environments=[{"name": "o", "generator": "openblas"}]), kernel)
    assert pack.problems and "refused inside a GPU kernel" in pack.problems[0]
    host_header = resolve_environments(Answer(code="x;", environments=[{"name": "zl", "headers": ["zlib.h"]}]), kernel)
    assert "declares no __device__ functions" in host_header.problems[0]
    if Path("/usr/local/cuda/include/cuda_fp16.h").is_file():
        device = resolve_environments(
            Answer(
                code="x;",
                environments=[
                    {"name": "half", "headers": ["cuda_fp16.h"], "include_dirs": ["/usr/local/cuda/include"]}
                ],
            ),
            kernel,
        )
        assert not device.problems and len(device.paths) == 1


def test_doctor_lists_registered_pack_and_stored_environments(capsys):
    from dace_ai.cli.main import main

    resolve_environments(
        Answer(code="x;", environments=[{"name": "zdoc", "headers": ["zlib.h"], "libraries": ["z"]}]), _context()
    )
    assert main(["doctor", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)["environments"]
    registered = {e["name"]: e for e in report["registered"]}
    assert registered[CUDA_ENV]["gpu"] is True and "reason" in registered[CUDA_ENV]
    packs = {e["name"]: e for e in report["packs"]}
    assert {"openblas", "fftw", "cublas", "generic"} <= set(packs)
    assert packs["cublas"]["installed"] is _installed("cublas") and packs["cublas"]["reason"]
    assert "dace-ai-openblas" in packs["openblas"]["from"]
    (stored,) = report["generated"]
    assert stored["name"].startswith(f"{HOME_MODULE}.zdoc_") and stored["installed"] is True
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert "Environment packs (generators):" in out and "Stored environments (generated):" in out


@pytest.mark.skipif(
    not _installed("cublas") or shutil.which("nvcc") is None,
    reason="needs cuBLAS headers (CUDA toolkit or pip install nvidia-cublas) and nvcc",
)
def test_cublas_pack_compiles_a_handle_made_in_init_code_with_nvcc(tmp_path):
    """Compile check without a GPU: the environment's include folder and library are what nvcc needs."""
    answer = Answer(code="x;", environments=[{"name": "cublas", "generator": "cublas"}])
    (path,) = resolve_environments(answer, _context("gpu")).paths
    env = dace.library.get_environment(path)
    assert env.dependencies and env.dependencies[0].full_class_path() == CUDA_ENV
    unit = tmp_path / "unit.cu"
    unit.write_text(
        "#include <cublas_v2.h>\nstruct S { cublasHandle_t handle; };\n"
        "int init(S *s) { return cublasCreate(&s->handle) == CUBLAS_STATUS_SUCCESS ? 0 : 1; }\n"
        "void fini(S *s) { cublasDestroy(s->handle); }\n"
    )
    compile_cmd = [
        "nvcc",
        "-c",
        "-Xcompiler",
        "-fPIC",
        *(f"-I{d}" for d in env.cmake_includes),
        str(unit),
        "-o",
        str(tmp_path / "unit.o"),
    ]
    result = subprocess.run(compile_cmd, check=False, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    # DaCe links with the host compiler driver, which is what the link flags are written for.
    link_cmd = [
        "g++",
        "-shared",
        str(tmp_path / "unit.o"),
        *env.cmake_libraries,
        *env.cmake_link_flags,
        "-o",
        str(tmp_path / "unit.so"),
    ]
    result = subprocess.run(link_cmd, check=False, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]


@pytest.mark.parametrize(
    "module",
    ["dace_ai_openblas.plugin", "dace_ai_fftw.plugin", "dace_ai_cublas.plugin", "dace_ai.environments.generated"],
)
def test_environment_packs_meet_the_registration_contract(module):
    import importlib

    from dace_ai.testing import check_registrations

    (generator,) = check_registrations(importlib.import_module(module))["dace_ai_environment_generators"]
    assert generator.offer(_context("gpu", in_gpu_kernel=True)) is None or generator.name == "generic"


def test_a_refused_environment_goes_back_to_the_model_in_a_repair_round(register_dace_ai_plugin):
    """The refusal is a failed check: the model reads why and answers again without it."""
    code = "for (int i = 0; i < N; ++i) _out[i] = 2 * _a[i];"
    fake = FakeProvider(
        [
            json.dumps({"code": code, "environments": [{"name": "mkl", "generator": "no-such-pack"}]}),
            json.dumps({"code": code}),
        ]
    )
    register_dace_ai_plugin(fake.plugin("scripted-repair"), "scripted-repair")
    dace.Config.set("ai", "provider", value="scripted-repair")
    dace.Config.set("ai", "checkers", value="probe")

    @dace.program
    def prog(A: dace.float64[N], B: dace.float64[N]):
        dace_ai.ai("Write _out[i] = 2 * _a[i].", a=A, out=B, name="twice_env")

    sdfg = prog.to_sdfg()
    try:
        ((_, state, node),) = pending_nodes(sdfg)
        dace_ai.expand(sdfg, state, node)
    finally:
        dace.Config.set("ai", "checkers", value="")
        dace.Config.set("ai", "provider", value="")
    assert len(fake.requests) == 2
    repair = fake.requests[1].messages[-1].content
    assert "Check 'environments'" in repair and "(generator 'no-such-pack'): no such environment generator" in repair
    A = np.arange(5.0)
    B = np.zeros(5)
    sdfg(A=A, B=B, N=5)
    np.testing.assert_allclose(B, 2 * A)
