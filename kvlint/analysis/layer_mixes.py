"""Which spec classes one container of the tree can mix, as the container-blind check's fix asks it.

A fix is safe only when it is right for every container the tree can build, so this errs towards mixing:
the classes a container can hold at all (kvlint.analysis.containers), grouped by family (the topmost class
below `KVCacheSpec`/`AttentionSpec` they descend from), joined with the spec classes of every container the
census finds a model building, by default or opt-in (kvlint.analysis.census.compositions). The family grouping
over-groups where a subclass is its own grouping base (e.g. `SlidingWindowMLASpec`), and the census reads
a model's layers only as far as its text says: together a check may be judged split where vLLM never mixes
those layers, never the other way round.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvlint.analysis.vocabulary import ATTENTION_ROOT, CONTAINER_CLASS, SPEC_ROOT

if TYPE_CHECKING:
    from collections.abc import Callable

    from kvlint.analysis.hierarchy import SpecHierarchy
    from kvlint.analysis.tree_index import TreeIndex

_ROOTS = (SPEC_ROOT, ATTENTION_ROOT)


def spec_class_mixes(index: TreeIndex) -> tuple[frozenset[str], ...] | None:
    """The sets of spec classes one container the tree builds can mix; None when the tree was not read
    (which containers exist is unknown)."""
    containers, hierarchy = index.containers, index.hierarchy
    built = index.container_compositions() or ()
    mixes: dict[frozenset[str], None] = dict.fromkeys(composition.spec_classes for composition in built)
    if containers is None or containers.member_classes is None:
        return tuple(mixes) if mixes else None
    # The census over-approximates a layer's kinds: keep only what the tree's container can hold at all (vLLM
    # 0.29.0 cannot build a container of EncoderOnlyAttentionSpec layers, say).
    held = (frozenset(c for c in mix if containers.may_hold_instance_of(c)) for mix in mixes)
    mixes = dict.fromkeys(mix for mix in held if mix)
    # The roots are abstract: no layer reports a bare `KVCacheSpec` or `AttentionSpec`.
    members = [c for c in hierarchy.bases if c not in (CONTAINER_CLASS, *_ROOTS) and containers.may_hold_instance_of(c)]
    families: dict[str, set[str]] = {}
    for name in members:
        families.setdefault(_family(name, hierarchy), set()).add(name)
    mixes.update(dict.fromkeys(frozenset(family) for family in families.values()))
    return tuple(mixes)


def _family(name: str, hierarchy: SpecHierarchy) -> str:
    """The topmost ancestor of `name` (itself included) below a root; a root is its own family."""
    if name in _ROOTS:
        return name
    current, seen = name, set()
    while current not in seen:
        seen.add(current)
        parents = hierarchy.bases.get(current, ())
        if not parents or any(parent in _ROOTS for parent in parents):
            return current
        current = parents[0]
    return current


def split_composition(
    compositions: tuple[frozenset[str], ...], answer: Callable[[str], object], hierarchy: SpecHierarchy
) -> frozenset[str] | None:
    """The first composition whose layers answer a per-layer test differently (`any` and `all` over such a
    container differ), or None when every composition answers alike for all its layers."""
    order = {name: index for index, name in enumerate(hierarchy.bases)}
    for composition in compositions:
        if len({answer(name) for name in composition}) > 1:
            return frozenset(sorted(composition, key=order.get))
    return None


def class_test(hierarchy: SpecHierarchy, classes: frozenset[str], exact: bool) -> Callable[[str], bool]:
    """What a layer of class `name` answers to `isinstance(layer, classes)` (`type(layer) in classes`)."""
    if exact:
        return lambda name: name in classes
    return lambda name: any(hierarchy.is_subclass(name, c) for c in classes)
