"""Rendering prompts from real node contexts, and prompt sections as plugins."""

import json

import dace
import pytest
from dace_ai.config.settings import resolve_settings
from dace_ai.context.collect import collect_sdfg_context
from dace_ai.errors import PluginError
from dace_ai.plugin import PromptSection, hookimpl
from dace_ai.plugins.manager import get_plugin_manager
from dace_ai.prompt.answer import Answer
from dace_ai.prompt.render import EXTRA_SECTION, SYSTEM_PROMPT, render_prompt

from .context_sdfgs import map_nest_sdfg, nested_sdfg, strided_sdfg
from .dace_versions import DACE2

BUILTIN_ORDER = [
    "task",
    "node",
    "connectors",
    "scopes",
    "symbols",
    "target",
    "target-guidance",
    "environments",
    "answer-format",
]


def _ctx(builder=strided_sdfg, *args):
    sdfg, state, node, *_ = builder(*args)
    return collect_sdfg_context(sdfg).node_context(state, node)


@pytest.fixture
def runtime_plugin():
    """Register plugin objects on the shared manager for one test, and always unregister them."""
    manager = get_plugin_manager()
    names = []

    def register(obj, name):
        manager.register(obj, name=name)
        names.append(name)

    yield register
    for name in names:
        manager.unregister(name)


def test_connector_section_has_strides_offset_and_index_formula():
    prompt = render_prompt(_ctx(), resolve_settings())
    table = prompt.section("connectors")
    row = next(line for line in table.splitlines() if line.startswith("| `_a`"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells == [
        "`_a`",
        "in",
        "`const double *` (pointer)",
        "A (CPU_Heap)",
        "`2:10:2, 1:5`",
        "[4, 4]",
        "[10, 1]",
        "[20, 5] / [5, 1]",
        "`11`",
        "`_a[i0*10 + i1]`",
    ]
    out_row = next(line for line in table.splitlines() if line.startswith("| `_b`"))
    assert "`double` (value)" in out_row and "`_b`" in out_row
    assert prompt.user.index("## Connectors") < prompt.user.index("## Enclosing scopes")


def test_scopes_section_shows_the_map_nest_with_schedules():
    prompt = render_prompt(_ctx(map_nest_sdfg), resolve_settings())
    scopes = prompt.section("scopes")
    outer = "- map `outer` over i in 0:N, schedule `CPU_Multicore`"
    inner = "  - map `inner` over j in 0:8, schedule `Sequential`"
    assert outer in scopes and inner in scopes and scopes.index(outer) < scopes.index(inner)
    assert "- `j`: `int64_t`" in prompt.section("symbols") or (DACE2 and "- `j`: `int`" in prompt.section("symbols"))
    assert prompt.section("gpu") is None  # host code over host data


def test_nested_sdfg_scope_in_prompt():
    scopes = render_prompt(_ctx(nested_sdfg), resolve_settings()).section("scopes")
    assert scopes.index("map `rows`") < scopes.index("nested SDFG `inner`")


def test_gpu_section_inside_a_gpu_device_map():
    prompt = render_prompt(
        _ctx(map_nest_sdfg, dace.ScheduleType.GPU_Device, dace.StorageType.GPU_Global), resolve_settings()
    )
    gpu = prompt.section("gpu")
    assert gpu is not None and "GPU_Device" in gpu and "`_h` -> H (CPU_Heap)" in gpu
    names = [name for name, _ in prompt.sections]
    assert names.index("scopes") < names.index("gpu") < names.index("target")


def test_builtin_sections_in_order_and_answer_fields_listed():
    prompt = render_prompt(_ctx(), resolve_settings())
    names = [name for name, _ in prompt.sections]
    assert [n for n in names if n in BUILTIN_ORDER] == [n for n in BUILTIN_ORDER if n in names]
    assert {"task", "node", "connectors", "scopes", "target", "environments", "answer-format"} <= set(names)
    orders = [s.order for s in get_plugin_manager().prompt_sections() if s.name in BUILTIN_ORDER + ["gpu"]]
    assert orders == list(range(100, 1100, 100))
    fmt = prompt.section("answer-format")
    assert all(f"`{field}`" in fmt for field in Answer.model_fields)
    assert "Probe" in prompt.section("task") and "`factor` = `2`" in prompt.section("node")
    assert prompt.user == "\n\n".join(text for _, text in prompt.sections) + "\n"


def test_system_prompt_states_the_tasklet_contract():
    assert prompt_contains(
        SYSTEM_PROMPT,
        "`return`",
        "strided view",
        "index formula",
        "scalar connector is a value",
        "once per program",
        "__state->name",
        "once per iteration of the innermost",
        "prefix it with the node's name",
        "JSON object",
    )


def test_state_fields_in_a_parallel_scope_are_read_only_after_init_and_scratch_is_per_call_or_per_thread():
    assert prompt_contains(
        " ".join(SYSTEM_PROMPT.split()),
        "one state per program, shared by every call",
        "a state field may hold only data that is read-only after `code_init`",
        "or per thread: indexed by `omp_get_thread_num()` and sized by `omp_get_max_threads()` in `code_init`",
        "Never scratch that every call writes",
        "per thread (a `thread_local` variable, or such a per-thread state field)",
        "checked by running them at the same time",
    )
    scopes = render_prompt(_ctx(map_nest_sdfg), resolve_settings()).section("scopes")
    assert "no state field written by the calls" in scopes and "`thread_local`" in scopes
    assert "per-thread data indexed by `omp_get_thread_num()`" in " ".join(scopes.split())


def prompt_contains(text, *phrases):
    missing = [p for p in phrases if p not in text]
    assert not missing, f"missing from the prompt: {missing}"
    return True


def test_prompt_is_deterministic():
    first = render_prompt(_ctx(map_nest_sdfg), resolve_settings())
    second = render_prompt(_ctx(map_nest_sdfg), resolve_settings())
    assert first.user == second.user and first.digest() == second.digest()
    changed = render_prompt(_ctx(map_nest_sdfg), resolve_settings({"extra_instructions": "x"}))
    assert changed.digest() != first.digest()


def test_extra_instructions_come_last_even_after_plugin_sections(runtime_plugin):
    class Late:
        @hookimpl
        def dace_ai_prompt_sections(self):
            yield PromptSection(name="epilogue", order=10**6, title="Epilogue", render=lambda ctx: "The end.")

    runtime_plugin(Late(), "late-section")
    prompt = render_prompt(_ctx(), resolve_settings({"extra_instructions": "Prefer readable code."}))
    assert prompt.sections[-1] == (EXTRA_SECTION, "## Additional instructions\n\nPrefer readable code.")
    assert prompt.sections[-2][0] == "epilogue"
    assert prompt.user.rstrip().endswith("Prefer readable code.")
    assert EXTRA_SECTION not in [n for n, _ in render_prompt(_ctx(), resolve_settings()).sections]


def test_plugin_adds_a_section_and_replaces_another(runtime_plugin):
    class HouseRules:
        @hookimpl
        def dace_ai_prompt_sections(self):
            yield PromptSection(
                name="house-rules",
                order=350,
                title="House rules",
                render=lambda ctx: f"No OpenMP pragmas in `{ctx.name}`.",
            )
            yield PromptSection(
                name="target-guidance",
                order=800,
                title="Lab guidance",
                replace=True,
                render=lambda ctx: "Use our tuned kernels only.",
            )

    runtime_plugin(HouseRules(), "house-rules")
    prompt = render_prompt(_ctx(), resolve_settings())
    names = [name for name, _ in prompt.sections]
    assert names.index("connectors") < names.index("house-rules") < names.index("scopes")
    assert prompt.section("house-rules") == "## House rules\n\nNo OpenMP pragmas in `probe`."
    assert prompt.section("target-guidance") == "## Lab guidance\n\nUse our tuned kernels only."
    assert names.count("target-guidance") == 1


def test_replacing_a_section_that_does_not_exist_names_the_sections_there_are(runtime_plugin):
    class Typo:
        @hookimpl
        def dace_ai_prompt_sections(self):
            yield PromptSection(name="target-guidence", order=800, replace=True, render=lambda ctx: "x")

    runtime_plugin(Typo(), "typo-sections")
    with pytest.raises(
        PluginError,
        match=r"PromptSection 'target-guidence' from .*typo-sections.* has replace=True "
        r"but no section of that name is registered \(sections: answer-format, "
        r".*target-guidance.*\)\. Did you mean 'target-guidance'\?",
    ):
        render_prompt(_ctx(), resolve_settings())


def test_plugins_list_shows_order_and_what_a_section_replaces(runtime_plugin, capsys):
    from dace_ai.cli.main import main

    class Lab:
        @hookimpl
        def dace_ai_prompt_sections(self):
            yield PromptSection(name="target-guidance", order=810, replace=True, render=lambda ctx: "Lab rules.")

    runtime_plugin(Lab(), "lab-guidance")
    assert main(["plugins", "list", "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["lab-guidance"]["prompt_sections"] == [
        {
            "name": "target-guidance",
            "order": 810,
            "title": "",
            "replaces": "'target-guidance' from dace-ai 0.1.0 (plugin 'prompt-sections')",
        }
    ]
    assert {"name": "task", "order": 100, "title": "Task", "replaces": None} in rows["prompt-sections"][
        "prompt_sections"
    ]
    assert main(["plugins", "list"]) == 0
    assert (
        "prompt section 'target-guidance': order 810, replaces 'target-guidance' from dace-ai 0.1.0 "
        "(plugin 'prompt-sections')"
    ) in capsys.readouterr().out


def test_environment_generators_offer_text_for_the_environments_section(runtime_plugin):
    from dace_ai.plugin import EnvironmentGenerator

    seen = []

    class Generators:
        @hookimpl
        def dace_ai_environment_generators(self):
            yield EnvironmentGenerator(
                name="t-lab-blas",
                offer=lambda ctx: seen.append(ctx.name) or "our BLAS build",
                generate=lambda request: "unused",
            )
            yield EnvironmentGenerator(name="t-silent", offer=lambda ctx: None, generate=lambda request: "unused")

    runtime_plugin(Generators(), "lab-generators")
    section = render_prompt(_ctx(), resolve_settings()).section("environments")
    assert "`t-lab-blas`" in section and "our BLAS build" in section
    assert "t-silent" not in section and set(seen) == {"probe"}


def test_section_may_skip_itself_and_failures_name_the_plugin(runtime_plugin):
    class Broken:
        @hookimpl
        def dace_ai_prompt_sections(self):
            yield PromptSection(name="skipped", order=150, render=lambda ctx: None)
            yield PromptSection(name="broken", order=160, render=lambda ctx: 1 / 0)

    runtime_plugin(Broken(), "broken-plugin")
    with pytest.raises(PluginError, match=r"prompt section 'broken' from .*broken-plugin.*ZeroDivisionError"):
        render_prompt(_ctx(), resolve_settings())


def test_target_and_guidance_are_separate_sections():
    ctx = _ctx()
    prompt = render_prompt(ctx, resolve_settings())
    target = prompt.section("target")
    assert ctx.target.description.strip().splitlines()[0] in target and ctx.target.reason in target
    if ctx.target.guidance.strip():
        assert prompt.section("target-guidance").endswith(ctx.target.guidance.strip())
        assert ctx.target.guidance.strip() not in target
