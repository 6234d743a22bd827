"""A well-behaved plugin: one provider and one prompt section."""

from dace_ai.plugin import PromptSection, Provider, hookimpl


@hookimpl
def dace_ai_providers():
    yield Provider(name="echo-test", factory=lambda settings: None, description="test provider")


@hookimpl
def dace_ai_prompt_sections():
    yield PromptSection(name="lab-rules", order=850, render=lambda ctx: "Lab rules apply.")
