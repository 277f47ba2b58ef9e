"""KV101 judges the value the code consumes, not the `isinstance` call alone: the whole boolean expression
holding the check, the branch a whole-model container never reaches past a one-group early exit, and a
fail-closed comment on the check's own line. Miniature sources, one per behaviour."""

from __future__ import annotations

import libcst as cst

from kvlint.analysis.cst_walk import preorder
from kvlint.analysis.deliberate import comments_at, fail_closed
from kvlint.analysis.hierarchy import SpecHierarchy
from kvlint.analysis.value_uses import past_single_group_exit
from kvlint.analysis.whole_answer import answers_alike
from tests.test_witness_semantics import SCHEDULER_027, _first, _parsed

HIERARCHY = SpecHierarchy(
    bases={
        "KVCacheSpec": (),
        "AttentionSpec": ("KVCacheSpec",),
        "FullAttentionSpec": ("AttentionSpec",),
        "MLAAttentionSpec": ("FullAttentionSpec",),
        "SlidingWindowSpec": ("AttentionSpec",),
        "UniformTypeKVCacheSpecs": ("KVCacheSpec",),
    }
)
AGNOSTIC = (
    "def f(runner, spec):\n"
    "    return (\n"
    "        not runner.v2\n"
    "        and spec is not None\n"
    "        and isinstance(spec, FullAttentionSpec)\n"
    "        and not isinstance(spec, MLAAttentionSpec)\n"
    "        and spec.num_kv_heads > 1\n"
    "    )\n"
)


def _full_attention_check(module):
    return _first(
        module,
        cst.Call,
        lambda n: (
            isinstance(n.func, cst.Name)
            and n.func.value == "isinstance"
            and n.args[1].value.value == "FullAttentionSpec"
        ),
    )


def test_the_whole_expression_answers_an_all_mla_container_as_each_of_its_layers():
    module, parent = _parsed(AGNOSTIC)
    check = _full_attention_check(module)
    assert answers_alike(check, "spec", parent, HIERARCHY, frozenset({"MLAAttentionSpec"}))
    # Plain full-attention layers answer True where the container answers False: a divergence.
    assert not answers_alike(check, "spec", parent, HIERARCHY, frozenset({"FullAttentionSpec"}))
    assert not answers_alike(check, "spec", parent, HIERARCHY, frozenset({"MLAAttentionSpec", "FullAttentionSpec"}))


def test_a_check_alone_or_beside_an_unknown_operand_is_never_called_alike():
    alone, parent = _parsed("def f(spec):\n    return isinstance(spec, FullAttentionSpec)\n")
    assert not answers_alike(_full_attention_check(alone), "spec", parent, HIERARCHY, frozenset({"MLAAttentionSpec"}))
    either, parent = _parsed("def f(spec, x):\n    return isinstance(spec, FullAttentionSpec) or x\n")
    assert not answers_alike(_full_attention_check(either), "spec", parent, HIERARCHY, frozenset({"MLAAttentionSpec"}))


def test_a_check_past_a_one_group_early_exit_is_reached_only_with_several_groups():
    module, parent = _parsed(SCHEDULER_027)
    check = _first(module, cst.Call, lambda n: isinstance(n.func, cst.Name) and n.func.value == "isinstance")
    assert past_single_group_exit(check, _first(module, cst.FunctionDef), parent)
    for test in ("len(groups) > 1", "len(other) <= 1"):
        changed, parent = _parsed(SCHEDULER_027.replace("len(groups) <= 1", test))
        call = _first(changed, cst.Call, lambda n: isinstance(n.func, cst.Name) and n.func.value == "isinstance")
        assert not past_single_group_exit(call, _first(changed, cst.FunctionDef), parent)


FAIL_CLOSED_CONJUNCT = """
def f(config, spec):
    replicated = (
        config.use_mla
        # Exact type: fail closed on wrappers and sliding-window variants.
        and type(spec) is MLAAttentionSpec
        and config.tp > 1
    )
"""


def _type_check(module):
    return next(n for n in preorder(module) if isinstance(n, cst.Comparison) and isinstance(n.left, cst.Call))


def test_a_fail_closed_comment_right_above_a_conjunct_check_makes_it_deliberate():
    module, parent = _parsed(FAIL_CLOSED_CONJUNCT)
    lines = FAIL_CLOSED_CONJUNCT.splitlines()
    line = next(i for i, text in enumerate(lines, 1) if "type(spec) is" in text)
    comments = comments_at(lines, line)
    words = fail_closed(_type_check(module), parent, _first(module, cst.FunctionDef), comments)
    assert words == "Exact type: fail closed on wrappers and sliding-window variants."
    for form in ("fail-closed", "fails closed"):
        source = FAIL_CLOSED_CONJUNCT.replace("fail closed", form)
        module, parent = _parsed(source)
        found = fail_closed(_type_check(module), parent, None, comments_at(source.splitlines(), line))
        assert found is not None and form in found
    plain = FAIL_CLOSED_CONJUNCT.replace("fail closed on", "covers")
    module, parent = _parsed(plain)
    assert fail_closed(_type_check(module), parent, None, comments_at(plain.splitlines(), line)) is None
