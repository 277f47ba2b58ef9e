"""Which KV cache config a piece of code sees: the scheduler's (flattened) or a worker's (keeps containers).

DESIGN.md §1: the engine core flattens every UniformTypeKVCacheSpecs container before the scheduler, the
KV cache managers, their coordinator and scheduler-side connector code see the config. Code there never
meets a container, so container checks on group specs are correct there and must not be reported.
"""

from __future__ import annotations

from fnmatch import fnmatchcase

# Module paths (relative to the tree root) that only ever receive the scheduler's config.
# Overridable with `scheduler-only-paths` in [tool.kvlint].
DEFAULT_SCHEDULER_ONLY_PATHS: tuple[str, ...] = (
    "vllm/v1/core/sched/*",
    "vllm/v1/core/kv_cache_manager.py",
    "vllm/v1/core/kv_cache_coordinator.py",
    "vllm/v1/core/single_type_kv_cache_manager.py",
    "vllm/v1/core/block_pool.py",
    "vllm/v1/core/encoder_cache_manager.py",
    "vllm/distributed/kv_transfer/kv_connector/*scheduler*.py",
    "vllm/v1/simple_kv_offload/manager.py",
)


def sees_only_scheduler_config(module_path: str, class_names: list[str], patterns: tuple[str, ...]) -> bool:
    if any(fnmatchcase(module_path, pattern) for pattern in patterns):
        return True
    # Connectors split in two halves: `FooConnectorScheduler` is built with the scheduler's config.
    return any(name.endswith("Scheduler") for name in class_names)
