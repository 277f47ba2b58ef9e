"""The census × grouping paths on a miniature vLLM: which containers its models build, by default or opt-in,
and what KV101 says about a group-spec check because of it (error, warning, nothing)."""

from __future__ import annotations

import json

import pytest

from kvlint.analysis.tree_index import build_tree_index
from tests.kvlint_runner import run_kvlint
from tests.mini_vllm import MINI_VLLM, write_tree

INTERFACE = """
    class KVCacheSpec:
        pass

    class AttentionSpec(KVCacheSpec):
        pass

    class FullAttentionSpec(AttentionSpec):
        pass

    class MLAAttentionSpec(FullAttentionSpec):
        pass

    class HiddenStateCacheSpec(FullAttentionSpec):
        pass

    class MambaSpec(KVCacheSpec):
        pass

    class UniformTypeKVCacheSpecs(KVCacheSpec):
        pass

    def iter_layer_specs(kv_cache_spec):
        return (kv_cache_spec,)
    """

LAYOUT = """
    import enum
    _DIM_L, _DIM_B = 0, 1

    class KVCacheLayout(enum.Enum):
        LBHNC = (0, 1, 2, 3, 4)
        BLHNC = (1, 0, 2, 3, 4)

        @property
        def is_block_outermost(self) -> bool:
            return self.value[0] == _DIM_B

    def resolve_kv_cache_layout(vllm_config):
        if (requested := envs.VLLM_KV_CACHE_LAYOUT) is not None:
            return requested
    """

PLANNING = """
    from vllm.v1.kv_cache_interface import HiddenStateCacheSpec, UniformTypeKVCacheSpecs

    def _get_packed_kv_cache_groups(vllm_config, kv_cache_spec):
        layout = vllm_config.cache_config.get_resolved_kv_cache_layout()
        page_sizes = {spec.page_size_bytes for spec in kv_cache_spec.values()}
        if not layout.is_block_outermost or len(page_sizes) <= 1:
            return None
        buckets = []
        for name, spec in kv_cache_spec.items():
            for bucket in buckets:
                if UniformTypeKVCacheSpecs.is_uniform_type({**bucket, name: spec}):
                    bucket[name] = spec
                    break
            else:
                buckets.append({name: spec})
        return [UniformTypeKVCacheSpecs.from_specs(bucket) for bucket in buckets]

    def get_kv_cache_groups(vllm_config, kv_cache_spec):
        if uniform_spec := UniformTypeKVCacheSpecs.from_specs(kv_cache_spec):
            return [uniform_spec]
        filtered_spec = {k: v for k, v in kv_cache_spec.items() if not isinstance(v, HiddenStateCacheSpec)}
        return _get_packed_kv_cache_groups(vllm_config, filtered_spec)
    """

SPEC_REGISTRY = """
    def register_all(registry):
        registry.register(FullAttentionSpec, FullManager, uniform_type_base_spec=FullAttentionSpec)
        registry.register(MLAAttentionSpec, FullManager, uniform_type_base_spec=FullAttentionSpec)
        registry.register(MambaSpec, MambaManager, uniform_type_base_spec=MambaSpec)
    """

LAYERS = {
    "vllm/model_executor/layers/attention.py": """
        class Attention(AttentionLayerBase):
            def get_kv_cache_spec(self, vllm_config):
                return FullAttentionSpec(block_size=16)

        class MLAAttention(AttentionLayerBase):
            def get_kv_cache_spec(self, vllm_config):
                return MLAAttentionSpec(block_size=16)
        """,
    "vllm/model_executor/layers/indexer.py": """
        class IndexerBackend(AttentionBackend):
            @classmethod
            def supported_kv_cache_layouts(cls):
                return (KVCacheLayout.BLHNC,)

        class IndexerCache(AttentionLayerBase):
            def get_kv_cache_spec(self, vllm_config):
                return MLAAttentionSpec(block_size=16)

            def get_attn_backend(self):
                return IndexerBackend
        """,
    "vllm/model_executor/layers/mamba/abstract.py": """
        class MambaBase(AttentionLayerBase):
            use_flashinfer_replayssm: bool = False

            def get_kv_cache_spec(self, vllm_config):
                return MambaSpec(block_size=16, mamba_type=self.mamba_type)
        """,
    "vllm/model_executor/layers/mamba/mixers.py": """
        from vllm.model_executor.layers.mamba.abstract import MambaBase

        class Mamba2Mixer(MambaBase):
            def __init__(self, vllm_config):
                self.use_flashinfer_replayssm = vllm_config.use_flashinfer_replayssm

            @property
            def mamba_type(self):
                return MambaType.MAMBA2

        class DeltaNet(MambaBase):
            @property
            def mamba_type(self):
                return MambaType.GDN_ATTN
        """,
}

MODELS = {
    "vllm/model_executor/models/registry.py": """
        _MODELS = {
            "DsaForCausalLM": ("dsa", "DsaForCausalLM"),
            "DsaHybridForCausalLM": ("dsa_hybrid", "DsaHybridForCausalLM"),
            "Mamba2HybridForCausalLM": ("mamba2_hybrid", "Mamba2HybridForCausalLM"),
        }
        """,
    "vllm/model_executor/models/dsa.py": """
        from vllm.model_executor.layers.attention import MLAAttention
        from vllm.model_executor.layers.indexer import IndexerCache

        class DsaForCausalLM:
            def __init__(self):
                self.layers = [MLAAttention(), IndexerCache()]
        """,
    "vllm/model_executor/models/dsa_hybrid.py": """
        from vllm.model_executor.layers.attention import MLAAttention
        from vllm.model_executor.layers.indexer import IndexerCache
        from vllm.model_executor.layers.mamba.mixers import DeltaNet

        class DsaHybridForCausalLM:
            def __init__(self):
                self.layers = [MLAAttention(), IndexerCache(), DeltaNet()]
        """,
    "vllm/model_executor/models/mamba2_hybrid.py": """
        from vllm.model_executor.layers.attention import Attention, HiddenStates
        from vllm.model_executor.layers.mamba.mixers import Mamba2Mixer

        class Mamba2HybridForCausalLM:
            def __init__(self):
                self.layers = [Attention(), Mamba2Mixer()]
        """,
}

CONNECTOR = "vllm/distributed/kv_transfer/kv_connector/v1/foo_connector.py"
CHECKS = """
    class FooConnectorWorker:
        def mamba_groups(self, kv_cache_config):
            return [g for g in kv_cache_config.kv_cache_groups if isinstance(g.kv_cache_spec, MambaSpec)]

        def mamba2_groups(self, kv_cache_config):
            return [
                g
                for g in kv_cache_config.kv_cache_groups
                if isinstance(g.kv_cache_spec, MambaSpec) and g.kv_cache_spec.mamba_type in (MambaType.MAMBA2,)
            ]

        def hidden_groups(self, kv_cache_config):
            return [g for g in kv_cache_config.kv_cache_groups if isinstance(g.kv_cache_spec, HiddenStateCacheSpec)]

        def mla_groups(self, kv_cache_config):
            return [g for g in kv_cache_config.kv_cache_groups if isinstance(g.kv_cache_spec, MLAAttentionSpec)]
    """


def files(**replaced: str) -> dict[str, str]:
    tree = {
        **MINI_VLLM,
        "vllm/v1/kv_cache_interface.py": INTERFACE,
        "vllm/v1/kv_cache_layout.py": LAYOUT,
        "vllm/v1/core/kv_cache_planning.py": PLANNING,
        "vllm/v1/core/single_type_kv_cache_manager.py": SPEC_REGISTRY,
        **LAYERS,
        **MODELS,
        CONNECTOR: CHECKS,
    }
    tree.update({path.replace("__", "/"): text for path, text in replaced.items()})
    return tree


@pytest.fixture
def tree(tmp_path):
    return write_tree(tmp_path / "tree", files())


def compositions_of(root):
    return {(frozenset(c.layer_classes), c.setting, c.model) for c in build_tree_index(root).container_compositions()}


def test_census_reads_models_layers_and_what_each_layer_reports(tree):
    index = build_tree_index(tree)
    census = index.census
    models = {model.name: model.layers for model in census.models}
    assert models == {
        "DsaForCausalLM": {"MLAAttention", "IndexerCache"},
        "DsaHybridForCausalLM": {"MLAAttention", "IndexerCache", "DeltaNet"},
        "Mamba2HybridForCausalLM": {"Attention", "Mamba2Mixer"},
    }
    mixer = census.layer("Mamba2Mixer")
    assert mixer.spec_classes == {"MambaSpec"} and dict(mixer.spec_fields)["mamba_type"] == "MAMBA2"
    assert dict(mixer.attributes)["use_flashinfer_replayssm"] == "use_flashinfer_replayssm"  # set at run time
    assert dict(census.layer("DeltaNet").attributes)["use_flashinfer_replayssm"] == "False"  # the base's default
    assert census.layer("IndexerCache").layouts == ("BLHNC",)
    assert census.block_outermost == {"BLHNC"} and census.layout_setting == "VLLM_KV_CACHE_LAYOUT"


MIXED = "with mixed page sizes, which the census does not decide"
OPT_IN = f"opt-in: VLLM_KV_CACHE_LAYOUT=BLHNC (a block-outermost layout), {MIXED}"


def test_containers_by_path_and_setting(tree):
    found = compositions_of(tree)
    # The whole-model container: MLA plus indexer share one uniform type, every layer of the model; by default.
    assert (frozenset({"MLAAttention", "IndexerCache"}), "default", "DsaForCausalLM") in found
    # With a Mamba layer beside them the whole model is no one type: no whole-model container for that model.
    # The packed path: the indexer's backend allows only a block-outermost layout, but the path also needs mixed
    # page sizes, which the census does not decide: possible, never default. A plain Mamba2 hybrid is packed
    # only when a user picks such a layout.
    hybrid = {(layers, setting) for layers, setting, model in found if model == "DsaHybridForCausalLM"}
    assert {layers for layers, _ in hybrid} == {frozenset({"MLAAttention", "IndexerCache"}), frozenset({"DeltaNet"})}
    assert all(setting.startswith("possible: " + MIXED) for _, setting in hybrid)
    assert (frozenset({"Mamba2Mixer"}), OPT_IN, "Mamba2HybridForCausalLM") in found
    assert not any("Mamba2Mixer" in layers and setting == "default" for layers, setting, _ in found)


PADDING = """
    class Platform:
        @classmethod
        def _align_hybrid_block_size(cls, vllm_config):
            vllm_config.cache_config.mamba_page_size_padded = attn_page_size
    """


def test_a_plain_mamba_hybrid_whose_pages_the_platform_pads_never_reaches_the_packed_path(tmp_path):
    root = write_tree(tmp_path / "tree", files(**{"vllm/platforms/interface.py": PADDING}))
    found = compositions_of(root)
    assert not any(model == "Mamba2HybridForCausalLM" for _, _, model in found)
    # Two attention kinds beside the state layer can still differ in page size: the DSA hybrid stays possible.
    assert any(model == "DsaHybridForCausalLM" for _, _, model in found)
    assert build_tree_index(root).census.mamba_page_padding == "vllm/platforms/interface.py:4"


def test_a_backend_declaring_no_block_outermost_layout_makes_the_opt_in_fail(tmp_path):
    attention = LAYERS["vllm/model_executor/layers/attention.py"].replace(
        "class Attention(AttentionLayerBase):",
        "class CpuBackend(AttentionBackend):\n"
        "            @classmethod\n"
        "            def supported_kv_cache_layouts(cls):\n"
        "                return (KVCacheLayout.LBHNC,)\n\n"
        "        class Attention(AttentionLayerBase):\n"
        "            def get_attn_backend(self):\n"
        "                return CpuBackend\n",
    )
    root = write_tree(tmp_path / "tree", files(**{"vllm/model_executor/layers/attention.py": attention}))
    assert not any(model == "Mamba2HybridForCausalLM" for _, _, model in compositions_of(root))


def test_without_a_block_outermost_only_backend_the_packed_path_is_opt_in(tmp_path):
    indexer = LAYERS["vllm/model_executor/layers/indexer.py"].replace("(KVCacheLayout.BLHNC,)", "None")
    root = write_tree(tmp_path / "tree", files(**{"vllm/model_executor/layers/indexer.py": indexer}))
    assert not any(layers == {"DeltaNet"} and setting == "default" for layers, setting, _ in compositions_of(root))


def test_hidden_state_layers_never_reach_the_packed_path(tmp_path):
    models = dict(MODELS)
    models["vllm/model_executor/models/mamba2_hybrid.py"] = MODELS["vllm/model_executor/models/mamba2_hybrid.py"]
    layers = LAYERS["vllm/model_executor/layers/attention.py"] + (
        "\n\n        class HiddenStates(AttentionLayerBase):\n"
        "            def get_kv_cache_spec(self, vllm_config):\n"
        "                return HiddenStateCacheSpec(block_size=16)\n"
    )
    model = MODELS["vllm/model_executor/models/mamba2_hybrid.py"].replace(
        "Mamba2Mixer()", "Mamba2Mixer(), HiddenStates()"
    )
    root = write_tree(
        tmp_path / "tree",
        files(
            **{"vllm/model_executor/layers/attention.py": layers, "vllm/model_executor/models/mamba2_hybrid.py": model}
        ),
    )
    found = compositions_of(root)
    assert not any("HiddenStates" in layers and "Attention" not in layers for layers, _, _ in found)


def test_no_registry_no_census(tmp_path):
    root = write_tree(tmp_path / "tree", {**files(), "vllm/model_executor/models/registry.py": "_MODELS = {}\n"})
    assert build_tree_index(root).container_compositions() is None


def test_kv101_severity_follows_the_model_and_setting_that_build_the_counterexample(tree):
    completed = run_kvlint("check", "--no-cache", "--format", "json", "--select", "KV101", CONNECTOR, cwd=tree)
    findings = {f["line"]: f for f in json.loads(completed.stdout)}
    plain, mamba2, mla = findings[3], findings[9], findings[16]
    assert mla["severity"] == "error" and "DsaForCausalLM with default settings" in mla["message"]
    assert "get_kv_cache_groups" in mla["message"]
    # A state container only the packed path builds, which needs mixed page sizes: never an error.
    assert plain["severity"] == "warning" and "DsaHybridForCausalLM" in plain["message"]
    assert mamba2["severity"] == "warning" and "VLLM_KV_CACHE_LAYOUT=BLHNC" in mamba2["message"]
    assert "Mamba2HybridForCausalLM" in mamba2["message"]
    assert set(findings) == {3, 9, 16}, "no container of hidden-state layers alone is built: line 15 is not reported"


def test_kv101_names_the_guard_that_lets_the_witness_through(tree):
    completed = run_kvlint("check", "--no-cache", "--format", "json", "--select", "KV101", CONNECTOR, cwd=tree)
    mla = {f["line"]: f for f in json.loads(completed.stdout)}[16]
    witness = next(
        c for c in build_tree_index(tree).container_compositions() if c.model == "DsaForCausalLM" and c.is_default
    )
    assert witness.guard, "the census has the guard of the path"
    assert (
        f"by `get_kv_cache_groups` ({witness.where()}), whose guard lets them through: {witness.guard};"
        in (mla["message"])
    )


ACCESSOR = """
    class FooConnector:
        def __init__(self, vllm_config, role, kv_cache_config):
            self._pulls_state = any(isinstance(g.kv_cache_spec, MambaSpec) for g in kv_cache_config.transfer_groups)

        @property
        def pulls_state(self):
            return self._pulls_state
    """


@pytest.mark.parametrize("worker_reads", [False, True])
def test_a_value_only_the_scheduler_reads_is_not_reported(tmp_path, worker_reads):
    tree = files(**{CONNECTOR: ACCESSOR})
    tree["vllm/v1/core/sched/scheduler.py"] = "def schedule(connector):\n    return connector.pulls_state\n"
    if worker_reads:
        tree["vllm/v1/worker/runner.py"] = "def run(connector):\n    return connector.pulls_state\n"
    root = write_tree(tmp_path / "tree", tree)
    assert ("pulls_state" in build_tree_index(root).scheduler_consumed) is not worker_reads
    completed = run_kvlint("check", "--no-cache", "--format", "json", "--select", "KV101", CONNECTOR, cwd=root)
    assert bool(json.loads(completed.stdout)) is worker_reads


@pytest.mark.slow
@pytest.mark.parametrize("version", ["0.29.0", "0.34.0"])
def test_real_releases_census_reads_the_same_from_the_files_that_could_matter(vllm_release, version):
    """A rebuild from the project cache reads only could-matter files: the census, the compositions and the
    connector members the scheduler consumes come out the same as from every file."""
    from kvlint.scan.tree_snapshot import could_matter

    root = vllm_release(version)
    only = frozenset(
        path.relative_to(root).as_posix()
        for path in (root / "vllm").rglob("*.py")
        if could_matter(path.relative_to(root).as_posix(), path.read_bytes())
    )
    full, partial = build_tree_index(root), build_tree_index(root, could_matter_files=only)
    assert full.compositions and full.compositions == partial.compositions
    assert full.census == partial.census and full.scheduler_consumed == partial.scheduler_consumed


DOMINATED = """
    def certifiable(kv_cache_config):
        spec = kv_cache_config.kv_cache_groups[0].kv_cache_spec
        if not isinstance(spec, AttentionSpec):
            return False
        return type(spec) is MLAAttentionSpec

    def both(kv_cache_config):
        spec = kv_cache_config.kv_cache_groups[0].kv_cache_spec
        return isinstance(spec, AttentionSpec) and type(spec) is MLAAttentionSpec

    def nested(kv_cache_config):
        spec = kv_cache_config.kv_cache_groups[0].kv_cache_spec
        if isinstance(spec, FullAttentionSpec):
            if type(spec) is MLAAttentionSpec:
                return 1
        return 0
    """


def test_a_check_no_container_reaches_is_a_related_location_of_the_one_before(tmp_path):
    root = write_tree(tmp_path / "tree", files(**{CONNECTOR: DOMINATED}))
    completed = run_kvlint("check", "--no-cache", "--format", "json", "--select", "KV101", CONNECTOR, cwd=root)
    findings = json.loads(completed.stdout)
    assert [f["line"] for f in findings] == [3, 9, 13]  # the first check of each function
    for finding, hidden in zip(findings, (5, 9, 14)):
        assert [(r["line"], r["code"]) for r in finding["related"]] == [(hidden, "KV101")]
        assert "is reached by no container" in finding["related"][0]["message"]


CROSS_FILE = {
    "vllm/v1/kv_cache_interface.py": MINI_VLLM["vllm/v1/kv_cache_interface.py"].replace(
        "class MambaSpec(KVCacheSpec):",
        "class SlidingWindowSpec(AttentionSpec):\n            pass\n\n        class MambaSpec(KVCacheSpec):",
    ),
    "vllm/v1/core/dcp_helpers.py": """
        from vllm.v1.kv_cache_interface import FullAttentionSpec

        def dcp_world_size_for_spec(spec, dcp_world_size):
            return dcp_world_size if isinstance(spec, FullAttentionSpec) else 1
        """,
    "vllm/v1/core/kv_cache_coordinator.py": """
        from vllm.v1.core.dcp_helpers import dcp_world_size_for_spec

        class KVCacheCoordinator:
            def __init__(self, kv_cache_config, dcp_world_size):
                self.block_sizes = [
                    g.kv_cache_spec.block_size * dcp_world_size_for_spec(g.kv_cache_spec, dcp_world_size)
                    for g in kv_cache_config.kv_cache_groups
                ]
        """,
}


def test_a_path_diverging_through_another_modules_reported_helper_is_its_related_location(tmp_path):
    root = write_tree(tmp_path / "tree", {**MINI_VLLM, **CROSS_FILE})
    completed = run_kvlint("check", "--no-cache", "--format", "json", "--select", "KV103,KV105", ".", cwd=root)
    findings = json.loads(completed.stdout)
    coordinator = [f for f in findings if f["path"].endswith("kv_cache_coordinator.py")]
    [helper] = [f for f in findings if f["path"].endswith("dcp_helpers.py")]
    assert coordinator == [] and helper["code"] == "KV105"
    [related] = [r for r in helper["related"] if r["code"] == "KV103"]
    assert related["path"].endswith("kv_cache_coordinator.py") and "SlidingWindowSpec" in related["message"]


# ------------------------------------------------ the grouping code's guards, evaluated per checkpoint

GUARDED_INTERFACE = (
    INTERFACE
    + """
    class SlidingWindowSpec(AttentionSpec):
        pass

    class SlidingWindowMLASpec(SlidingWindowSpec):
        @classmethod
        def merge(cls, specs):
            assert len({spec.sliding_window for spec in specs}) == 1
            return specs[0]
    """
)
FALLBACK = """
    def _promote(kv_cache_spec):
        promotions = {SlidingWindowMLASpec: MLAAttentionSpec, SlidingWindowSpec: FullAttentionSpec}
        return {name: promotions.get(type(spec), type(spec))(spec) for name, spec in kv_cache_spec.items()}

    def _fallback(kv_cache_spec):
        if any(isinstance(spec, (SlidingWindowMLASpec, HiddenStateCacheSpec)) for spec in kv_cache_spec.values()):
            return None
        has_mla = any(isinstance(spec, MLAAttentionSpec) for spec in kv_cache_spec.values())
        has_swa = any(isinstance(spec, SlidingWindowSpec) for spec in kv_cache_spec.values())
        if not (has_mla and has_swa):
            return None
        promoted_specs = _promote(kv_cache_spec)
        uniform_spec = UniformTypeKVCacheSpecs.from_specs(promoted_specs)
        return [uniform_spec] if uniform_spec is not None else None

    def get_kv_cache_groups(vllm_config, kv_cache_spec):
        if uniform_spec := UniformTypeKVCacheSpecs.from_specs(kv_cache_spec):
            return [uniform_spec]
        try:
            kv_cache_spec = unify_kv_cache_spec_page_size(kv_cache_spec)
        except NotImplementedError:
            groups = _fallback(kv_cache_spec)
            if groups is None:
                raise
            return groups
        return hybrid_groups(kv_cache_spec)
    """
GUARDED_LAYERS = """
    class SlidingAttention(AttentionLayerBase):
        def get_kv_cache_spec(self, vllm_config):
            return SlidingWindowSpec(block_size=16)

    class SlidingMLA(AttentionLayerBase):
        def get_kv_cache_spec(self, vllm_config):
            return SlidingWindowMLASpec(block_size=16)

    class OtherSlidingMLA(AttentionLayerBase):
        def get_kv_cache_spec(self, vllm_config):
            return SlidingWindowMLASpec(block_size=16)
    """
GUARDED_MODELS = {
    "MlaSwa": "MLAAttention(), SlidingAttention()",
    "MlaSwaMla": "MLAAttention(), SlidingAttention(), SlidingMLA()",
    "FullSwa": "Attention(), SlidingAttention()",
    "TwoSwaMla": "SlidingMLA(), OtherSlidingMLA()",
}


def guarded_tree(tmp_path):
    registry = "_MODELS = {\n" + "".join(f'    "{m}": ("{m.lower()}", "{m}"),\n' for m in GUARDED_MODELS) + "}\n"
    tree = files(
        **{
            "vllm/v1/kv_cache_interface.py": GUARDED_INTERFACE,
            "vllm/v1/core/kv_cache_planning.py": PLANNING + FALLBACK,
            "vllm/model_executor/layers/sliding.py": GUARDED_LAYERS,
            "vllm/model_executor/models/registry.py": registry,
        }
    )
    tree["vllm/v1/core/kv_cache_planning.py"] = tree["vllm/v1/core/kv_cache_planning.py"].replace(
        "def get_kv_cache_groups(vllm_config, kv_cache_spec):\n        if uniform_spec",
        "def _unused_grouping(vllm_config, kv_cache_spec):\n        if uniform_spec",
        1,
    )
    imports = (
        "from vllm.model_executor.layers.attention import Attention, MLAAttention\n"
        "from vllm.model_executor.layers.sliding import SlidingAttention, SlidingMLA, OtherSlidingMLA\n\n"
    )
    for model, layers in GUARDED_MODELS.items():
        tree[f"vllm/model_executor/models/{model.lower()}.py"] = (
            f"{imports}class {model}:\n    def __init__(self):\n        self.layers = [{layers}]\n"
        )
    return build_tree_index(write_tree(tmp_path / "tree", tree)).container_compositions()


def test_the_fallback_runs_only_for_mla_beside_sliding_window_promoting_it_and_is_only_possible(tmp_path):
    found = guarded_tree(tmp_path)
    fallback = [c for c in found if c.path.endswith(":_fallback")]
    # MLA + sliding window: one whole-model container, the sliding window promoted to full attention; its guard
    # (page sizes that cannot be unified) is not decided statically: possible.
    assert [(c.model, c.layer_classes, c.spec_classes) for c in fallback] == [
        ("MlaSwa", {"MLAAttention", "SlidingAttention"}, {"MLAAttentionSpec", "FullAttentionSpec"})
    ]
    assert fallback[0].setting.startswith("possible: only when unify_kv_cache_spec_page_size raises")
    assert "after unify_kv_cache_spec_page_size raises NotImplementedError" in fallback[0].guard
    # No fallback without MLA (FullSwa), nor beside a sliding-window MLA layer, which the code refuses (MlaSwaMla).
    assert not any(c.model in ("FullSwa", "MlaSwaMla") for c in fallback)


def test_layers_of_one_class_whose_merge_ignores_shapes_are_all_alike(tmp_path):
    # Two sliding-window MLA layer classes: one uniform type, but the spec's merge never compares shapes, so
    # vLLM calls them all alike and builds no container for them.
    assert not any(c.model == "TwoSwaMla" for c in guarded_tree(tmp_path))


def test_containers_shows_each_compositions_evidence(tree):
    text = run_kvlint("containers", ".", cwd=tree).stdout
    assert "5 container compositions (1 by default, 2 opt-in, 2 possible)" in text
    assert "guard: all of the model's layers are one uniform type (not all alike)" in text
    assert "MLAAttention built at vllm/model_executor/models/dsa.py:6 (in DsaForCausalLM)" in text
    rows = json.loads(run_kvlint("containers", "--format", "json", ".", cwd=tree).stdout)
    dsa = next(row for row in rows if row["models"] == ["DsaForCausalLM"])
    assert dsa["kind"] == "default" and "one uniform type" in dsa["guard"]
    assert dsa["evidence"] == [
        {
            "model": "DsaForCausalLM",
            "built_at": {
                "IndexerCache": "vllm/model_executor/models/dsa.py:6",
                "MLAAttention": "vllm/model_executor/models/dsa.py:6",
            },
            "checkpoints": [["IndexerCache:MLAAttentionSpec", "MLAAttention:MLAAttentionSpec"]],
        }
    ]
    assert {row["kind"] for row in rows} == {"default", "opt-in", "possible"}


def test_containers_counts_the_models_the_census_could_not_read(tmp_path):
    registry = MODELS["vllm/model_executor/models/registry.py"].replace(
        "}", '    "GoneForCausalLM": ("gone", "GoneForCausalLM"),\n        }'
    )
    root = write_tree(tmp_path / "tree", files(**{"vllm/model_executor/models/registry.py": registry}))
    text = run_kvlint("containers", ".", cwd=root).stdout
    assert text.startswith("3 models (not read by the census: 1, e.g. GoneForCausalLM), ")


@pytest.mark.slow
def test_0_34_0_census_builds_whole_model_and_fallback_containers_as_the_code_decides(vllm_release):
    index = build_tree_index(vllm_release("0.34.0"))
    census, compositions = index.census, index.container_compositions()
    hierarchy = index.hierarchy
    # A checkpoint's layers go to one whole-model container or none.
    whole = [c for c in compositions if c.path.endswith(":get_kv_cache_groups")]
    keys = [(c.model, checkpoint) for c in whole for checkpoint in c.checkpoints]
    assert len(keys) == len(set(keys))
    # A layer whose spec is None has no KV cache: it is no layer class of the census.
    assert all(layer.spec_classes for layer in census.layers)
    # The fallback: only for a checkpoint with both MLA and sliding-window layers, its sliding windows promoted.
    for composition in compositions:
        if not composition.path.endswith(":_try_get_full_allocation_fallback_groups"):
            continue
        assert not any(hierarchy.is_subclass(s, "SlidingWindowSpec") for s in composition.spec_classes)
        for checkpoint in composition.checkpoints:
            specs = [kind.split(":")[1] for kind in checkpoint]
            assert any(hierarchy.is_subclass(s, "MLAAttentionSpec") for s in specs), composition
            assert any(hierarchy.is_subclass(s, "SlidingWindowSpec") for s in specs), composition
    # Every model of the registry is read or counted as unread, never dropped.
    assert census.unread and len({m.name for m in census.models} & set(census.unread)) == 0


def test_kv101_says_when_the_branch_a_container_takes_raises(tmp_path):
    """`if not isinstance(spec, MLAAttentionSpec): raise TypeError(…)` refuses a container at run time: the
    finding says so (the reader of vLLM 0.34.0's mamba_utils.py:1045 found "takes the other branch" hid it)."""
    raising = CHECKS + (
        "\n"
        "        def mla_only(self, kv_cache_config):\n"
        "            spec = kv_cache_config.kv_cache_groups[0].kv_cache_spec\n"
        "            if not isinstance(spec, MLAAttentionSpec):\n"
        "                raise TypeError('MLA only')\n"
        "            return spec\n"
    )
    tree = write_tree(tmp_path / "tree", files(**{CONNECTOR: raising}))
    completed = run_kvlint("check", "--no-cache", "--format", "json", "--select", "KV101", CONNECTOR, cwd=tree)
    findings = {f["line"]: f["message"] for f in json.loads(completed.stdout)}
    [raised] = [line for line, message in findings.items() if "raises `TypeError`" in message]
    assert "takes the other branch, which raises `TypeError` (a refusal at run time" in findings[raised]
    assert raised > 16, findings
    assert "raises" not in findings[16]
