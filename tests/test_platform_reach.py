"""Code that runs on one platform only meets only the containers of layers that platform accepts: a group-spec
check in the CPU runner is not reported for a container of MLA layers when the CPU platform refuses MLA."""

from __future__ import annotations

import json

from kvlint.analysis.tree_index import build_tree_index
from kvlint.scan.cache_codec import index_from_data, index_to_data
from kvlint.scan.tree_snapshot import could_matter
from tests.kvlint_runner import run_kvlint
from tests.mini_vllm import write_tree
from tests.test_compositions import CHECKS, CONNECTOR, LAYERS, files

ATTENTION = """
    class Attention(AttentionLayerBase):
        def get_kv_cache_spec(self, vllm_config):
            return FullAttentionSpec(block_size=16)

    class MLAAttention(AttentionLayerBase):
        def __init__(self):
            self.attn_backend = get_attn_backend(16, use_mla=True, use_sparse=False)

        def get_kv_cache_spec(self, vllm_config):
            return MLAAttentionSpec(block_size=16)
    """

CPU_PLATFORM = """
    class CpuPlatform(Platform):
        @classmethod
        def get_attn_backend_cls(cls, selected_backend, attn_selector_config):
            if attn_selector_config.use_mla:
                raise NotImplementedError("MLA is not supported on CPU.")
            return "vllm.v1.attention.backends.cpu_attn.CPUAttentionBackend"

        @classmethod
        def check_and_update_config(cls, vllm_config):
            if vllm_config.parallel_config.worker_cls == "auto":
                vllm_config.parallel_config.worker_cls = "vllm.v1.worker.cpu_worker.CPUWorker"
    """

CPU_RUNNER = "vllm/v1/worker/cpu_model_runner.py"


def cpu_tree(tmp_path, platform: str = CPU_PLATFORM):
    return write_tree(
        tmp_path / "tree",
        {
            **files(),
            "vllm/model_executor/layers/attention.py": ATTENTION,
            "vllm/platforms/cpu.py": platform,
            "vllm/v1/worker/cpu_worker.py": "from vllm.v1.worker.cpu_model_runner import CPUModelRunner\n",
            CPU_RUNNER: CHECKS.replace("FooConnectorWorker", "CPUModelRunner"),
        },
    )


def kv101_lines(tree, path: str) -> dict[int, str]:
    completed = run_kvlint("check", "--no-cache", "--format", "json", "--select", "KV101", path, cwd=tree)
    return {f["line"]: f["severity"] for f in json.loads(completed.stdout)}


def test_the_platform_names_its_runner_and_refuses_mla_layers(tmp_path):
    reach = build_tree_index(cpu_tree(tmp_path)).platform_reach
    assert reach.refused_layers(CPU_RUNNER) == {"MLAAttention"}
    assert reach.refused_layers("vllm/v1/worker/cpu_worker.py") == {"MLAAttention"}
    assert reach.refused_layers(CONNECTOR) == frozenset(), "code every platform runs meets every layer"


def test_a_cpu_runner_check_is_not_reported_for_a_container_the_cpu_platform_refuses(tmp_path):
    tree = cpu_tree(tmp_path)
    assert kv101_lines(tree, CONNECTOR)[16] == "error", "elsewhere the MLA container still makes it an error"
    runner = kv101_lines(tree, CPU_RUNNER)
    assert 16 not in runner, "every container of MLA layers is refused by the CPU platform"
    assert runner[9] == "warning", "a Mamba container the CPU platform accepts is still the witness"


def test_without_the_refusal_the_cpu_runner_check_is_still_an_error(tmp_path):
    accepting = CPU_PLATFORM.replace('raise NotImplementedError("MLA is not supported on CPU.")', "pass")
    assert kv101_lines(cpu_tree(tmp_path, accepting), CPU_RUNNER)[16] == "error"


def test_an_edit_of_a_platform_module_invalidates_the_cached_index():
    # Its refusals are part of the index: a cached index must not outlive a change of them.
    assert could_matter("vllm/platforms/cpu.py", b"class CpuPlatform:\n    pass\n") is True


def test_the_reach_survives_the_index_cache(tmp_path):
    index = build_tree_index(cpu_tree(tmp_path))
    assert index_from_data(index_to_data(index)).platform_reach == index.platform_reach


SPARSE_REFUSED = CPU_PLATFORM.replace(".use_mla:", ".use_sparse:")


def test_a_layer_naming_its_own_sparse_backend_is_refused_where_sparse_attention_is(tmp_path):
    indexer = LAYERS["vllm/model_executor/layers/indexer.py"].replace(
        "class IndexerBackend(AttentionBackend):",
        "class IndexerBackend(AttentionBackend):\n"
        "            @classmethod\n            def is_sparse(cls):\n                return True\n",
    )
    tree = cpu_tree(tmp_path, SPARSE_REFUSED)
    assert build_tree_index(tree).platform_reach.refused_layers(CPU_RUNNER) == frozenset(), "it declares nothing"
    write_tree(tree, {"vllm/model_executor/layers/indexer.py": indexer})
    assert build_tree_index(tree).platform_reach.refused_layers(CPU_RUNNER) == {"IndexerCache"}


# vLLM's MLA layer hands the sparse flag it is built with on to its backend selection; a DSA model decides it
# from its config (`use_sparse=self.is_sparse`).
FORWARDING_ATTENTION = ATTENTION.replace(
    """        def __init__(self):
            self.attn_backend = get_attn_backend(16, use_mla=True, use_sparse=False)""",
    """        def __init__(self, use_sparse=False):
            self.attn_backend = get_attn_backend(16, use_mla=True, use_sparse=use_sparse)""",
)
DSA_MODEL = "vllm/model_executor/models/dsa.py"


def _sparse_tree(tmp_path, built_with: str):
    tree = cpu_tree(tmp_path, SPARSE_REFUSED)
    model = files()[DSA_MODEL].replace("MLAAttention()", f"MLAAttention({built_with})")
    assert model != files()[DSA_MODEL]
    return write_tree(tree, {"vllm/model_executor/layers/attention.py": FORWARDING_ATTENTION, DSA_MODEL: model})


def _kv101(tree, path: str) -> dict[int, dict]:
    completed = run_kvlint("check", "--no-cache", "--format", "json", "--select", "KV101", path, cwd=tree)
    return {f["line"]: f for f in json.loads(completed.stdout)}


def test_a_flag_decided_at_run_time_leaves_the_platform_s_witness_unproven(tmp_path):
    tree = _sparse_tree(tmp_path, "use_sparse=self.is_sparse")
    assert _kv101(tree, CONNECTOR)[16]["severity"] == "error", "code every platform runs: the witness stands"
    finding = _kv101(tree, CPU_RUNNER)[16]
    assert finding["severity"] == "warning"
    assert (
        "that the cpu platform builds it is unproven: MLAAttention is built with `use_sparse=self.is_sparse` "
        "(dsa.py:6), decided at run time, and its backend selection refuses it"
    ) in finding["message"]


def test_a_literal_flag_decides_the_platform_s_witness(tmp_path):
    refused = _kv101(_sparse_tree(tmp_path / "on", "use_sparse=True"), CPU_RUNNER)[16]
    # Refused: the DSA model is no witness; only the hybrid model, which builds its MLA layers dense, is left.
    assert "DsaForCausalLM" not in refused["message"] and "DsaHybridForCausalLM possibly" in refused["message"]
    accepted = _kv101(_sparse_tree(tmp_path / "off", "use_sparse=False"), CPU_RUNNER)[16]
    assert accepted["severity"] == "error" and "DsaForCausalLM with default settings" in accepted["message"]


def test_a_model_read_through_another_platforms_implementation_is_no_witness_on_this_one():
    # 0.33.0's Dots3Note: its package's `__init__` imports `nvidia/` (the census follows the default platform's
    # `current_platform` tests), so the layers read are CUDA's; CPU-only code never meets them (the reader's
    # WRONG cpu_model_runner witness).
    from kvlint.analysis.census.compositions import ContainerComposition
    from kvlint.analysis.platform_reach import built_elsewhere

    def composition(*places: str) -> ContainerComposition:
        return ContainerComposition(
            frozenset({"Mla"}),
            frozenset({"MLAAttentionSpec"}),
            "default",
            "M",
            "p:f",
            1,
            "",
            (("Mla", ", ".join(places)),),
        )

    nvidia = composition("vllm/model_executor/layers/mla.py:122", "vllm/models/dots3_note/nvidia/model.py:467")
    assert built_elsewhere(nvidia, ("cpu",)) and built_elsewhere(composition("vllm/models/m/amd/model.py:3"), ("cpu",))
    assert not built_elsewhere(nvidia, ("cuda",)) and not built_elsewhere(nvidia, ())  # runs there / everywhere
    assert not built_elsewhere(composition("vllm/models/m/cpu/model.py:3"), ("zen_cpu",))
    assert not built_elsewhere(composition("vllm/model_executor/layers/mla.py:122"), ("cpu",))
    assert not built_elsewhere(composition("vllm/models/nvidia.py:3"), ("cpu",))  # a module's name, not a folder
