"""Which spec classes tell their layers apart when merged: read with `ast` from each spec class's `merge`.

vLLM calls a model's layers "all alike" when the first layer's class merges them all (`is_kv_cache_spec_uniform`:
`merge` raises on a difference): then the whole-model path is never asked for a container. A `merge` that
compares the layers' attention fields (`getattr(spec, f.name) == getattr(merged, f.name)`, `spec == specs[0]`)
or hands them to another class's `merge` tells layers of different shapes apart; one that only checks that
a few settings agree (`len({spec.sliding_window …}) == 1`) does not: layers of that class alone, however
shaped, are one group and get no container.
"""

from __future__ import annotations

import ast

from kvlint.analysis.census.parsing import parsed


def merges_ignoring_shapes(texts: dict[str, bytes], spec_classes: frozenset[str]) -> frozenset[str]:
    """The spec classes whose nearest `merge` (own or inherited) never compares layer shapes."""
    own: dict[str, bool] = {}  # class → its own merge compares shapes
    bases: dict[str, list[str]] = {}
    for relative, data in texts.items():
        if b"def merge(" not in data:
            continue
        module = parsed(data, relative)
        if module is None:
            continue
        for node in module.body:
            if not isinstance(node, ast.ClassDef) or node.name not in spec_classes:
                continue
            bases.setdefault(node.name, [b.id for b in node.bases if isinstance(b, ast.Name)])
            merge = next((s for s in node.body if isinstance(s, ast.FunctionDef) and s.name == "merge"), None)
            if merge is not None:
                own.setdefault(node.name, _compares_shapes(merge))
    ignoring = set()
    for name in spec_classes:
        decided = _nearest(name, own, bases, set())
        if decided is False:
            ignoring.add(name)
    return frozenset(ignoring)


def _nearest(name: str, own: dict[str, bool], bases: dict[str, list[str]], seen: set[str]) -> bool | None:
    if name in own:
        return own[name]
    seen.add(name)
    for base in bases.get(name, ()):
        if base not in seen:
            found = _nearest(base, own, bases, seen)
            if found is not None:
                return found
    return None


def _len_call(node: ast.expr) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "len"


def _compares_shapes(merge: ast.FunctionDef) -> bool:
    for node in ast.walk(merge):
        if isinstance(node, ast.Compare) and any(isinstance(op, (ast.Eq, ast.NotEq)) for op in node.ops):
            if not _len_call(node.left):
                return True
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "merge":
            return True  # handed to another class's merge (`FullAttentionSpec.merge(specs)`, `super().merge`)
    return False
