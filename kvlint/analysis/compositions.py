"""Which layer classes can share one `UniformTypeKVCacheSpecs` container the tree builds: its compositions.

Every container vLLM builds is uniform-typed (`UniformTypeKVCacheSpecs.is_uniform_type`: all its layers are
instances of one grouping base class). Today's answer reads the container reachability of
kvlint.analysis.containers (which classes a container can hold at all) and groups those classes by their
family: the topmost class below `KVCacheSpec`/`AttentionSpec` they descend from (`FullAttentionSpec` holds
MLA, sink, hidden-state layers …). That over-groups where a subclass is its own grouping base (e.g.
`SlidingWindowMLASpec`), so a check may be judged split where vLLM never mixes those layers: never the
other way round. `container_compositions` is the one question the container-blind check's fix asks; a census of the
containers each grouping path builds can answer it in its place.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvlint.analysis.vocabulary import ATTENTION_ROOT, CONTAINER_CLASS, SPEC_ROOT

if TYPE_CHECKING:
    from collections.abc import Callable

    from kvlint.analysis.hierarchy import SpecHierarchy
    from kvlint.analysis.tree_index import TreeIndex

_ROOTS = (SPEC_ROOT, ATTENTION_ROOT)


def container_compositions(index: TreeIndex) -> tuple[frozenset[str], ...] | None:
    """The sets of layer classes one container the tree builds can mix, in the interface's order; None
    when the tree was not read (which containers exist is unknown)."""
    containers, hierarchy = index.containers, index.hierarchy
    if containers is None or containers.member_classes is None:
        return None
    # The roots are abstract: no layer reports a bare `KVCacheSpec` or `AttentionSpec`.
    members = [c for c in hierarchy.bases if c not in (CONTAINER_CLASS, *_ROOTS) and containers.may_hold_instance_of(c)]
    families: dict[str, set[str]] = {}
    for name in members:
        families.setdefault(_family(name, hierarchy), set()).add(name)
    return tuple(frozenset(family) for family in families.values())


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
