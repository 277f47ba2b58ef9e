"""What KV101's fix (rules/_unwrap_fix.py) says and writes: the note of an unsafe fix names the quantifier it
took and the other one, and the check the layers answer apart (the check itself, or the class tests of the
function a group spec is handed to). One snippet per behaviour, named after it, linted in the examples' tree;
written against the mutants scripts/mutation.py made of that module (issue 31)."""

from __future__ import annotations

import dataclasses
import textwrap

import pytest

from kvlint.analysis.census.compositions import ContainerComposition
from kvlint.engine.lint import LintRequest, lint_text
from kvlint.fixing.apply import apply_fixes
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


def test_the_note_names_a_parenthesized_check_without_its_parentheses():
    # rules/kv101_container_isinstance.py hands the note the check's own code (`own_parentheses=False`).
    check = "type(g.kv_cache_spec) is not MLAAttentionSpec"
    said = message(
        IMPORTS
        + f"def worker(kv_cache_config):\n    return [g for g in kv_cache_config.kv_cache_groups if ({check})]\n"
    )
    assert f"answer `{check}` differently" in said


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


def fix_of(source: str) -> str:
    """`source` after `kvlint fix --unsafe-fixes` of its KV101 findings, read as is (no dedent, no strip)."""
    findings = [f for f in lint_text(LintRequest(PATH, PATH, PROJECT, (RULE,)), source).findings if f.code == "KV101"]
    assert findings, source
    return apply_fixes(source, findings, unsafe=True).text


def test_the_checks_own_parentheses_stay_around_its_rewrite():
    source = (
        IMPORTS
        + "for g in kv_cache_config.kv_cache_groups:\n    ok = (isinstance(g.kv_cache_spec, FullAttentionSpec))\n"
    )
    assert "    ok = (is_full_attention_spec(g.kv_cache_spec))\n" in fix_of(source)


def test_a_comment_inside_the_checked_classes_stays_where_it_is_and_only_there():
    source = IMPORTS + (
        "for g in kv_cache_config.kv_cache_groups:\n"
        "    ok = isinstance(\n"
        "        g.kv_cache_spec,\n"
        "        (MambaSpec,  # the packed kinds\n"
        "         CrossAttentionSpec),\n"
        "    )\n"
    )
    text = fix_of(source)
    assert text.count("# the packed kinds") == 1
    assert "isinstance(spec, (MambaSpec,  # the packed kinds\n" in text


@pytest.mark.parametrize("newline", ["\n", "\r"])
@pytest.mark.parametrize(("name", "wrapped"), [("x" * 4, False), ("x" * 5, True)])
def test_a_rewrite_up_to_the_line_limit_stays_on_one_line_counted_from_its_lines_start(newline, name, wrapped):
    # 84 + len(name) columns once rewritten: 88, the limit, fits; 89 does not. The file's first line is empty,
    # so the check's line starts right after the file's first character.
    check = "isinstance(g.kv_cache_spec, FullAttentionSpec)"
    source = f"{newline}for g in kv_cache_config.kv_cache_groups: {name} = {check}{newline}"
    one_line = f"for g in kv_cache_config.kv_cache_groups: {name} = is_full_attention_spec(g.kv_cache_spec)"
    assert len(one_line) == 84 + len(name)
    assert (one_line not in fix_of(source)) is wrapped


@pytest.mark.parametrize(("group", "one_content_line"), [("gggg", True), ("ggggg", False)])
def test_a_wrapped_rewrites_content_stays_on_one_line_up_to_the_limit_a_tab_counted_four(group, one_content_line):
    # Too long for one line: the call's content on a line of its own when it fits, three tabs and 72 + 4
    # characters being 88 columns, else one part a line.
    source = IMPORTS + (
        "def worker(kv_cache_config):\n"
        f"\tfor {group} in kv_cache_config.kv_cache_groups:\n"
        f"\t\tokay = isinstance({group}.kv_cache_spec, MambaSpec)\n"
    )
    content = f"\t\t\tisinstance(spec, MambaSpec) for spec in iter_layer_specs({group}.kv_cache_spec)\n"
    assert (content in fix_of(source)) is one_content_line


def test_comments_between_the_checks_parts_end_the_rewrites_lines_in_order_then_stand_alone():
    source = IMPORTS + (
        "for g in kv_cache_config.kv_cache_groups:\n"
        "    ok = isinstance(  # first\n"
        "        g.kv_cache_spec,  # second\n"
        "        MambaSpec,  # third\n"
        "    )\n"
    )
    assert (
        "    ok = all(\n"
        "        isinstance(spec, MambaSpec)  # first\n"
        "        for spec in iter_layer_specs(g.kv_cache_spec)  # second\n"
        "        # third\n"
        "    )\n"
    ) in fix_of(source)


CALL_SITE_TITLE = "Unwrap the group spec where it is passed: `… for spec in iter_layer_specs(…)`"
CHECK_TITLE = "Test every layer: `all(… for spec in iter_layer_specs(…))`"
METHOD = """
class C:
    def certifiable(self, spec):
        return type(spec) is MLAAttentionSpec

    def build(self, kv_cache_config):
        return all(self.certifiable(g.kv_cache_spec) for g in kv_cache_config.kv_cache_groups)
"""
STATIC_METHOD = """
class C:
    @staticmethod
    def certifiable(spec):
        return type(spec) is MLAAttentionSpec

    def build(self, kv_cache_config):
        return all(C.certifiable(g.kv_cache_spec) for g in kv_cache_config.kv_cache_groups)
"""
ANOTHER_RECEIVER = """
    def other(self, helper, kv_cache_config):
        return [helper.certifiable(g.kv_cache_spec) for g in kv_cache_config.kv_cache_groups]
"""


def fix_title(source: str) -> str:
    source = textwrap.dedent(source).lstrip("\n")
    (finding,) = [f for f in lint_text(LintRequest(PATH, PATH, PROJECT, (RULE,)), source).findings if f.code == "KV101"]
    return finding.fix.title


@pytest.mark.parametrize("method", [METHOD, STATIC_METHOD])
def test_a_method_handed_a_group_spec_by_a_call_that_may_reach_another_method_is_fixed_at_its_check(method):
    # `helper.certifiable(…)` may call another class's method of that name: its tests are not these, so the
    # layers are not unwrapped at the call sites; the check itself is.
    assert fix_title(method) == CALL_SITE_TITLE
    assert fix_title(method + ANOTHER_RECEIVER) == CHECK_TITLE


def test_a_parameter_rebound_before_the_check_is_fixed_at_the_check_not_at_the_calls():
    source = """
        def build(kv_cache_config, fallback):
            def certifiable(spec):
                if spec is None:
                    spec = fallback
                return type(spec) is MLAAttentionSpec

            return all(certifiable(group.kv_cache_spec) for group in kv_cache_config.kv_cache_groups)
    """
    assert fix_title(source) == CHECK_TITLE


@pytest.mark.parametrize(
    "more",
    [
        # a call that may reach another method, handed no group spec: nothing to unwrap there
        "\n    def other(self, helper, layer):\n        return helper.certifiable(layer)\n",
        # a call of this very method handed no group spec: nothing to unwrap there either
        "\n    def single(self, layer):\n        return self.certifiable(layer)\n",
    ],
)
def test_calls_handing_no_group_spec_leave_the_call_site_fix_alone(more):
    assert fix_title(METHOD + more) == CALL_SITE_TITLE


def test_a_group_spec_handed_outside_all_or_any_is_fixed_at_the_check():
    source = METHOD.replace(
        "return all(self.certifiable(g.kv_cache_spec) for g", "return [self.certifiable(g.kv_cache_spec) for g"
    )
    source = source.replace("kv_cache_groups)", "kv_cache_groups]")
    assert fix_title(source) == CHECK_TITLE


@pytest.mark.parametrize(
    ("tests", "applicability"),
    [
        # every layer of each composition the tree builds is a FullAttentionSpec (or a subclass)
        ("isinstance(spec, FullAttentionSpec)", "safe"),
        # ... but only some are exactly one
        ("type(spec) is FullAttentionSpec", "unsafe"),
        ("isinstance(spec, FullAttentionSpec) and type(spec) == MLAAttentionSpec", "unsafe"),
        # the function's other class test of the parameter tells MLA layers apart: its answer may split
        ("isinstance(spec, AttentionSpec) and isinstance(spec, MLAAttentionSpec)", "unsafe"),
        ("isinstance(spec, AttentionSpec) and isinstance(spec, (MLAAttentionSpec, MambaSpec))", "unsafe"),
        # neither another call compared nor another name's class is a class test of the parameter
        ("isinstance(spec, FullAttentionSpec) and kind_of(spec) == MLAAttentionSpec", "safe"),
        ("isinstance(spec, FullAttentionSpec) and type(other) is MLAAttentionSpec", "safe"),
        ("isinstance(spec, FullAttentionSpec) and isinstance(other, MLAAttentionSpec)", "safe"),
    ],
)
def test_a_call_site_fix_is_safe_when_no_class_test_of_the_parameter_splits_a_composition(tests, applicability):
    source = (
        "def build(kv_cache_config, other):\n"
        "    def certifiable(spec):\n"
        f"        return {tests}\n\n"
        "    return all(certifiable(group.kv_cache_spec) for group in kv_cache_config.kv_cache_groups)\n"
    )
    (finding,) = [f for f in lint_text(LintRequest(PATH, PATH, PROJECT, (RULE,)), source).findings if f.code == "KV101"]
    assert finding.fix.title == CALL_SITE_TITLE
    assert finding.fix.applicability.value == applicability


def fix_with(source: str, path: str = PATH):
    (finding,) = [f for f in lint_text(LintRequest(path, path, PROJECT, (RULE,)), source).findings if f.code == "KV101"]
    return finding.fix, apply_fixes(source, [finding], unsafe=True).text


COMMENTED_CALL_SITE = (
    "def build(kv_cache_config):\n"
    "    def certifiable(spec):\n"
    "        return type(spec) is MLAAttentionSpec\n"
    "\n"
    "    return all(\n"
    "        certifiable(group.kv_cache_spec)  # why\n"
    "        for group in kv_cache_config.kv_cache_groups\n"
    "    )\n"
)


def test_a_comment_before_the_loops_keeps_the_new_loop_on_a_line_of_its_own():
    _, text = fix_with(COMMENTED_CALL_SITE)
    assert (
        "        certifiable(spec)  # why\n"
        "        for group in kv_cache_config.kv_cache_groups\n"
        "        for spec in iter_layer_specs(group.kv_cache_spec)\n"
    ) in text


def test_each_edit_is_placed_where_it_writes_the_argument_at_its_start_the_new_loop_after_the_loops():
    fix, _ = fix_with(COMMENTED_CALL_SITE)
    assert [(e.line, e.column, e.end_line, e.end_column) for e in fix.edits] == [(6, 21, 6, 40), (7, 53, 7, 53)]


@pytest.mark.parametrize(
    ("declared", "removed"),
    [
        ("", True),
        ("x: int = 1\n", True),  # another annotated name
        ("__all__ = ['worker']\n", False),  # the module's imports are its interface: kept
        ("__all__: list = ['worker']\n", False),
        ("__all__ += ['worker']\n", False),
    ],
)
def test_a_helper_fix_drops_the_checked_class_import_unless_the_module_declares_its_interface(declared, removed):
    source = (
        "from vllm.v1.kv_cache_interface import FullAttentionSpec\n"
        f"{declared}\n"
        "def worker(kv_cache_config):\n"
        "    return [g for g in kv_cache_config.kv_cache_groups if isinstance(g.kv_cache_spec, FullAttentionSpec)]\n"
    )
    fix, _ = fix_with(source)
    dropped = [(i.module, i.name) for i in fix.imports if not i.add]
    assert (dropped == [("vllm.v1.kv_cache_interface", "FullAttentionSpec")]) is removed


def test_the_interface_module_imports_nothing_from_itself():
    source = (
        "def iter_layer_specs(spec):\n"
        "    return [spec]\n\n"
        "def worker(kv_cache_config):\n"
        "    return [g for g in kv_cache_config.kv_cache_groups if isinstance(g.kv_cache_spec, MambaSpec)]\n"
    )
    fix, text = fix_with(source, "vllm/v1/kv_cache_interface.py")
    assert fix.imports == () and "isinstance(spec, MambaSpec) for spec in iter_layer_specs(" in text
