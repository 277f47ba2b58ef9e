"""Which spec classes tell their layers apart when merged: read with `ast` from each spec class's `merge`.

vLLM calls a model's layers "all alike" when the first layer's class merges them all (`is_kv_cache_spec_uniform`:
`merge` raises on a difference): then the whole-model path is never asked for a container. A `merge` that
compares the layers' attention fields (`getattr(spec, f.name) == getattr(merged, f.name)`, `spec == specs[0]`)
or hands them to another class's `merge` tells layers of different shapes apart; one that only checks that
a few settings agree (`len({spec.sliding_window …}) == 1`) does not: layers of that class alone, however
shaped, are one group and get no container — unless their layer classes write one of those settings apart
(0.17.0's MLA layers set `cache_dtype_str` from the cache config, DeepSeek-V3.2's indexer leaves it unset: the
merge's assert fails and `from_specs` builds the container; possible, since the values are the config's).
"""

from __future__ import annotations

import ast
import re

from kvlint.analysis.census.parsing import parsed

# `^class …` under re.MULTILINE, found as `class …` at a line's start: the regex engine skips to each "class"
# (a literal) instead of trying every position of 17 MB of model modules (0.08 s → 0.01 s on vLLM 0.29.0).
_CLASS = re.compile(rb"class[ \t]+(\w+)")


def _top_level_classes(data: bytes) -> list[bytes]:
    return [m.group(1) for m in _CLASS.finditer(data) if m.start() == 0 or data[m.start() - 1] == 0x0A]


def settings_merges(texts: dict[str, bytes], spec_classes: frozenset[str]) -> tuple[tuple[str, frozenset[str]], ...]:
    """(spec class, the fields its merge asserts one value of) for each class whose nearest `merge` never
    compares layer shapes: `len({spec.cache_dtype_str for spec in specs}) == 1` asserts one `cache_dtype_str`,
    so layers that set it apart are not all alike (0.17.0's MLA layers and DeepSeek-V3.2's indexer)."""
    own: dict[str, tuple[bool, frozenset[str]]] = {}  # class → (its own merge compares shapes, fields asserted)
    bases: dict[str, list[str]] = {}
    for relative, data in texts.items():
        # A module defining no merge may still define a spec class that inherits one (its base is read).
        if b"def merge(" not in data and not spec_classes.intersection(map(bytes.decode, _top_level_classes(data))):
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
                own.setdefault(node.name, (_compares_shapes(merge), _asserted_fields(merge)))
    found = []
    for name in sorted(spec_classes):
        decided = _nearest(name, own, bases, set())
        if decided is not None and not decided[0]:
            found.append((name, decided[1]))
    return tuple(found)


def _asserted_fields(merge: ast.FunctionDef) -> frozenset[str]:
    """The fields a merge reads of each layer's spec in a comprehension (`spec.F for spec in specs`)."""
    fields = set()
    for node in ast.walk(merge):
        if isinstance(node, (ast.GeneratorExp, ast.SetComp, ast.ListComp)):
            targets = {n.id for g in node.generators for n in ast.walk(g.target) if isinstance(n, ast.Name)}
            fields.update(
                a.attr
                for a in ast.walk(node.elt)
                if isinstance(a, ast.Attribute) and isinstance(a.value, ast.Name) and a.value.id in targets
            )
    return frozenset(fields)


def _nearest(name: str, own: dict, bases: dict[str, list[str]], seen: set[str]):
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


def settings_apart(pool, fields: frozenset[str]) -> list[str]:
    """The fields of `fields` the pool's layer classes write differently (one leaving it unset among them)."""
    written = {layer.name: dict(layer.spec_settings) for layer, _, _ in pool}
    return sorted(f for f in fields if len({values.get(f, "") for values in written.values()}) > 1)


def unproven_unlike(bucket, alike) -> str:
    """A whole-model container of one spec class whose merge compares no shapes: built only when its layer
    classes' settings differ at run time (they write them apart; whether the values differ is the config's)."""
    held = {spec for _, _, spec in bucket}
    if len(held) != 1 or not alike or not held <= alike.keys():
        return ""
    spec = next(iter(held))
    apart = settings_apart(bucket, alike[spec])
    if not apart:
        return ""
    field = apart[0]  # one is enough to say why
    said = "; ".join(
        f"{layer.name}: {dict(layer.spec_settings).get(field) or 'unset'}"
        for layer in sorted({layer for layer, _, _ in bucket}, key=lambda layer: layer.name)
    )
    return (
        f"that they hold different `{field}` values is decided at run time ({said}): {spec}'s `merge` asserts "
        "one, and calls them all alike otherwise"
    )


def written_setting(methods: list[str], field: str) -> str:
    """How the spec calls of a layer's `get_kv_cache_spec` set `field` (`cache_dtype_str=…`), each value as
    written (comments aside), joined by "|"; "" when none sets it."""
    keyword = re.compile(rf"\b{re.escape(field)}\s*=\s*([^,\n]+)")
    found = {
        value.strip().rstrip(")").strip()
        for method in methods
        for line in method.splitlines()
        for value in keyword.findall(line.split("#", 1)[0])
        if not value.startswith("=")
    }
    return "|".join(sorted(found))
