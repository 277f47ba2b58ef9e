"""Which containers a tree builds: its models' layers (kvlint.analysis.census) × its grouping paths
(kvlint.analysis.census.paths), each with the setting that builds it.

Each path is evaluated on what one checkpoint builds (each alternative of a model,
kvlint.analysis.census.instantiation). A path that takes every layer of a model builds one container of
all of them when they share one uniform type (the spec registry's `uniform_type_base_spec`) and are not all
one kind — DeepSeek-V3.2's MLA plus indexer, by default — or none. The full-allocation fallback (a path
that returns early unless the model has layers of each of some classes) builds one container of the whole
model, only for models that have them. A bucketing path gated on a block-outermost layout builds one container per uniform-type bucket of
a model whose layers have more than one bucket (mixed page sizes): by default when one of the model's layers
has a backend that declares only block-outermost layouts (the resolved layout is then one of them), else
only when the user picks such a layout (opt-in). A model whose alternatives were merged gives compositions
that are only possible. Plain data: part of the tree index.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kvlint.analysis.census.paths import GroupingPath
from kvlint.analysis.census.reading import Census, LayerClass
from kvlint.analysis.hierarchy import SpecHierarchy

DEFAULT = "default"
POSSIBLE = "possible: "
MERGED = "the model's constructor branches more ways than the census keeps apart, so that these layers are built together by one checkpoint is unproven"
_REGISTERED = re.compile(rb"register\(\s*(\w+)\s*,\s*\w+\s*,\s*uniform_type_base_spec\s*=\s*(\w+)")


@dataclass(frozen=True)
class ContainerComposition:
    """One container a model of the tree builds: its layers, the setting and the path that build it."""

    layer_classes: frozenset[str]
    spec_classes: frozenset[str]
    # "default", "opt-in: <the setting that builds it>", or "possible: <the link the census could not prove>"
    setting: str
    model: str
    path: str  # "module:function"
    line: int  # the `from_specs` call of the path

    @property
    def is_default(self) -> bool:
        return self.setting == DEFAULT

    def where(self) -> str:
        module = self.path.split(":")[0].rsplit("/", 1)[-1]
        return f"{module}:{self.line}"


def uniform_bases(texts: dict[str, bytes]) -> dict[str, str]:
    """Spec class → the class it groups with (`KVCacheSpecRegistry.register(S, M, uniform_type_base_spec=B)`)."""
    bases: dict[str, str] = {}
    for data in texts.values():
        if b"uniform_type_base_spec" in data:
            for spec, base in _REGISTERED.findall(data):
                bases.setdefault(spec.decode(), base.decode())
    return bases


def compose(
    census: Census, paths: tuple[GroupingPath, ...], hierarchy: SpecHierarchy, bases: dict[str, str]
) -> tuple[ContainerComposition, ...]:
    layers = {layer.name: layer for layer in census.layers}
    found: dict[tuple, ContainerComposition] = {}
    for model in census.models:
        for alternative in model.alternatives or (model.layers,):
            present = sorted(name for name in alternative if name in layers)
            for kinds in _spec_choices([layers[name] for name in present]):
                _compose_one(census, model, present, kinds, paths, hierarchy, bases, found)
    return tuple(sorted(found.values(), key=lambda c: (not c.is_default, c.path, sorted(c.layer_classes))))


_MAX_CHOICES = 16


def _spec_choices(model_layers: list[LayerClass]) -> list[list[tuple[LayerClass, str]]]:
    """The (layer, spec class) kinds one checkpoint can have: a layer class whose `get_kv_cache_spec` builds
    one of several classes by its config (an MLA layer with or without a sliding window) builds one of them
    in a checkpoint whose layers share that config; and, as well, all of them at once (layers configured
    apart). Capped: past it, only the all-at-once reading."""
    every = [(layer, spec) for layer in model_layers for spec in sorted(layer.spec_classes)]
    choices: list[list[tuple[LayerClass, str]]] = [[]]
    for layer in model_layers:
        specs = sorted(layer.spec_classes)
        choices = [choice + [(layer, spec)] for choice in choices for spec in specs]
        if len(choices) > _MAX_CHOICES:
            return [every]
    return [every, *(choice for choice in choices if choice != every)]


def _compose_one(census, model, present, kinds, paths, hierarchy, bases, found) -> None:
    """The containers each path builds from one checkpoint's kinds, into `found`."""
    layers = {layer.name: layer for layer in census.layers}
    for path in paths:
        unproven = _unproven_requirement(path, kinds, hierarchy)
        for bucket in _containers(path, kinds, hierarchy, bases):
            setting = _setting(census, [layers[n] for n in present]) if path.layout_gated else DEFAULT
            if unproven:
                setting = POSSIBLE + unproven
            if model.merged:
                setting = POSSIBLE + MERGED
            composition = ContainerComposition(
                frozenset(layer.name for layer, _ in bucket),
                frozenset(spec for _, spec in bucket),
                setting,
                model.name,
                path.name,
                path.line,
            )
            found.setdefault((composition.layer_classes, setting, path.name, model.name), composition)


def _unproven_requirement(path: GroupingPath, kinds, hierarchy: SpecHierarchy) -> str:
    """Why a path's guard (`requires`) is met only through a layer class that builds other kinds too (an MLA
    layer that builds a sliding-window spec only when its config asks): "" when every required class is
    built by a layer class that builds nothing else."""
    for required in sorted(path.requires):
        sure = {
            layer.name
            for layer, _ in kinds
            if layer.spec_classes and all(hierarchy.is_subclass(spec, required) for spec in layer.spec_classes)
        }
        if not sure:
            maybe = sorted({layer.name for layer, spec in kinds if hierarchy.is_subclass(spec, required)})
            return (
                f"that a layer of {', '.join(maybe)} builds a {required} is unproven (its spec depends on its config)"
            )
    return ""


def _containers(path: GroupingPath, kinds, hierarchy: SpecHierarchy, bases: dict[str, str]):
    """The containers `path` builds from one checkpoint's (layer, spec class) kinds, evaluated as its code
    decides: a whole-model path puts every layer in one container or builds none; a bucketing path one per
    uniform-type bucket when there are several; a path handed only some classes, one per bucket of them."""
    if path.requires and not all(any(hierarchy.is_subclass(spec, c) for _, spec in kinds) for c in path.requires):
        return []
    pool = [
        (layer, spec)
        for layer, spec in kinds
        if not any(hierarchy.is_subclass(spec, c) for c in path.excluded)
        and (not path.only or any(hierarchy.is_subclass(spec, c) for c in path.only))
    ]
    buckets: dict[str, list] = {}
    for layer, spec in pool:
        buckets.setdefault(bases.get(spec, spec), []).append((layer, spec))
    if path.buckets:
        return list(buckets.values()) if len(buckets) > 1 else []
    if path.requires:
        # The fallback after page-size unification failed: one container of the whole model (its code
        # promotes the sliding-window kinds so that they share the full kinds' type).
        return [pool] if pool else []
    if path.only:
        return [bucket for bucket in buckets.values() if len(bucket) > 1]
    # The whole model: one uniform type, not all one kind, or no container at all.
    return [pool] if len(buckets) == 1 and len(pool) > 1 else []


def _setting(census: Census, model_layers: list[LayerClass]) -> str:
    """How a model gets a block-outermost layout: by default when a backend of its layers allows no other."""
    outermost = census.block_outermost
    if outermost and any(layer.layouts and set(layer.layouts) <= outermost for layer in model_layers):
        return DEFAULT
    choice = "|".join(sorted(outermost)) or "a block-outermost layout"
    name = census.layout_setting or "the KV cache layout"
    return f"opt-in: {name}={choice} (a block-outermost layout) with mixed page sizes"
