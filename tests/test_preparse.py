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


# Each way provenance lets a group's spec reach a type test (a loop, `=`, `:=`, `next`, `enumerate`, a
# comprehension, a caller's argument, an annotation): Python's parse must send the file to libcst.
GROUP_ROUTES = {
    "attribute": "for g in kv_cache_config.kv_cache_groups:\n        ok = isinstance(g.kv_cache_spec, MLAAttentionSpec)",
    "assignment": "groups = kv_cache_config.kv_cache_groups\n    spec = groups[0].kv_cache_spec\n"
    "    ok = isinstance(spec, MLAAttentionSpec)",
    "walrus": "if (spec := kv_cache_config.kv_cache_groups[0].kv_cache_spec) is not None:\n"
    "        ok = isinstance(spec, MLAAttentionSpec)",
    "next": "group = next(iter(kv_cache_config.kv_cache_groups))\n    ok = isinstance(group.kv_cache_spec, MLAAttentionSpec)",
    "enumerate": "for i, g in enumerate(kv_cache_config.kv_cache_groups):\n"
    "        ok = type(g.kv_cache_spec) is MLAAttentionSpec",
    "comprehension": "groups = kv_cache_config.kv_cache_groups\n"
    "    ok = [isinstance(s, MLAAttentionSpec) for s in [g.kv_cache_spec for g in groups]]",
    "caller": "ok = [certifiable(spec=g.kv_cache_spec) for g in kv_cache_config.kv_cache_groups]\n"
    "def certifiable(spec):\n    return isinstance(spec, MLAAttentionSpec)",
    "positional caller": "ok = [certifiable(1, g.kv_cache_spec) for g in kv_cache_config.kv_cache_groups]\n"
    "def certifiable(size, spec):\n    return isinstance(spec, MLAAttentionSpec)",
    "group caller": "ok = [certifiable(g) for g in kv_cache_config.kv_cache_groups]\n"
    "def certifiable(group):\n    return isinstance(group.kv_cache_spec, MLAAttentionSpec)",
    "annotation": "ok = None\ndef annotated(group: 'KVCacheGroupSpec'):\n"
    "    return isinstance(group.kv_cache_spec, MLAAttentionSpec)",
    "conditional": "g = kv_cache_config.kv_cache_groups[0]\n    spec = g.kv_cache_spec if g else None\n"
    "    ok = isinstance(spec, MLAAttentionSpec)",
}


@pytest.mark.parametrize("route", list(GROUP_ROUTES))
def test_every_route_of_a_group_spec_to_a_type_test_needs_libcst(route):
    text = f"def check(kv_cache_config):\n    {GROUP_ROUTES[route]}\n    return ok\n"
    kv101 = rule_class("KV101")
    assert kv101.could_report(PreParse(text, PATH, _request().project, {}))
    assert [f.code for f in lint_text(_request((kv101,)), text).findings] == ["KV101"]


def test_a_type_test_no_group_reaches_is_left_unparsed(no_libcst_parse):
    # A layer's spec, a parameter nothing in the module passes a group to, a name bound from elsewhere.
    text = """
def layer_kind(layer, kv_cache_config):
    spec = layer.get_kv_cache_spec()
    groups = kv_cache_config.kv_cache_groups
    return isinstance(spec, MLAAttentionSpec), type(layer.spec) is FullAttentionSpec, len(groups)

def certifiable(spec):
    return isinstance(spec, MLAAttentionSpec)

certifiable(make_spec())
"""
    result = lint_text(_request(), textwrap.dedent(text))
    assert result.skipped_by_prefilter and not result.findings


def test_a_product_of_no_block_size_is_left_unparsed(no_libcst_parse):
    # `heads * dcp_world_size` scales a head count; a block size appears elsewhere, unscaled
    text = """
def shard(spec, num_heads, dcp_world_size):
    heads = num_heads * dcp_world_size
    rows = spec.block_size + 1
    return heads, rows
"""
    result = lint_text(_request(), textwrap.dedent(text))
    assert result.skipped_by_prefilter and not result.findings


@pytest.mark.parametrize(
    "body",
    [
        "bs = spec.block_size\n    return bs * dcp_world_size",
        "cp_scale = pcp * dcp_world_size\n    return spec.block_size * cp_scale",
        "cp_scale = (1 if pcp > 1 else pcp * dcp_world_size)\n    return spec.block_size * cp_scale",
        "return spec.block_size * (1 if flag else dcp_world_size)",
        "self.kv_block_size = spec.block_size\n    self.kv_block_size *= dcp_world_size",
        # owners whose names say nothing: a layer's spec by its loop, one narrowed by a container test
        "for layer in iter_layer_specs(spec):\n        total = layer.block_size * dcp_world_size\n    return total",
        "if isinstance(flag, UniformTypeKVCacheSpecs):\n        return 0\n    return flag.block_size * dcp_world_size",
        # a layer of a container, by its subscript's text; by a call provenance reads as a layer's
        "return spec.kv_cache_specs[pcp].block_size * dcp_world_size",
        "return next(iter(spec.kv_cache_specs.values())).block_size * dcp_world_size",
    ],
)
def test_every_block_size_and_factor_a_scaling_accepts_needs_libcst(body):
    text = f"def span(self, spec, pcp, flag, dcp_world_size):\n    {body}\n"
    kv102 = rule_class("KV102")
    assert kv102.could_report(PreParse(text, PATH, _request().project, {}))
    assert [f.code for f in lint_text(_request((kv102,)), text).findings] == ["KV102"]


SCHEDULER_SIDE = """
class {name}:
    def pick(self, kv_cache_config):
        return [g for g in kv_cache_config.kv_cache_groups if isinstance(g.kv_cache_spec, MLAAttentionSpec)]
"""


def test_checks_that_see_only_the_schedulers_config_are_left_unparsed(no_libcst_parse):
    # KV101 returns for both: a scheduler-only module, a class of a connector's scheduler half.
    text = textwrap.dedent(SCHEDULER_SIDE.format(name="Picker"))
    kv101 = rule_class("KV101")
    pre = PreParse(text, "vllm/v1/core/sched/scheduler.py", _request().project, {})
    assert not kv101.could_report(pre)
    scheduler_half = textwrap.dedent(SCHEDULER_SIDE.format(name="FooConnectorScheduler"))
    assert not kv101.could_report(PreParse(scheduler_half, PATH, _request().project, {}))
    # configured paths replace the defaults
    settings = {"scheduler-only-paths": ("plugin/*",)}
    assert kv101.could_report(PreParse(text, "vllm/v1/core/sched/scheduler.py", _request().project, settings))


def test_a_check_outside_the_scheduler_half_is_parsed_and_reported():
    text = textwrap.dedent(SCHEDULER_SIDE.format(name="FooConnectorScheduler") + SCHEDULER_SIDE.format(name="Worker"))
    assert [f.line for f in lint_text(_request((rule_class("KV101"),)), text).findings] == [8]


def test_a_parameter_holds_only_what_its_callers_pass_it_not_their_other_arguments(no_libcst_parse):
    # The group's spec goes to `size`'s neighbour: `spec` is given a layer's (as provenance's argument_for reads
    # a call: by keyword, else by position).
    text = """
def certifiable(spec, group_spec=None):
    return isinstance(spec, MLAAttentionSpec)

def check(layer, kv_cache_config):
    return [certifiable(layer.spec, g.kv_cache_spec) for g in kv_cache_config.kv_cache_groups]
"""
    result = lint_text(_request(), textwrap.dedent(text))
    assert result.skipped_by_prefilter and not result.findings


def test_a_name_holds_a_group_only_in_the_scopes_that_bind_it_so(no_libcst_parse):
    # `spec` is a group's spec in `first_spec` only: `layer_kind`'s own `spec` is a layer's
    text = """
def first_spec(kv_cache_config):
    spec = kv_cache_config.kv_cache_groups[0].kv_cache_spec
    return spec

def layer_kind(layer):
    spec = layer.get_kv_cache_spec()
    return isinstance(spec, MLAAttentionSpec)
"""
    result = lint_text(_request(), textwrap.dedent(text))
    assert result.skipped_by_prefilter and not result.findings


def test_a_type_test_no_container_of_the_census_answers_apart_is_left_unparsed(no_libcst_parse):
    # The census's containers hold MLA, full-attention, Mamba and cross-attention layers (tests/test_rules.py):
    # none holds only sliding-window layers, so a group spec that is a container answers False, as would one
    # of its layers' specs: no counterexample, whatever the code around the test says.
    text = "def windows(kv_cache_config):\n    return [isinstance(g.kv_cache_spec, SlidingWindowSpec) for g in kv_cache_config.kv_cache_groups]\n"
    kv101 = rule_class("KV101")
    assert _request().project.containers.may_hold_instance_of("SlidingWindowSpec")  # the class-level answer: maybe
    assert not kv101.could_report(PreParse(text, PATH, _request().project, {}))
    result = lint_text(_request((kv101,)), text)
    assert result.skipped_by_prefilter and not result.findings


def test_a_type_test_a_container_of_the_census_answers_apart_goes_to_libcst():
    # The census builds a container of MLA layers only: it answers `isinstance(…, MLAAttentionSpec)` False.
    text = "def windows(kv_cache_config):\n    return [isinstance(g.kv_cache_spec, SlidingWindowSpec) for g in kv_cache_config.kv_cache_groups]\n"
    kv101 = rule_class("KV101")
    mla = text.replace("SlidingWindowSpec", "MLAAttentionSpec")
    assert kv101.could_report(PreParse(mla, PATH, _request().project, {}))
    assert [f.code for f in lint_text(_request((kv101,)), mla).findings] == ["KV101"]


def test_a_conditional_that_unwraps_a_container_is_left_unparsed(no_libcst_parse):
    # Either way but a `None` must be a group's spec for the conditional to be one (as provenance reads it):
    # `spec.first_spec if isinstance(spec, UniformTypeKVCacheSpecs) else spec` is a layer's spec.
    text = """
def windows(kv_cache_config):
    for group in kv_cache_config.kv_cache_groups:
        spec = group.kv_cache_spec
        layer_spec = spec.first_spec if isinstance(spec, UniformTypeKVCacheSpecs) else spec
        yield isinstance(layer_spec, MLAAttentionSpec)
"""
    result = lint_text(_request(), textwrap.dedent(text))
    assert result.skipped_by_prefilter and not result.findings


def test_a_list_of_groups_handed_to_a_helper_is_left_unparsed(no_libcst_parse, monkeypatch):
    # Provenance passes a group or a group's spec through a parameter, never their list, and reads only an
    # annotation that names the group class itself (`list[KVCacheGroupSpec]` does not): the helper's `spec` is
    # unknown to it, so KV101 says nothing, and Python's parse must say so first (vLLM 0.34.0's
    # `_ensure_min_page_size`).
    text = """
def scaled(groups: list[KVCacheGroupSpec]):
    for g in groups:
        spec = g.kv_cache_spec
        yield isinstance(spec, MLAAttentionSpec)

def plan(kv_cache_config):
    return list(scaled(kv_cache_config.kv_cache_groups))
"""
    text = textwrap.dedent(text)
    kv101 = rule_class("KV101")
    assert not kv101.could_report(PreParse(text, PATH, _request().project, {}))
    result = lint_text(_request(), text)
    assert result.skipped_by_prefilter and not result.findings
    monkeypatch.undo()  # libcst parses again: with the sieve bypassed, KV101 itself finds nothing either
    monkeypatch.setattr(kv101, "could_report", classmethod(lambda cls, pre: True))
    assert lint_text(_request((kv101,)), text).findings == ()


@pytest.mark.parametrize(
    "body",
    [
        # the engine's block size: an attribute, a name assigned one, a name assigned an attribute
        "return self.cache_config.block_size * dcp_world_size",
        "block_size = vllm_config.cache_config.block_size\n    return block_size * dcp_world_size",
        "cache_config = vllm_config.cache_config\n    return cache_config.block_size * dcp_world_size",
        # a spec's own method: `self` is no spec provenance knows (vLLM's `max_num_blocks_per_req`)
        "return self.block_size * dcp_world_size",
    ],
)
def test_a_block_size_no_spec_owns_is_left_unparsed(body, no_libcst_parse, monkeypatch):
    text = f"def span(self, vllm_config, dcp_world_size):\n    {body}\n"
    kv102 = rule_class("KV102")
    assert not kv102.could_report(PreParse(text, PATH, _request().project, {}))
    monkeypatch.undo()  # and libcst's reading, the sieve bypassed, finds nothing either
    monkeypatch.setattr(kv102, "could_report", classmethod(lambda cls, pre: True))
    assert lint_text(_request((kv102,)), text).findings == ()


def test_the_resolvers_own_product_is_left_unparsed(no_libcst_parse, monkeypatch):
    # KV102 takes the resolver's body for the yardstick itself; a function nested in it is judged as any other
    text = (
        "def resolve_dcp_kv_block_size(spec, dcp_world_size):\n"
        "    return spec.block_size * (dcp_world_size if spec.dcp_sharded else 1)\n"
    )
    kv102 = rule_class("KV102")
    assert not kv102.could_report(PreParse(text, PATH, _request().project, {}))
    nested = text + "\n    def inner(spec, dcp_world_size):\n        return spec.block_size * dcp_world_size\n"
    nested = nested.replace("    return spec.block_size * (", "    x = spec.block_size * (")
    assert kv102.could_report(PreParse(nested, PATH, _request().project, {}))
    monkeypatch.undo()
    monkeypatch.setattr(kv102, "could_report", classmethod(lambda cls, pre: True))
    assert lint_text(_request((kv102,)), text).findings == ()


def test_a_chain_of_assignments_is_followed_in_linear_time():
    # `a1 = a0`, `a2 = a1`, …: a pass over every binding until none changed took the chain's square (1,000 links
    # 1.3 s, 20,000 minutes); a binding is read again only when a name it reads gains a kind.
    import ast
    import time

    from kvlint.analysis.flow.ast_group_flow import SPEC, GroupFlow

    links = "\n".join(f"    a{i} = a{i - 1}" for i in range(1, 20_001))
    text = f"def f(kv_cache_config):\n    a0 = kv_cache_config.kv_cache_groups[0].kv_cache_spec\n{links}\n    b = 1\n"
    tree = ast.parse(text)
    started = time.monotonic()
    flow = GroupFlow(tree)
    assert time.monotonic() - started < 3
    scope = id(tree.body[0])
    assert flow.kinds[scope, "a20000"] == SPEC and (scope, "b") not in flow.kinds
