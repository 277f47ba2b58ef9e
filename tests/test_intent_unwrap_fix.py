"""What KV101's fix (rules/_unwrap_fix.py) says and writes: the note of an unsafe fix names the quantifier it
took and the other one, and the check the layers answer apart (the check itself, or the class tests of the
function a group spec is handed to). One snippet per behaviour, named after it, linted in the examples' tree;
written against the mutants scripts/mutation.py made of that module (issue 31)."""

from __future__ import annotations

import dataclasses
import textwrap

from kvlint.analysis.census.compositions import ContainerComposition
from kvlint.engine.lint import LintRequest, lint_text
from tests.test_fix_safety import IMPORTS, PATH, PROJECT, RULE
from tests.test_rules import EXAMPLE_COMPOSITIONS

CALL_SITE = """
def build(kv_cache_config):
    def certifiable(spec):
        if not isinstance(spec, AttentionSpec):
            return False
        return type(spec) is MLAAttentionSpec

    return all(certifiable(group.kv_cache_spec) for group in kv_cache_config.kv_cache_groups)
"""


def message(source: str, project=PROJECT) -> str:
    source = textwrap.dedent(source).lstrip("\n")
    (finding,) = [f for f in lint_text(LintRequest(PATH, PATH, project, (RULE,)), source).findings if f.code == "KV101"]
    return finding.message


def test_an_unsafe_call_site_fix_names_the_functions_class_tests_and_both_quantifiers():
    said = message(CALL_SITE)
    assert "answer the class tests of `certifiable()` differently" in said
    assert "the fix takes `all`, the author must choose it or `any`" in said


def test_an_unsafe_fix_of_the_check_names_the_check_and_both_quantifiers():
    check = "type(g.kv_cache_spec) is not MLAAttentionSpec"
    said = message(
        IMPORTS + f"def worker(kv_cache_config):\n    return [g for g in kv_cache_config.kv_cache_groups if {check}]\n"
    )
    assert f"answer `{check}` differently" in said
    assert "the fix takes `any`, the author must choose it or `all`" in said


def test_an_unsafe_helper_fix_takes_the_helpers_own_quantifier():
    # A tree that builds a container of full-attention and Mamba layers: `is_full_attention_spec` (an `all`
    # over the layers) answers it apart from `any`.
    mixed = ContainerComposition(
        frozenset({"Attention", "Mamba2Mixer"}),
        frozenset({"FullAttentionSpec", "MambaSpec"}),
        "default",
        "HybridForCausalLM",
        "vllm/v1/core/kv_cache_planning.py:get_kv_cache_groups",
        1187,
    )
    project = dataclasses.replace(PROJECT, compositions=(*EXAMPLE_COMPOSITIONS, mixed))
    check = "isinstance(g.kv_cache_spec, FullAttentionSpec)"
    source = (
        IMPORTS + f"def worker(kv_cache_config):\n    return [g for g in kv_cache_config.kv_cache_groups if {check}]\n"
    )
    said = message(source, project)
    assert "is_full_attention_spec" in said
    assert "the fix takes `all`, the author must choose it or `any`" in said
