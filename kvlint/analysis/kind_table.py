"""The kinds a KV cache group's spec can be in a tree, each with what the tree's own sizing rule does to it.

A per-file rule that meets a hand-written DCP scaling compares it, kind by kind, with the rule every
component must agree with: the shared resolver `resolve_dcp_kv_block_size` (0.29+), or, in a tree without
one, the scheduler's `resolve_kv_cache_block_sizes` as it sizes a config of several groups. The rows and
their factors come from the cross-file sizing analysis when the tree was read (kvlint.analysis.sizing: it
evaluates the resolver's own body for every kind); without a tree, from the hierarchy and the resolver's
rule as kvlint.analysis.resolver reads it. Plain data: part of the tree index and of its digests.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvlint.analysis.hierarchy import SpecHierarchy
from kvlint.analysis.sizing.results import SizingAnalysis
from kvlint.analysis.sizing.values import BLOCK_SIZE, DCP, Container, Layer
from kvlint.analysis.vocabulary import ATTENTION_ROOT, CONTAINER_CLASS, RESOLVER_NAME

# The containers vLLM builds that the sizing matrix evaluates (kvlint.analysis.sizing.kinds), by layers.
_STANDARD_CONTAINERS = (
    ("{MLA, indexer}", ("MLAAttentionSpec", "MLAAttentionSpec")),
    ("{FullAttention×2}", ("FullAttentionSpec", "FullAttentionSpec")),
    ("{SlidingWindow, FullAttention}", ("SlidingWindowSpec", "FullAttentionSpec")),
)


@dataclass(frozen=True)
class KindRow:
    label: str  # "MambaSpec", "UniformTypeKVCacheSpecs{MLA, indexer}"
    layers: tuple[str, ...]  # the layer classes, in the container's order (one for a plain spec)
    is_container: bool
    # What the reference rule multiplies the block size by: "dcp", "1", or "?" (not known statically).
    reference: str
    # The spec's `dcp_sharded` (0.31+), None where the tree's specs have no such field or it is unknown.
    dcp_sharded: bool | None
    # Why vLLM refuses this kind when DCP > 1 (an assertion in the tree), or None.
    rejected_under_dcp: str | None = None
    # What the coordinator hands a manager of this kind as its DCP size: "dcp", "1", or "" (not known).
    handed: str = ""
    # Accepted under DCP, but refused on the code of these classes: (class, why) (SpecKind.rejected_in).
    rejected_in: tuple[tuple[str, str], ...] = ()
    # Where the managers are the yardstick: the constructor that decides this kind's allocation when it is not
    # the table's `reference` (a manager subclass resetting the block size: `MambaManager.__init__`), else "".
    reference_by: str = ""

    def refused_on(self, classes) -> str | None:
        """Why vLLM refuses this kind under DCP on code in `classes` (or anywhere), or None."""
        return self.rejected_under_dcp or next((why for cls, why in self.rejected_in if cls in classes), None)


def tokens(factor: str) -> str:
    """Tokens per block a factor gives at the DCP size and block size the analysis evaluates with."""
    return {"dcp": str(BLOCK_SIZE * DCP), "1": str(BLOCK_SIZE)}.get(factor, "?")


@dataclass(frozen=True)
class KindTable:
    rows: tuple[KindRow, ...]
    # The rule compared with, as a message names it: `resolve_dcp_kv_block_size` or the scheduler's path.
    reference: str
    has_resolver: bool
    # `reference` is the KV cache managers' allocation (a tree without the resolver), not a sizing function.
    is_allocator: bool = False
    # Where the coordinator hands each manager its DCP size, and the module of those managers (SizingAnalysis).
    manager_module: str = ""
    handed_at: str = ""


def _flag(hierarchy: SpecHierarchy, layer: Layer | str) -> bool | None:
    cls, overrides = (layer, ()) if isinstance(layer, str) else (layer.cls, layer.overrides)
    value = dict(overrides).get("dcp_sharded", hierarchy.attribute_default(cls, "dcp_sharded"))
    return {"True": True, "False": False, True: True, False: False}.get(value)  # type: ignore[arg-type]


def table_from_sizing(
    analysis: SizingAnalysis, hierarchy: SpecHierarchy, static: KindTable | None = None
) -> KindTable | None:
    """The rows of the sizing matrix with the resolver's column (the scheduler's multi-group view without one).

    Where the evaluation of the resolver's body gives no answer ("?"), the resolver's rule as read statically
    (`static`, from kvlint.analysis.resolver) answers for the same kind."""
    resolver = next((p for p in analysis.paths if p.name == analysis.resolver and p.role == "resolver"), None)
    reference = next((p for p in analysis.paths if p.name == analysis.reference and p.role == "reference"), None)
    # Without the resolver, what the managers allocate is the yardstick (kvlint.analysis.sizing.allocator).
    allocator = next((p for p in analysis.paths if p.name == analysis.allocator and p.role == "allocator"), None)
    factors = resolver.factors("group") if resolver is not None else None
    if factors is None and allocator is not None:
        factors, reference = allocator.factors("scheduler"), allocator
    if factors is None and reference is not None:
        factors = reference.factors("scheduler")
    if not factors or len(factors) != len(analysis.kinds):
        return None
    fallback = {row.label: row.reference for row in static.rows} if static is not None and resolver else {}
    rows = []
    deciders = allocator.deciders if allocator is not None and reference is allocator else ()
    for index, (kind, factor) in enumerate(zip(analysis.kinds, factors)):
        factor = fallback.get(kind.label, "?") if factor == "?" else factor
        spec = kind.spec
        layers = spec.layers if isinstance(spec, Container) else (spec,)
        if isinstance(spec, Container):
            # A container carries its first layer's flag (vLLM 0.33+ sets it so, and groups only layers that agree).
            flag = _flag(hierarchy, layers[0]) if "dcp_sharded" in _fields(hierarchy) else None
        else:
            flag = _flag(hierarchy, spec)
        rows.append(
            KindRow(
                kind.label,
                tuple(layer.cls for layer in layers),
                kind.is_container,
                factor,
                flag,
                kind.rejected_under_dcp,
                kind.handed,
                kind.rejected_in,
                deciders[index] if index < len(deciders) else "",
            )
        )
    name = RESOLVER_NAME if resolver is not None else (reference.name.split(":")[-1] if reference else "")
    return KindTable(
        tuple(rows), name, resolver is not None, allocator is not None, analysis.manager_module, analysis.handed_at
    )


def table_from_hierarchy(
    hierarchy: SpecHierarchy, resolver_layer_classes: frozenset[str], reads_dcp_sharded: bool, has_resolver: bool
) -> KindTable | None:
    """Without a tree read: the hierarchy's concrete classes and the standard containers, the resolver's
    rule applied to each (every layer an instance of its classes, or the `dcp_sharded` flag)."""
    if not has_resolver:
        return None
    roots = {n for n, bases in hierarchy.bases.items() if not any(b in hierarchy.bases for b in bases)}
    abstract = roots | {ATTENTION_ROOT, CONTAINER_CLASS}

    def scales(cls: str) -> str:
        if resolver_layer_classes:
            return "dcp" if any(hierarchy.is_subclass(cls, c) for c in resolver_layer_classes) else "1"
        flag = _flag(hierarchy, cls) if reads_dcp_sharded else None
        return "?" if flag is None else ("dcp" if flag else "1")

    rows = [
        KindRow(cls, (cls,), False, scales(cls), _flag(hierarchy, cls))
        for cls in hierarchy.bases
        if cls not in abstract
    ]
    if CONTAINER_CLASS in hierarchy.bases:
        for label, layers in _STANDARD_CONTAINERS:
            if not all(layer in hierarchy.bases for layer in layers):
                continue
            answers = {scales(layer) for layer in layers}
            if resolver_layer_classes:  # every layer must qualify
                factor = "?" if "?" in answers else ("dcp" if answers == {"dcp"} else "1")
            else:  # the first layer's flag
                factor = scales(layers[0])
            flag = _flag(hierarchy, layers[0]) if reads_dcp_sharded else None
            rows.append(KindRow(f"{CONTAINER_CLASS}{label}", layers, True, factor, flag))
    return KindTable(tuple(rows), RESOLVER_NAME, True)


def _fields(hierarchy: SpecHierarchy) -> set[str]:
    return {name for attributes in hierarchy.attribute_defaults.values() for name in attributes}
