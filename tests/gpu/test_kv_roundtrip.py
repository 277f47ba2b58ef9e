"""The rewritten offloading connector's chunks against the scheduler, and the worker's KV pages copied in
those chunks, on a CUDA device.

For each configuration of `kvlint verify`'s matrix (the same builders), on a vLLM tree
that `kvlint fix` rewrote, check that

- the connector's span per group (vLLM's `build_offloading_config`) is the scheduler's
  (`resolve_dcp_kv_block_size`), and every chunk of `tokens_per_block` x `blocks_per_chunk`
  starts and ends on a hash-block boundary of the scheduler (`resolve_kv_cache_block_sizes`);
- the KV cache laid out as the worker's KVCacheConfig places it, copied device -> host ->
  device chunk by chunk, comes back byte-exact with nothing outside the moved blocks written.
  The copy is this test's own torch ops (index_select, pinned host tensors, index_copy_), not
  vLLM's transfer code (its swap_blocks kernels need vLLM's compiled ops, which a light tree
  does not carry): it checks the placement the connector's chunks address, not vLLM's copy.

The tree comes from KVLINT_GPU_VLLM_TREE, else the bundle scripts/gpu_check.sh prepares
(.gpu-bundle). Skipped where CUDA is absent; KVLINT_GPU_TEST_DEVICE=cpu dry-runs the same
code on the CPU. KVLINT_GPU_REQUIRED=1 (scripts/gpu_check.sh sets it) turns every skip
into a failure: a device check that skipped would prove nothing.
"""

from __future__ import annotations

import math
import os
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from kvlint.verify import child

sys.path.insert(0, str(Path(__file__).parent))
import vllm_light  # noqa: E402  (tests/gpu helper)

pytestmark = pytest.mark.gpu

BLOCKS_PER_CHUNK = 4
# Every kind of the verify matrix but one: with a lone Mamba group, vLLM 0.29.0's
# scheduler scales the block by DCP while the connector does not (verify shows it), a
# disagreement the rewrite does not touch, so the connector refuses to build there.
KINDS = (
    "full_attention",
    "mla",
    "sliding_window",
    "dsa_container",
    "full_attention_container",
    "hybrid_attention_mamba",
)
DCP_SIZES = (1, 2, 4, 8)


BUNDLE = Path(__file__).resolve().parents[2] / ".gpu-bundle"  # what `scripts/gpu_check.sh prepare` writes


def unavailable(reason: str) -> None:
    """Skip, unless the run requires the GPU tests to run (scripts/gpu_check.sh): then fail, saying why."""
    if os.environ.get("KVLINT_GPU_REQUIRED") == "1":
        pytest.fail(f"KVLINT_GPU_REQUIRED=1 but {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def device():
    try:
        import torch
    except ImportError:
        unavailable("CUDA is absent: torch is not even installed here")
    if os.environ.get("KVLINT_GPU_TEST_DEVICE") == "cpu":
        return torch.device("cpu")
    if not torch.cuda.is_available():
        unavailable("CUDA is absent: no device to allocate KV cache tensors on")
    return torch.device("cuda")


def vllm_tree() -> Path | None:
    configured = os.environ.get("KVLINT_GPU_VLLM_TREE")
    if configured:
        return Path(configured)
    return BUNDLE if (BUNDLE / "vllm" / "__init__.py").is_file() else None


@pytest.fixture(scope="module")
def sizing(device):
    tree = vllm_tree()
    if tree is None:
        # A device is here (or the CPU switch is on): a missing tree is a setup fault, not an absent GPU.
        pytest.fail(
            f"no vLLM tree to test: set KVLINT_GPU_VLLM_TREE or run `scripts/gpu_check.sh prepare` ({BUNDLE})",
            pytrace=False,
        )
    return vllm_light.import_sizing_modules(tree)


def light_vllm_config(dcp: int, use_mla: bool, torch: Any) -> Any:
    """The fields the sizing paths read, where vllm.config cannot be imported (light mode)."""
    parallel = SimpleNamespace(
        tensor_parallel_size=child.TENSOR_PARALLEL_SIZE,
        decode_context_parallel_size=dcp,
        prefill_context_parallel_size=1,
        pipeline_parallel_size=1,
        world_size=child.TENSOR_PARALLEL_SIZE,
        rank=0,
        data_parallel_index=0,
        data_parallel_size=1,
        data_parallel_rank_local=None,
        distributed_executor_backend="mp",
        nnodes_within_dp=1,
    )
    cache = SimpleNamespace(
        block_size=child.BLOCK_SIZE,
        enable_prefix_caching=True,
        prefix_match_unit=None,
        cache_dtype="auto",
        kv_cache_layout=None,
    )
    transfer = SimpleNamespace(
        kv_connector="OffloadingConnector",
        kv_role="kv_both",
        engine_id=child.ENGINE_ID,
        kv_connector_extra_config={"blocks_per_chunk": BLOCKS_PER_CHUNK},
    )
    return SimpleNamespace(
        parallel_config=parallel,
        cache_config=cache,
        kv_transfer_config=transfer,
        kv_events_config=None,
        use_v2_model_runner=False,
        model_config=child.ModelConfigStandIn(use_mla, 1 if use_mla else 8, torch),
    )


def vllm_config_for(sizing, dcp: int, use_mla: bool) -> Any:
    if sizing.mode == "full":
        import vllm.config  # the tree's, already on sys.path

        config, _ = child.build_vllm_config(vllm.config, dcp, {"blocks_per_chunk": BLOCKS_PER_CHUNK})
        return child.WithModel(config, child.ModelConfigStandIn(use_mla, 1 if use_mla else 8, sizing.torch))
    return light_vllm_config(dcp, use_mla, sizing.torch)


def layer_pages(worker: Any, backing: Any, torch: Any) -> dict[str, Any]:
    """Per layer, a (num_blocks, page_bytes) view of its pages in the backing allocation."""
    page_bytes: dict[str, int] = {}
    for group in worker.kv_cache_groups:
        inner = child.layer_specs_of(group.kv_cache_spec)
        for name in group.layer_names:
            spec = inner[name] if inner is not None else group.kv_cache_spec
            page_bytes[name] = int(spec.page_size_bytes)
    views = {}
    for tensor in worker.kv_cache_tensors:
        for index, name in enumerate(tensor.layers):
            start = tensor.offset + index * tensor.layer_stride
            assert start + (worker.num_blocks - 1) * tensor.block_stride + page_bytes[name] <= tensor.size
            views[name] = torch.as_strided(
                backing, (worker.num_blocks, page_bytes[name]), (tensor.block_stride, 1), start
            )
    return views


@pytest.mark.parametrize("dcp", DCP_SIZES)
@pytest.mark.parametrize("kind", KINDS)
def test_connector_chunks_match_the_scheduler_and_pages_copied_in_them_round_trip(sizing, device, kind, dcp):
    torch = sizing.torch
    specs = child.SpecFactory(sizing.interface, torch)
    worker = child.build_worker_config(sizing.interface, child.build_kinds(specs)[kind]())
    if not hasattr(worker.kv_cache_tensors[0], "layers"):
        unavailable("this release's KVCacheTensor has no placement (layers/strides) to follow")
    scheduler_config = sizing.utils.generate_scheduler_kv_cache_config([worker])
    use_mla = kind in ("mla", "dsa_container")
    config = vllm_config_for(sizing, dcp, use_mla)

    # The worker-side connector, built the way the engine builds it: from the worker's config.
    offloading = sizing.offloading.build_offloading_config(config, worker)
    _, hash_block_size = sizing.utils.resolve_kv_cache_block_sizes(scheduler_config, config)
    blocks_per_chunk = offloading.cache.blocks_per_chunk
    assert blocks_per_chunk == BLOCKS_PER_CHUNK
    assert offloading.cache.tokens_per_hash == hash_block_size

    spans = {}
    for index, group in enumerate(worker.kv_cache_groups):
        group_config = next(g for g in offloading.groups if tuple(g.layer_names) == tuple(group.layer_names))
        scheduler_span = sizing.utils.resolve_dcp_kv_block_size(
            scheduler_config.kv_cache_groups[index].kv_cache_spec, dcp
        )
        assert group_config.tokens_per_block == scheduler_span, (kind, dcp, index)
        chunk_tokens = group_config.tokens_per_block * blocks_per_chunk
        assert chunk_tokens % hash_block_size == 0, (chunk_tokens, hash_block_size)
        spans[index] = group_config.tokens_per_block

    # A request long enough for two chunks of the widest group.
    request_tokens = 2 * math.lcm(*(span * blocks_per_chunk for span in spans.values()))
    total = worker.kv_cache_tensors[0].size
    generator = torch.Generator(device="cpu").manual_seed(dcp * 1009 + len(kind))
    source = torch.randint(0, 256, (total,), dtype=torch.uint8, generator=generator).to(device)
    target = torch.zeros(total, dtype=torch.uint8, device=device)
    source_pages = layer_pages(worker, source, torch)
    target_pages = layer_pages(worker, target, torch)
    pin = device.type == "cuda"

    for index, group in enumerate(worker.kv_cache_groups):
        span = spans[index]
        num_blocks = request_tokens // span
        assert num_blocks <= worker.num_blocks, (kind, dcp, num_blocks)
        # Blocks sit anywhere in the pool: a request's table is a permutation, and the
        # blocks it is loaded back into are another.
        saved_ids = torch.randperm(worker.num_blocks, generator=generator)[:num_blocks]
        loaded_ids = torch.randperm(worker.num_blocks, generator=generator)[:num_blocks]
        chunk_tokens = span * blocks_per_chunk
        for chunk_start in range(0, num_blocks, blocks_per_chunk):
            first_token = chunk_start * span
            last_token = min(chunk_start + blocks_per_chunk, num_blocks) * span
            assert first_token % hash_block_size == 0 and last_token % hash_block_size == 0
            assert first_token % chunk_tokens == 0
            ids_out = saved_ids[chunk_start : chunk_start + blocks_per_chunk].to(device)
            ids_in = loaded_ids[chunk_start : chunk_start + blocks_per_chunk].to(device)
            for name in group.layer_names:
                pages = source_pages[name].index_select(0, ids_out)
                host = torch.empty(pages.shape, dtype=torch.uint8, pin_memory=pin)
                host.copy_(pages, non_blocking=pin)
                if pin:
                    torch.cuda.synchronize()
                target_pages[name].index_copy_(0, ids_in, host.to(device, non_blocking=pin))
        if pin:
            torch.cuda.synchronize()
        untouched = torch.ones(worker.num_blocks, dtype=torch.bool)
        untouched[loaded_ids] = False
        for name in group.layer_names:
            moved = source_pages[name][saved_ids.to(device)]
            assert torch.equal(moved, target_pages[name][loaded_ids.to(device)]), (kind, dcp, name)
            assert int(target_pages[name][untouched.to(device)].count_nonzero()) == 0, name
