"""What the census reads of a tree (kvlint.analysis.census.reading): which modules it reads whole, the
registry's names for a model class, and which layers choose among spec classes. One snippet per behaviour."""

from __future__ import annotations

import pytest

from kvlint.analysis.census.reading import _registry
from kvlint.analysis.census_selection import census_words


@pytest.mark.parametrize(
    "text",
    [b"def get_kv_cache_spec(self):", b"return specs.from_specs(x)", b"    def merge(cls, specs):", b"x = 1"],
)
def test_a_module_is_read_whole_when_it_holds_any_one_of_the_census_words(text):
    assert census_words(text) is (text != b"x = 1")


REGISTRY = b"""
_TEXT_GENERATION_MODELS = {
    "DeepseekV3ForCausalLM": ("deepseek_v2", "DeepseekV3ForCausalLM"),
    "DeepseekV32ForCausalLM": ("deepseek_v2", "DeepseekV3ForCausalLM"),
}

_SPECULATIVE_DECODING_MODELS = {
    "DeepseekV3ForCausalLM": ("deepseek_v2", "DeepseekV3ForCausalLM"),
}
"""


def test_a_class_the_registry_lists_under_several_names_has_the_others_as_aliases_never_itself():
    texts = {"vllm/models/registry.py": REGISTRY, "vllm/models/deepseek_v2.py": b"class DeepseekV3ForCausalLM: ...\n"}
    [(architecture, path, class_name, draft, pooling, aliases)] = _registry(texts)
    assert (architecture, path, class_name) == (
        "DeepseekV3ForCausalLM",
        "vllm/models/deepseek_v2.py",
        "DeepseekV3ForCausalLM",
    )
    assert not draft and not pooling  # the first table that lists it
    # Listed again (in the draft table) under its own name: no alias of itself.
    assert aliases == ("DeepseekV32ForCausalLM",)
