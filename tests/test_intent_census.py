"""What the census reads (kvlint.analysis.census.reading, .instantiation): which spec classes each layer's
`get_kv_cache_spec` builds and which layer classes each model's constructor builds. Each test is a miniature
tree handed to `read_census` as texts (nothing written, nothing indexed), named after the behaviour it proves;
written against the mutants scripts/mutation.py made of those modules (issue 31)."""

from __future__ import annotations

import textwrap

from kvlint.analysis.census import read_census
from kvlint.analysis.census.budget import Budget
from kvlint.analysis.census.instantiation import Program, platform_test
from kvlint.analysis.census.reading import model_layers

SPECS = frozenset({"FullAttentionSpec", "SlidingWindowSpec", "MLAAttentionSpec", "MambaSpec"})
MODELS = "vllm/model_executor/models"
LAYER_MODULE = "vllm/model_executor/layers/attention.py"
LAYERS = """
class Attention(AttentionLayerBase):
    def get_kv_cache_spec(self, vllm_config):
        return FullAttentionSpec(block_size=16)

class Sliding(Attention):
    def get_kv_cache_spec(self, vllm_config):
        if self.window:
            return SlidingWindowSpec(block_size=16)
        return super().get_kv_cache_spec(vllm_config)

class SlidingOnly(Attention):
    def get_kv_cache_spec(self, vllm_config):
        return SlidingWindowSpec(block_size=16)

class Inherits(SlidingOnly):
    pass

class Mla(AttentionLayerBase):
    def get_kv_cache_spec(self, vllm_config):
        return MLAAttentionSpec(block_size=16)

class Mamba(AttentionLayerBase):
    def get_kv_cache_spec(self, vllm_config):
        return MambaSpec(block_size=16)

class Encoder(Attention):
    def get_kv_cache_spec(self, vllm_config):
        return None
"""
IMPORTS = "from vllm.model_executor.layers.attention import Attention, Sliding, Mla, Mamba\n"


def census_of(model: str, **modules: str):
    """The census of a tree whose registry names one model, `M` in models/m.py, with `model` as its module."""
    texts = {
        f"{MODELS}/registry.py": '_MODELS = {\n    "M": ("m", "M"),\n}\n',
        f"{MODELS}/m.py": IMPORTS + textwrap.dedent(model),
        LAYER_MODULE: LAYERS,
        **{path: textwrap.dedent(text) for path, text in modules.items()},
    }
    return read_census({path: text.encode() for path, text in texts.items()}, SPECS)


def built(model: str, **modules: str) -> set[frozenset[str]]:
    census = census_of(model, **modules)
    return {alternative for m in census.models for alternative in m.alternatives}


# -------------------------------------------------------------------------------- what a layer reports


def test_a_spec_method_calling_super_builds_its_bases_spec_too_and_one_that_does_not_is_final():
    layers = {layer.name: layer.spec_classes for layer in census_of("class M:\n    pass\n").layers}
    assert layers["Sliding"] == {"SlidingWindowSpec", "FullAttentionSpec"}
    assert layers["SlidingOnly"] == {"SlidingWindowSpec"}
    assert layers["Inherits"] == {"SlidingWindowSpec"}  # inherited: the nearest definition
    assert layers["Attention"] == {"FullAttentionSpec"}


def test_a_layer_whose_spec_method_builds_no_spec_has_no_kv_cache():
    assert "Encoder" not in {layer.name for layer in census_of("class M:\n    pass\n").layers}


def test_without_a_model_registry_there_is_no_census():
    texts = {LAYER_MODULE: LAYERS.encode()}
    assert read_census(texts, SPECS) is None


def test_a_model_whose_module_the_tree_lacks_is_counted_unread():
    texts = {
        f"{MODELS}/registry.py": b'_MODELS = {\n    "M": ("m", "M"),\n    "Gone": ("gone", "Gone"),\n}\n',
        f"{MODELS}/m.py": (IMPORTS + "class M:\n    def __init__(self):\n        self.a = Attention()\n").encode(),
        LAYER_MODULE: LAYERS.encode(),
    }
    census = read_census(texts, SPECS)
    assert census.unread == ("Gone",) and [m.name for m in census.models] == ["M"]


# ------------------------------------------------------------------------------ what a model builds


def test_layers_a_models_decoder_layer_builds_are_the_models():
    assert built(
        """
        class DecoderLayer:
            def __init__(self):
                self.attn = Attention()
                self.mixer = Mamba()

        class M:
            def __init__(self):
                self.layers = [DecoderLayer() for _ in range(4)]
        """
    ) == {frozenset({"Attention", "Mamba"})}


def test_a_fused_layer_is_built_with_the_layers_its_own_constructor_builds():
    assert built(
        """
        class Fused(Mla):
            def __init__(self):
                super().__init__()
                self.inner = Sliding()

        class M:
            def __init__(self):
                self.attn = Fused()
        """
    ) == {frozenset({"Fused", "Sliding"})}  # Fused is a layer (an Mla) and builds a Sliding


def test_a_models_import_of_another_model_module_is_followed_through_its_base_class():
    base = """
    from vllm.model_executor.layers.attention import Mamba

    class Base:
        def __init__(self):
            self.mixer = Mamba()
    """
    model = """
    from vllm.model_executor.models.base import Base

    class M(Base):
        def __init__(self):
            super().__init__()
            self.attn = Attention()
    """
    assert built(model, **{f"{MODELS}/base.py": base}) == {frozenset({"Attention", "Mamba"})}
    relative = model.replace("from vllm.model_executor.models.base import", "from .base import")
    assert built(relative, **{f"{MODELS}/base.py": base}) == {frozenset({"Attention", "Mamba"})}
    package = model.replace("from vllm.model_executor.models.base import Base", "from . import base").replace(
        "M(Base)", "M(base.Base)"
    )
    assert built(package, **{f"{MODELS}/base.py": base}) == {frozenset({"Attention", "Mamba"})}


def test_a_constructor_that_does_not_call_super_init_builds_none_of_its_bases_layers():
    model = """
    class Base:
        def __init__(self):
            self.mixer = Mamba()

    class M(Base):
        def __init__(self):
            self.attn = Attention()

    class Inherited(Base):
        pass
    """
    assert built(model) == {frozenset({"Attention"})}
    assert built(model.replace("class M(Base)", "class Old(Base)").replace("class Inherited", "class M")) == {
        frozenset({"Mamba"})
    }


def test_a_config_branch_gives_alternatives_and_an_if_expression_too():
    assert built(
        """
        class M:
            def __init__(self, config):
                self.a = Mla()
                if config.x:
                    self.b = Mamba()
                else:
                    self.b = Attention()
                self.c = Sliding() if config.y else Mla()
        """
    ) == {
        frozenset({"Mla", "Mamba", "Sliding"}),
        frozenset({"Mla", "Mamba"}),
        frozenset({"Mla", "Attention", "Sliding"}),
        frozenset({"Mla", "Attention"}),
    }


def test_the_default_platform_decides_a_platform_branch_and_an_if_expression():
    assert built(
        """
        class M:
            def __init__(self):
                if current_platform.is_rocm():
                    self.a = Mamba()
                else:
                    self.a = Attention()
                if current_platform.is_cuda():
                    self.b = Mla()
                self.c = Sliding() if current_platform.is_cpu() else None
                self.d = None if not current_platform.is_cuda_alike() else Mla()
        """
    ) == {frozenset({"Attention", "Mla"})}


def test_platform_tests_combine_as_python_would_and_a_config_operand_leaves_them_undecided():
    def value(text):
        import ast

        return platform_test(ast.parse(text, mode="eval").body)

    assert value("TYPE_CHECKING") is False
    assert value("current_platform.is_cuda()") is True
    assert value("current_platform.is_rocm()") is False
    assert value("vllm.platforms.current_platform.is_rocm()") is False
    assert value("current_platform.is_rocm(x)") is None
    assert value("other.is_rocm()") is None
    assert value("current_platform.device_name()") is None
    assert value("not current_platform.is_rocm()") is True
    assert value("not config.x") is None
    assert value("current_platform.is_rocm() or current_platform.is_cuda()") is True
    assert value("current_platform.is_rocm() or current_platform.is_cpu()") is False
    assert value("current_platform.is_rocm() or config.x") is None
    assert value("current_platform.is_cuda() and current_platform.is_cuda_alike()") is True
    assert value("current_platform.is_cuda() and current_platform.is_rocm()") is False
    assert value("current_platform.is_cuda() and config.x") is None
    assert value("config.x") is None


def test_a_module_level_platform_branch_binds_the_default_platforms_class():
    assert built(
        """
        if current_platform.is_rocm():
            from vllm.model_executor.layers.attention import Mamba as Impl
        else:
            from vllm.model_executor.layers.attention import Mla as Impl
        if config_flag:
            from vllm.model_executor.layers.attention import Sliding as Either
        try:
            from vllm.model_executor.layers.attention import Attention as Tried
        except ImportError:
            pass

        class M:
            def __init__(self):
                self.a = Impl()
                self.b = Either()
                self.c = Tried()
        """
    ) == {frozenset({"Mla", "Sliding", "Attention"})}


def test_what_a_method_called_on_self_a_factory_or_a_lambda_builds_is_the_models():
    assert built(
        """
        def make_layers(n, layer_fn):
            return [layer_fn(prefix=i) for i in range(n)]

        def factory(config):
            return Mamba()

        class M:
            def __init__(self, config):
                self.layers = make_layers(4, lambda prefix: Attention())
                self.extra = factory(config)
                self._build()
                self.unknown()

            def _build(self):
                self.mla = Mla()
        """
    ) == {frozenset({"Attention", "Mamba", "Mla"})}


def test_a_dict_of_layer_types_a_model_picks_from_builds_each_of_them():
    assert built(
        """
        LAYER_TYPES = {"attention": Attention, "mamba": Mamba}
        NOT_A_TABLE = Sliding

        class M:
            def __init__(self, config):
                self.layers = [LAYER_TYPES[t](config) for t in config.types]
                self.other = NOT_A_TABLE
        """
    ) == {frozenset({"Attention", "Mamba"})}


def test_a_class_only_named_builds_no_layer():
    assert built(
        """
        from typing import Callable

        class M:
            attn_cls: Callable[..., Mla]

            def __init__(self, config, layer):
                self.attn_cls: Callable[..., Mamba] = Attention
                self.sliding: Sliding | None = None
                if isinstance(layer, Sliding) or issubclass(type(layer), Mla):
                    pass
                class Local(Mamba):
                    pass
                import os
                assert Mla
                raise Mamba()
        """
    ) == {frozenset({"Attention"})}


def test_loops_with_blocks_and_try_bodies_build_what_they_hold():
    assert built(
        """
        class M:
            def __init__(self, config):
                for _ in range(2):
                    self.a = Attention()
                while config.more:
                    self.b = Mamba()
                with config.ctx():
                    self.c = Mla()
                try:
                    self.d = Sliding()
                except Exception:
                    self.e = Attention()
        """
    ) == {frozenset({"Attention", "Mamba", "Mla", "Sliding"})}


def test_where_a_model_builds_each_layer_is_kept_as_its_site():
    census = census_of("class M:\n    def __init__(self):\n        self.a = Attention()\n        self.b = Mla()\n")
    (model,) = census.models
    assert set(model.sites) == {("Attention", f"{MODELS}/m.py:4"), ("Mla", f"{MODELS}/m.py:5")}


def test_too_many_independent_branches_merge_into_one_union_marked_merged():
    branches = "".join(
        f"        if config.x{i}:\n            self.a{i} = {cls}()\n"
        for i, cls in enumerate(["Attention", "Mamba", "Mla", "Sliding", "SlidingOnly"])
    )
    header = "from vllm.model_executor.layers.attention import SlidingOnly\n"
    census = census_of(header + "class M:\n    def __init__(self, config):\n" + branches)
    (model,) = census.models
    assert model.merged and model.alternatives == (frozenset({"Attention", "Mamba", "Mla", "Sliding", "SlidingOnly"}),)
    four = "".join(branches.splitlines(keepends=True)[:8])
    (model,) = census_of(header + "class M:\n    def __init__(self, config):\n" + four).models
    assert not model.merged and len(model.alternatives) == 15  # 2**4, less the one that builds nothing


def test_a_constructor_chain_past_the_depth_limit_exceeds_the_budget_not_the_stack():
    import pytest

    from kvlint.analysis.census.budget import BudgetExceeded

    chain = "".join(f"class C{i}:\n    def __init__(self):\n        self.x = C{i + 1}()\n\n" for i in range(120))
    texts = {"m.py": (chain + "class C120:\n    pass\n").encode()}
    # The chain ends in a layer: a chain that builds none is not followed at all (may_build's sieve).
    with pytest.raises(BudgetExceeded):
        model_layers(Program(texts, {"C120"}, Budget()), "m.py", "C0")
    shallow = {"m.py": (chain.split("class C90")[0] + "class C90:\n    pass\n").encode()}
    assert model_layers(Program(shallow, {"C90"}, Budget()), "m.py", "C0") is not None
    assert model_layers(Program(texts, set(), Budget()), "m.py", "C0") is not None


def test_a_constructor_chain_of_exactly_the_depth_limit_is_followed_one_deeper_is_not():
    import pytest

    from kvlint.analysis.census.budget import BudgetExceeded

    def chain(length: int) -> dict[str, bytes]:
        body = "".join(
            f"class C{i}:\n    def __init__(self):\n        self.x = C{i + 1}()\n\n" for i in range(length - 1)
        )
        return {"m.py": (body + f"class C{length - 1}:\n    pass\n").encode()}

    assert model_layers(Program(chain(100), {"C99"}, Budget()), "m.py", "C0") is not None
    with pytest.raises(BudgetExceeded):
        model_layers(Program(chain(101), {"C100"}, Budget()), "m.py", "C0")


def test_an_import_re_exported_twenty_modules_deep_is_followed_not_one_more():
    def reexports(depth: int) -> dict[str, bytes]:
        texts = {f"m{i}.py": f"from m{i + 1} import Layer\n".encode() for i in range(depth)}
        texts[f"m{depth}.py"] = b"class Layer:\n    pass\n"
        return texts

    assert Program(reexports(20), set(), Budget()).resolve("m0.py", "Layer") is not None
    assert Program(reexports(21), set(), Budget()).resolve("m0.py", "Layer") is None


def test_a_module_could_shape_the_census_by_its_folder_or_by_a_word_it_holds():
    from kvlint.analysis.census import could_shape_census

    assert could_shape_census("vllm/model_executor/models/x.py", b"")
    assert could_shape_census("vllm/v1/other.py", b"def get_kv_cache_spec(self):")
    assert not could_shape_census("vllm/v1/other.py", b"nothing here")


def test_the_registry_is_the_registry_module_with_the_most_entries_each_class_once():
    texts = {
        "vllm/other/table.py": b'X = {\n    "A": ("m", "M"),\n    "B": ("m2", "M2"),\n    "C": ("m3", "M3"),\n}\n',
        f"{MODELS}/registry.py": (
            b'_MODELS = {\n    "M": ("m", "M"),\n    "Again": ("m", "M"),\n'
            b'    "Gone1": ("gone1", "X"),\n    "Gone2": ("gone2", "X"),\n}\n'
        ),
        "vllm/extra/registry.py": b'_MODELS = {\n    "Other": ("m", "M"),\n}\n',
        f"{MODELS}/m.py": (IMPORTS + "class M:\n    def __init__(self):\n        self.a = Attention()\n").encode(),
        LAYER_MODULE: LAYERS.encode(),
    }
    census = read_census(texts, SPECS)
    assert [m.name for m in census.models] == ["M"]  # "Again" names the same class: one model
    assert census.unread == ("Gone1", "Gone2")  # two missing modules, each its own model
    tied = {**texts, f"{MODELS}/registry.py": b'_MODELS = {\n    "First": ("m", "M"),\n}\n'}
    tied["vllm/extra/registry.py"] = b'_MODELS = {\n    "Second": ("m", "M"),\n}\n'
    assert [m.name for m in read_census(tied, SPECS).models] == ["First"]  # a tie: the first read


def test_the_spec_method_belongs_to_the_class_indented_around_it_not_a_nested_one_above():
    layers = LAYERS + (
        "\nclass Outer(AttentionLayerBase):\n    class Meta:\n        pass\n\n"
        "    def get_kv_cache_spec(self, vllm_config):\n        return MambaSpec(block_size=16)\n"
    )
    census = census_of("class M:\n    pass\n", **{LAYER_MODULE: layers})
    names = {layer.name for layer in census.layers}
    assert "Outer" in names and "Meta" not in names


def test_classes_deriving_from_each_other_are_read_once_not_forever():
    cyclic = LAYERS + "\nclass Ping(Pong, Attention):\n    pass\n\nclass Pong(Ping):\n    pass\n"
    census = census_of("class M:\n    pass\n", **{LAYER_MODULE: cyclic})
    assert {layer.name: layer.spec_classes for layer in census.layers}["Ping"] == {"FullAttentionSpec"}


def test_a_layers_layouts_are_what_its_backends_nearest_declaration_says():
    layers = LAYERS + (
        "\nclass BaseBackend:\n    @classmethod\n    def supported_kv_cache_layouts(cls):\n"
        "        return (KVCacheLayout.HND, KVCacheLayout.NHD)\n\n"
        "class Backend(BaseBackend):\n    pass\n\n"
        "class Silent:\n    pass\n\n"
        "class Declared(Attention):\n    def get_attn_backend(self):\n        return Backend\n\n"
        "class Undeclared(Attention):\n    def get_attn_backend(self):\n        return Silent\n\n"
        "class Chooses(Attention):\n    def get_attn_backend(self):\n        if x:\n            return Backend\n"
        "        return Silent\n\n"
        "class InheritsIt(Declared):\n    pass\n"
    )
    census = census_of("class M:\n    pass\n", **{LAYER_MODULE: layers})
    layouts = {layer.name: layer.layouts for layer in census.layers}
    assert layouts["Declared"] == ("HND", "NHD") and layouts["InheritsIt"] == ("HND", "NHD")
    assert layouts["Undeclared"] is None and layouts["Chooses"] is None and layouts["Attention"] is None


def test_imports_two_packages_up_and_a_class_named_through_its_module_are_followed():
    assert built(
        """
        from ..layers.attention import Mamba
        from ..layers import attention

        class M:
            def __init__(self):
                self.a = Mamba()
                self.b = attention.Mla()
                self.kind = attention.Sliding
        """
    ) == {frozenset({"Mamba", "Mla", "Sliding"})}


def test_a_layer_function_defined_inside_the_constructor_is_read():
    assert built(
        """
        class M:
            def __init__(self, config):
                def layer_fn(prefix):
                    return Mamba()

                self.layers = make_layers(config.n, layer_fn)
        """
    ) == {frozenset({"Mamba"})}


def test_a_constructor_or_function_reaching_itself_is_read_once():
    assert built(
        """
        def build(n):
            return [Mla(), build(n - 1)]

        class Node:
            def __init__(self, depth):
                self.attn = Attention()
                self.child = Node(depth - 1) if depth else None

        class M:
            def __init__(self):
                self.root = Node(3)
                self.extra = build(2)
        """
    ) == {frozenset({"Attention", "Mla"})}
