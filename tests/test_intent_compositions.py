"""Which grouping paths the tree has and which containers each builds of a model's layers (kvlint.analysis.
census.paths, .compositions): the paths read from miniature grouping modules, the compositions from a census
and paths written out by hand. One behaviour per test, named after it; written against the mutants
scripts/mutation.py made of those modules (issue 31)."""

from __future__ import annotations

import textwrap
from dataclasses import replace

from kvlint.analysis.census.compositions import DEFAULT, POSSIBLE, compose
from kvlint.analysis.census.guards import Guards
from kvlint.analysis.census.paths import GroupingPath, read_grouping_paths
from kvlint.analysis.census.reading import Census, LayerClass, Model
from kvlint.analysis.hierarchy import SpecHierarchy

CONTAINER = "UniformTypeKVCacheSpecs"
PLANNING = "vllm/v1/core/kv_cache_utils.py"


def paths_of(source: str, module: str = PLANNING) -> dict[str, GroupingPath]:
    texts = {module: textwrap.dedent(source).encode()}
    return {path.function: path for path in read_grouping_paths(texts, CONTAINER)}


# ------------------------------------------------------------------------------------------- the paths


def test_a_from_specs_re_splitting_a_built_containers_layers_is_no_path_of_its_own():
    found = paths_of(
        """
        def split(group):
            specs = {name: group.kv_cache_spec.kv_cache_specs[name] for name in group.layer_names}
            return UniformTypeKVCacheSpecs.from_specs(specs)

        def whole(kv_cache_spec):
            return UniformTypeKVCacheSpecs.from_specs(kv_cache_spec)
        """
    )
    assert set(found) == {"whole"}
    assert found["whole"].only == frozenset() and found["whole"].requires == frozenset()
    assert not found["whole"].buckets and not found["whole"].layout_gated


def test_only_the_grouping_code_and_a_call_inside_a_function_make_a_path():
    source = (
        "X = UniformTypeKVCacheSpecs.from_specs(specs)\n\ndef f(s):\n    return UniformTypeKVCacheSpecs.from_specs(s)\n"
    )
    assert set(paths_of(source)) == {"f"}
    assert paths_of(source, "vllm/v1/worker/utils.py") == {}


def test_a_path_is_excluded_the_classes_every_caller_filters_out_not_those_one_caller_does():
    found = paths_of(
        """
        def _pack(vllm_config, kv_cache_spec):
            return UniformTypeKVCacheSpecs.from_specs(kv_cache_spec)

        def first(vllm_config, kv_cache_spec):
            filtered = {k: v for k, v in kv_cache_spec.items() if not isinstance(v, (HiddenSpec, EncoderSpec))}
            return _pack(vllm_config, filtered)

        def second(vllm_config, kv_cache_spec):
            kept = {k: v for k, v in kv_cache_spec.items() if not isinstance(v, HiddenSpec)}
            return _pack(vllm_config, kept)
        """
    )
    assert found["_pack"].excluded == frozenset({"HiddenSpec"})


def test_a_path_handed_the_layers_a_filter_keeps_is_handed_only_their_classes():
    found = paths_of(
        """
        def mla_only(kv_cache_spec):
            mla = {k: v for k, v in kv_cache_spec.items() if isinstance(v, MLAAttentionSpec)}
            return UniformTypeKVCacheSpecs.from_specs(mla)

        def filled(kv_cache_spec):
            chosen = {}
            for name, spec in kv_cache_spec.items():
                if isinstance(spec, SlidingWindowSpec):
                    chosen[name] = spec
            return UniformTypeKVCacheSpecs.from_specs(chosen)
        """
    )
    assert found["mla_only"].only == frozenset({"MLAAttentionSpec"}) and found["mla_only"].excluded == frozenset()
    assert found["filled"].only == frozenset({"SlidingWindowSpec"})


def test_a_path_returning_early_without_some_class_requires_it():
    found = paths_of(
        """
        def one(kv_cache_spec):
            if not any(isinstance(s, MLAAttentionSpec) for s in kv_cache_spec.values()):
                return None
            return UniformTypeKVCacheSpecs.from_specs(kv_cache_spec)

        def both(kv_cache_spec):
            has_mla = any(isinstance(s, MLAAttentionSpec) for s in kv_cache_spec.values())
            has_swa = any(isinstance(s, SlidingWindowSpec) for s in kv_cache_spec.values())
            if not (has_mla and has_swa):
                return None
            return UniformTypeKVCacheSpecs.from_specs(kv_cache_spec)

        def either(kv_cache_spec):
            has_mla = any(isinstance(s, MLAAttentionSpec) for s in kv_cache_spec.values())
            has_swa = any(isinstance(s, SlidingWindowSpec) for s in kv_cache_spec.values())
            if not (has_mla and other):
                return None
            return UniformTypeKVCacheSpecs.from_specs(kv_cache_spec)
        """
    )
    assert found["one"].requires == frozenset({"MLAAttentionSpec"})
    assert found["both"].requires == frozenset({"MLAAttentionSpec", "SlidingWindowSpec"})
    assert found["either"].requires == frozenset()


def test_a_bucketing_path_gated_on_the_layout_is_read_as_such():
    found = paths_of(
        """
        def packed(vllm_config, kv_cache_spec):
            if not layout.is_block_outermost:
                return None
            buckets = [b for b in kv_cache_spec if UniformTypeKVCacheSpecs.is_uniform_type(b)]
            return [UniformTypeKVCacheSpecs.from_specs(bucket) for bucket in buckets]
        """
    )
    assert found["packed"].buckets and found["packed"].layout_gated


# ------------------------------------------------------------------------------------ the compositions

HIERARCHY = SpecHierarchy(
    bases={
        "KVCacheSpec": (),
        "AttentionSpec": ("KVCacheSpec",),
        "FullAttentionSpec": ("AttentionSpec",),
        "MLAAttentionSpec": ("FullAttentionSpec",),
        "SlidingWindowSpec": ("AttentionSpec",),
        "HiddenSpec": ("FullAttentionSpec",),
        "MambaSpec": ("KVCacheSpec",),
    }
)
BASES = {
    "FullAttentionSpec": "FullAttentionSpec",
    "MLAAttentionSpec": "FullAttentionSpec",
    "HiddenSpec": "FullAttentionSpec",
}
LAYERS = (
    LayerClass("Attn", "l.py:1", frozenset({"FullAttentionSpec"}), (), (), None),
    LayerClass("Mla", "l.py:2", frozenset({"MLAAttentionSpec"}), (), (), None),
    LayerClass("Indexer", "l.py:3", frozenset({"MLAAttentionSpec"}), (), (), None),
    LayerClass("Swa", "l.py:4", frozenset({"SlidingWindowSpec"}), (), (), None),
    LayerClass("Hidden", "l.py:5", frozenset({"HiddenSpec"}), (), (), None),
    LayerClass("Mamba", "l.py:6", frozenset({"MambaSpec"}), (("tp_replicated", "False"),), (), None),
    LayerClass("Mamba2", "l.py:7", frozenset({"MambaSpec"}), (("tp_replicated", "True"),), (), None),
    LayerClass("Outer", "l.py:8", frozenset({"FullAttentionSpec"}), (), (), ("HND",)),
    LayerClass("Inner", "l.py:9", frozenset({"FullAttentionSpec"}), (), (), ("NHD",)),
    LayerClass("Either", "l.py:10", frozenset({"FullAttentionSpec"}), (), (), ("NHD", "HND")),
)


def path(function="f", *, buckets=False, only=(), excluded=(), requires=(), guards=None, layout_gated=False):
    return GroupingPath(
        "vllm/v1/core/g.py",
        function,
        10,
        layout_gated,
        buckets,
        frozenset(only),
        frozenset(excluded),
        frozenset(requires),
        guards or Guards(),
    )


def containers(layers: set[str], *paths: GroupingPath, merged=False, **census) -> set[tuple[frozenset, str]]:
    model = Model("M", "vllm/models/m.py", frozenset(layers), (frozenset(layers),), merged)
    outermost, setting = census.pop("block_outermost", frozenset()), census.pop("layout_setting", "")
    tree = Census(LAYERS, (model,), outermost, setting, **census)
    return {(c.layer_classes, c.setting) for c in compose(tree, paths, HIERARCHY, BASES)}


def test_a_whole_model_path_builds_one_container_of_layers_of_one_uniform_type_not_all_alike():
    assert containers({"Attn", "Mla"}, path()) == {(frozenset({"Attn", "Mla"}), DEFAULT)}
    assert containers({"Attn", "Swa"}, path()) == set()  # two uniform types
    assert containers({"Mla"}, path()) == set()  # one layer class: a plain group, no container
    assert containers({"Mla", "Indexer"}, path(), merge_ignores_shapes=frozenset({"MLAAttentionSpec"})) == set()
    assert containers({"Mla", "Indexer"}, path()) == {(frozenset({"Mla", "Indexer"}), DEFAULT)}


def test_layers_writing_a_setting_their_merge_asserts_one_of_apart_are_possibly_not_all_alike():
    # 0.17.0: MLAAttentionSpec.merge asserts one `cache_dtype_str`; MLA layers set it from the cache config,
    # DeepSeek-V3.2's indexer leaves it unset: the merge raises, so they are not all alike and `from_specs`
    # builds the container (the census had called them alike and missed it).
    from dataclasses import replace

    mla = replace(LAYERS[1], spec_settings=(("cache_dtype_str", "cache_config.cache_dtype"),))
    settings = (("MLAAttentionSpec", frozenset({"cache_dtype_str"})),)

    def found(*layers):
        model = Model("M", "m.py", frozenset(c.name for c in layers), (frozenset(c.name for c in layers),))
        tree = Census(layers, (model,), frozenset(), "", (), (), frozenset({"MLAAttentionSpec"}), settings)
        return {(c.layer_classes, c.setting) for c in compose(tree, (path(),), HIERARCHY, BASES)}

    ((layers, setting),) = found(mla, LAYERS[2])
    assert layers == {"Mla", "Indexer"} and setting.startswith(POSSIBLE)
    assert "`cache_dtype_str`" in setting and "Indexer: unset; Mla: cache_config.cache_dtype" in setting
    assert found(LAYERS[1], LAYERS[2]) == set()  # both leave it unset: all alike
    indexer = replace(LAYERS[2], spec_settings=mla.spec_settings)
    assert found(mla, indexer) == set()  # both write it alike


def test_a_path_handed_only_some_classes_builds_one_container_per_bucket_of_them():
    only_mla = path(only={"MLAAttentionSpec"})
    assert containers({"Attn", "Mla", "Indexer"}, only_mla) == {(frozenset({"Mla", "Indexer"}), DEFAULT)}
    assert containers({"Attn", "Mla"}, only_mla) == set()  # one layer of them: no container


def test_a_path_never_holds_the_classes_filtered_out_before_it():
    assert containers({"Attn", "Mla", "Hidden"}, path(excluded={"HiddenSpec"})) == {
        (frozenset({"Attn", "Mla"}), DEFAULT)
    }


def test_a_bucketing_path_builds_one_container_per_bucket_only_of_several_buckets():
    bucketing = path(buckets=True)
    assert containers({"Attn", "Mla", "Swa"}, bucketing) == {
        (frozenset({"Attn", "Mla"}), DEFAULT),
        (frozenset({"Swa"}), DEFAULT),
    }
    assert containers({"Attn", "Mla"}, bucketing) == set()  # a single bucket: the whole-model path's business


def test_a_container_is_alone_only_when_it_holds_every_layer_of_its_checkpoint():
    """A check of a config's only group (`spec = groups[0].kv_cache_spec if len(groups) == 1 else None`) meets
    only a container that is some checkpoint's only group: a whole-model path's, never a bucketing path's, even
    when its buckets hold every layer class (one class's full and sliding-window layers are two buckets)."""
    model = Model("M", "vllm/models/m.py", frozenset({"Attn", "Mla", "Swa"}), (frozenset({"Attn", "Mla", "Swa"}),))
    tree = Census(LAYERS, (model,), frozenset(), "")
    alone = {(c.layer_classes, c.alone) for c in compose(tree, (path(buckets=True),), HIERARCHY, BASES)}
    assert alone == {(frozenset({"Attn", "Mla"}), False), (frozenset({"Swa"}), False)}
    whole = Model("W", "vllm/models/w.py", frozenset({"Attn", "Mla"}), (frozenset({"Attn", "Mla"}),))
    tree = Census(LAYERS, (whole,), frozenset(), "")
    assert {(c.layer_classes, c.alone) for c in compose(tree, (path(),), HIERARCHY, BASES)} == {
        (frozenset({"Attn", "Mla"}), True)
    }
    hidden = Model(
        "H", "vllm/models/h.py", frozenset({"Attn", "Mla", "Hidden"}), (frozenset({"Attn", "Mla", "Hidden"}),)
    )
    tree = Census(LAYERS, (hidden,), frozenset(), "")
    # the hidden-state layers filtered out before the path are a group of their own
    assert {c.alone for c in compose(tree, (path(excluded={"HiddenSpec"}),), HIERARCHY, BASES)} == {False}


def test_a_container_alone_in_one_checkpoint_of_its_model_is_alone_whatever_the_others():
    # {Attn, Mla} is one checkpoint's only group, and beside its hidden-state layers' group in another.
    alternatives = (frozenset({"Attn", "Mla"}), frozenset({"Attn", "Mla", "Hidden"}))
    model = Model("M", "vllm/models/m.py", frozenset({"Attn", "Mla", "Hidden"}), alternatives)
    tree = Census(LAYERS, (model,), frozenset(), "")
    [built] = compose(tree, (path(excluded={"HiddenSpec"}),), HIERARCHY, BASES)
    assert len(built.checkpoints) == 2 and built.alone


def test_a_config_branch_is_only_said_of_a_model_whose_alternatives_were_kept_apart():
    alternatives = (frozenset({"Attn"}), frozenset({"Attn", "Mla"}))
    apart = Model("M", "vllm/models/m.py", frozenset({"Attn", "Mla"}), alternatives)
    merged = Model("N", "vllm/models/n.py", frozenset({"Attn", "Mla"}), alternatives, True)
    tree = Census(LAYERS, (apart, merged), frozenset(), "")
    branches = {c.model: c.config_branch for c in compose(tree, (path(),), HIERARCHY, BASES)}
    assert branches == {"M": ("Mla",), "N": ()}


def test_among_names_as_near_to_the_layers_the_witness_keeps_the_models_own():
    model = Model("Yota", "vllm/models/y.py", frozenset({"Attn", "Mla"}), (frozenset({"Attn", "Mla"}),))
    model = replace(model, aliases=("Xeta",))
    tree = Census(LAYERS, (model,), frozenset(), "")
    [built] = compose(tree, (path(),), HIERARCHY, BASES)
    assert built.architecture == "Yota"


def test_state_layers_must_share_their_replication_to_share_a_bucket():
    assert containers({"Mamba", "Mamba2"}, path(buckets=True)) == {
        (frozenset({"Mamba"}), DEFAULT),
        (frozenset({"Mamba2"}), DEFAULT),
    }


def test_a_path_requiring_a_class_runs_for_a_model_with_any_layer_of_it_and_builds_the_whole_model():
    requiring = path(requires={"MLAAttentionSpec"})
    assert containers({"Attn", "Mla"}, requiring) == {(frozenset({"Attn", "Mla"}), DEFAULT)}
    assert containers({"Attn", "Hidden"}, requiring) == set()  # no layer of the class: returns early
    assert containers({"Mla", "Swa"}, requiring) == set()  # two uniform types: no container
    both = path(requires={"MLAAttentionSpec", "HiddenSpec"})
    assert containers({"Attn", "Mla", "Hidden"}, both) == {(frozenset({"Attn", "Mla", "Hidden"}), DEFAULT)}
    assert containers({"Attn", "Mla"}, both) == set()  # each required class must be there


def test_a_path_refusing_a_class_never_runs_for_a_model_with_it():
    refusing = path(guards=Guards(refuses=frozenset({"SlidingWindowSpec"})))
    assert containers({"Attn", "Mla"}, refusing) == {(frozenset({"Attn", "Mla"}), DEFAULT)}
    assert containers({"Attn", "Mla", "Swa"}, refusing) == set()


def test_a_path_promoting_a_class_groups_it_as_its_target():
    promoting = path(
        requires={"MLAAttentionSpec"}, guards=Guards(promotions=(("SlidingWindowSpec", "FullAttentionSpec"),))
    )
    found = compose(
        Census(LAYERS, (Model("M", "m.py", frozenset({"Mla", "Swa"}), (frozenset({"Mla", "Swa"}),)),), frozenset(), ""),
        (promoting,),
        HIERARCHY,
        BASES,
    )
    assert [(c.layer_classes, c.spec_classes) for c in found] == [
        (frozenset({"Mla", "Swa"}), frozenset({"MLAAttentionSpec", "FullAttentionSpec"}))
    ]


def test_the_whole_model_container_by_default_ends_the_grouping_for_that_checkpoint():
    whole = path("whole", guards=Guards(returns_container=True))
    bucketing = path("packed", buckets=True)
    assert containers({"Attn", "Mla"}, bucketing, whole) == {(frozenset({"Attn", "Mla"}), DEFAULT)}
    assert containers({"Attn", "Mla", "Swa"}, bucketing, whole) == {
        (frozenset({"Attn", "Mla"}), DEFAULT),
        (frozenset({"Swa"}), DEFAULT),
    }


def test_a_merged_models_containers_are_only_possible():
    ((layers, setting),) = containers({"Attn", "Mla"}, path(), merged=True)
    assert setting.startswith(POSSIBLE) and layers == {"Attn", "Mla"}


def test_a_page_gated_path_is_possible_only_with_pages_that_can_differ():
    gated = path(guards=Guards(page_gated=True), buckets=True)
    ((_, setting), _) = sorted(containers({"Attn", "Swa"}, gated))
    assert setting.startswith(POSSIBLE) and "mixed page sizes" in setting
    padded = containers({"Attn", "Mamba"}, gated, mamba_page_padding="p.py:1")
    assert padded == set()  # the platform pads the Mamba page to the attention page
    assert containers({"Attn", "Mamba"}, gated) != set()


def test_a_layout_gated_path_is_opt_in_unless_a_backend_allows_only_block_outermost_layouts():
    gated = path(buckets=True, layout_gated=True)
    opt_in = containers({"Attn", "Swa"}, gated, layout_setting="VLLM_KV_CACHE_LAYOUT")
    assert {setting for _, setting in opt_in} == {
        "opt-in: VLLM_KV_CACHE_LAYOUT=a block-outermost layout (a block-outermost layout), with mixed page sizes, "
        "which the census does not decide"
    }
    outermost = frozenset({"HND"})
    chosen = containers({"Either", "Swa"}, gated, block_outermost=outermost, layout_setting="LAYOUT")
    assert {setting for _, setting in chosen} == {
        "opt-in: LAYOUT=HND (a block-outermost layout), with mixed page sizes, which the census does not decide"
    }
    assert containers({"Inner", "Swa"}, gated, block_outermost=outermost) == set()  # the setting fails
    forced = containers({"Outer", "Either", "Swa"}, gated, block_outermost=outermost)
    assert {setting for _, setting in forced} == {
        POSSIBLE + "with mixed page sizes, which the census does not decide (block-outermost by default: "
        "Outer's backend allows no other layout)"
    }


def test_a_container_says_where_its_path_builds_it_and_what_kind_of_setting_it_is():
    (found,) = compose(
        Census(
            LAYERS, (Model("M", "m.py", frozenset({"Attn", "Mla"}), (frozenset({"Attn", "Mla"}),)),), frozenset(), ""
        ),
        (path(),),
        HIERARCHY,
        BASES,
    )
    assert found.where() == "g.py:10" and found.kind == "default" and found.is_default
    assert found.checkpoints == (("Attn:FullAttentionSpec", "Mla:MLAAttentionSpec"),)


def test_checkpoints_building_the_same_container_are_one_composition_naming_each():
    alternatives = (frozenset({"Attn", "Mla"}), frozenset({"Attn", "Mla", "Hidden"}))
    model = Model("M", "m.py", frozenset({"Attn", "Mla", "Hidden"}), alternatives)
    (found,) = compose(Census(LAYERS, (model,), frozenset(), ""), (path(excluded={"HiddenSpec"}),), HIERARCHY, BASES)
    assert len(found.checkpoints) == 2 and found.layer_classes == {"Attn", "Mla"}


def test_default_containers_come_before_possible_ones():
    merged = Model("A", "a.py", frozenset({"Attn", "Mla"}), (frozenset({"Attn", "Mla"}),), True)
    plain = Model("B", "b.py", frozenset({"Attn", "Mla"}), (frozenset({"Attn", "Mla"}),))
    found = compose(Census(LAYERS, (merged, plain), frozenset(), ""), (path(),), HIERARCHY, BASES)
    assert [c.model for c in found] == ["B", "A"]


def test_a_layer_building_one_of_several_specs_gives_a_checkpoint_per_choice_and_one_of_all_when_configured_apart():
    from kvlint.analysis.census.compositions import checkpoint_key, checkpoints

    either = [
        LayerClass(f"E{i}", "l.py:1", frozenset({"MLAAttentionSpec", "SlidingWindowSpec"}), (), (), None)
        for i in range(5)
    ]
    few = Census(tuple(either[:2]), (), frozenset(), "")
    names = frozenset({"E0", "E1"})
    shared = checkpoints(few, Model("M", "m.py", names, (names,)))
    assert len(shared) == 4 and all(len(kinds) == 2 for kinds in shared)  # 2 x 2 choices, one spec per class
    apart = [checkpoint_key(k) for k in checkpoints(few, Model("M", "m.py", names, (names,), varied=names))]
    assert len(apart) == 9 and apart[0] == tuple(sorted(f"E{i}:{s}" for i in (0, 1) for s in either[0].spec_classes))
    many = Census(tuple(either), (), frozenset(), "")
    names = frozenset(f"E{i}" for i in range(5))
    assert len(checkpoints(many, Model("M", "m.py", names, (names,), varied=names))) == 1  # 3**5: only all at once


def test_reading_the_paths_spends_the_budget_on_the_module_and_each_paths_function():
    import pytest

    from kvlint.analysis.census.budget import Budget, BudgetExceeded

    source = "def f(s):\n    return UniformTypeKVCacheSpecs.from_specs(s)\n"
    texts = {PLANNING: source.encode()}
    with pytest.raises(BudgetExceeded):
        read_grouping_paths(texts, CONTAINER, Budget(len(source) - 1))
    with pytest.raises(BudgetExceeded):  # the module, then the function's body again
        read_grouping_paths(texts, CONTAINER, Budget(len(source) + 10))
    assert read_grouping_paths(texts, CONTAINER, Budget(2 * len(source)))


def test_a_call_is_the_path_of_the_function_whose_lines_hold_it():
    found = paths_of(
        """
        def first(
            kv_cache_spec,
        ):
            # a comment at the margin inside the function
        # another
            x = f(
                kv_cache_spec
        )
            return UniformTypeKVCacheSpecs.from_specs(kv_cache_spec)


        def second(kv_cache_spec):
            mla = {k: v for k, v in kv_cache_spec.items() if isinstance(v, MLAAttentionSpec)}
            return UniformTypeKVCacheSpecs.from_specs(mla)
        """
    )
    assert set(found) == {"first", "second"}
    assert found["first"].line == 10 and found["second"].line == 15
    assert found["first"].only == frozenset() and found["second"].only == frozenset({"MLAAttentionSpec"})


def test_a_filter_names_the_classes_of_a_tuple_and_nothing_for_a_computed_class():
    found = paths_of(
        """
        def tupled(kv_cache_spec):
            kept = {k: v for k, v in kv_cache_spec.items() if not isinstance(v, (HiddenSpec, EncoderSpec))}
            return UniformTypeKVCacheSpecs.from_specs(kept)

        def computed(kv_cache_spec):
            kept = {k: v for k, v in kv_cache_spec.items() if not isinstance(v, pick(HiddenSpec))}
            return UniformTypeKVCacheSpecs.from_specs(kept)

        def attribute(kv_cache_spec):
            kept = {k: v for k, v in kv_cache_spec.items() if not isinstance(v.spec, HiddenSpec)}
            return UniformTypeKVCacheSpecs.from_specs(kept)

        def listed(kv_cache_spec):
            kept = [v for v in kv_cache_spec if not isinstance(v, HiddenSpec)]
            return UniformTypeKVCacheSpecs.from_specs(kept)
        """
    )
    assert found["tupled"].excluded == frozenset({"HiddenSpec", "EncoderSpec"})
    assert found["computed"].excluded == frozenset()
    assert found["attribute"].excluded == frozenset()
    assert found["listed"].excluded == frozenset()


def test_past_sixteen_spec_choices_only_the_all_at_once_checkpoint_is_kept():
    from kvlint.analysis.census.compositions import checkpoints

    def count(specs: int, varied: frozenset[str] = frozenset()) -> int:
        layer = LayerClass("E", "l.py:1", frozenset(f"S{i}" for i in range(specs)), (), (), None)
        model = Model("M", "m.py", frozenset({"E"}), (frozenset({"E"}),), varied=varied)
        return len(checkpoints(Census((layer,), (), frozenset(), ""), model))

    assert count(16) == 16  # each of the 16
    assert count(17) == 1
    assert count(15, frozenset({"E"})) == 16  # each of the 15, and all at once
    assert count(16, frozenset({"E"})) == 1


def test_a_layer_of_one_spec_class_configured_apart_adds_no_choice():
    from kvlint.analysis.census.compositions import checkpoints

    chooser = LayerClass("E", "l.py:1", frozenset({"S0", "S1"}), (), (), None)
    plain = [LayerClass(f"P{i}", "l.py:2", frozenset({"FullAttentionSpec"}), (), (), None) for i in range(4)]
    names = frozenset({"E", *(p.name for p in plain)})
    # Four single-spec layer classes given per-layer arguments: still the chooser's two checkpoints (a doubling
    # per such class would pass the cap of sixteen and leave only the all-at-once reading).
    model = Model("M", "m.py", names, (names,), varied=frozenset(p.name for p in plain))
    assert len(checkpoints(Census((chooser, *plain), (), frozenset(), ""), model)) == 2


def test_a_whole_model_container_built_by_default_keeps_later_paths_from_running():
    whole = path("whole", guards=Guards(returns_container=True))
    only_mla = path("mla", only={"MLAAttentionSpec"})
    assert containers({"Attn", "Mla", "Indexer"}, only_mla, whole) == {(frozenset({"Attn", "Mla", "Indexer"}), DEFAULT)}
    possible = path("whole", guards=Guards(returns_container=True, page_gated=True))
    assert containers({"Attn", "Mla", "Indexer", "Swa"}, only_mla, possible) == {
        (frozenset({"Mla", "Indexer"}), DEFAULT)
    }


def test_a_layer_setting_its_own_block_size_at_run_time_makes_its_container_only_possible():
    sized = LayerClass("Sized", "l.py:9", frozenset({"FullAttentionSpec"}), (("block_size", "?"),), (), None)
    model = Model("M", "m.py", frozenset({"Sized", "Mla"}), (frozenset({"Sized", "Mla"}),))
    (found,) = compose(Census((*LAYERS, sized), (model,), frozenset(), ""), (path(),), HIERARCHY, BASES)
    assert found.setting == POSSIBLE + "that Sized share the others' block size is unproven (set at run time)"


def guards_of(layers: set[str], one: GroupingPath, **census) -> set[str]:
    model = Model("M", "m.py", frozenset(layers), (frozenset(layers),))
    outermost, setting = census.pop("block_outermost", frozenset()), census.pop("layout_setting", "")
    tree = Census(LAYERS, (model,), outermost, setting, **census)
    return {c.guard for c in compose(tree, (one,), HIERARCHY, BASES)}


def test_a_containers_guard_says_what_in_the_paths_code_lets_its_layers_through_in_order():
    requiring = path(requires={"MLAAttentionSpec"}, guards=Guards(refuses=frozenset({"MambaSpec"})))
    assert guards_of({"Attn", "Mla"}, requiring) == {"the model has MLAAttentionSpec layers; none of MambaSpec"}
    gated = path(buckets=True, guards=Guards(refuses=frozenset({"MambaSpec"}), page_gated=True))
    assert guards_of({"Attn", "Swa"}, gated) == {"mixed page sizes; none of MambaSpec"}
    laid_out = path(buckets=True, layout_gated=True, guards=Guards(refuses=frozenset({"MambaSpec"})))
    assert guards_of({"Attn", "Swa"}, laid_out) == {
        "a block-outermost KV cache layout and mixed page sizes; none of MambaSpec"
    }


def test_one_kind_of_layer_never_makes_mixed_page_sizes():
    gated = path(requires={"MLAAttentionSpec"}, guards=Guards(page_gated=True))
    assert containers({"Mla"}, gated) == set()
    padded_gate = path(requires={"MambaSpec"}, guards=Guards(page_gated=True))
    assert containers({"Mamba"}, padded_gate, mamba_page_padding="p.py:1") == set()


def test_with_padded_mamba_pages_state_layers_alone_still_differ_among_themselves():
    gated = path(buckets=True, guards=Guards(page_gated=True))
    found = containers({"Mamba", "Mamba2"}, gated, mamba_page_padding="p.py:1")
    assert {layers for layers, _ in found} == {frozenset({"Mamba"}), frozenset({"Mamba2"})}
    assert containers({"Attn", "Swa", "Mamba"}, gated, mamba_page_padding="p.py:1") != set()


def test_a_required_class_only_some_config_of_a_layer_builds_leaves_the_container_possible():
    either = LayerClass("Either", "l.py:9", frozenset({"MLAAttentionSpec", "SlidingWindowSpec"}), (), (), None)
    model = Model("M", "m.py", frozenset({"Either", "Attn"}), (frozenset({"Either", "Attn"}),))
    tree = Census((*LAYERS, either), (model,), frozenset(), "")
    found = compose(tree, (path(requires={"MLAAttentionSpec"}),), HIERARCHY, BASES)
    settings = {c.setting for c in found if c.spec_classes == {"MLAAttentionSpec", "FullAttentionSpec"}}
    assert settings == {
        POSSIBLE + "that a layer of Either builds a MLAAttentionSpec is unproven (its spec depends on its config)"
    }


def test_a_single_layer_container_needs_no_shared_block_size():
    sized = LayerClass("Sized", "l.py:9", frozenset({"FullAttentionSpec"}), (("block_size", "?"),), (), None)
    model = Model("M", "m.py", frozenset({"Sized"}), (frozenset({"Sized"}),))
    found = compose(
        Census((*LAYERS, sized), (model,), frozenset(), ""), (path(requires={"FullAttentionSpec"}),), HIERARCHY, BASES
    )
    assert [c.setting for c in found] == [DEFAULT]


def test_a_spec_is_promoted_by_its_nearest_promoted_base_whatever_the_codes_order():
    promotions = (("AttentionSpec", "FullAttentionSpec"), ("SlidingWindowSpec", "MLAAttentionSpec"))
    promoting = path(requires={"MLAAttentionSpec"}, guards=Guards(promotions=promotions))
    model = Model("M", "m.py", frozenset({"Mla", "Swa"}), (frozenset({"Mla", "Swa"}),))
    (found,) = compose(Census(LAYERS, (model,), frozenset(), ""), (promoting,), HIERARCHY, BASES)
    assert found.spec_classes == {"MLAAttentionSpec", "FullAttentionSpec"}  # Swa → MLA (nearest), Mla → Full


def test_a_path_handed_several_classes_takes_layers_of_any_of_them():
    two = path(only={"MLAAttentionSpec", "HiddenSpec"})
    assert containers({"Mla", "Hidden", "Swa"}, two) == {(frozenset({"Mla", "Hidden"}), DEFAULT)}
    split = path(only={"MLAAttentionSpec", "SlidingWindowSpec"})
    assert containers({"Mla", "Indexer", "Swa", "Attn"}, split) == {(frozenset({"Mla", "Indexer"}), DEFAULT)}


def test_a_call_on_a_functions_last_line_right_before_the_next_def_is_its_path():
    source = "def a(s):\n    return UniformTypeKVCacheSpecs.from_specs(s)\ndef b(s):\n    pass\n"
    assert set(paths_of(source)) == {"a"}


def test_a_call_at_the_margin_after_a_function_is_no_path_of_it():
    for source in (
        "def a(s): return 1\nX = UniformTypeKVCacheSpecs.from_specs(s)\n",
        "def a(s):\n    x = 1\nX = UniformTypeKVCacheSpecs.from_specs(s)\n",
    ):
        assert paths_of(source) == {}, source


def test_a_call_on_the_last_line_of_a_file_without_a_final_newline_is_placed_there():
    found = paths_of("def a(s):\n    x = 1\n    return UniformTypeKVCacheSpecs.from_specs(s)")
    assert found["a"].line == 3


def test_a_path_handed_a_dict_filled_only_under_a_class_test_is_handed_that_class():
    found = paths_of(
        """
        def grouped(kv_cache_spec):
            by_key = {}
            for name, spec in kv_cache_spec.items():
                if isinstance(spec, MambaSpec):
                    by_key[spec.key][name] = spec
            for specs in by_key.values():
                UniformTypeKVCacheSpecs.from_specs(specs)
        """
    )
    assert found["grouped"].only == frozenset({"MambaSpec"})


def test_a_def_only_in_a_strings_text_does_not_break_the_reading():
    source = 'DOC = """\ndef fake(s):\n    return UniformTypeKVCacheSpecs.from_specs(s)\n"""\n'
    assert set(paths_of(source)) == {"fake"}  # read as text, without the guards `ast` would give


def test_a_filter_written_over_several_lines_is_read_whole():
    found = paths_of(
        """
        def multi(kv_cache_spec):
            kept = {
                k: v
                for k, v in kv_cache_spec.items()
                if not isinstance(v, HiddenSpec)
            }
            return UniformTypeKVCacheSpecs.from_specs(kept)
        """
    )
    assert found["multi"].excluded == frozenset({"HiddenSpec"})


def test_an_empty_dict_a_path_fills_is_read_as_empty_whatever_follows():
    found = paths_of(
        """
        def f(kv_cache_spec):
            chosen = {}
            for name, spec in kv_cache_spec.items():
                if not isinstance(spec, HiddenSpec):
                    log("}")
                chosen[name] = spec
            return UniformTypeKVCacheSpecs.from_specs(chosen)
        """
    )
    assert found["f"].excluded == frozenset()


def test_a_re_split_on_one_line_without_braces_is_no_path_either():
    source = (
        "def split(group, names):\n"
        "    specs = dict((n, group.kv_cache_spec.kv_cache_specs[n]) for n in names)\n"
        "    return UniformTypeKVCacheSpecs.from_specs(specs)\n"
    )
    assert paths_of(source) == {}


def test_an_unclosed_class_test_in_a_filter_names_no_class():
    source = (
        "def f(s):\n"
        "    kept = {k: v for k, v in s.items() if not isinstance(v, (HiddenSpec,\n"
        "        EncoderSpec)) if k\n"
        "    return UniformTypeKVCacheSpecs.from_specs(kept)"
    )
    assert paths_of(source)["f"].excluded == frozenset()


def test_a_call_in_a_one_line_functions_body_is_its_path():
    # The def line is the function's only line: its body (after the colon) is there too.
    found = paths_of("def whole(s): return UniformTypeKVCacheSpecs.from_specs(s)\n")
    assert set(found) == {"whole"} and found["whole"].line == 1


def test_a_dict_filled_with_the_layers_a_class_test_rejects_is_not_handed_only_that_class():
    found = paths_of(
        """
        def f(kv_cache_spec):
            chosen = {}
            for name, spec in kv_cache_spec.items():
                if not isinstance(spec, HiddenSpec):
                    chosen[name] = spec
            return UniformTypeKVCacheSpecs.from_specs(chosen)
        """
    )
    assert found["f"].only == frozenset()


def test_a_one_line_caller_handing_every_layer_keeps_the_path_unexcluded():
    found = paths_of(
        """
        def _pack(vllm_config, kv_cache_spec):
            return UniformTypeKVCacheSpecs.from_specs(kv_cache_spec)

        def first(vllm_config, kv_cache_spec):
            filtered = {k: v for k, v in kv_cache_spec.items() if not isinstance(v, HiddenSpec)}
            return _pack(vllm_config, filtered)

        def every(vllm_config, kv_cache_spec): return _pack(vllm_config, kv_cache_spec)
        """
    )
    assert found["_pack"].excluded == frozenset()


def test_a_paths_guards_are_read_from_its_functions_code():
    source = "def whole(s):\n    if c := UniformTypeKVCacheSpecs.from_specs(s):\n        return [c]\n    return []\n"
    assert paths_of(source)["whole"].guards.returns_container


def test_a_tuple_of_classes_with_a_computed_one_names_no_class():
    source = (
        "def f(s):\n"
        "    kept = {k: v for k, v in s.items() if not isinstance(v, (HiddenSpec, pick(EncoderSpec)))}\n"
        "    return UniformTypeKVCacheSpecs.from_specs(kept)\n"
    )
    assert paths_of(source)["f"].excluded == frozenset()


def test_a_filter_without_a_closing_brace_is_read_on_its_line_and_an_unclosed_class_test_names_nothing():
    closed_test = (
        "def f(s):\n"
        "    kept = {k: v for k, v in s.items() if not isinstance(v, HiddenSpec)\n"
        "    return UniformTypeKVCacheSpecs.from_specs(kept)\n"
    )
    assert paths_of(closed_test)["f"].excluded == frozenset({"HiddenSpec"})
    unclosed_test = closed_test.replace("HiddenSpec)\n", "HiddenSpec\n")
    assert paths_of(unclosed_test)["f"].excluded == frozenset()


def test_what_callers_filter_is_read_from_calls_in_functions_only_the_def_on_the_first_line_no_call():
    source = (
        "def _pack(vllm_config, kv_cache_spec):\n"
        "    return UniformTypeKVCacheSpecs.from_specs(kv_cache_spec)\n"
        "\n"
        "def first(vllm_config, kv_cache_spec):\n"
        "    filtered = {k: v for k, v in kv_cache_spec.items() if not isinstance(v, HiddenSpec)}\n"
        "    return _pack(vllm_config, filtered)\n"
        "\n"
        "X = _pack(None, SPECS)\n"  # at module level: no caller's filter to read
    )
    assert paths_of(source)["_pack"].excluded == frozenset({"HiddenSpec"})


def test_a_call_on_its_callers_last_line_counts_in_what_every_caller_filters_out():
    source = (
        "def _pack(vllm_config, kv_cache_spec):\n"
        "    return UniformTypeKVCacheSpecs.from_specs(kv_cache_spec)\n"
        "\n"
        "def first(vllm_config, kv_cache_spec):\n"
        "    filtered = {k: v for k, v in kv_cache_spec.items() if not isinstance(v, HiddenSpec)}\n"
        "    return _pack(vllm_config, filtered)\n"  # the next def follows at once
        "def second(vllm_config, kv_cache_spec):\n"
        "    kept = {k: v for k, v in kv_cache_spec.items() if not isinstance(v, (HiddenSpec, EncoderSpec))}\n"
        "    return _pack(vllm_config, kept)\n"
    )
    assert paths_of(source)["_pack"].excluded == frozenset({"HiddenSpec"})


def test_a_row_of_the_containers_table_names_each_model_once():
    from kvlint.analysis.census.compositions import ContainerComposition
    from kvlint.reporters.containers import grouped

    path, setting = "vllm/v1/core/kv_cache_utils.py:get_kv_cache_groups", "opt-in: VLLM_KV_CACHE_LAYOUT=BLHNC"
    full = ContainerComposition(frozenset({"Attention"}), frozenset({"FullAttentionSpec"}), setting, "A", path, 9)
    # The same model's checkpoint with a sliding window: the same layers, setting and path, another spec set.
    window = replace(full, spec_classes=frozenset({"FullAttentionSpec", "SlidingWindowSpec"}))
    other = replace(full, model="B")
    rows = grouped((full, window, other))
    assert [(row.spec_classes, models) for row, models in rows] == [(frozenset({"FullAttentionSpec"}), ["A", "B"])]
