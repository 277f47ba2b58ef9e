"""A plugin's own spec classes, read into the hierarchy and the spec kinds of the release it targets.

A platform plugin may define its own `KVCacheSpec` subclass (`class NpuAttentionSpec(FullAttentionSpec)`) and
test group specs for it. The target release's hierarchy does not name it, so a check or a gate of that class
would be read as naming no spec class at all. The scanned files' class headers are read (bounded patterns,
the last name of each base), and every class deriving — directly or through another of the plugin's own — from
a class of the target's hierarchy joins it; each such class is a kind of its own, with the sizing rule's
factor of the target's class it derives from (the resolver decides by class or by the inherited
`dcp_sharded`), alone and as the layers of a container.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import replace
from typing import TYPE_CHECKING

from kvlint.analysis.hierarchy import SpecHierarchy
from kvlint.analysis.kind_table import KindRow
from kvlint.analysis.vocabulary import CONTAINER_CLASS

if TYPE_CHECKING:
    from kvlint.analysis.tree_index import TreeIndex

_CLASS = re.compile(rb"^[ \t]*class[ \t]+(\w+)[ \t]*\(([^)]{0,400})\)[ \t]*:", re.MULTILINE)


def class_headers(texts: Iterable[bytes]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Each class header of the texts that may name a spec class: (name, the last name of each base)."""
    headers = []
    for data in texts:
        if b"Spec" not in data:
            continue
        for match in _CLASS.finditer(data):
            bases = match.group(2).decode("utf-8", "replace").split(",")
            names = tuple(b.strip().split("[")[0].rsplit(".", 1)[-1].strip() for b in bases if "=" not in b)
            headers.append((match.group(1).decode(), tuple(n for n in names if n)))
    return tuple(headers)


def own_spec_bases(headers, hierarchy: SpecHierarchy) -> dict[str, tuple[str, ...]]:
    """The classes of `headers` that derive from the hierarchy's, each with its bases among them; a class
    named like one of the target's is the target's (a plugin's file never redefines it)."""
    by_name: dict[str, tuple[str, ...]] = {}
    for name, bases in headers:
        by_name.setdefault(name, bases)
    own: dict[str, tuple[str, ...]] = {}
    known = set(hierarchy.bases)
    changed = True
    while changed:
        changed = False
        for name, bases in by_name.items():
            if name not in known and any(base in known for base in bases):
                own[name] = tuple(base for base in bases if base in known)
                known.add(name)
                changed = True
    return own


def with_own_specs(index: TreeIndex, own: dict[str, tuple[str, ...]]) -> TreeIndex:
    """The index with the plugin's classes in its hierarchy, and in its kinds a row for each, alone and as a
    container's layers: the factor of its nearest ancestor's row, else what the resolver's rule says of it."""
    if not own:
        return index
    extended = replace(index, hierarchy=replace(index.hierarchy, bases={**index.hierarchy.bases, **own}), own_specs=own)
    kinds = index.kinds
    if kinds is None:
        return extended  # the kinds are the hierarchy's (TreeIndex.kind_table), the plugin's classes among them
    rows = list(kinds.rows)
    plain = {row.layers[0]: row for row in kinds.rows if not row.is_container}
    for name in own:
        row = next((plain[a] for a in _ancestors_in_order(extended.hierarchy, name) if a in plain), None)
        if row is None:
            scales = extended.resolver_scales(name)
            flag = {"True": True, "False": False}.get(extended.hierarchy.attribute_default(name, "dcp_sharded") or "")
            row = KindRow(name, (name,), False, {True: "dcp", False: "1"}.get(scales, "?"), flag)
        rows.append(replace(row, label=name, layers=(name,)))
        rows.append(replace(row, label=f"{CONTAINER_CLASS}{{{name}×2}}", layers=(name, name), is_container=True))
    return replace(extended, kinds=replace(kinds, rows=tuple(rows)))


def judged_as(index: TreeIndex, classes: frozenset[str]) -> frozenset[str]:
    """The classes a type test of `classes` is judged as against the target's census: each of the plugin's own
    spec classes as the target's classes it derives from (its layers stand where the target builds those: the
    census reads the target's models, never which of the plugin's classes their layers report). An own class
    deriving only from one a container is itself (`KVCacheSpec`) stands for no layer class: it is judged as none."""
    judged = {target for name in classes for target in _target_bases(index.own_specs, name, frozenset())}
    return frozenset(judged - index.hierarchy.ancestors(CONTAINER_CLASS) - {CONTAINER_CLASS})


def judged_note(index: TreeIndex, classes: frozenset[str]) -> str:
    """What a finding says of the plugin's own classes it judged as the target's ("" when it tested none)."""
    own = sorted(name for name in classes if name in index.own_specs)
    if not own:
        return ""
    said = ", ".join(
        f"`{name}` judged as the `{'`/`'.join(sorted(judged_as(index, frozenset({name}))))}` it derives from"
        for name in own
    )
    return f"the package's own {said} (its layers stand where vLLM builds those)"


def _target_bases(own: dict[str, tuple[str, ...]], name: str, seen: frozenset[str]) -> set[str]:
    if name not in own:
        return {name}
    if name in seen:
        return set()
    return {target for base in own[name] for target in _target_bases(own, base, seen | {name})}


def _ancestors_in_order(hierarchy: SpecHierarchy, name: str) -> list[str]:
    """`name`'s ancestors, nearest first (breadth first)."""
    order, queue, seen = [], list(hierarchy.bases.get(name, ())), set()
    while queue:
        current = queue.pop(0)
        if current in seen:
            continue
        seen.add(current)
        order.append(current)
        queue.extend(hierarchy.bases.get(current, ()))
    return order
