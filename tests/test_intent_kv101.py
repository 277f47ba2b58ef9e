"""What KV101 reports (rules/kv101_container_isinstance.py) beyond its examples: which comparisons are class
tests, that a `type(…)` test is exact, where a container never arrives (scheduler-side code), a check no
composition answers wrongly, and a deliberate fail-closed check. One snippet per behaviour, named after it,
linted in the examples' tree; written against the mutants scripts/mutation.py made of that module (issue 31)."""

from __future__ import annotations

import dataclasses
import textwrap

import pytest

from kvlint.analysis.vocabulary import RESOLVER_NAME
from kvlint.engine.lint import LintRequest, lint_text
from tests.test_fix_safety import PATH, PROJECT, RULE


def findings(source: str, path: str = PATH, project=PROJECT):
    source = textwrap.dedent(source).lstrip("\n")
    return [f for f in lint_text(LintRequest(path, path, project, (RULE,)), source).findings if f.code == "KV101"]


def filtering(check: str) -> str:
    return f"def worker(kv_cache_config):\n    return [g for g in kv_cache_config.kv_cache_groups if {check}]\n"


def test_a_type_test_is_exact_its_witness_a_container_of_exactly_that_class():
    # `isinstance(…, FullAttentionSpec)` is True for MLA layers too (a subclass); `type(…) is` only for full ones.
    (typed,) = findings(filtering("type(g.kv_cache_spec) is FullAttentionSpec"))
    assert "UniformTypeKVCacheSpecs of Attention, SinkAttention layers" in typed.message
    (instance,) = findings(filtering("isinstance(g.kv_cache_spec, FullAttentionSpec)"))
    assert "UniformTypeKVCacheSpecs of IndexerCache, MLAAttention layers" in instance.message


def test_only_a_single_comparison_of_a_one_argument_type_call_is_a_class_test():
    # One plain check in the file, so that the rule runs on it at all (its pre-filter reads the same shapes).
    source = "\n".join(
        filtering(check).replace("worker", name)
        for name, check in [
            ("plain", "type(g.kv_cache_spec) == MambaSpec"),
            ("chained", "type(g.kv_cache_spec) == MambaSpec == other"),  # more than the class is compared
            ("two_arguments", "type(g.kv_cache_spec, extra) == MambaSpec"),  # not the one-argument `type`
        ]
    )
    assert [f.line for f in findings(source)] == [2]


@pytest.mark.parametrize(
    ("check", "reported"),
    [
        # a test that admits containers answers them as it answers their layers
        ("isinstance(g.kv_cache_spec, (UniformTypeKVCacheSpecs, MambaSpec))", False),
        # one of the classes a container can hold is enough
        ("isinstance(g.kv_cache_spec, (MambaSpec, EncoderOnlyAttentionSpec))", True),
        # the same statement tests for the container first
        (
            "not isinstance(g.kv_cache_spec, UniformTypeKVCacheSpecs) and isinstance(g.kv_cache_spec, MambaSpec)",
            False,
        ),
    ],
)
def test_a_check_is_reported_only_where_a_container_would_answer_it_wrongly(check, reported):
    assert bool(findings(filtering(check))) is reported


def test_a_deliberate_fail_closed_check_is_a_warning_not_an_error():
    source = """
        def certifiable(kv_cache_config):
            {doc}
            for g in kv_cache_config.kv_cache_groups:
                if not isinstance(g.kv_cache_spec, MambaSpec):
                    return False
            return True
    """
    (plain,) = findings(source.format(doc='"""Whether every group is certifiable."""'))
    assert plain.severity.value == "error"
    (meant,) = findings(source.format(doc='"""Conservative: refuses what it cannot vouch for, on purpose."""'))
    assert meant.severity.value == "warning"


def test_without_compositions_two_checks_proven_wrong_by_one_layer_class_are_one_finding():
    # The tree's models were not read: a check is judged by the layer class a container may hold; two checks of
    # one spec in one function that the same class proves wrong are one cause.
    not_read = dataclasses.replace(PROJECT, compositions=None, census=None)
    source = (
        "def worker(kv_cache_config):\n"
        "    for g in kv_cache_config.kv_cache_groups:\n"
        "        a = isinstance(g.kv_cache_spec, FullAttentionSpec)\n"
        "        b = isinstance(g.kv_cache_spec, (FullAttentionSpec, EncoderOnlyAttentionSpec))\n"
    )
    assert [f.line for f in findings(source, project=not_read)] == [3]


class _TargetsLackingTheResolver:
    """Targeted releases (TreeIndex.target) of which one lacks the resolver and nothing else."""

    def lacked_by(self, module: str, name: str) -> tuple[str, ...]:
        return ("0.20.0",) if name == RESOLVER_NAME else ()


def test_a_check_gated_on_no_scaling_keeps_its_fix_where_only_the_resolver_is_lacking():
    targets = dataclasses.replace(PROJECT, target=_TargetsLackingTheResolver())
    (finding,) = findings(filtering("isinstance(g.kv_cache_spec, MambaSpec)"), project=targets)
    assert finding.fix_unavailable is None and finding.fix is not None


def test_a_check_in_parentheses_is_quoted_without_them():
    (finding,) = findings(filtering("(isinstance(g.kv_cache_spec, MambaSpec))"))
    assert finding.message.startswith("`isinstance(g.kv_cache_spec, MambaSpec)` is False")


def test_a_check_no_container_reaches_past_an_earlier_one_is_folded_into_it():
    # The `continue` sends every container away before the second check: its wrong answer is the first's.
    source = """
    def worker(kv_cache_config):
        for g in kv_cache_config.kv_cache_groups:
            if not isinstance(g.kv_cache_spec, MambaSpec):
                continue
            if isinstance(g.kv_cache_spec, FullAttentionSpec):
                return 1
    """
    (finding,) = findings(source)
    assert finding.line == 3
    assert [(r.line, r.code) for r in finding.related] == [(5, "KV101")]
    assert "is reached by no container" in finding.related[0].message


def _dsa_beside_sliding_mla(refused: bool):
    """The examples' tree with its DSA checkpoint also building a sliding-window MLA layer, whose spec vLLM
    refuses under DCP (`refused`: as 0.27.1's `SlidingWindowSpec.max_memory_usage_bytes` asserts) or not."""
    table = PROJECT.kind_table()
    why = "SlidingWindowSpec.max_memory_usage_bytes asserts DCP == 1" if refused else None
    rows = tuple(
        dataclasses.replace(r, rejected_under_dcp=why) if r.label == "SlidingWindowMLASpec" else r for r in table.rows
    )
    checkpoint = ("IndexerCache:MLAAttentionSpec", "MLAAttention:MLAAttentionSpec", "SWACache:SlidingWindowMLASpec")
    compositions = tuple(
        dataclasses.replace(c, checkpoints=(checkpoint,)) if "IndexerCache" in c.layer_classes else c
        for c in PROJECT.container_compositions()
    )
    return dataclasses.replace(PROJECT, kinds=dataclasses.replace(table, rows=rows), compositions=compositions)


@pytest.mark.parametrize(
    "check",
    [
        # the gate of a hand-written scaling, and the choice between a size and that size times the DCP size
        "spec.block_size * (dcp if isinstance(spec, MLAAttentionSpec) else 1)",
        "spec.block_size * dcp if isinstance(spec, MLAAttentionSpec) else spec.block_size",
        "spec.block_size if not isinstance(spec, MLAAttentionSpec) else dcp * spec.block_size",
    ],
)
def test_a_check_that_only_decides_the_dcp_factor_has_no_witness_vllm_refuses_under_dcp(check):
    check = check.replace("spec", "g.kv_cache_spec")
    source = f"def spans(kv_cache_config, dcp):\n    return [{check} for g in kv_cache_config.kv_cache_groups]\n"
    assert findings(source, project=_dsa_beside_sliding_mla(refused=False))
    # Its only witness also builds a layer vLLM refuses under DCP: at DCP = 1 both ways agree, so no defect.
    assert not findings(source, project=_dsa_beside_sliding_mla(refused=True))


def test_a_check_that_decides_more_than_the_dcp_factor_keeps_a_witness_refused_under_dcp():
    source = filtering("isinstance(g.kv_cache_spec, MLAAttentionSpec)")
    assert findings(source, project=_dsa_beside_sliding_mla(refused=True))
