"""Which containers a tree builds: its models' layers (kvlint.analysis.census) × its grouping paths
(kvlint.analysis.grouping_paths), each with the setting that builds it.

A path that takes every layer of a model builds a container when they share one uniform type (the spec
registry's `uniform_type_base_spec`) and are not all one kind: DeepSeek-V3.2's MLA plus indexer, by
default (the census over-approximates a model's layers, so each type's layers of a model count as one). A bucketing path gated on a block-outermost layout builds one container per uniform-type bucket of
a model whose layers have more than one bucket (mixed page sizes): by default when one of the model's layers
has a backend that declares only block-outermost layouts (the resolved layout is then one of them), else
only when the user picks such a layout (opt-in). Plain data: part of the tree index.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kvlint.analysis.census import Census, LayerClass
from kvlint.analysis.grouping_paths import GroupingPath
from kvlint.analysis.hierarchy import SpecHierarchy

DEFAULT = "default"
_REGISTERED = re.compile(rb"register\(\s*(\w+)\s*,\s*\w+\s*,\s*uniform_type_base_spec\s*=\s*(\w+)")


@dataclass(frozen=True)
class ContainerComposition:
    """One container a model of the tree builds: its layers, the setting and the path that build it."""

    layer_classes: frozenset[str]
    spec_classes: frozenset[str]
    setting: str  # "default", or "opt-in: <the setting that builds it>"
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
        kinds = [(layers[name], spec) for name in sorted(model.layers) for spec in sorted(layers[name].spec_classes)]
        for path in paths:
            if path.requires and not any(hierarchy.is_subclass(spec, c) for _, spec in kinds for c in path.requires):
                continue
            pool = [
                (layer, spec)
                for layer, spec in kinds
                if not any(hierarchy.is_subclass(spec, c) for c in path.excluded)
                and (not path.only or any(hierarchy.is_subclass(spec, c) for c in path.only))
            ]
            buckets: dict[str, list[tuple[LayerClass, str]]] = {}
            for layer, spec in pool:
                buckets.setdefault(bases.get(spec, spec), []).append((layer, spec))
            if path.buckets:
                built = list(buckets.values()) if len(buckets) > 1 else []
            else:
                # Every layer of one uniform type, not all one kind. Which of its module's layers one checkpoint
                # builds the census cannot tell, so each type's layers, when several kinds, stand for a model.
                built = [bucket for bucket in buckets.values() if len(bucket) > 1]
            if not built:
                continue
            setting = _setting(census, [layers[name] for name in model.layers]) if path.layout_gated else DEFAULT
            for bucket in built:
                composition = ContainerComposition(
                    frozenset(layer.name for layer, _ in bucket),
                    frozenset(spec for _, spec in bucket),
                    setting,
                    model.name,
                    path.name,
                    path.line,
                )
                found.setdefault((composition.layer_classes, setting, path.name, model.name), composition)
    return tuple(sorted(found.values(), key=lambda c: (not c.is_default, c.path, sorted(c.layer_classes))))


def _setting(census: Census, model_layers: list[LayerClass]) -> str:
    """How a model gets a block-outermost layout: by default when a backend of its layers allows no other."""
    outermost = census.block_outermost
    if outermost and any(layer.layouts and set(layer.layouts) <= outermost for layer in model_layers):
        return DEFAULT
    choice = "|".join(sorted(outermost)) or "a block-outermost layout"
    name = census.layout_setting or "the KV cache layout"
    return f"opt-in: {name}={choice} (a block-outermost layout) with mixed page sizes"
