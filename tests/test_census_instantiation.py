"""Which layers a model builds, read from its constructor (kvlint.analysis.census.instantiation): one
miniature tree per pattern, on the mini vLLM of test_compositions."""

from __future__ import annotations

from kvlint.analysis.tree_index import build_tree_index
from tests.mini_vllm import write_tree
from tests.test_compositions import LAYERS, files

MODEL = "vllm/model_executor/models/dsa_hybrid.py"
IMPORTS = """
from vllm.model_executor.layers.attention import Attention, MLAAttention
from vllm.model_executor.layers.indexer import IndexerCache
from vllm.platforms import current_platform
"""


def census_of(tmp_path, model: str, **extra: str):
    tree = files(**{MODEL: IMPORTS + model})
    tree.update(extra)
    index = build_tree_index(write_tree(tmp_path / "tree", tree))
    models = {m.name: m for m in index.census.models}
    return models.get("DsaHybridForCausalLM"), index.container_compositions()


def test_a_config_branch_makes_alternatives_not_a_union(tmp_path):
    model, found = census_of(
        tmp_path,
        """
class DsaHybridForCausalLM:
    def __init__(self, config):
        self.mla = MLAAttention()
        if config.use_indexer:
            self.extra = IndexerCache()
        else:
            self.extra = Attention()
""",
    )
    assert set(model.alternatives) == {
        frozenset({"MLAAttention", "IndexerCache"}),
        frozenset({"MLAAttention", "Attention"}),
    }
    whole = [c for c in found if c.model == "DsaHybridForCausalLM" and c.path.endswith(":get_kv_cache_groups")]
    # One whole-model container per alternative (the mini registry groups full and MLA specs), never the union.
    assert sorted(sorted(c.layer_classes) for c in whole) == [
        ["Attention", "MLAAttention"],
        ["IndexerCache", "MLAAttention"],
    ]
    # The witness is a checkpoint whose config takes the branch: the layers only some checkpoints build are named.
    assert {c.config_branch for c in whole} == {("Attention",), ("IndexerCache",)}
    from rules._container_remedy import built_by

    indexer = next(c for c in whole if "IndexerCache" in c.layer_classes)
    assert built_by(indexer)["checkpoint"] == (
        "a DsaHybridForCausalLM checkpoint whose config builds IndexerCache (dsa_hybrid.py:9)"
    )


def test_a_model_without_a_config_branch_is_its_own_witness(tmp_path):
    from rules._container_remedy import built_by

    _, found = census_of(
        tmp_path,
        """
class DsaHybridForCausalLM:
    def __init__(self, config):
        self.mla = MLAAttention()
        self.extra = IndexerCache()
""",
    )
    [whole] = [c for c in found if c.model == "DsaHybridForCausalLM" and c.path.endswith(":get_kv_cache_groups")]
    assert whole.config_branch == () and built_by(whole)["checkpoint"] == "DsaHybridForCausalLM"


def test_another_platforms_branch_is_not_built_by_default(tmp_path):
    model, _ = census_of(
        tmp_path,
        """
class DsaHybridForCausalLM:
    def __init__(self):
        self.mla = MLAAttention()
        if current_platform.is_rocm():
            self.indexer = IndexerCache()
""",
    )
    assert model.alternatives == (frozenset({"MLAAttention"}),)


def test_an_import_adds_no_layers_and_a_wrapper_is_followed(tmp_path):
    wrapper = "vllm/model_executor/layers/wrapper.py"
    model, _ = census_of(
        tmp_path,
        """
from vllm.model_executor.layers.wrapper import Wrapper

class DsaHybridForCausalLM:
    def __init__(self):
        self.attn = Wrapper()
""",
        **{
            wrapper: (
                "from vllm.model_executor.layers.indexer import IndexerCache\n"
                "from vllm.model_executor.layers.attention import MLAAttention\n\n"
                "class Wrapper:\n    def __init__(self):\n        self.inner = MLAAttention()\n"
            )
        },
    )
    # The wrapper's module imports IndexerCache; only the MLA layer its constructor builds counts.
    assert model.alternatives == (frozenset({"MLAAttention"}),)


def test_a_layer_whose_spec_is_none_has_no_kv_cache(tmp_path):
    attention = LAYERS["vllm/model_executor/layers/attention.py"] + (
        "\n        class EncoderOnly(Attention):\n"
        "            def get_kv_cache_spec(self, vllm_config):\n"
        "                return None\n"
    )
    model, _ = census_of(
        tmp_path,
        """
from vllm.model_executor.layers.attention import EncoderOnly

class DsaHybridForCausalLM:
    def __init__(self):
        self.layers = [MLAAttention(), EncoderOnly()]
""",
        **{"vllm/model_executor/layers/attention.py": attention},
    )
    assert model.alternatives == (frozenset({"MLAAttention"}),)


def test_an_annotation_names_classes_it_builds_none_of(tmp_path):
    model, _ = census_of(
        tmp_path,
        """
class DsaHybridForCausalLM:
    def __init__(self, config):
        attn_cls: Callable[..., MLAAttention | Attention]
        if config.use_mla:
            attn_cls = MLAAttention
        else:
            attn_cls = Attention
        self.attn = attn_cls()
""",
    )
    assert set(model.alternatives) == {frozenset({"MLAAttention"}), frozenset({"Attention"})}


def test_where_the_model_builds_each_layer_is_evidence_of_its_compositions(tmp_path):
    model, found = census_of(
        tmp_path,
        """
class DsaHybridForCausalLM:
    def __init__(self):
        self.mla = MLAAttention()
        self.indexer = IndexerCache()
""",
    )
    assert dict(model.sites) == {"MLAAttention": f"{MODEL}:7", "IndexerCache": f"{MODEL}:8"}
    whole = next(c for c in found if c.model == "DsaHybridForCausalLM")
    assert whole.built_at == (("IndexerCache", f"{MODEL}:8"), ("MLAAttention", f"{MODEL}:7"))
    assert whole.checkpoints == (("IndexerCache:MLAAttentionSpec", "MLAAttention:MLAAttentionSpec"),)
    assert "one uniform type" in whole.guard


def test_a_model_whose_class_the_tree_lacks_is_counted_not_dropped(tmp_path):
    registry = (
        "_MODELS = {\n"
        '    "DsaHybridForCausalLM": ("dsa_hybrid", "DsaHybridForCausalLM"),\n'
        '    "GoneForCausalLM": ("gone", "GoneForCausalLM"),\n'
        '    "MissingClassForCausalLM": ("dsa_hybrid", "NoSuchClass"),\n'
        "}\n"
    )
    tree = files(**{"vllm/model_executor/models/registry.py": registry})
    census = build_tree_index(write_tree(tmp_path / "tree", tree)).census
    assert census.unread == ("GoneForCausalLM", "MissingClassForCausalLM")
    assert [m.name for m in census.models] == ["DsaHybridForCausalLM"]


# A model class that builds its inner model through a class attribute a subclass may rebind (vLLM's
# `DeepseekV2ForCausalLM.model_cls`), and a draft model that rebinds it on the instance.
PICKED_BY_ATTRIBUTE = """
class DenseModel:
    def __init__(self):
        self.attn = Attention()


class SparseModel:
    def __init__(self):
        self.mla = MLAAttention()
        self.indexer = IndexerCache()


class BaseForCausalLM:
    model_cls = DenseModel

    def __init__(self):
        self.model = self.model_cls()


class DsaHybridForCausalLM(BaseForCausalLM):
    model_cls = SparseModel


class PlainForCausalLM(BaseForCausalLM):
    pass


class DraftForCausalLM(DsaHybridForCausalLM):
    def __init__(self):
        self.model_cls = DenseModel
        super().__init__()
"""

REGISTRY_WITH_DRAFTS = """
_MODELS = {
    "DsaHybridForCausalLM": ("dsa_hybrid", "DsaHybridForCausalLM"),
    "PlainForCausalLM": ("dsa_hybrid", "PlainForCausalLM"),
}

_SPECULATIVE_DECODING_MODELS = {
    "DraftForCausalLM": ("dsa_hybrid", "DraftForCausalLM"),
    "EagleDsaForCausalLM": ("dsa_hybrid", "SparseModel"),
}
"""


def _census_with_drafts(tmp_path):
    tree = files(
        **{MODEL: IMPORTS + PICKED_BY_ATTRIBUTE, "vllm/model_executor/models/registry.py": REGISTRY_WITH_DRAFTS}
    )
    index = build_tree_index(write_tree(tmp_path / "tree", tree))
    return {m.name: m for m in index.census.models}, index


def test_a_class_picked_through_a_class_attribute_is_the_instance_classs(tmp_path):
    models, _ = _census_with_drafts(tmp_path)
    # The subclass's binding wins over the base's, and each model gets its own, whatever the reading order.
    assert models["DsaHybridForCausalLM"].alternatives == (frozenset({"MLAAttention", "IndexerCache"}),)
    assert models["PlainForCausalLM"].alternatives == (frozenset({"Attention"}),)
    # An instance attribute set in the constructor wins over every class attribute: no union with it.
    assert models["DraftForCausalLM"].alternatives == (frozenset({"Attention"}),)


def test_the_registry_s_speculative_decoding_models_are_drafts(tmp_path):
    models, _ = _census_with_drafts(tmp_path)
    assert models["EagleDsaForCausalLM"].draft and models["DraftForCausalLM"].draft
    assert not models["DsaHybridForCausalLM"].draft and not models["PlainForCausalLM"].draft


def test_a_main_model_is_named_before_a_draft_model_building_the_same_container(tmp_path):
    from kvlint.analysis.flow.layer_selection import rank_witnesses

    _, index = _census_with_drafts(tmp_path)
    found = tuple(c for c in index.container_compositions() if c.layer_classes == {"MLAAttention", "IndexerCache"})
    assert {c.model for c in found} == {"DsaHybridForCausalLM", "EagleDsaForCausalLM"}
    for order in (found, found[::-1]):
        assert rank_witnesses(order, index.census)[0].model == "DsaHybridForCausalLM"


def test_a_branch_on_the_layer_s_position_goes_both_ways_in_one_model(tmp_path):
    # MiniMax-M3's decoder layer: the first layers dense, the rest sparse, decided by the layer's index.
    model, found = census_of(
        tmp_path,
        """
class DecoderLayer:
    def __init__(self, config, prefix):
        layer_id = int(prefix.split(".")[-1])
        is_sparse_layer = layer_id in config.sparse_ids
        if is_sparse_layer:
            self.attn = MLAAttention()
            self.indexer = IndexerCache()
        else:
            self.attn = Attention()


class DsaHybridForCausalLM:
    def __init__(self, config, prefix=""):
        self.layers = make_layers(config.n, lambda prefix: DecoderLayer(config, prefix))
""",
    )
    assert set(model.alternatives) == {
        frozenset({"MLAAttention", "IndexerCache"}),
        frozenset({"Attention"}),
        frozenset({"MLAAttention", "IndexerCache", "Attention"}),
    }


def test_a_value_a_comprehension_folds_is_no_layer_position(tmp_path):
    model, _ = census_of(
        tmp_path,
        """
class DsaHybridForCausalLM:
    def __init__(self, config, prefix=""):
        layer_id = int(prefix.split(".")[-1])
        self.layer_id = layer_id  # binds an attribute of `self`: `self` is no position
        use_mha = all(dim == 0 for dim in (config.a, config.b))
        self.use_mha = use_mha
        if self.use_mha:
            self.attn = Attention()
        else:
            self.attn = MLAAttention()
""",
    )
    assert set(model.alternatives) == {frozenset({"Attention"}), frozenset({"MLAAttention"})}


def test_a_generating_model_is_named_before_a_pooling_model_building_the_same_container(tmp_path):
    from kvlint.analysis.census.reading import witness_order
    from kvlint.analysis.flow.layer_selection import rank_witnesses

    registry = REGISTRY_WITH_DRAFTS.replace("_SPECULATIVE_DECODING_MODELS", "_EMBEDDING_MODELS").replace(
        '"EagleDsaForCausalLM"', '"AaaDsaEmbeddingModel"'
    )
    tree = files(**{MODEL: IMPORTS + PICKED_BY_ATTRIBUTE, "vllm/model_executor/models/registry.py": registry})
    index = build_tree_index(write_tree(tmp_path / "tree", tree))
    models = {m.name: m for m in index.census.models}
    assert models["AaaDsaEmbeddingModel"].pooling and not models["DsaHybridForCausalLM"].pooling
    found = tuple(c for c in index.container_compositions() if c.layer_classes == {"MLAAttention", "IndexerCache"})
    assert {c.model for c in found} == {"DsaHybridForCausalLM", "AaaDsaEmbeddingModel"}
    for order in (found, found[::-1]):
        assert rank_witnesses(order, index.census)[0].model == "DsaHybridForCausalLM"
    # The same order names a hybrid's Mamba witness (kvlint.analysis.hybrid_witness).
    first = sorted(index.census.models, key=witness_order)[0]
    assert not first.pooling


# A base model picks its layer types from `layer_types or ALL_LAYER_TYPES`; a subclass hands its own (vLLM 0.29.0's
# Cosmos3 Edge gives NemotronHModel attention and MLP layers only: no Mamba layer is built).
LAYER_TYPES = """
ALL_LAYER_TYPES = {"*": Attention, "M": MambaMixer}


class BaseModel:
    def __init__(self, config, layer_types=None):
        types = layer_types or ALL_LAYER_TYPES
        self.layers = [types[t]() for t in config.pattern]


class DsaHybridForCausalLM:
    def __init__(self, config):
        self.model = BaseModel(config, layer_types={"*": Attention})
"""


def test_a_layer_type_table_the_caller_hands_replaces_the_default(tmp_path):
    mamba = "from vllm.model_executor.layers.mamba import MambaMixer\n"
    layer = "vllm/model_executor/layers/mamba.py"
    mixer = "class MambaMixer:\n    def get_kv_cache_spec(self):\n        return MambaSpec()\n"
    model, _ = census_of(tmp_path / "given", mamba + LAYER_TYPES, **{layer: mixer})
    assert model.alternatives == (frozenset({"Attention"}),)
    # Given nothing (or None), the default table is read: both kinds of layers.
    for call in ("BaseModel(config)", "BaseModel(config, layer_types=None)"):
        text = LAYER_TYPES.replace('BaseModel(config, layer_types={"*": Attention})', call)
        model, _ = census_of(tmp_path / call[-5:-1], mamba + text, **{layer: mixer})
        assert model.layers == {"Attention", "MambaMixer"}, call
    # A subclass without a constructor hands its caller's arguments on; one with a constructor, its super() call's.
    for text in (
        LAYER_TYPES.replace("self.model = BaseModel(", "self.model = Sub(") + "\n\nclass Sub(BaseModel):\n    pass\n",
        LAYER_TYPES.replace('self.model = BaseModel(config, layer_types={"*": Attention})', "self.model = Sub(config)")
        + '\n\nclass Sub(BaseModel):\n    def __init__(self, config):\n        super().__init__(config, {"*": Attention})\n',
    ):
        model, _ = census_of(tmp_path / str(len(text)), mamba + text, **{layer: mixer})
        assert model.alternatives == (frozenset({"Attention"}),)


def test_a_class_attribute_called_through_type_of_self_is_built(tmp_path):
    # vLLM 0.29.0's DeepSeek-V3.2 indexer: `self.k_cache = type(self).indexer_cache_cls(...)`.
    model, _ = census_of(
        tmp_path,
        """
class Indexer:
    indexer_cache_cls = IndexerCache

    def __init__(self):
        self.k_cache = type(self).indexer_cache_cls()


class DsaHybridForCausalLM:
    def __init__(self, config):
        self.mla = MLAAttention()
        self.indexer = Indexer()
""",
    )
    assert model.alternatives == (frozenset({"MLAAttention", "IndexerCache"}),)


def test_a_witness_shows_the_architecture_name_its_layers_are_named_after(tmp_path):
    from rules._container_remedy import built_by

    # vLLM 0.27.1 maps both `DeepseekV3ForCausalLM` and `DeepseekV32ForCausalLM` to one class.
    registry = '_MODELS = {\n    "AaaForCausalLM": ("dsa_hybrid", "DsaHybridForCausalLM"),\n'
    registry += '    "IndexerForCausalLM": ("dsa_hybrid", "DsaHybridForCausalLM"),\n}\n'
    model = "\nclass DsaHybridForCausalLM:\n    def __init__(self):\n        self.a = MLAAttention()\n"
    model += "        self.b = IndexerCache()\n"
    tree = files(**{MODEL: IMPORTS + model, "vllm/model_executor/models/registry.py": registry})
    index = build_tree_index(write_tree(tmp_path / "tree", tree))
    [found] = [m for m in index.census.models]
    assert found.name == "AaaForCausalLM" and found.aliases == ("IndexerForCausalLM",)
    [whole] = [c for c in index.container_compositions() if c.path.endswith(":get_kv_cache_groups")]
    assert whole.model == "AaaForCausalLM" and whole.architecture == "IndexerForCausalLM"
    assert built_by(whole)["model"] == "IndexerForCausalLM"
    assert built_by(whole)["setting"] == " with default settings"


def test_a_call_through_a_chain_of_attributes_builds_nothing_and_stops_nothing(tmp_path):
    """`torch.nn.Identity()` names no module of the tree: neither the sieve nor the walk can follow it (and
    neither fails on it); the layers around it are built as before."""
    model, _ = census_of(
        tmp_path,
        """
import torch

class DsaHybridForCausalLM:
    def __init__(self, config):
        self.norm = torch.nn.Identity()
        self.mla = MLAAttention()
        self.head = torch.nn.functional.linear
""",
    )
    assert set(model.alternatives) == {frozenset({"MLAAttention"})}
