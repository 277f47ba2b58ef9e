"""What `kvlint verify --census` asks vLLM about: per model of the census, the layers it builds (each a spec
class with the parameters that tell it apart) and the containers the census says that model builds by default.

The one place the oracle reads the census (kvlint.analysis): everything else in the oracle sees only these
plain records, so a new census is wired in here. Parameters are plain JSON values (the child turns them into
the tree's objects): literal spec fields the census read from the layer's class (`tp_replicated=False`,
`mamba_type=GDN_ATTN`) and a variant number, which is different for layers of one spec class whose census
records differ (DeepSeek-V3.2's MLA attention and its indexer cache), so the child gives them different shapes.
A census that knows a model's alternatives (config branches, platforms) gives a case per alternative, each with
its own name (`model` is the key the answers come back under).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kvlint.analysis.tree_index import TreeIndex

# A field value the child can build without the model's config: a bool, None, a number, an enum member's name.
_LITERAL = re.compile(r"^(?:True|False|None|\d+|[A-Z][A-Z0-9_]*)$")

Param = tuple[str, "bool | int | str | None"]


@dataclass(frozen=True)
class CaseLayer:
    name: str  # the layer's name in the spec dict (`model.layers.0.Attention.FullAttentionSpec`)
    layer_class: str
    spec_class: str
    params: tuple[Param, ...]  # sorted (field, value); "variant" picks the child's shape for this layer
    layouts: tuple[str, ...] | None  # the layouts its attention backend declares; None: any


@dataclass(frozen=True)
class CensusCase:
    model: str
    module: str
    layers: tuple[CaseLayer, ...]
    expected: frozenset[frozenset[str]]  # the census's default containers for the model, each its spec classes

    def document(self) -> dict:
        """The case as the child reads it (JSON)."""
        return {
            "model": self.model,
            "layers": [
                {
                    "name": layer.name,
                    "layer_class": layer.layer_class,
                    "spec_class": layer.spec_class,
                    "params": dict(layer.params),
                    "layouts": list(layer.layouts) if layer.layouts is not None else None,
                }
                for layer in self.layers
            ],
        }


def census_cases(index: TreeIndex) -> list[CensusCase]:
    """One case per model whose layers the census knows, in the census's order; [] without a census."""
    census = index.census
    if census is None:
        return []
    expected: dict[str, set[frozenset[str]]] = {}
    for composition in index.container_compositions() or ():
        if composition.is_default:
            expected.setdefault(composition.model, set()).add(composition.spec_classes)
    cases = []
    for model in census.models:
        kinds = []
        for name in sorted(model.layers):
            layer = census.layer(name)
            if layer is not None:
                kinds.extend((layer, spec) for spec in sorted(layer.spec_classes))
        if not kinds:
            continue
        # Layers of one spec class whose census records differ are different layers: a variant each.
        records: dict[str, list[tuple]] = {}
        layers = []
        for position, (layer, spec) in enumerate(kinds):
            record = (layer.spec_fields, layer.layouts)
            seen = records.setdefault(spec, [])
            if record not in seen:
                seen.append(record)
            params = {field: _literal(value) for field, value in layer.spec_fields if _LITERAL.match(value)}
            params["variant"] = seen.index(record)
            layers.append(
                CaseLayer(
                    f"model.layers.{position}.{layer.name}.{spec}",
                    layer.name,
                    spec,
                    tuple(sorted(params.items())),
                    layer.layouts,
                )
            )
        cases.append(CensusCase(model.name, model.module, tuple(layers), frozenset(expected.get(model.name, ()))))
    return cases


def _literal(value: str) -> bool | int | str | None:
    if value in ("True", "False"):
        return value == "True"
    if value == "None":
        return None
    return int(value) if value.isdigit() else value
