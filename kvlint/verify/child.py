"""Measure every KV-cache sizing path of a vLLM tree, inside a child interpreter.

Run by `kvlint verify` as ``python -I child.py --out FILE [--vllm PATH]``: this is the only
place where scanned vLLM code is imported, so it stays out of kvlint's own process.
It imports nothing from kvlint (stdlib and the vLLM tree only) and writes one JSON
document to FILE; stdout and stderr are left to vLLM's logging.

For every group kind x DCP size it builds the worker's KVCacheConfig (containers kept)
and the scheduler's (flattened by the tree's own ``generate_scheduler_kv_cache_config``)
and asks each sizing path, fed the config its role really sees, for the token span of
one block of every group. A path that raises is recorded with its message. A configuration the
scheduler's own coordinator refuses to build (an assertion or ValueError raised in vLLM's code, as at
engine start: e.g. a sliding-window group under DCP) is "refused": vLLM never runs it, so no other path's
answer for it is a disagreement.
Constructors differ between releases, so every spec, config and call is built by
introspection; what a release cannot express is reported, never guessed.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import inspect
import json
import math
import os
import sys
import traceback
from collections.abc import Callable
from typing import Any

DCP_SIZES = (1, 2, 4, 8)
# Large enough that every DCP size above divides it, as vLLM requires.
TENSOR_PARALLEL_SIZE = 8
BLOCK_SIZE = 16
NUM_BLOCKS = 64
MAX_MODEL_LEN = 4096
MAX_BATCHED_TOKENS = 2048
ENGINE_ID = "kvlint-verify"

KV_CACHE_UTILS = "vllm.v1.core.kv_cache_utils"
KV_CACHE_INTERFACE = "vllm.v1.kv_cache_interface"
COORDINATOR = "vllm.v1.core.kv_cache_coordinator"
OFFLOADING_CONFIG = "vllm.distributed.kv_transfer.kv_connector.v1.offloading.config"

# Kinds whose group-level spec is a UniformTypeKVCacheSpecs container.
CONTAINER_KINDS = ("dsa_container", "full_attention_container")


class NotExpressible(Exception):
    """The release's classes cannot describe this configuration."""


class StandInGap(AttributeError):
    """A sizing path asked kvlint's stand-in for something it cannot answer honestly."""


class Refused(Exception):
    """vLLM's scheduler refuses this configuration when it starts (its coordinator raises); the message is why."""


def raised_by_vllm(error: BaseException) -> bool:
    """Whether the innermost frame `error` was raised in is vLLM's code (its own assert or raise), not kvlint's."""
    frame = error.__traceback__
    while frame is not None and frame.tb_next is not None:
        frame = frame.tb_next
    return frame is not None and str(frame.tb_frame.f_globals.get("__name__", "")).startswith("vllm.")


def describe_error(error: BaseException) -> str:
    message = str(error).strip()
    return f"{type(error).__name__}: {message}" if message else type(error).__name__


# --------------------------------------------------------------------------- specs


def construct(cls: type, wanted: dict[str, Any]) -> Any:
    """Build a dataclass from the wanted fields it has; refuse if it needs others."""
    if not dataclasses.is_dataclass(cls):
        return cls(**wanted)
    fields = {field.name: field for field in dataclasses.fields(cls) if field.init}
    missing = [
        name
        for name, field in fields.items()
        if name not in wanted and field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING  # type: ignore[misc]
    ]
    if missing:
        raise NotExpressible(f"{cls.__name__} needs {', '.join(missing)} (unknown to kvlint)")
    return cls(**{name: value for name, value in wanted.items() if name in fields})


class SpecFactory:
    """Layer and group specs of the tree under test, built by introspection."""

    def __init__(self, interface: Any, torch: Any) -> None:
        self.interface = interface
        self.torch = torch

    def spec_class(self, name: str) -> type:
        cls = getattr(self.interface, name, None)
        if cls is None:
            raise NotExpressible(f"{KV_CACHE_INTERFACE} has no {name}")
        return cls

    def attention(self, class_name: str, **fields: Any) -> Any:
        return construct(self.spec_class(class_name), {"block_size": BLOCK_SIZE, **fields})

    def full_attention(self, num_kv_heads: int = 8, head_size: int = 128) -> Any:
        return self.attention(
            "FullAttentionSpec",
            num_kv_heads=num_kv_heads,
            head_size=head_size,
            dtype=self.torch.bfloat16,
        )

    def mla(self, head_size: int = 576, dtype: Any = None) -> Any:
        return self.attention(
            "MLAAttentionSpec",
            num_kv_heads=1,
            head_size=head_size,
            dtype=dtype if dtype is not None else self.torch.bfloat16,
        )

    def indexer(self) -> Any:
        # DeepSeek V3.2's indexer cache: fp8 keys of 128 dims plus 4 scale bytes per 128.
        return self.mla(head_size=132, dtype=self.torch.uint8)

    def sliding_window(self) -> Any:
        return self.attention(
            "SlidingWindowSpec",
            num_kv_heads=8,
            head_size=128,
            dtype=self.torch.bfloat16,
            sliding_window=1024,
        )

    def mamba(self) -> Any:
        return construct(
            self.spec_class("MambaSpec"),
            {
                "block_size": BLOCK_SIZE,
                "shapes": ((4, 1024), (16, 64, 128)),
                "dtypes": (self.torch.bfloat16, self.torch.float32),
                # Prefix caching is on, as with any connector: hybrid models run Mamba aligned.
                "mamba_cache_mode": "align",
            },
        )

    def container(self, layer_specs: dict[str, Any]) -> Any:
        cls = self.spec_class("UniformTypeKVCacheSpecs")
        from_specs = getattr(cls, "from_specs", None)
        if from_specs is not None:
            spec = from_specs(layer_specs)
            if spec is None:
                raise NotExpressible("UniformTypeKVCacheSpecs.from_specs rejects these layers")
            return spec
        return construct(cls, {"block_size": BLOCK_SIZE, "kv_cache_specs": layer_specs})


def layer_specs_of(spec: Any) -> dict[str, Any] | None:
    """A container's per-layer specs, or None for a plain layer-level spec."""
    inner = getattr(spec, "kv_cache_specs", None)
    return dict(inner) if isinstance(inner, dict) else None


def build_kinds(specs: SpecFactory) -> dict[str, Callable[[], list[tuple[list[str], Any]]]]:
    """Each kind: a function returning the worker's groups as (layer names, group spec)."""

    def single(layer_count: int, make: Callable[[], Any]) -> list[tuple[list[str], Any]]:
        names = [f"model.layers.{index}.attn" for index in range(layer_count)]
        return [(names, make())]

    def dsa_container() -> list[tuple[list[str], Any]]:
        layers: dict[str, Any] = {}
        for index in range(2):
            layers[f"model.layers.{index}.self_attn.attn"] = specs.mla()
            layers[f"model.layers.{index}.self_attn.indexer.k_cache"] = specs.indexer()
        return [(list(layers), specs.container(layers))]

    def full_attention_container() -> list[tuple[list[str], Any]]:
        layers = {
            "model.layers.0.attn": specs.full_attention(num_kv_heads=8, head_size=128),
            "model.layers.1.attn": specs.full_attention(num_kv_heads=4, head_size=256),
        }
        return [(list(layers), specs.container(layers))]

    def hybrid_attention_mamba() -> list[tuple[list[str], Any]]:
        # Like vLLM's hybrid grouping: one attention group, Mamba layers split into
        # equally sized groups.
        return [
            (["model.layers.0.attn", "model.layers.3.attn"], specs.full_attention()),
            (["model.layers.1.mixer", "model.layers.4.mixer"], specs.mamba()),
            (["model.layers.2.mixer", "model.layers.5.mixer"], specs.mamba()),
        ]

    return {
        "full_attention": lambda: single(2, specs.full_attention),
        "mla": lambda: single(2, specs.mla),
        "sliding_window": lambda: single(2, specs.sliding_window),
        "mamba": lambda: single(2, specs.mamba),
        "dsa_container": dsa_container,
        "full_attention_container": full_attention_container,
        "hybrid_attention_mamba": hybrid_attention_mamba,
    }


# ----------------------------------------------------------------- KV cache configs


def build_kv_cache_tensors(interface: Any, groups: list[tuple[list[str], Any]]) -> list[Any]:
    """One tensor per layer, all in one backing allocation (layer-outermost placement)."""
    tensor_class = interface.KVCacheTensor
    field_names = {field.name for field in dataclasses.fields(tensor_class)}
    pages: list[tuple[str, int]] = []
    for layer_names, spec in groups:
        inner = layer_specs_of(spec)
        for name in layer_names:
            layer_spec = inner[name] if inner is not None else spec
            pages.append((name, int(layer_spec.page_size_bytes)))
    total = sum(page for _, page in pages) * NUM_BLOCKS
    tensors = []
    offset = 0
    for name, page in pages:
        if "shared_by" in field_names:  # older releases: one allocation per tensor
            wanted: dict[str, Any] = {"size": page * NUM_BLOCKS, "shared_by": [name]}
        else:
            wanted = {
                "size": total,
                "layers": [name],
                "layer_stride": page * NUM_BLOCKS,
                "block_stride": page,
                "offset": offset,
            }
        tensors.append(construct(tensor_class, wanted))
        offset += page * NUM_BLOCKS
    return tensors


def build_worker_config(interface: Any, groups: list[tuple[list[str], Any]]) -> Any:
    group_specs = [
        construct(interface.KVCacheGroupSpec, {"layer_names": list(names), "kv_cache_spec": spec})
        for names, spec in groups
    ]
    return construct(
        interface.KVCacheConfig,
        {
            "num_blocks": NUM_BLOCKS,
            "kv_cache_tensors": build_kv_cache_tensors(interface, groups),
            "kv_cache_groups": group_specs,
        },
    )


class ModelConfigStandIn:
    """The few ModelConfig answers the sizing paths read, without loading a model.

    A real ModelConfig inspects a Hugging Face checkpoint; the sizing paths only ask
    these questions. Anything else fails loudly instead of answering a guess.
    """

    def __init__(self, use_mla: bool, total_num_kv_heads: int, torch: Any) -> None:
        self.use_mla = use_mla
        self.model = "kvlint/verify"
        self.dtype = torch.bfloat16
        self.max_model_len = MAX_MODEL_LEN
        self.is_diffusion = False
        self._total_num_kv_heads = total_num_kv_heads

    def get_total_num_kv_heads(self) -> int:
        return self._total_num_kv_heads

    def __getattr__(self, name: str) -> Any:
        raise StandInGap(f"kvlint's ModelConfig stand-in cannot answer {name!r}")


def tensor_parallel_size_for(dcp_sizes: tuple[int, ...]) -> int:
    """One tensor-parallel size for the whole matrix: vLLM needs every DCP size to divide it."""
    return math.lcm(TENSOR_PARALLEL_SIZE, *dcp_sizes)


def build_vllm_config(
    config_module: Any,
    dcp: int,
    extra_config: dict[str, Any] | None = None,
    tensor_parallel_size: int = TENSOR_PARALLEL_SIZE,
) -> tuple[Any, str]:
    """The real VllmConfig with the real sub-configs, or those sub-configs on a stand-in."""
    parallel = construct(
        config_module.ParallelConfig,
        {"tensor_parallel_size": tensor_parallel_size, "decode_context_parallel_size": dcp},
    )
    cache = construct(config_module.CacheConfig, {"block_size": BLOCK_SIZE, "enable_prefix_caching": True})
    transfer = construct(
        config_module.KVTransferConfig,
        {
            "kv_connector": "OffloadingConnector",
            "kv_role": "kv_both",
            "engine_id": ENGINE_ID,
            "kv_connector_extra_config": dict(extra_config or {}),
        },
    )
    pieces: dict[str, Any] = {
        "parallel_config": parallel,
        "cache_config": cache,
        "kv_transfer_config": transfer,
    }
    device_config_class = getattr(config_module, "DeviceConfig", None)
    if device_config_class is not None:
        pieces["device_config"] = construct(device_config_class, {"device": "cpu"})
    try:
        config = config_module.VllmConfig(**pieces)
        kind = "VllmConfig"
    except Exception as error:  # pragma: no cover - depends on the release
        config = _ConfigStandIn(pieces)
        kind = f"stand-in carrying the real sub-configs ({describe_error(error)})"
    return config, kind


class _ConfigStandIn:
    def __init__(self, pieces: dict[str, Any]) -> None:
        self.__dict__.update(pieces)
        self.kv_events_config = None
        self.use_v2_model_runner = False
        self.model_config = None

    def __getattr__(self, name: str) -> Any:
        raise StandInGap(f"kvlint's VllmConfig stand-in cannot answer {name!r}")


class WithModel:
    """The real VllmConfig, seen with a ModelConfig stand-in.

    The real config keeps ``model_config=None`` (a state vLLM itself allows), so its own
    properties never consult the stand-in; only what a sizing path reads off
    ``vllm_config.model_config`` does.
    """

    def __init__(self, vllm_config: Any, model_config: Any) -> None:
        self._vllm_config = vllm_config
        self.model_config = model_config

    def __getattr__(self, name: str) -> Any:
        return getattr(self._vllm_config, name)


# ------------------------------------------------------------------- sizing paths


@dataclasses.dataclass
class Cell:
    kind: str
    dcp: int
    worker: Any
    scheduler: Any
    vllm_config: Any
    scheduler_sizes: tuple[int, int] | None = None
    scheduler_error: str | None = None


def call_with_known_arguments(function: Callable[..., Any], known: dict[str, Any]) -> Any:
    parameters = inspect.signature(function).parameters
    arguments: dict[str, Any] = {}
    for name, parameter in parameters.items():
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            continue
        if name in known:
            arguments[name] = known[name]
        elif parameter.default is parameter.empty:
            raise NotExpressible(f"{function.__qualname__} needs {name} (unknown to kvlint)")
    return function(**arguments)


@dataclasses.dataclass(frozen=True)
class SizingPath:
    name: str
    description: str  # `module:function` and the config it is fed
    measure: Callable[[Cell], list[int | None]]


class SizingPaths:
    """The tree's sizing paths; each returns one span per group (None: not sized there)."""

    def __init__(self, modules: dict[str, Any]) -> None:
        self.utils = modules["utils"]
        self.coordinator = modules.get("coordinator")
        self.offloading = modules.get("offloading")
        self.missing: dict[str, str] = {}
        self.paths: list[SizingPath] = []
        self._register()

    def _add(self, name: str, description: str, measure: Callable[[Cell], list[int | None]]) -> None:
        self.paths.append(SizingPath(name, description, measure))

    def _register(self) -> None:
        self._add(
            "scheduler",
            f"{KV_CACHE_UTILS}:resolve_kv_cache_block_sizes (scheduler config; "
            "several groups: the per-group spans it takes the LCM of)",
            self.scheduler,
        )
        if self.coordinator is not None and hasattr(self.coordinator, "get_kv_cache_coordinator"):
            self._add(
                "managers",
                f"{COORDINATOR}:get_kv_cache_coordinator -> managers' block_size (scheduler config)",
                self.managers,
            )
        else:
            self.missing["managers"] = f"{COORDINATOR}:get_kv_cache_coordinator not found"
        if hasattr(self.utils, "resolve_dcp_kv_cache_spec"):
            self._add(
                "mooncake[worker]",
                f"{KV_CACHE_UTILS}:resolve_dcp_kv_cache_spec, as the Mooncake store worker "
                "resizes each group (worker config)",
                self.mooncake_worker,
            )
        else:
            self.missing["mooncake[worker]"] = f"{KV_CACHE_UTILS}:resolve_dcp_kv_cache_spec not found"
        if self.offloading is not None and hasattr(self.offloading, "build_offloading_config"):
            # The connector is built for both roles, each from the config that role holds.
            self._add(
                "offloading[scheduler]",
                f"{OFFLOADING_CONFIG}:build_offloading_config (scheduler config)",
                lambda cell: self.offloading_spans(cell, cell.scheduler),
            )
            self._add(
                "offloading[worker]",
                f"{OFFLOADING_CONFIG}:build_offloading_config (worker config)",
                lambda cell: self.offloading_spans(cell, cell.worker),
            )
        else:
            self.missing["offloading"] = f"{OFFLOADING_CONFIG}:build_offloading_config not found"

    @property
    def descriptions(self) -> dict[str, str]:
        return {path.name: path.description for path in self.paths}

    def resolve_sizes(self, cell: Cell) -> None:
        try:
            sizes = self.utils.resolve_kv_cache_block_sizes(cell.scheduler, cell.vllm_config)
            cell.scheduler_sizes = (int(sizes[0]), int(sizes[1]))
        except Exception as error:
            cell.scheduler_error = describe_error(error)

    def scheduler(self, cell: Cell) -> list[int | None]:
        if cell.scheduler_error is not None:
            raise RuntimeError(cell.scheduler_error)
        assert cell.scheduler_sizes is not None
        scheduler_block_size, _ = cell.scheduler_sizes
        groups = cell.scheduler.kv_cache_groups
        if len(groups) == 1:
            return [scheduler_block_size]
        # Several groups: the scheduler block is the LCM of the per-group spans it
        # resolves with the tree's own resolver; report those spans.
        resolver = getattr(self.utils, "resolve_dcp_kv_block_size", None)
        if resolver is None:
            return [None] * len(groups)
        dcp = cell.vllm_config.parallel_config.decode_context_parallel_size
        spans = [int(resolver(group.kv_cache_spec, dcp)) for group in groups]
        if math.lcm(*spans) != scheduler_block_size:
            raise AssertionError(
                f"per-group spans {spans} do not have the scheduler block size {scheduler_block_size} as their LCM"
            )
        return spans

    def mooncake_worker(self, cell: Cell) -> list[int | None]:
        dcp = cell.vllm_config.parallel_config.decode_context_parallel_size
        return [
            int(self.utils.resolve_dcp_kv_cache_spec(group.kv_cache_spec, dcp).block_size)
            for group in cell.worker.kv_cache_groups
        ]

    def managers(self, cell: Cell) -> list[int | None]:
        if cell.scheduler_error is not None:
            raise RuntimeError(f"needs the scheduler's block sizes: {cell.scheduler_error}")
        assert cell.scheduler_sizes is not None
        scheduler_block_size, hash_block_size = cell.scheduler_sizes
        parallel = cell.vllm_config.parallel_config
        known = {
            "kv_cache_config": cell.scheduler,
            "max_model_len": MAX_MODEL_LEN,
            "max_in_flight_tokens": MAX_BATCHED_TOKENS,
            "max_num_batched_tokens": MAX_BATCHED_TOKENS,
            "use_eagle": False,
            "enable_caching": True,
            "enable_kv_cache_events": False,
            "dcp_world_size": parallel.decode_context_parallel_size,
            "pcp_world_size": 1,
            "scheduler_block_size": scheduler_block_size,
            "hash_block_size": hash_block_size,
            "metrics_collector": None,
            "num_prefill_lookahead": 0,
        }
        try:
            coordinator = call_with_known_arguments(self.coordinator.get_kv_cache_coordinator, known)
        except (AssertionError, ValueError, NotImplementedError) as error:
            if raised_by_vllm(error):  # the engine would stop here at start: vLLM refuses the configuration
                raise Refused(describe_error(error)) from None
            raise
        return [int(manager.block_size) for manager in coordinator.single_type_managers]

    def offloading_spans(self, cell: Cell, kv_cache_config: Any) -> list[int | None]:
        config = self.offloading.build_offloading_config(cell.vllm_config, kv_cache_config)
        groups = kv_cache_config.kv_cache_groups
        spans: list[int | None] = [None] * len(groups)
        by_layers = {tuple(group.layer_names): index for index, group in enumerate(groups)}
        for position, group_config in enumerate(config.groups):
            index = getattr(group_config, "group_id", None)
            if index is None:
                index = by_layers.get(tuple(group_config.layer_names), position)
            spans[index] = int(group_config.tokens_per_block)
        return spans


def compare(paths: dict[str, Any]) -> bool | None:
    """Agree: no path raised, and every group got one span from all paths that size it.

    None when fewer than two paths could be evaluated: nothing was compared.
    """
    spans = [value for value in paths.values() if isinstance(value, list)]
    if len(spans) != len(paths):
        return False
    if len(spans) < 2:
        return None
    for group_spans in zip(*spans):
        values = {span for span in group_spans if span is not None}
        if len(values) > 1:
            return False
    return True


def run_matrix(modules: dict[str, Any], dcp_sizes: tuple[int, ...]) -> dict[str, Any]:
    torch = modules["torch"]
    interface = modules["interface"]
    utils = modules["utils"]
    specs = SpecFactory(interface, torch)
    kinds = build_kinds(specs)
    paths = SizingPaths(modules)
    vllm_configs: dict[int, tuple[Any, str]] = {}
    cells: list[dict[str, Any]] = []
    notes: dict[str, str] = {}
    for kind, make_groups in kinds.items():
        for dcp in dcp_sizes:
            record: dict[str, Any] = {"kind": kind, "dcp": dcp, "container": kind in CONTAINER_KINDS}
            try:
                groups = make_groups()
                worker = build_worker_config(interface, groups)
                scheduler = utils.generate_scheduler_kv_cache_config([worker])
            except NotExpressible as error:
                record.update(paths={}, agree=None, not_expressible=str(error))
                cells.append(record)
                continue
            except Exception as error:
                reason = f"building the {kind} configuration failed: {describe_error(error)}"
                record.update(paths={}, agree=None, not_expressible=reason)
                cells.append(record)
                continue
            if dcp not in vllm_configs:
                try:
                    vllm_configs[dcp] = build_vllm_config(
                        modules["config"], dcp, tensor_parallel_size=tensor_parallel_size_for(dcp_sizes)
                    )
                except Exception as error:
                    vllm_configs[dcp] = (None, f"vLLM rejects DCP={dcp}: {describe_error(error)}")
            base_config, config_kind = vllm_configs[dcp]
            if base_config is None:
                record.update(paths={}, agree=None, not_expressible=config_kind)
                cells.append(record)
                continue
            notes[f"vllm_config[dcp={dcp}]"] = config_kind
            use_mla = kind in ("mla", "dsa_container")
            model = ModelConfigStandIn(use_mla, 1 if use_mla else 8, torch)
            cell = Cell(kind, dcp, worker, scheduler, WithModel(base_config, model))
            paths.resolve_sizes(cell)
            measured: dict[str, Any] = {}
            unexpressed: dict[str, str] = {}
            refused: str | None = None
            for path in paths.paths:
                try:
                    measured[path.name] = path.measure(cell)
                except (NotExpressible, StandInGap) as error:
                    # kvlint's limit, not vLLM's disagreement: say so, compare the rest.
                    unexpressed[path.name] = str(error)
                except Refused as error:
                    refused = measured[path.name] = str(error)
                except Exception as error:
                    measured[path.name] = describe_error(error)
            record["paths"] = measured
            if unexpressed:
                record["not_expressible_paths"] = unexpressed
            if cell.scheduler_sizes is not None:
                record["scheduler_block_size"], record["hash_block_size"] = cell.scheduler_sizes
            # A configuration vLLM refuses at start is not compared: no path of it ever runs.
            record["agree"] = None if refused is not None else compare(measured)
            if refused is not None:
                record["refused"] = refused
            cells.append(record)
    return {
        "paths": paths.descriptions,
        "unavailable_paths": paths.missing,
        "notes": notes,
        "cells": cells,
    }


# ------------------------------------------------------- rewritten container-blind checks


# Field values a spec of any class may need; a class needing another field is reported, not guessed.
def spec_fields(torch: Any) -> dict[str, Any]:
    return {
        "block_size": BLOCK_SIZE,
        "num_kv_heads": 8,
        "head_size": 128,
        "dtype": torch.bfloat16,
        "sliding_window": 1024,
        "attention_chunk_size": 1024,
        "rswa_window": 1024,
        "shapes": ((4, 1024), (16, 64, 128)),
        "dtypes": (torch.bfloat16, torch.float32),
        "mamba_cache_mode": "align",
    }


# A rewritten check arrives as data (kvlint/verify/check_forms.py): the test, class names, the quantifier over
# the layers. Nothing from the scanned tree is compiled or evaluated here; a name is looked up in the interface.
TYPE_OPERATORS: dict[str, Callable[[Any, Any], bool]] = {
    "is": lambda left, right: left is right,
    "is not": lambda left, right: left is not right,
    "==": lambda left, right: left == right,
    "!=": lambda left, right: left != right,
    "in": lambda left, right: left in right,
    "not in": lambda left, right: left not in right,
}


class CheckNames:
    """The interface's classes and functions a check names, by plain name only."""

    def __init__(self, interface: Any) -> None:
        self.interface = interface

    def value(self, name: Any) -> Any:
        if not isinstance(name, str) or not name.isidentifier() or name.startswith("__"):
            raise NotExpressible(f"not a name: {name!r}")
        if name not in vars(self.interface):
            raise NotExpressible(f"this vLLM has no {name}")
        return vars(self.interface)[name]

    def classes(self, described: Any) -> Any:
        """A class name, a list (a tuple of classes) or {"union": [left, right]}."""
        if isinstance(described, list):
            return tuple(self.classes(item) for item in described)
        if isinstance(described, dict) and list(described) == ["union"] and len(described["union"]) == 2:
            left, right = (self.classes(item) for item in described["union"])
            return left | right
        found = self.value(described)
        if not isinstance(found, type):
            raise NotExpressible(f"{described} is not a class in this vLLM")
        return found

    def function(self, name: Any) -> Callable[[Any], Any]:
        found = self.value(name)
        if not inspect.isfunction(found):
            raise NotExpressible(f"{name} is not a function in this vLLM")
        return found


def answer(check: dict[str, Any], names: CheckNames, spec: Any) -> bool:
    """What the described check answers for `spec` (raises what the check would raise)."""
    test = check["test"]
    if test == "helper":
        return bool(names.function(check["helper"])(spec))
    layers = check.get("layers")
    if layers is not None:
        one = {**check, "layers": None}
        quantify = {"all": all, "any": any}[layers]
        return quantify(answer(one, names, layer) for layer in names.function("iter_layer_specs")(spec))
    classes = names.classes(check["classes"])
    if test == "isinstance":
        return isinstance(spec, classes)
    if test == "type":
        return bool(TYPE_OPERATORS[check["operator"]](type(spec), classes))
    raise NotExpressible(f"unknown test {test!r}")


def evaluate(check: dict[str, Any], names: CheckNames, spec: Any) -> Any:
    try:
        return answer(check, names, spec)
    except Exception as error:
        return str(error) if isinstance(error, NotExpressible) else describe_error(error)


def run_checks(modules: dict[str, Any], document: dict[str, Any]) -> list[dict[str, Any]]:
    """Each rewritten check on a plain spec of every class and on a container of every composition:
    a plain spec must answer as before, a container as its layers do (with the rewrite's quantifier)."""
    interface, torch = modules["interface"], modules["torch"]
    names = CheckNames(interface)
    fields = spec_fields(torch)
    classes = sorted({name for composition in document["compositions"] for name in composition})
    specs: dict[str, Any] = {}
    errors: dict[str, str] = {}
    for name in classes:
        try:
            cls = getattr(interface, name, None)
            if cls is None:
                raise NotExpressible(f"this vLLM has no {name}")
            specs[name] = construct(cls, fields)
        except Exception as error:
            errors[name] = str(error) if isinstance(error, NotExpressible) else describe_error(error)
    factory = SpecFactory(interface, torch)
    results = []
    for case in document["cases"]:
        before, after = case["before"], case["after"]
        quantify = all if case["quantifier"] == "all" else any
        plain = []
        for name in classes:
            if name not in specs:
                plain.append({"class": name, "ok": None, "error": errors[name]})
                continue
            answers = (
                evaluate(before, names, specs[name]),
                evaluate(after, names, specs[name]),
            )
            plain.append({"class": name, "before": answers[0], "after": answers[1], "ok": answers[0] == answers[1]})
        containers = []
        for composition in document["compositions"]:
            record: dict[str, Any] = {"layers": composition}
            missing = [name for name in composition if name not in specs]
            if missing:
                record.update(ok=None, error=f"{', '.join(missing)} not built")
                containers.append(record)
                continue
            layers = {f"model.layers.{index}": specs[name] for index, name in enumerate(composition)}
            try:
                try:
                    container = factory.container(layers)
                except NotExpressible:  # from_specs keeps only what vLLM would group: build it as given
                    container = construct(
                        factory.spec_class("UniformTypeKVCacheSpecs"),
                        {"block_size": BLOCK_SIZE, "kv_cache_specs": layers},
                    )
                before_answer = evaluate(before, names, container)
                after_answer = evaluate(after, names, container)
            except Exception as error:  # a composition of a newer tree that this vLLM cannot build or answer
                record.update(ok=None, error=f"this vLLM cannot build it: {describe_error(error)}")
                containers.append(record)
                continue
            layer_answers = [evaluate(before, names, layer) for layer in layers.values()]
            expected = quantify(layer_answers) if all(isinstance(a, bool) for a in layer_answers) else None
            record.update(
                before=before_answer,
                after=after_answer,
                layer_answers=layer_answers,
                expected=expected,
                ok=expected is not None and after_answer == expected,
            )
            containers.append(record)
        results.append({"site": case["site"], "plain": plain, "containers": containers})
    return results


# ---------------------------------------------------------------------- importing


def import_tree(vllm_path: str | None) -> dict[str, Any]:
    if vllm_path is not None:
        root = os.path.abspath(vllm_path)
        if not os.path.isfile(os.path.join(root, "vllm", "__init__.py")):
            raise ImportError(f"{root} holds no vllm package (expected {root}/vllm/__init__.py)")
        sys.path.insert(0, root)
    import vllm  # noqa: F401  - the tree under test

    location = os.path.dirname(os.path.abspath(vllm.__file__))
    if vllm_path is not None and os.path.dirname(location) != os.path.abspath(vllm_path):
        raise ImportError(f"imported vllm from {location}, not from {vllm_path}")
    modules: dict[str, Any] = {
        "vllm": vllm,
        "location": location,
        "torch": importlib.import_module("torch"),
        "config": importlib.import_module("vllm.config"),
        "interface": importlib.import_module(KV_CACHE_INTERFACE),
        "utils": importlib.import_module(KV_CACHE_UTILS),
    }
    for key, name in (("coordinator", COORDINATOR), ("offloading", OFFLOADING_CONFIG)):
        try:
            modules[key] = importlib.import_module(name)
        except ModuleNotFoundError as error:
            if error.name is not None and error.name.startswith("vllm"):
                continue  # the release has no such module: a missing path, not a broken tree
            raise
    return modules


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="where to write the JSON result")
    parser.add_argument("--vllm", default=None, help="directory holding the vllm package")
    parser.add_argument("--dcp", default=",".join(map(str, DCP_SIZES)), help="DCP sizes")
    parser.add_argument("--checks", default=None, help="JSON file of rewritten checks to evaluate (no matrix)")
    arguments = parser.parse_args(argv)
    dcp_sizes = tuple(int(size) for size in arguments.dcp.split(","))
    result: dict[str, Any]
    try:
        modules = import_tree(arguments.vllm)
    except BaseException as error:  # any failure to import is "the tree cannot be imported"
        result = {"import_error": describe_error(error)}
    else:
        result = {
            "vllm": {
                "version": getattr(modules["vllm"], "__version__", "unknown"),
                "path": modules["location"],
            },
            "python": sys.version.split()[0],
            "setup": {
                "tensor_parallel_size": tensor_parallel_size_for(dcp_sizes),
                "block_size": BLOCK_SIZE,
                "num_blocks": NUM_BLOCKS,
            },
        }
        try:
            if arguments.checks is not None:
                with open(arguments.checks, encoding="utf-8") as handle:
                    result["checks"] = run_checks(modules, json.load(handle))
            else:
                result.update(run_matrix(modules, dcp_sizes))
        except Exception as error:
            result["internal_error"] = describe_error(error)
            result["traceback"] = traceback.format_exc()
    with open(arguments.out, "w", encoding="utf-8") as handle:
        json.dump(result, handle, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
