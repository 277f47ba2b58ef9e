"""Which layers a group-spec check is about, and which built containers it meets (kvlint.analysis.
layer_selection): one miniature snippet or census per behaviour, each named after what it proves. Written
against the mutants scripts/mutation.py made of that module (issue 31)."""

from __future__ import annotations

import libcst as cst

from kvlint.analysis.census.compositions import ContainerComposition
from kvlint.analysis.census.reading import Census, LayerClass, Model
from kvlint.analysis.flow.layer_selection import (
    LayerSelection,
    built_containers,
    rank_witnesses,
    reaching,
    selection_at,
)
from kvlint.analysis.hierarchy import SpecHierarchy
from tests.test_witness_semantics import _first, _isinstance_call, _parsed

HIERARCHY = SpecHierarchy(
    bases={
        "KVCacheSpec": (),
        "AttentionSpec": ("KVCacheSpec",),
        "FullAttentionSpec": ("AttentionSpec",),
        "MLAAttentionSpec": ("FullAttentionSpec",),
        "SlidingWindowSpec": ("AttentionSpec",),
        "MambaSpec": ("KVCacheSpec",),
    }
)


def layer(name, specs, fields=(), attributes=(), where="vllm/layers/x.py:1"):
    return LayerClass(name, where, frozenset(specs), tuple(fields), tuple(attributes), None)


def container(layers, specs, model="M", setting="default", alone=False):
    return ContainerComposition(frozenset(layers), frozenset(specs), setting, model, "vllm/g.py:f", 1, alone=alone)


def census(*layers, models=()):
    return Census(tuple(layers), tuple(models), frozenset(), "")


def selection_of(source: str) -> LayerSelection:
    module, parent = _parsed(source)
    check = _isinstance_call(module)
    return selection_at(check, "s", parent, _first(module, cst.FunctionDef))


# ------------------------------------------------------------------------------------------ the narrowing


def test_a_field_test_beside_the_check_in_an_and_narrows_it_to_those_values():
    found = selection_of("def f(s):\n    return isinstance(s, MambaSpec) and s.mamba_type in (E.MAMBA1, E.MAMBA2)\n")
    assert found.fields == (("mamba_type", frozenset({"MAMBA1", "MAMBA2"})),)
    assert found.describe() == "mamba_type in {MAMBA1, MAMBA2}"


def test_a_field_test_in_an_or_narrows_nothing():
    assert selection_of("def f(s):\n    return isinstance(s, MambaSpec) or s.mamba_type == E.MAMBA1\n").fields == ()


def test_a_field_test_further_up_a_chain_of_ands_narrows_too():
    found = selection_of("def f(s, x):\n    return x and isinstance(s, MambaSpec) and s.mamba_type is E.MAMBA2\n")
    assert found.fields == (("mamba_type", frozenset({"MAMBA2"})),)


def test_only_an_equality_or_membership_test_of_the_checked_value_with_named_constants_narrows():
    for test in (
        "s.mamba_type != E.MAMBA1",  # excludes, not selects
        "t.mamba_type == E.MAMBA1",  # another value
        "s.mamba_type in (E.MAMBA1, other())",  # a value the census cannot name
        "s.mamba_type in things",  # not a literal collection
        "E.MAMBA1 == s.mamba_type == E.MAMBA2",  # two comparisons
    ):
        assert selection_of(f"def f(s, t, things):\n    return isinstance(s, MambaSpec) and {test}\n").fields == (), (
            test
        )


def test_a_layer_flag_tested_beside_an_isinstance_of_that_layer_selects_the_functions_layers():
    found = selection_of(
        "def f(s, layers):\n"
        "    for layer in layers:\n"
        "        if isinstance(layer, MambaBase) and layer.use_replay:\n"
        "            pass\n"
        "        if isinstance(layer, MambaBase) or layer.other:\n"
        "            pass\n"
        "        if isinstance(layer, MambaBase) and other.flag:\n"
        "            pass\n"
        "    return isinstance(s, MambaSpec)\n"
    )
    assert found.flags == ("use_replay",)
    assert found.describe() == "`use_replay` set"
    walrus = selection_of(
        "def f(s, m):\n    if isinstance(layer := m.layer, MambaBase) and layer.use_replay:\n        return isinstance(s, A)\n"
    )
    assert walrus.flags == ("use_replay",)


# ------------------------------------------------------------------------------------ containers it meets


def test_a_check_meets_a_container_only_when_every_spec_it_holds_answers_true():
    mixed = container({"MLA", "SWA"}, {"MLAAttentionSpec", "SlidingWindowSpec"})
    alike = container({"MLA", "Full"}, {"MLAAttentionSpec", "FullAttentionSpec"})
    found = built_containers((mixed, alike), None, HIERARCHY, frozenset({"FullAttentionSpec"}), False, LayerSelection())
    assert found == (alike,)


def test_an_exact_type_check_meets_only_containers_of_exactly_its_classes():
    sub = container({"MLA"}, {"MLAAttentionSpec"})
    exact = container({"Full"}, {"FullAttentionSpec"})
    checked = frozenset({"FullAttentionSpec"})
    assert built_containers((sub, exact), None, HIERARCHY, checked, True, LayerSelection()) == (exact,)


def test_a_container_with_a_layer_the_platform_refuses_is_not_met():
    one = container({"MLA", "Indexer"}, {"MLAAttentionSpec"})
    checked = frozenset({"MLAAttentionSpec"})
    assert built_containers((one,), None, HIERARCHY, checked, False, LayerSelection(), frozenset({"Indexer"})) == ()
    assert built_containers((one,), None, HIERARCHY, checked, False, LayerSelection(), frozenset({"Other"})) == (one,)


def test_a_container_is_met_only_when_every_layer_is_one_the_narrowed_check_is_about():
    tree = census(
        layer("Mamba1", {"MambaSpec"}, fields=[("mamba_type", "MAMBA1")]),
        layer("Mamba2", {"MambaSpec"}, fields=[("mamba_type", "MAMBA2")]),
        layer("Either", {"MambaSpec"}, fields=[("mamba_type", "MAMBA1|MAMBA2")]),
        layer("Unknown", {"MambaSpec"}, fields=[("mamba_type", "?")]),
    )
    narrowed = LayerSelection(fields=(("mamba_type", frozenset({"MAMBA2"})),))
    checked = frozenset({"MambaSpec"})
    both = container({"Mamba1", "Mamba2"}, {"MambaSpec"})
    twos = container({"Mamba2", "Either", "Unknown"}, {"MambaSpec"})
    ones = container({"Mamba1", "Either"}, {"MambaSpec"})
    assert built_containers((both, twos, ones), tree, HIERARCHY, checked, False, narrowed) == (twos,)


def test_a_layer_whose_class_never_sets_the_selecting_flag_is_not_one_the_check_is_about():
    tree = census(
        layer("Off", {"MambaSpec"}, attributes=[("use_replay", "False|None")]),
        layer("On", {"MambaSpec"}, attributes=[("use_replay", "False|True")]),
        layer("Unread", {"MambaSpec"}),
    )
    flagged = LayerSelection(flags=("use_replay",))
    checked = frozenset({"MambaSpec"})
    off, on = container({"Off", "On"}, {"MambaSpec"}), container({"On", "Unread"}, {"MambaSpec"})
    assert built_containers((off, on), tree, HIERARCHY, checked, False, flagged) == (on,)


# ----------------------------------------------------------------------------------- the whole model


def test_a_container_is_the_whole_model_when_some_checkpoint_has_it_as_its_only_group():
    # compose decides it from the checkpoint's kinds (test_intent_compositions); selection reads the mark.
    module, parent = _parsed(SINGLE_GROUP)
    check, function = _isinstance_call(module), _first(module, cst.FunctionDef)
    alone, beside = container({"A"}, {"FullAttentionSpec"}, alone=True), container({"A", "B"}, {"FullAttentionSpec"})
    assert reaching((alone, beside), None, HIERARCHY, check, "s", function, parent) == (alone,)


SINGLE_GROUP = """
def f(kv_cache_config):
    s = kv_cache_config.kv_cache_groups[0].kv_cache_spec if len(kv_cache_config.kv_cache_groups) == 1 else None
    return isinstance(s, FullAttentionSpec)
"""
PAST_EXIT = """
def f(kv_cache_config, s):
    groups = kv_cache_config.kv_cache_groups
    if len(groups) == 1:
        return None
    return isinstance(s, FullAttentionSpec)
"""


def test_a_spec_bound_only_with_one_group_is_reached_only_by_a_whole_model_container():
    model = Model("M", "vllm/models/m.py", frozenset({"A", "B"}), (frozenset({"A", "B"}),))
    tree = census(layer("A", {"FullAttentionSpec"}), layer("B", {"MLAAttentionSpec"}), models=(model,))
    whole, part = container({"A", "B"}, {"FullAttentionSpec"}, alone=True), container({"A"}, {"FullAttentionSpec"})
    for source, reached in ((SINGLE_GROUP, whole), (PAST_EXIT, part)):
        module, parent = _parsed(source)
        check = _isinstance_call(module)
        function = _first(module, cst.FunctionDef)
        assert reaching((whole, part), tree, HIERARCHY, check, "s", function, parent) == (reached,)


def test_the_best_witness_is_default_then_possible_then_opt_in_then_most_shared_then_nearest():
    near = LayerClass("Near", "vllm/models/deepseek/layers.py:1", frozenset({"A"}), (), (), None)
    models = (
        Model("Far", "vllm/other/far.py", frozenset({"Near"})),
        Model("Close", "vllm/models/deepseek/model.py", frozenset({"Near"})),
    )
    tree = census(near, models=models)
    opt_in = container({"X"}, {"A"}, setting="opt-in: LAYOUT=HND")
    possible = container({"X"}, {"A"}, setting="possible: unproven")
    lonely = container({"Y"}, {"A"})
    far, close = container({"Near"}, {"A"}, model="Far"), container({"Near"}, {"A"}, model="Close")
    ranked = rank_witnesses((opt_in, possible, lonely, far, close), tree)
    assert ranked == (close, far, lonely, possible, opt_in)


def test_a_flag_whose_every_value_is_falsy_deselects_its_layer():
    tree = census(layer("Never", {"MambaSpec"}, attributes=[("use_replay", "0|False|None")]))
    flagged = LayerSelection(flags=("use_replay",))
    never = container({"Never"}, {"MambaSpec"})
    assert built_containers((never,), tree, HIERARCHY, frozenset({"MambaSpec"}), False, flagged) == ()


def test_witnesses_rank_without_a_census_and_a_model_or_layer_it_lacks_is_near_nothing():
    first, second = container({"X"}, {"A"}, model="Gone"), container({"Y"}, {"A"})
    assert rank_witnesses((second, first), None) == (second, first)
    homeless = census(layer("Y", {"A"}, where="elsewhere/y.py:1"), models=(Model("M", "vllm/m.py", frozenset()),))
    unplaced = container({"Z"}, {"A"})  # no layer of the census: no home to be near
    assert rank_witnesses((second, unplaced), homeless) == (second, unplaced)
    assert rank_witnesses((second, first), homeless) == (second, first)  # "Gone": no model in the census


def test_among_names_of_one_class_the_witness_is_the_name_its_layers_were_named_for():
    """The registry maps several architecture names to one class (DeepSeek V1, V2, V3 and V3.2 share a
    constructor); the one named for the layers (DeepseekV32… for DeepseekV32IndexerCache) is the witness."""
    home = "vllm/models/deepseek_v2.py"
    indexer = LayerClass("DeepseekV32IndexerCache", f"{home}:1", frozenset({"A"}), (), (), None)
    names = ("DeepseekForCausalLM", "DeepseekV2ForCausalLM", "DeepseekV32ForCausalLM")
    tree = census(indexer, models=tuple(Model(name, home, frozenset({indexer.name})) for name in names))
    built = tuple(container({indexer.name}, {"A"}, model=name) for name in names)
    assert rank_witnesses(built, tree)[0].model == "DeepseekV32ForCausalLM"


def test_a_container_the_whole_expression_answers_as_its_layers_does_not_reach_even_ungated():
    # `or`, not an `and` gate: no layer refuses it; the container answers True (not full attention) as its MLA
    # layers do (MLA): no wrong answer, whatever the check alone says.
    module, parent = _parsed(
        "def f(spec):\n    return isinstance(spec, MLAAttentionSpec) or not isinstance(spec, FullAttentionSpec)\n"
    )
    check, function = _isinstance_call(module), _first(module, cst.FunctionDef)
    mla = container({"Mla"}, {"MLAAttentionSpec"})
    assert reaching((mla,), None, HIERARCHY, check, "spec", function, parent) == ()
    # Full-attention layers answer False where the container answers True: it reaches.
    full = container({"Attn"}, {"FullAttentionSpec"})
    assert reaching((full,), None, HIERARCHY, check, "spec", function, parent) == (full,)


def test_a_container_is_a_dcp_witness_when_some_checkpoint_building_it_is_accepted_under_dcp():
    from dataclasses import replace

    from kvlint.analysis.flow.layer_selection import accepted_under_dcp

    refused = frozenset({"SlidingWindowSpec"})
    beside = ("Mla:MLAAttentionSpec", "Swa:SlidingWindowSpec")
    alone = ("Mla:MLAAttentionSpec",)
    mla = container({"Mla"}, {"MLAAttentionSpec"})
    assert accepted_under_dcp((replace(mla, checkpoints=(beside,)),), refused) == ()
    either = replace(mla, checkpoints=(beside, alone))
    assert accepted_under_dcp((either,), refused) == (either,)
    assert accepted_under_dcp((mla,), refused) == (mla,)  # no checkpoint recorded: nothing to refuse it by
