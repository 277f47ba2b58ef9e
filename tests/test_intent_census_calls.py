"""How a constructor's calls reach the layers it builds, and when a grouping path's promotions apply: the
behaviours the runtime oracle (`kvlint verify --census`) found read wrongly on releases nobody had read for
us (vLLM 0.17.0 and 0.24.0: 127 of 140 and 160 of 176 models differed from `get_kv_cache_groups`). Each test
is a miniature tree, named after the behaviour it proves."""

from __future__ import annotations

import textwrap

from kvlint.analysis.census.compositions import DEFAULT, POSSIBLE, compose
from kvlint.analysis.census.paths import read_grouping_paths
from kvlint.analysis.census.reading import Census, LayerClass, Model
from kvlint.analysis.hierarchy import SpecHierarchy
from kvlint.verify.census_child import defines_at_module_level
from tests.test_intent_census import built

# ------------------------------------------------------------------------ which constructors a call runs


def test_super_naming_a_base_skips_that_bases_constructor_and_the_layers_it_builds():
    # Qwen3.5's decoder layer: `super(Qwen3NextDecoderLayer, self).__init__()` runs nn.Module's, not its base's.
    model = """
    class Base:
        def __init__(self):
            self.mixer = Mamba()

    class M(Base):
        def __init__(self):
            super(Base, self).__init__()
            self.attn = Attention()
    """
    assert built(model) == {frozenset({"Attention"})}
    assert built(model.replace("super(Base, self)", "super(M, self)")) == {frozenset({"Attention", "Mamba"})}


def test_super_naming_the_first_of_two_bases_runs_the_second_bases_constructor():
    # 0.34.0's `class CausalMixin(VllmModelForTextGeneration, Base)`: `super(VllmModelForTextGeneration, self)`
    # goes on to Base, the next class of the method resolution order.
    model = """
    class Interface:
        def __init__(self):
            self.never = Mamba()

    class Base:
        def __init__(self):
            self.attn = Attention()

    class M(Interface, Base):
        def __init__(self):
            super(Interface, self).__init__()
    """
    assert built(model) == {frozenset({"Attention"})}


def test_a_parameter_given_a_value_read_from_the_layers_position_branches_both_ways_in_one_model():
    # Qwen3.5: `layer_type=config.layer_types[extract_layer_index(prefix)]`, tested as `self.layer_type`.
    model = """
    class Layer:
        def __init__(self, config, layer_type, prefix=""):
            self.layer_type = layer_type
            if self.layer_type == "linear_attention":
                self.mixer = Mamba()
            else:
                self.attn = Attention()

    class M:
        def __init__(self, config, prefix=""):
            self.layers = [Layer(config, layer_type=config.layer_types[i]) for i in range(config.n)]
    """
    assert frozenset({"Mamba", "Attention"}) in built(model)
    constant = model.replace("layer_type=config.layer_types[i]", "layer_type=config.kind")
    assert built(constant) == {frozenset({"Mamba"}), frozenset({"Attention"})}


def test_a_class_handed_in_as_a_parameter_builds_its_default():
    # InternS1-Pro: `decoder_layer_type: type = InternS1ProMoeDecoderLayer`, called as `decoder_layer_type(…)`.
    model = """
    class M:
        def __init__(self, vllm_config, prefix="", layer_type=Mla):
            self.layers = [layer_type() for _ in range(4)]
    """
    assert built(model) == {frozenset({"Mla"})}
    assert built(model.replace("layer_type=Mla", "layer_type=None")) == set()  # no layer: the model is not counted


# -------------------------------------------------------------------- promotions only under a setting

GROUPING = """
def unify_hybrid_kv_cache_specs(kv_cache_spec):
    for name, spec in kv_cache_spec.items():
        if isinstance(spec, SlidingWindowSpec):
            kv_cache_spec[name] = FullAttentionSpec(block_size=spec.block_size)

def get_kv_cache_groups(vllm_config, kv_cache_spec):
    if vllm_config.scheduler_config.disable_hybrid_kv_cache_manager:
        unify_hybrid_kv_cache_specs(kv_cache_spec)
    if uniform := UniformTypeKVCacheSpecs.from_specs(kv_cache_spec):
        return [uniform]
    return []
"""
SPECS = frozenset({"KVCacheSpec", "FullAttentionSpec", "SlidingWindowSpec"})
HIERARCHY = SpecHierarchy(
    {"FullAttentionSpec": ("KVCacheSpec",), "SlidingWindowSpec": ("KVCacheSpec",), "KVCacheSpec": ()}
)
ATTENTION = LayerClass("Attention", "l.py:1", frozenset({"FullAttentionSpec", "SlidingWindowSpec"}), (), (), None)


def _compositions(grouping: str):
    paths = read_grouping_paths(
        {"vllm/v1/core/kv_cache_utils.py": textwrap.dedent(grouping).encode()}, "UniformTypeKVCacheSpecs", None, SPECS
    )
    # A full + sliding-window model: its attention layers configured apart (a window given per layer).
    model = Model("M", "m.py", frozenset({"Attention"}), (frozenset({"Attention"}),), varied=frozenset({"Attention"}))
    return paths, compose(Census((ATTENTION,), (model,), frozenset(), ""), paths, HIERARCHY, {})


def test_promotions_called_under_a_setting_are_that_settings_and_make_no_default_container():
    # 0.17.0/0.24.0: `if disable_hybrid_kv_cache_manager: unify_hybrid_kv_cache_specs(…)` turned every
    # full + sliding-window model into a "default" whole-model container; vLLM builds none.
    paths, found = _compositions(GROUPING)
    (path,) = paths
    assert path.guards.promotions == (("SlidingWindowSpec", "FullAttentionSpec"),)
    assert path.guards.promoted_when == "vllm_config.scheduler_config.disable_hybrid_kv_cache_manager"
    assert found and all(
        c.setting.startswith(POSSIBLE) and "disable_hybrid_kv_cache_manager" in c.setting for c in found
    )
    assert not any(c.setting == DEFAULT for c in found)


def test_promotions_every_run_makes_apply_by_default():
    always = GROUPING.replace(
        "    if vllm_config.scheduler_config.disable_hybrid_kv_cache_manager:\n        unify", "    unify"
    )
    paths, found = _compositions(always)
    assert paths[0].guards.promoted_when == ""
    assert {c.setting for c in found} == {DEFAULT}


# ------------------------------------------------------------------------------------- the oracle's finder


def test_the_oracle_calls_the_module_level_grouping_function_not_a_method_of_that_name():
    # 0.34.0's config builder has a method `get_kv_cache_groups`; the function lives in kv_cache_planning.py.
    method = "class Builder:\n    def get_kv_cache_groups(self, specs):\n        pass\n"
    assert not defines_at_module_level(method, "get_kv_cache_groups")
    assert defines_at_module_level(
        method + "def get_kv_cache_groups(config, specs):\n    pass\n", "get_kv_cache_groups"
    )


# ------------------------------------------------------------------ one uniform type: the first layer's base

ORDERED = SpecHierarchy(
    {
        "KVCacheSpec": (),
        "AttentionSpec": ("KVCacheSpec",),
        "FullAttentionSpec": ("AttentionSpec",),
        "TQFullAttentionSpec": ("FullAttentionSpec",),
        "SlidingWindowSpec": ("AttentionSpec",),
        "SlidingWindowMLASpec": ("SlidingWindowSpec",),
    }
)
REGISTERED = {
    "FullAttentionSpec": "FullAttentionSpec",
    "SlidingWindowSpec": "SlidingWindowSpec",
    "SlidingWindowMLASpec": "SlidingWindowMLASpec",
}


def _whole_model(*kinds: tuple[str, str]):
    layers = tuple(
        LayerClass(name, f"l.py:{i}", frozenset({spec}), (), (), None) for i, (name, spec) in enumerate(kinds)
    )
    names = frozenset(name for name, _ in kinds)
    model = Model("M", "m.py", names, (names,))
    path = read_grouping_paths(
        {
            "vllm/v1/core/kv_cache_utils.py": b"def g(specs):\n    if u := UniformTypeKVCacheSpecs.from_specs(specs):\n        return [u]\n"
        },
        "UniformTypeKVCacheSpecs",
        None,
        frozenset(ORDERED.bases),
    )
    return {c.setting for c in compose(Census(layers, (model,), frozenset(), ""), path, ORDERED, REGISTERED)}


def test_a_subclass_the_registry_does_not_name_groups_with_its_nearest_registered_base():
    # 0.24.0's TQFullAttentionSpec is grouped as a FullAttentionSpec (`get_uniform_type_base_spec` walks the MRO).
    assert _whole_model(("Attn", "FullAttentionSpec"), ("Tq", "TQFullAttentionSpec")) == {DEFAULT}


def test_layers_that_are_one_uniform_type_only_when_one_comes_first_make_a_possible_container():
    # 0.34.0's MingV3ASR: a sliding-window layer first takes a sliding-window MLA layer in; the reverse does not.
    (setting,) = _whole_model(("Swa", "SlidingWindowSpec"), ("SwaMla", "SlidingWindowMLASpec"))
    assert setting.startswith(POSSIBLE) and "SlidingWindowSpec layer comes first" in setting
    assert _whole_model(("Attn", "FullAttentionSpec"), ("Swa", "SlidingWindowSpec")) == set()


# ---------------------------------------------------------------------------------------- the budget


def test_each_module_read_is_charged_to_the_budget_once():
    from kvlint.analysis.census.budget import Budget
    from kvlint.analysis.census.instantiation import Program

    texts = {"a.py": b"x" * 100, "b.py": b"y" * 50}
    budget = Budget(160)
    program = Program(texts, set(), budget)
    assert program.tree_charged("a.py") and program.tree_charged("a.py") and program.tree_charged("b.py")
    assert budget.left == 10  # 100 + 50, a.py once
    assert not program.tree_charged("c.py") and budget.left == 10


def test_a_relative_import_climbs_one_package_per_dot_beyond_the_first():
    from kvlint.analysis.census.module_bindings import module_path

    here = "vllm/model_executor/models/m.py"
    texts = {
        "vllm/model_executor/models/llama.py": b"",
        "vllm/model_executor/layers/attention.py": b"",
        "vllm/model_executor/layers/__init__.py": b"",
        "vllm/model_executor/models/__init__.py": b"",
        "vllm/model_executor/__init__.py": b"",
    }
    assert module_path(texts, "llama", here, 1) == "vllm/model_executor/models/llama.py"  # from .llama
    assert module_path(texts, "layers.attention", here, 2) == "vllm/model_executor/layers/attention.py"
    assert module_path(texts, "", here, 1) == "vllm/model_executor/models/__init__.py"  # from . import x
    assert module_path(texts, "", here, 2) == "vllm/model_executor/__init__.py"  # from .. import x
    assert module_path(texts, "vllm.model_executor.layers", here) == "vllm/model_executor/layers/__init__.py"


def test_one_buckets_unproven_link_leaves_the_next_buckets_setting_its_own():
    # A bucketing path: the full-attention bucket's shared block size is unproven (a layer sets its own at run
    # time), the sliding-window bucket's is not; before, the first bucket's "possible" stuck to the second.
    from tests.test_intent_compositions import BASES, HIERARCHY, LAYERS, path

    sized = LayerClass("Sized", "l.py:20", frozenset({"FullAttentionSpec"}), (("block_size", "?"),), (), None)
    swb = LayerClass("Swb", "l.py:21", frozenset({"SlidingWindowSpec"}), (), (), None)
    names = frozenset({"Attn", "Sized", "Swa", "Swb"})
    tree = Census((*LAYERS, sized, swb), (Model("M", "m.py", names, (names,)),), frozenset(), "")
    found = {c.layer_classes: c.setting for c in compose(tree, (path(buckets=True),), HIERARCHY, BASES)}
    assert found[frozenset({"Attn", "Sized"})].startswith(POSSIBLE)
    assert found[frozenset({"Swa", "Swb"})] == DEFAULT


# ------------------------------------------------------------ when a layer class's instances choose apart


def _checkpoints(model: str) -> set[tuple[str, ...]]:
    from kvlint.analysis.census.compositions import checkpoint_key, checkpoints
    from tests.test_intent_census import census_of

    census = census_of(model)
    return {checkpoint_key(kinds) for m in census.models for kinds in checkpoints(census, m)}


_BOTH = ("Mamba:MambaSpec", "Sliding:FullAttentionSpec", "Sliding:SlidingWindowSpec")


def test_a_layer_class_one_call_builds_with_the_models_config_takes_one_branch_of_its_spec_in_every_layer():
    # 0.31.0's FalconH1: `Attention(...)` built by one call for every attention layer, its window the model's
    # (`cache_config.sliding_window`): all full or all sliding, never both in one checkpoint, so no mixed pages.
    model = """
    class M:
        def __init__(self, config, prefix=""):
            self.attn = [Sliding(window=config.window, prefix=f"{prefix}.{i}") for i in range(config.n)]
            self.mixer = Mamba()
    """
    found = _checkpoints(model)
    assert ("Mamba:MambaSpec", "Sliding:FullAttentionSpec") in found and _BOTH not in found
    # Gemma-style: the window given only to some layers, read from the layer's position: both at once.
    per_layer = model.replace("window=config.window", "window=config.windows[i]")
    assert _BOTH in _checkpoints(per_layer)


def test_a_layer_class_built_at_two_places_of_a_model_can_take_both_branches_of_its_spec():
    model = """
    class M:
        def __init__(self, config, prefix=""):
            self.local = Sliding(window=config.window)
            self.glob = Sliding(window=None)
            self.mixer = Mamba()
    """
    assert _BOTH in _checkpoints(model)


def test_a_layer_class_built_in_either_branch_of_a_config_test_takes_one_branch_of_its_spec():
    # 0.17.0's BaiChuan: `Attention(...)` at two lines, one for ALiBi checkpoints and one for rotary ones: every
    # layer of one checkpoint is built by the same line, so they never mix full and sliding-window specs.
    model = """
    class M:
        def __init__(self, config, prefix=""):
            if config.alibi:
                self.attn = Sliding(window=config.window, alibi=True)
            else:
                self.attn = Sliding(window=config.window)
            self.mixer = Mamba()
    """
    assert _BOTH not in _checkpoints(model)


# ---------------------------------------------------------------------- merges that assert one setting


def test_a_merge_asserting_one_setting_is_read_with_how_each_layer_class_writes_it():
    from tests.test_intent_census import census_of

    interface = """
    class MLAAttentionSpec(FullAttentionSpec):
        @classmethod
        def merge(cls, specs):
            dtypes = set(spec.cache_dtype_str for spec in specs)
            assert len(dtypes) == 1, "one quantization method"
            return specs[0]
    """
    written = """
    class DtypeMla(AttentionLayerBase):
        def get_kv_cache_spec(self, vllm_config):
            return MLAAttentionSpec(
                block_size=16,
                cache_dtype_str=vllm_config.cache_config.cache_dtype,
            )
    """
    census = census_of(
        "class M:\n    pass\n", **{"vllm/v1/kv_cache_interface.py": interface, "vllm/layers/dtype_mla.py": written}
    )
    assert census.merge_settings == (("MLAAttentionSpec", frozenset({"cache_dtype_str"})),)
    assert census.merge_ignores_shapes == {"MLAAttentionSpec"}
    layers = {layer.name: layer.spec_settings for layer in census.layers}
    assert layers["DtypeMla"] == (("cache_dtype_str", "vllm_config.cache_config.cache_dtype"),)
    assert layers["Mla"] == ()  # its spec call leaves it unset


def test_a_class_held_in_a_local_and_called_with_a_per_layer_window_is_configured_apart():
    # 0.34.0's Gemma3: `attn_cls = EncoderOnly if … else Attention`, then `attn_cls(…, window=…)` with the window
    # read from `self.is_sliding`, itself set from the layer's index (a self attribute read counts).
    model = """
    class M:
        def __init__(self, config, prefix=""):
            layer_idx = int(prefix.split(".")[-1])
            self.is_sliding = config.layer_types[layer_idx] == "sliding"
            window = config.window if self.is_sliding else None
            cls = Mla if config.mla else Sliding
            self.attn = cls(window=window, prefix=prefix)
            self.mixer = Mamba()
    """
    assert _BOTH in _checkpoints(model)
    assert _BOTH not in _checkpoints(model.replace("window=window", "window=config.window"))


def test_a_method_reads_the_position_its_instances_constructor_set():
    # 0.34.0's GPT-OSS: `self.layer_idx = extract_layer_index(prefix)` in `__init__`, the window decided from it in
    # `_build_attention`, which the constructor calls.
    model = """
    class M:
        def __init__(self, config, prefix=""):
            self.layer_idx = int(prefix.split(".")[-1])
            self.attn = self._build(config)
            self.mixer = Mamba()

        def _build(self, config):
            window = config.window if self.layer_idx % 2 == 0 else None
            return Sliding(window=window)
    """
    assert _BOTH in _checkpoints(model)
    assert _BOTH not in _checkpoints(model.replace("self.layer_idx % 2 == 0", "config.alternate"))
