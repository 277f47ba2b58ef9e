"""Which layers a model builds (kvlint.analysis.census.instantiation): behaviours the mutation gate found
untested, one miniature tree each, on the mini vLLM of test_compositions."""

from __future__ import annotations

from tests.test_census_instantiation import census_of


def test_a_methods_parameter_is_no_position_because_the_constructor_s_namesake_is(tmp_path):
    # The constructor is given `layer_type` per layer; the method it calls takes a `layer_type` of its own,
    # handed a config value: the method's branch is a config branch (one class per checkpoint).
    model, _ = census_of(
        tmp_path,
        """
class DecoderLayer:
    def __init__(self, config, prefix, layer_type):
        self._build(config.kind)

    def _build(self, layer_type):
        if layer_type == "dense":
            self.attn = Attention()
        else:
            self.attn = MLAAttention()


class DsaHybridForCausalLM:
    def __init__(self, config, prefix=""):
        self.layers = make_layers(
            config.n,
            lambda prefix: DecoderLayer(config, prefix, layer_type=config.layer_types[int(prefix.split(".")[-1])]),
        )
""",
    )
    assert set(model.alternatives) == {frozenset({"Attention"}), frozenset({"MLAAttention"})}


def test_a_class_whose_definition_does_not_parse_builds_nothing_and_the_rest_is_read(tmp_path):
    broken = """
from vllm.model_executor.layers.attention import Attention, MLAAttention


class Broken:
    def __init__(self):
        self.attn = Attention(


class Fine:
    def __init__(self):
        self.attn = MLAAttention()
"""
    model, _ = census_of(
        tmp_path,
        """
from vllm.model_executor.models.broken import Broken, Fine


class DsaHybridForCausalLM:
    def __init__(self, config, prefix=""):
        self.a = Broken()
        self.b = Fine()
""",
        **{"vllm/model_executor/models/broken.py": broken},
    )
    assert model.layers == frozenset({"MLAAttention"})


def test_what_a_comprehension_iterates_over_is_built(tmp_path):
    model, _ = census_of(
        tmp_path,
        """
class DsaHybridForCausalLM:
    def __init__(self, config, prefix=""):
        self.attns = [attn for attn in (Attention(), MLAAttention())]
""",
    )
    assert model.layers == frozenset({"Attention", "MLAAttention"})


def test_module_values_that_name_each_other_are_read_once_not_forever(tmp_path):
    # A crafted module: two tables that hold each other (Python would fail importing it; the census must not).
    model, _ = census_of(
        tmp_path,
        """
LAYERS = {"dense": Attention, "more": OTHERS}
OTHERS = {"sparse": MLAAttention, "back": LAYERS}


class DsaHybridForCausalLM:
    def __init__(self, config, prefix=""):
        self.attn = LAYERS[config.kind]()
""",
    )
    assert model is not None and "Attention" in model.layers
