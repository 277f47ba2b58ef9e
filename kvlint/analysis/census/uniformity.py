"""What vLLM's grouping code calls one uniform type (`UniformTypeKVCacheSpecs.is_uniform_type`), read from the
spec registry: each spec class's uniform base (`KVCacheSpecRegistry.register(S, M, uniform_type_base_spec=B)`),
found as `get_uniform_type_base_spec` does, through the method resolution order; and the order dependence of
`is_uniform_with_collection`, which tests every layer against the first layer's base."""

from __future__ import annotations

import re

from kvlint.analysis.census.reading import LayerClass
from kvlint.analysis.hierarchy import SpecHierarchy

_REGISTERED = re.compile(rb"register\(\s*(\w+)\s*,\s*\w+\s*,\s*uniform_type_base_spec\s*=\s*(\w+)")


def uniform_bases(texts: dict[str, bytes]) -> dict[str, str]:
    """Spec class → the class it groups with (`KVCacheSpecRegistry.register(S, M, uniform_type_base_spec=B)`)."""
    bases: dict[str, str] = {}
    for data in texts.values():
        if b"uniform_type_base_spec" in data:
            for spec, base in _REGISTERED.findall(data):
                bases.setdefault(spec.decode(), base.decode())
    return bases


def registered_base(spec: str, hierarchy: SpecHierarchy, bases: dict[str, str]) -> str:
    """The uniform base of `spec`: that of the nearest class of its method resolution order the registry
    names (`get_uniform_type_base_spec` walks `__mro__`), breadth first; itself when none is named."""
    pending, seen = [spec], set()
    while pending:
        name = pending.pop(0)
        if name in bases:
            return bases[name]
        seen.add(name)
        pending += [base for base in hierarchy.bases.get(name, ()) if base not in seen]
    return spec


def first_layers_making_uniform(held: set[str], hierarchy: SpecHierarchy, bases: dict[str, str]) -> list[str]:
    """The spec classes which, held by the model's first layer, make all of `held` one uniform type:
    `is_uniform_with_collection` tests every layer against the first layer's base, so a sliding-window
    layer first takes a sliding-window MLA layer in (its subclass) and the other way round does not."""
    return sorted(
        first
        for first in held
        if all(hierarchy.is_subclass(other, registered_base(first, hierarchy, bases)) for other in held)
    )


def bucket_key(layer: LayerClass, spec: str, hierarchy: SpecHierarchy, bases: dict[str, str]) -> tuple:
    """What `is_uniform_type` tells apart: the registered uniform base, and for state layers
    (`MambaSpec.is_uniform_with_collection`) the fields they must share (`tp_replicated`)."""
    base = registered_base(spec, hierarchy, bases)
    if hierarchy.is_subclass(spec, "MambaSpec"):
        fields = dict(layer.spec_fields)
        return base, fields.get("tp_replicated", "")
    return (base,)
