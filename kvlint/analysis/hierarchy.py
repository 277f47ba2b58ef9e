"""The KV cache spec class hierarchy of a tree, as its `kv_cache_interface.py` declares it (never imported)."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

from kvlint.analysis.ast_helpers import base_name, field_default, parse_file, parse_source
from kvlint.analysis.layer_helpers import layer_helpers
from kvlint.analysis.vocabulary import ATTENTION_ROOT, SPEC_ROOT

# Used only when a scan has no kv_cache_interface.py (a lone file or fixture): vLLM 0.29.0's hierarchy.
BUILTIN_BASES: dict[str, tuple[str, ...]] = {
    "KVCacheSpec": (),
    "AttentionSpec": ("KVCacheSpec",),
    "FullAttentionSpec": ("AttentionSpec",),
    "MLAAttentionSpec": ("FullAttentionSpec",),
    "HiddenStateCacheSpec": ("MLAAttentionSpec",),
    "RSWASpec": ("FullAttentionSpec",),
    "ChunkedLocalAttentionSpec": ("AttentionSpec",),
    "SlidingWindowSpec": ("AttentionSpec",),
    "CircularBufferSpec": ("AttentionSpec",),
    "SlidingWindowMLASpec": ("SlidingWindowSpec",),
    "MambaSpec": ("KVCacheSpec",),
    "EncoderOnlyAttentionSpec": ("AttentionSpec",),
    "CrossAttentionSpec": ("AttentionSpec",),
    "SinkFullAttentionSpec": ("FullAttentionSpec",),
    "UniformTypeKVCacheSpecs": ("KVCacheSpec",),
}
BUILTIN_FUNCTIONS = ("iter_layer_specs", "is_full_attention_spec")
BUILTIN_LAYER_HELPERS = {"is_full_attention_spec": ("all", "FullAttentionSpec")}


@dataclass(frozen=True)
class SpecHierarchy:
    """Spec classes by name, each with its direct base class names, as the tree declares them."""

    bases: dict[str, tuple[str, ...]]
    # Class-level attribute defaults as source text, e.g. {"AttentionSpec": {"dcp_sharded": "True"}}.
    attribute_defaults: dict[str, dict[str, str]] = field(default_factory=dict)
    source: str = "built-in default (vLLM 0.29.0)"
    # The interface's module-level functions (`iter_layer_specs`, `is_full_attention_spec` in 0.29+): the
    # helpers a message may name as the remedy, only where the scanned tree has them.
    functions: frozenset[str] = frozenset(BUILTIN_FUNCTIONS)
    # Those of them that test every layer of a group spec for one class (kvlint.analysis.layer_helpers):
    # name → (quantifier, class), e.g. {"is_full_attention_spec": ("all", "FullAttentionSpec")}.
    layer_helpers: dict[str, tuple[str, str]] = field(default_factory=lambda: dict(BUILTIN_LAYER_HELPERS))

    def ancestors(self, name: str) -> set[str]:
        seen: set[str] = set()
        stack = [name]
        while stack:
            for base in self.bases.get(stack.pop(), ()):
                if base not in seen:
                    seen.add(base)
                    stack.append(base)
        return seen

    def is_subclass(self, name: str, ancestor: str) -> bool:
        return name == ancestor or ancestor in self.ancestors(name)

    def attention_family(self) -> frozenset[str]:
        return frozenset(name for name in self.bases if self.is_subclass(name, ATTENTION_ROOT))

    def attribute_default(self, name: str, attribute: str) -> str | None:
        """The class-level default of `attribute` for `name`, looked up along its bases (depth first)."""
        stack, seen = [name], set()
        while stack:
            current = stack.pop(0)
            if current in seen:
                continue
            seen.add(current)
            value = self.attribute_defaults.get(current, {}).get(attribute)
            if value is not None:
                return value
            stack.extend(self.bases.get(current, ()))
        return None


def builtin_hierarchy() -> SpecHierarchy:
    return SpecHierarchy(bases=dict(BUILTIN_BASES))


def read_hierarchy(interface: Path) -> SpecHierarchy:
    """The spec family (classes reaching KVCacheSpec) of `interface`; the built-in one when it does not parse."""
    return _hierarchy_of(parse_file(interface), str(interface))


def hierarchy_of_source(data: bytes | None, interface: str) -> SpecHierarchy:
    """`read_hierarchy` of bytes already read (None: no interface, the built-in hierarchy)."""
    return _hierarchy_of(parse_source(data, interface), interface)


def _hierarchy_of(module: ast.Module | None, interface: str) -> SpecHierarchy:
    if module is None:
        return builtin_hierarchy()
    bases: dict[str, tuple[str, ...]] = {}
    defaults: dict[str, dict[str, str]] = {}
    functions: set[str] = set()
    for node in module.body:
        if isinstance(node, ast.ClassDef):
            bases[node.name] = tuple(b for b in map(base_name, node.bases) if b)
            defaults[node.name] = _class_attributes(node)
        elif isinstance(node, ast.FunctionDef):
            functions.add(node.name)
    hierarchy = SpecHierarchy(bases=bases, attribute_defaults=defaults, source=interface)
    family = {n for n in bases if hierarchy.is_subclass(n, SPEC_ROOT)}
    return SpecHierarchy(
        bases={n: b for n, b in bases.items() if n in family},
        attribute_defaults={n: a for n, a in defaults.items() if n in family},
        source=interface,
        functions=frozenset(functions),
        layer_helpers=layer_helpers(module),
    )


def _class_attributes(node: ast.ClassDef) -> dict[str, str]:
    """Class-level `name: T = value` and `name = value` defaults, as source text."""
    attributes: dict[str, str] = {}
    for statement in node.body:
        if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
            if statement.value is not None:
                attributes[statement.target.id] = ast.unparse(field_default(statement.value))
        elif isinstance(statement, ast.Assign):
            for target in statement.targets:
                if isinstance(target, ast.Name):
                    attributes[target.id] = ast.unparse(statement.value)
    return attributes
