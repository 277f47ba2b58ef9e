"""Issue 26, the value a check's answer feeds: a fallback that gives a one-group container what its layers
would get, an `and` gate whose False is already right for a container, the remedy of a check that guards a
use of the spec, and the hybrid model a Mamba counterexample needs. Miniature sources and censuses."""

from __future__ import annotations

from types import SimpleNamespace

import libcst as cst

from kvlint import Severity
from kvlint.analysis.agreement import DIFFERS
from kvlint.analysis.census.reading import Census, LayerClass, Model
from kvlint.analysis.hierarchy import SpecHierarchy
from kvlint.analysis.hybrid_witness import hybrid_witness
from kvlint.analysis.value_uses import first_group_fallback
from kvlint.analysis.whole_answer import refused_with_a_layer
from kvlint.rules._container_remedy import remedy
from kvlint.rules._scaling_verdict import severity_of
from tests.test_consumed_answer import AGNOSTIC, HIERARCHY, _full_attention_check
from tests.test_witness_semantics import _first, _isinstance_call, _parsed

# vLLM 0.27.1 gpu_model_runner.py:_get_attention_kv_cache_gid, abridged.
ATTENTION_GID = """
class Runner:
    def _get_attention_kv_cache_gid(self) -> int:
        for gid, group in enumerate(self.kv_cache_config.kv_cache_groups):
            if isinstance(group.kv_cache_spec, FullAttentionSpec):
                return gid
        return 0
"""


def _fallback(source: str) -> bool:
    module, parent = _parsed(source)
    function = _first(module, cst.FunctionDef, lambda n: n.name.value == "_get_attention_kv_cache_gid")
    return first_group_fallback(_isinstance_call(module), function, parent)


def test_a_loop_that_falls_back_to_the_first_group_answers_a_lone_container_alike():
    assert _fallback(ATTENTION_GID)


def test_a_fallback_to_another_index_or_a_refusal_is_no_same_answer():
    assert not _fallback(ATTENTION_GID.replace("return 0", "return -1"))
    assert not _fallback(ATTENTION_GID.replace("        return 0", '        raise ValueError("no attention")'))
    assert not _fallback(ATTENTION_GID.replace("return gid", "return gid + 1"))
    assert not _fallback(ATTENTION_GID.replace("enumerate(self.kv_cache_config.kv_cache_groups)", "pairs"))


def test_an_and_gate_that_refuses_one_of_the_layers_is_right_to_refuse_the_container():
    module, parent = _parsed(AGNOSTIC)
    check = _full_attention_check(module)
    # {FullAttention, MLA} (MiniMaxM3's sparse attention and indexer): the gate refuses the MLA layer.
    assert refused_with_a_layer(check, "spec", parent, HIERARCHY, frozenset({"FullAttentionSpec", "MLAAttentionSpec"}))
    # Plain full-attention layers may pass it: the container's False is the defect.
    assert not refused_with_a_layer(check, "spec", parent, HIERARCHY, frozenset({"FullAttentionSpec"}))
    either, parent = _parsed(AGNOSTIC.replace("and not isinstance(spec, MLA", "or not isinstance(spec, MLA"))
    mixed = frozenset({"FullAttentionSpec", "MLAAttentionSpec"})
    assert not refused_with_a_layer(_full_attention_check(either), "spec", parent, HIERARCHY, mixed)


def test_a_check_that_guards_a_use_of_the_spec_is_not_told_to_let_containers_through():
    helpers = {"is_full_attention_spec", "iter_layer_specs"}
    checked = frozenset({"FullAttentionSpec"})
    assert "is_full_attention_spec" in remedy(helpers, "spec", checked)
    guarded = remedy(helpers, "spec", checked, "spec")
    assert "is_full_attention_spec" not in guarded and "iter_layer_specs(spec)" in guarded


def _census(*models: tuple[str, frozenset[str]]) -> Census:
    layers = (
        LayerClass("Attention", "m/attention.py:1", frozenset({"FullAttentionSpec"}), (), (), None),
        LayerClass("MambaMixer2", "m/mamba.py:1", frozenset({"MambaSpec"}), (), (), None),
    )
    built = tuple(Model(name, f"m/{name.lower()}.py", layers, (layers,)) for name, layers in models)
    return Census(layers, built, frozenset(), "")


MAMBA_HIERARCHY = SpecHierarchy(
    bases={"KVCacheSpec": (), "AttentionSpec": ("KVCacheSpec",), "FullAttentionSpec": ("AttentionSpec",)}
    | {"MambaSpec": ("KVCacheSpec",)}
)
MAMBA_VERDICT = SimpleNamespace(counterexample=SimpleNamespace(label="MambaSpec", is_container=False))


def test_a_mamba_counterexample_names_a_hybrid_model_or_is_a_warning():
    hybrid = _census(("PureMamba", frozenset({"MambaMixer2"})), ("Hybrid", frozenset({"MambaMixer2", "Attention"})))
    assert hybrid_witness(hybrid, MAMBA_HIERARCHY, MAMBA_VERDICT) == "Hybrid (Attention, MambaMixer2)"
    lone = _census(("PureMamba", frozenset({"MambaMixer2"})), ("Llama", frozenset({"Attention"})))
    assert hybrid_witness(lone, MAMBA_HIERARCHY, MAMBA_VERDICT) == ""
    assert severity_of(SimpleNamespace(outcome=DIFFERS), "") is Severity.WARNING
    assert severity_of(SimpleNamespace(outcome=DIFFERS), "Hybrid (Attention, MambaMixer2)") is Severity.ERROR
    attention = SimpleNamespace(counterexample=SimpleNamespace(label="FullAttentionSpec", is_container=False))
    assert hybrid_witness(lone, MAMBA_HIERARCHY, attention) is None
