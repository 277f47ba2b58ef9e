"""Python's own parse decides which files libcst parses (kvlint.engine.preparse, kvlint.analysis.ast_candidates).

A file whose text triggers a rule but holds no node the rule could report on is settled without libcst; a
file where the decision could be wrong (identifiers outside ASCII, code Python rejects) is parsed as before.
"""

from __future__ import annotations

import textwrap

import pytest

import kvlint.engine.lint as engine_lint
from kvlint.engine.lint import LintRequest, lint_text
from kvlint.engine.preparse import PreParse
from kvlint.engine.registry import all_rules, rule_class
from tests.test_rules import cases, project_for

PATH = "vllm/distributed/kv_transfer/kv_connector/v1/example/config.py"

# Every rule's text trigger holds (kv_cache_groups, isinstance(, Spec, block_size, dcp), but no type test of
# a layer class and no block size times a DCP size: no finding is possible.
NOTHING_TO_REPORT = """
def describe(kv_cache_config, dcp_world_size):
    groups = kv_cache_config.kv_cache_groups
    if isinstance(groups, list):
        return [g.kv_cache_spec.block_size + dcp_world_size for g in groups], "Spec"
"""


@pytest.fixture
def no_libcst_parse(monkeypatch):
    def refuse(text, *args, **kwargs):
        raise AssertionError("libcst parsed a file no rule can report in")

    monkeypatch.setattr(engine_lint.cst, "parse_module", refuse)


def _request(rules=None):
    example = rule_class("KV101").INVALID[0]
    rules = tuple(r for r in all_rules() if r.CODE in ("KV101", "KV102")) if rules is None else rules
    return LintRequest(PATH, PATH, project_for(example), rules)


def test_a_file_no_rule_can_report_in_is_not_parsed_by_libcst(no_libcst_parse):
    result = lint_text(_request(), textwrap.dedent(NOTHING_TO_REPORT))
    assert result.skipped_by_prefilter and not result.findings


def test_a_file_with_a_candidate_is_parsed_and_reported():
    text = textwrap.dedent(NOTHING_TO_REPORT).replace(".block_size + dcp_world_size", ".block_size * dcp_world_size")
    result = lint_text(_request(), text)
    assert [f.code for f in result.findings] == ["KV102"]


def test_identifiers_outside_ascii_are_decided_by_libcst():
    # Python reads `dcpｓ` as `dcps`, libcst as written: the module's alias is the one libcst matches.
    text = "def span(spec, dcp_world_size):\n    dcpｓ = dcp_world_size\n    return spec.block_size * dcpｓ\n"
    pre = PreParse(text, PATH, _request().project, {})
    assert pre.tree is None
    assert [f.code for f in lint_text(_request(), text).findings] == ["KV102"]


def test_code_python_rejects_is_left_to_libcst_to_diagnose():
    pre = PreParse("def broken(:\n    pass\n", PATH, _request().project, {})
    assert pre.tree is None


@pytest.mark.parametrize(("rule", "example"), list(cases("INVALID")))
def test_every_invalid_example_could_be_reported(rule, example):
    pre = PreParse(example.source, example.path, project_for(example), {})
    assert rule.could_report(pre)


@pytest.mark.parametrize(
    "product",
    [
        "spec.block_size * dcp_world_size",
        "dcp_world_size * spec.block_size",
        "(spec.block_size  # the span\n        ) * dcp_size",
        "spec.block_size \\\n        * dcp",
        "(dcp if spec.dcp_sharded else 1) * spec.block_size",
        "spec.block_size*(dcp if isinstance(spec, AttentionSpec) else 1)",
        "spec.block_size * cp",  # `cp = dcp_world_size` makes `cp` an alias
    ],
)
def test_every_spelling_of_a_scaling_needs_libcst(product):
    text = f"def span(spec, dcp_world_size, dcp_size, dcp):\n    cp = dcp_world_size\n    return ({product})\n"
    kv102 = rule_class("KV102")
    assert kv102.could_report(PreParse(text, PATH, _request().project, {}))
    assert [f.code for f in lint_text(_request((kv102,)), text).findings] == ["KV102"]
