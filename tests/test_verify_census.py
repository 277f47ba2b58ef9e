"""`kvlint verify --census`: the census's cases (adapter), the comparison and its table and exit codes on a
miniature vLLM that both reads like a tree to the census and runs in the child (with a stand-in torch), then
the real vLLM 0.29.0 in the CPU runtime (slow)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from kvlint.analysis.tree_index import build_tree_index
from kvlint.scan.index_cache import build_project_index
from kvlint.verify.census_cases import census_cases
from kvlint.verify.census_oracle import CENSUS_CHILD, CensusResultError, compare, render_json, render_text
from tests.kvlint_runner import run_kvlint
from tests.mini_vllm import write_tree
from tests.test_compositions import files as composition_files

# A vLLM that runs: the child imports its config, interface and grouping; the census reads its models and layers.
RUNNING = {
    "torch.py": """
        bfloat16, float32, uint8 = "bfloat16", "float32", "uint8"
        """,
    "vllm/__init__.py": '__version__ = "0.0.census"\n',
    "vllm/config.py": """
        import dataclasses

        @dataclasses.dataclass
        class CacheConfig:
            block_size: int = 16

        @dataclasses.dataclass
        class DeviceConfig:
            device: str = "cuda"

        @dataclasses.dataclass
        class SchedulerConfig:
            disable_hybrid_kv_cache_manager: bool | None = None

        @dataclasses.dataclass
        class VllmConfig:
            cache_config: CacheConfig
            device_config: DeviceConfig | None = None
            scheduler_config: SchedulerConfig = dataclasses.field(default_factory=SchedulerConfig)
        """,
    "vllm/v1/__init__.py": "",
    "vllm/v1/kv_cache_interface.py": """
        import dataclasses

        SIZES = {"bfloat16": 2, "float32": 4, "uint8": 1}

        @dataclasses.dataclass(frozen=True, kw_only=True)
        class KVCacheSpec:
            block_size: int

        @dataclasses.dataclass(frozen=True, kw_only=True)
        class AttentionSpec(KVCacheSpec):
            num_kv_heads: int
            head_size: int
            dtype: str

            @property
            def page_size_bytes(self):
                return self.block_size * self.num_kv_heads * self.head_size * SIZES[self.dtype]

        @dataclasses.dataclass(frozen=True, kw_only=True)
        class FullAttentionSpec(AttentionSpec):
            sliding_window: int | None = None  # set only when vLLM merges windowed layers into one group

        @dataclasses.dataclass(frozen=True, kw_only=True)
        class MLAAttentionSpec(FullAttentionSpec):
            pass

        @dataclasses.dataclass(frozen=True, kw_only=True)
        class ChunkySpec(AttentionSpec):
            chunk_tokens: int

        @dataclasses.dataclass(frozen=True, kw_only=True)
        class UniformTypeKVCacheSpecs(KVCacheSpec):
            kv_cache_specs: dict

            @classmethod
            def from_specs(cls, kv_cache_specs):
                bases = {FullAttentionSpec if isinstance(s, FullAttentionSpec) else type(s) for s in kv_cache_specs.values()}
                if len(bases) != 1:
                    return None
                return cls(block_size=16, kv_cache_specs=kv_cache_specs)
        """,
    "vllm/v1/core/__init__.py": "",
    "vllm/v1/core/kv_cache_utils.py": """
        import dataclasses

        from vllm.v1.kv_cache_interface import UniformTypeKVCacheSpecs

        @dataclasses.dataclass
        class KVCacheGroupSpec:
            layer_names: list
            kv_cache_spec: object

        def get_kv_cache_groups(vllm_config, kv_cache_spec):
            assert not any(getattr(s, "sliding_window", None) for s in kv_cache_spec.values()), "a windowed layer"
            if len(set(kv_cache_spec.values())) == 1:
                return [KVCacheGroupSpec(list(kv_cache_spec), next(iter(kv_cache_spec.values())))]
            if uniform_spec := UniformTypeKVCacheSpecs.from_specs(kv_cache_spec):
                return [KVCacheGroupSpec(list(kv_cache_spec), uniform_spec)]
            raise NotImplementedError("cannot group these layers")
        """,
    "vllm/model_executor/layers/attention.py": """
        class Attention(AttentionLayerBase):
            def get_kv_cache_spec(self, vllm_config):
                return FullAttentionSpec(block_size=16, num_kv_heads=self.num_kv_heads)

        class MLAAttention(AttentionLayerBase):
            def __init__(self, kv_cache_dtype):
                self.kv_cache_dtype = kv_cache_dtype

            def get_kv_cache_spec(self, vllm_config):
                return MLAAttentionSpec(block_size=16, cache_dtype_str=self.kv_cache_dtype)

        class ChunkyAttention(AttentionLayerBase):
            def get_kv_cache_spec(self, vllm_config):
                return ChunkySpec(block_size=16)
        """,
    "vllm/model_executor/layers/indexer.py": """
        class IndexerCache(AttentionLayerBase):
            def __init__(self, head_dim, dtype):
                self.head_dim = head_dim
                self.dtype = dtype

            def get_kv_cache_spec(self, vllm_config):
                return MLAAttentionSpec(block_size=16, head_size=self.head_dim, dtype=self.dtype)
        """,
    "vllm/model_executor/models/registry.py": """
        _MODELS = {
            "DsaForCausalLM": ("dsa", "DsaForCausalLM"),
            "LlamaForCausalLM": ("llama", "LlamaForCausalLM"),
            "ChunkyForCausalLM": ("chunky", "ChunkyForCausalLM"),
        }
        """,
    "vllm/model_executor/models/dsa.py": """
        from vllm.model_executor.layers.attention import MLAAttention
        from vllm.model_executor.layers.indexer import IndexerCache

        class DsaForCausalLM:
            def __init__(self):
                self.layers = [MLAAttention(), IndexerCache()]
        """,
    "vllm/model_executor/models/llama.py": """
        from vllm.model_executor.layers.attention import Attention

        class LlamaForCausalLM:
            def __init__(self):
                self.layers = [Attention()]
        """,
    "vllm/model_executor/models/chunky.py": """
        from vllm.model_executor.layers.attention import ChunkyAttention

        class ChunkyForCausalLM:
            def __init__(self):
                self.layers = [ChunkyAttention()]
        """,
}
# The same tree whose grouping never builds a container: the census's DSA container is then a difference.
NO_CONTAINERS = """
    import dataclasses

    from vllm.v1.kv_cache_interface import UniformTypeKVCacheSpecs

    @dataclasses.dataclass
    class KVCacheGroupSpec:
        layer_names: list
        kv_cache_spec: object

    def get_kv_cache_groups(vllm_config, kv_cache_spec):
        if UniformTypeKVCacheSpecs.from_specs(kv_cache_spec) is None:
            pass  # the census reads a path here; this tree keeps every layer apart
        return [KVCacheGroupSpec([name], spec) for name, spec in kv_cache_spec.items()]
    """


@pytest.fixture
def running(tmp_path):
    return write_tree(tmp_path / "tree", RUNNING)


def verify_census(tree: Path, *extra: str):
    return run_kvlint("verify", "--census", "--python", sys.executable, "--vllm", str(tree), *extra, cwd=tree)


# ------------------------------------------------------------------- the adapter


def test_one_case_per_model_with_its_layers_and_the_census_default_containers(tmp_path):
    index = build_tree_index(write_tree(tmp_path / "tree", composition_files()))
    cases = {case.model: case for case in census_cases(index)}
    assert set(cases) == {"DsaForCausalLM", "DsaHybridForCausalLM", "Mamba2HybridForCausalLM"}
    assert cases["DsaForCausalLM"].expected == {frozenset({"MLAAttentionSpec"})}
    dsa = cases["DsaHybridForCausalLM"]
    layers = {layer.layer_class: layer for layer in dsa.layers}
    assert {name: layer.spec_class for name, layer in layers.items()} == {
        "MLAAttention": "MLAAttentionSpec",
        "IndexerCache": "MLAAttentionSpec",
        "DeltaNet": "MambaSpec",
    }
    # MLA and the indexer report one spec class, but the census tells them apart: a shape each.
    assert {dict(layers[name].params)["variant"] for name in ("MLAAttention", "IndexerCache")} == {0, 1}
    assert dict(layers["DeltaNet"].params)["mamba_type"] == "GDN_ATTN"  # the literal the layer's class sets
    assert layers["IndexerCache"].layouts == ("BLHNC",)
    assert len({layer.name for layer in dsa.layers}) == len(dsa.layers)
    # No default composition: the whole-model path builds nothing for MLA + Mamba, and the packed path (the
    # indexer's backend forces its layout) needs mixed page sizes, which the census does not decide.
    assert dsa.expected == frozenset()
    assert dsa.possible == {frozenset({"MLAAttentionSpec"}), frozenset({"MambaSpec"})}
    assert dsa.checkpoint == ("DeltaNet:MambaSpec", "IndexerCache:MLAAttentionSpec", "MLAAttention:MLAAttentionSpec")
    # The Mamba2 hybrid's packed container is opt-in: neither expected nor possible by default.
    assert cases["Mamba2HybridForCausalLM"].expected == cases["Mamba2HybridForCausalLM"].possible == frozenset()
    assert json.loads(json.dumps(dsa.document()))["layers"][0]["params"]["variant"] in (0, 1)


def test_layers_the_census_cannot_tell_apart_share_one_shape(running):
    files = dict(RUNNING)
    files["vllm/model_executor/models/llama.py"] = (
        RUNNING["vllm/model_executor/models/llama.py"]
        .replace("[Attention()]", "[Attention(), EncoderAttention()]")
        .replace(
            "import Attention",
            "import Attention\n        from vllm.model_executor.layers.encoder import EncoderAttention",
        )
    )
    files["vllm/model_executor/layers/encoder.py"] = "class EncoderAttention(Attention):\n    pass\n"
    index = build_tree_index(write_tree(running.parent / "two", files))
    llama = next(case for case in census_cases(index) if case.model == "LlamaForCausalLM")
    assert [layer.layer_class for layer in llama.layers] == ["Attention", "EncoderAttention"]
    assert {dict(layer.params)["variant"] for layer in llama.layers} == {0}


def test_no_census_no_cases(tmp_path):
    files = {path: text for path, text in RUNNING.items() if "registry" not in path}
    assert census_cases(build_tree_index(write_tree(tmp_path / "tree", files))) == []


# ------------------------------------------------------------ the comparison and the table


def _answers(*models: dict) -> dict:
    return {"vllm": {"version": "9.9", "path": "/v"}, "models": list(models)}


def test_differing_models_are_grouped_with_what_each_side_says(running):
    cases = census_cases(build_tree_index(running))
    report = compare(
        cases,
        _answers(
            {"model": "DsaForCausalLM", "containers": [], "groups": 2},
            {"model": "LlamaForCausalLM", "error": "NotImplementedError: no"},
            {"model": "ChunkyForCausalLM", "not_buildable": "ChunkySpec needs chunk_tokens"},
        ),
    )
    # Llama: vLLM refuses the configuration and the census claims no container for it: they agree.
    assert [o.agree for o in report.outcomes] == [False, True, None]
    assert report.exit_code == 1
    text = render_text(report)
    assert "2 models compared (2 checkpoints): 1 agree, 1 differ (1 checkpoints); 1 not buildable here" in text
    assert "census: {MLAAttentionSpec}\n    vLLM:   no container" in text
    assert "vLLM refuses 1 checkpoints of 1 models" in text
    assert "ChunkyForCausalLM: ChunkySpec needs chunk_tokens" in text
    document = json.loads(render_json(report))
    assert document["differing"] == 1 and document["models"][0]["census"] == [["MLAAttentionSpec"]]


def test_all_agreeing_exits_0_and_nothing_compared_exits_2(running):
    cases = census_cases(build_tree_index(running))
    agreeing = compare(
        cases,
        _answers(
            {"model": "DsaForCausalLM", "containers": [["MLAAttentionSpec"]]},
            {"model": "LlamaForCausalLM", "containers": []},
            {"model": "ChunkyForCausalLM", "not_buildable": "no"},
        ),
    )
    assert agreeing.exit_code == 0
    nothing = compare(cases, _answers(*({"model": case.model, "not_buildable": "no"} for case in cases)))
    assert nothing.exit_code == 2
    with pytest.raises(CensusResultError):
        compare(cases, _answers())


def test_a_model_name_from_the_tree_cannot_start_a_line(running):
    cases = census_cases(build_tree_index(running))
    answers = [{"model": case.model, "error": "ValueError: a\nb\x1b[2J"} for case in cases]
    text = render_text(compare(cases, _answers(*answers)))
    assert "\x1b" not in text and "a\\nb" in text


# ------------------------------------------------------------- the command on a running miniature


def test_verify_census_on_a_miniature_that_agrees_exits_0(running):
    result = verify_census(running)
    assert result.returncode == 0, result.stderr
    assert "2 models compared (2 checkpoints): 2 agree, 0 differ (0 checkpoints); 1 not buildable here" in result.stdout
    assert "ChunkyForCausalLM: ChunkySpec needs chunk_tokens (unknown to kvlint)" in result.stdout


def test_verify_census_says_the_model_whose_containers_differ_and_exits_1(running):
    (running / "vllm/v1/core/kv_cache_utils.py").write_text(
        __import__("textwrap").dedent(NO_CONTAINERS), encoding="utf-8"
    )
    result = verify_census(running, "--format", "json")
    assert result.returncode == 1, result.stderr
    models = {model["model"]: model for model in json.loads(result.stdout)["models"]}
    assert models["DsaForCausalLM"]["census"] == [["MLAAttentionSpec"]] and models["DsaForCausalLM"]["vllm"] == []
    assert models["LlamaForCausalLM"]["agree"] is True


def test_a_tree_without_the_grouping_function_is_not_buildable_per_model(running):
    (running / "vllm/v1/core/kv_cache_utils.py").write_text(
        "from vllm.v1.kv_cache_interface import UniformTypeKVCacheSpecs\n\n\n"
        "def group(specs):\n    return UniformTypeKVCacheSpecs.from_specs(specs)\n",
        encoding="utf-8",
    )
    result = verify_census(running)
    assert result.returncode == 2
    assert "0 models compared" in result.stdout
    assert "no module under vllm/v1/core defines get_kv_cache_groups" in result.stdout
    assert "kvlint: no model could be compared" in result.stderr


def test_without_a_tree_the_interpreter_s_own_vllm_is_used_and_one_without_it_is_one_line(running):
    result = run_kvlint("verify", "--census", "--python", sys.executable, cwd=running)
    assert result.returncode == 2
    assert result.stderr.strip().endswith("has no vllm installed: give --vllm PATH or --vllm-release VERSION")
    assert len(result.stderr.strip().splitlines()) == 1


def test_census_goes_alone(running):
    result = verify_census(running, "--dcp", "2")
    assert result.returncode == 2 and "--census goes alone" in result.stderr


def test_the_census_child_imports_nothing_of_kvlint():
    import ast

    tree = ast.parse(CENSUS_CHILD.read_text(encoding="utf-8"))
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert all(name.split(".")[0] in sys.stdlib_module_names | {"vllm", "__future__"} for name in imported)


# ------------------------------------------------------------------ the real vLLM 0.29.0 (slow)


@pytest.fixture(scope="module")
def runtime(vllm_runtime_env):
    return vllm_runtime_env  # conftest: built once per session, and only for tests marked slow


@pytest.fixture(scope="module")
def census_029(runtime, tmp_path_factory):
    """`verify --census --format json` on the runtime's installed vLLM 0.29.0, and the census's cases of it."""
    result = run_kvlint(
        "verify", "--census", "--format", "json", "--python", str(runtime.python), cwd=tmp_path_factory.mktemp("c")
    )
    assert result.returncode in (0, 1), result.stderr
    cases = census_cases(build_project_index([runtime.site_packages / "vllm"]))  # as the command reads it
    return result.returncode, json.loads(result.stdout), cases


def _child_answers(runtime, tmp_path, cases: list[dict]) -> dict[str, dict]:
    from kvlint.verify.run import ChildRun, run_child_raw

    document = tmp_path / "cases.json"
    document.write_text(json.dumps({"cases": cases}), encoding="utf-8")
    raw = run_child_raw(ChildRun(str(runtime.python), runtime.site_packages), ["--cases", str(document)], CENSUS_CHILD)
    return {answer["model"]: answer for answer in raw["models"]}


def _layer(name: str, spec: str, variant: int = 0, layouts=None, **params) -> dict:
    return {
        "name": name,
        "layer_class": name,
        "spec_class": spec,
        "params": {"variant": variant, **params},
        "layouts": layouts,
    }


@pytest.mark.slow
def test_vllm_0_29_0_groups_hand_made_models_as_its_own_tests_say(runtime, tmp_path):
    """The child's shapes lead vLLM's grouping where upstream's tests say it goes: DeepSeek-V3.2's MLA plus its
    indexer share one container (the seed bug's), a full + sliding-window hybrid gets a group per type, an MLA +
    Mamba hybrid's padded Mamba pages join no container, and a backend that allows only block-outermost layouts
    packs mixed page sizes into a container per uniform type."""
    answers = _child_answers(
        runtime,
        tmp_path,
        [
            {"model": "dsa", "layers": [_layer("mla", "MLAAttentionSpec"), _layer("indexer", "MLAAttentionSpec", 1)]},
            {"model": "gemma", "layers": [_layer("full", "FullAttentionSpec"), _layer("swa", "SlidingWindowSpec")]},
            {
                "model": "kimi",
                "layers": [_layer("mla", "MLAAttentionSpec"), _layer("kda", "MambaSpec", mamba_type="GDN_ATTN")],
            },
            {
                "model": "packed",
                "layers": [
                    _layer("mla", "MLAAttentionSpec"),
                    _layer("indexer", "MLAAttentionSpec", 1, layouts=["BLHNC", "BLNHC"]),
                    _layer("full", "FullAttentionSpec"),
                ],
            },
            {"model": "odd", "layers": [_layer("x", "NoSuchSpec")]},
        ],
    )
    assert answers["dsa"]["containers"] == [["MLAAttentionSpec"]] and answers["dsa"]["groups"] == 1
    assert answers["gemma"]["containers"] == [] and answers["gemma"]["groups"] == 2
    assert answers["kimi"]["containers"] == [] and "error" not in answers["kimi"]
    assert answers["packed"]["layout"] == "BLHNC"
    assert answers["packed"]["containers"] == [["FullAttentionSpec", "MLAAttentionSpec"]]
    assert answers["odd"]["not_buildable"] == "vllm.v1.kv_cache_interface has no NoSuchSpec"


@pytest.mark.slow
def test_verify_census_on_0_29_0_compares_every_model_whose_specs_build(census_029):
    _, document, cases = census_029
    assert document["vllm"]["version"] == "0.29.0"
    assert [model["model"] for model in document["models"]] == [case.model for case in cases]
    assert document["compared"] + document["not_buildable"] == len(cases)
    # Every model with KV cache layers of 0.29.0's registry; a model is "not buildable" only for a spec kvlint
    # cannot fill, never for the harness.
    assert document["compared"] >= 200
    for model in document["models"]:
        if model["agree"] is None:
            assert "unknown to kvlint" in model["not_buildable"] or " has no " in model["not_buildable"], model


@pytest.mark.slow
def test_the_census_means_what_vllm_0_29_0_groups(census_029):
    code, document, _ = census_029
    differing = [model["model"] for model in document["models"] if model["agree"] is False]
    assert differing == [] and code == 0


@pytest.mark.slow
def test_the_census_means_what_the_newest_releases_grouping_code_does(runtime, tmp_path):
    """The oracle on a release the runtime was not built for: 0.34.0's sources imported with the runtime's
    torch (its `get_kv_cache_groups` lives in kv_cache_planning.py beside a method of that name): every model
    whose specs build agrees with the census."""
    result = run_kvlint(
        "verify",
        "--census",
        "--format",
        "json",
        "--vllm-release",
        "0.34.0",
        "--python",
        str(runtime.python),
        cwd=tmp_path,
    )
    document = json.loads(result.stdout)
    differing = [model["model"] for model in document["models"] if model["agree"] is False]
    assert document["compared"] >= 200 and differing == [] and result.returncode == 0, result.stderr


def test_a_setting_a_merge_asserts_written_apart_gets_a_stand_in_per_way_it_is_written():
    # 0.17.0's DeepSeek-V3.2: MLA layers set `cache_dtype_str` from the cache config, the indexer leaves it unset,
    # and MLAAttentionSpec.merge asserts one: the oracle's shapes must differ there too, or vLLM's answer would
    # agree with a census that called them alike.
    import dataclasses
    import types
    from dataclasses import replace

    from kvlint.analysis.census.reading import LayerClass
    from kvlint.verify.census_cases import _case_layers
    from kvlint.verify.census_child import wanted_fields

    written = (("cache_dtype_str", "vllm_config.cache_config.cache_dtype"), ("model_version", '"v4"'))
    mla = LayerClass("Mla", "l.py:1", frozenset({"MLAAttentionSpec"}), (), (), None, written)
    indexer = LayerClass("Indexer", "l.py:2", frozenset({"MLAAttentionSpec"}), (), (), None)
    first, second = (
        dict(layer.params) for layer in _case_layers([(mla, "MLAAttentionSpec"), (indexer, "MLAAttentionSpec")])
    )
    assert first["setting:cache_dtype_str"] == 1 and first["model_version"] == "v4"  # a literal as written
    assert not {"setting:cache_dtype_str", "model_version"} & second.keys() and first["variant"] != second["variant"]
    alike = _case_layers([(mla, "MLAAttentionSpec"), (replace(indexer, spec_settings=written), "MLAAttentionSpec")])
    assert not any(key.startswith("setting:") for layer in alike for key, _ in layer.params)

    @dataclasses.dataclass
    class Spec:
        block_size: int
        cache_dtype_str: str | None = None
        ratio: int = 1
        flag: bool = False

    params = {"variant": 0, "setting:cache_dtype_str": 2, "setting:ratio": 1, "setting:flag": 1}
    wanted = wanted_fields(Spec, params, types.SimpleNamespace())
    assert wanted["cache_dtype_str"] == "kvlint-setting-2" and wanted["ratio"] == 1001 and "flag" not in wanted
