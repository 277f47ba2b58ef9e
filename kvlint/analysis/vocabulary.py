"""The vLLM names kvlint reads a tree by: where things live, what the KV cache classes are called, which
names hold a DCP size, and which code only ever sees the scheduler's config.

Every analysis (libcst per file, stdlib `ast` across files) takes these from here, so that they agree.
"""

from __future__ import annotations

import re
from fnmatch import fnmatchcase
from functools import lru_cache

# -- where things live and what they are called -----------------------------------------------------

INTERFACE_MODULE = "vllm/v1/kv_cache_interface.py"  # the spec class hierarchy; marks a tree's root
RESOLVER_NAME = "resolve_dcp_kv_block_size"  # the shared resolver (vLLM 0.29.0+)
RESOLVER_HOME = "vllm/v1/core/kv_cache_utils.py"  # where upstream defines it; searched first, then the tree
SCHEDULER_REFERENCE = "resolve_kv_cache_block_sizes"  # the scheduler's own sizing path
MANAGER_FACTORY = "get_manager_for_kv_cache_spec"  # how the coordinator builds each group's KV cache manager
PLATFORMS_DIR = "vllm/platforms"  # one module per platform: what each refuses (kvlint.analysis.platform_reach)
WORKERS_DIR = "vllm/v1/worker"  # the workers, which select their model runner (kvlint.analysis.runner_reach)
_WORKER_MODULE = re.compile(r"^vllm/v1/worker/\w*worker\.py$")
SPEC_ROOT = "KVCacheSpec"
ATTENTION_ROOT = "AttentionSpec"
CONTAINER_CLASS = "UniformTypeKVCacheSpecs"
# Attributes holding a config's list of KV cache groups.
GROUP_LIST_ATTRIBUTES = frozenset({"kv_cache_groups", "transfer_groups"})
# Calls that hand back per-layer specs: their results are never containers.
LAYER_ITERATORS = frozenset({"iter_layer_specs"})


def is_worker_module(relative: str) -> bool:
    return _WORKER_MODULE.match(relative) is not None


# -- DCP sizes -------------------------------------------------------------------------------------

DCP_NAMES = frozenset({"dcp", "dcp_size", "dcp_world_size", "decode_context_parallel_size"})
# Every text that names a DCP size holds one of these (what the tree readers select files by).
DCP_WORDS = ("dcp", "decode_context_parallel")


def is_dcp_name(name: str | None, aliases: frozenset[str] | set[str] = frozenset()) -> bool:
    """Whether an identifier holds the DCP size: a known name, `dcp_…size`, or one of a module's aliases."""
    if name is None:
        return False
    return name in DCP_NAMES or (name.startswith("dcp_") and name.endswith("size")) or name in aliases


# `name = <…dcp…>`, `name: int | None = <…dcp…>`, and keyword arguments `name=<…dcp…>` (the parameter of a
# callee), anywhere on a line.
_ALIAS = re.compile(
    # A name starts at a word's start, and the value is taken whole (`(?=(…))\2`: no backtracking into it): either
    # way a crafted line cost time quadratic in its length.
    r"\b(?:self\.)?(?P<name>[A-Za-z_]\w*)\s*(?::\s*[\w\[\]., |]+)?=(?!=)\s*(?=(?P<value>[A-Za-z_][\w.]*))(?P=value)"
    r"\s*(?=[,)\n#]|$)",
    re.MULTILINE,
)


# Each of a file's KV102 checks asks for its module's aliases: read once per text (a crafted module of 800
# checks read itself 800 times, quadratic in its size). A few texts kept: the file being linted and the index's.
@lru_cache(maxsize=4)
def dcp_aliases(source: str) -> frozenset[str]:
    """Identifiers a module assigns from a DCP size (`self.cp_world_size = dcp_world_size`), aliases of
    aliases too.

    Read from the text: it runs for every candidate file, and a tree walk costs a hundred times more.
    Only lines naming a DCP size (or an alias found so far) are matched, so the regex never scans the
    whole file; two passes catch aliases of aliases.
    """
    names: set[str] = set()
    lines = [line for line in source.splitlines() if "=" in line]
    for _ in range(2):
        needles = (*DCP_WORDS, *names)
        for line in lines:
            if not any(needle in line for needle in needles):
                continue
            for match in _ALIAS.finditer(line):
                value = match.group("value").rsplit(".", 1)[-1]
                if is_dcp_name(value, names):
                    names.add(match.group("name"))
    return frozenset(names)


# -- roles: which KV cache config a piece of code sees ---------------------------------------------
#
# DESIGN.md §1: the engine core flattens every UniformTypeKVCacheSpecs container before the scheduler, the
# KV cache managers, their coordinator and scheduler-side connector code see the config. Code there never
# meets a container, so container checks on group specs are correct there and must not be reported.


def could_consume(relative: str, data: bytes) -> bool:
    """A connector module, or one that mentions a connector: where a connector member may be read
    (kvlint.analysis.flow.consumers reads these; the project cache rebuilds the index when one changes)."""
    return "/kv_connector/" in relative or b"connector" in data


def could_construct(data: bytes) -> bool:
    """A module that may build or define a class handed a KV cache config (kvlint.analysis.construction_sites
    reads these; the project cache rebuilds the index when one changes)."""
    return b"kv_cache_config" in data or b"kv_cache_groups" in data


def could_shape_roles(relative: str) -> bool:
    """A module whose class headers kvlint.analysis.plugin_roles reads (the scheduler's and the connectors'):
    the project cache rebuilds the index when one changes."""
    return relative.startswith(("vllm/v1/core/", "vllm/distributed/kv_transfer/"))


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


def scheduler_only_paths(settings: dict) -> tuple[str, ...]:
    """The configured `scheduler-only-paths` (`[tool.kvlint]`), or the defaults."""
    return tuple(settings.get("scheduler-only-paths", DEFAULT_SCHEDULER_ONLY_PATHS))


def sees_only_scheduler_config(module_path: str, class_names: list[str], patterns: tuple[str, ...]) -> bool:
    if any(fnmatchcase(module_path, pattern) for pattern in patterns):
        return True
    # Connectors split in two halves: `FooConnectorScheduler` is built with the scheduler's config.
    return any(name.endswith("Scheduler") for name in class_names)
