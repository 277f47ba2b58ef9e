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

from kvlint.analysis.census.compositions import checkpoint_key, checkpoints
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
    model: str  # the key the child answers under: the model's name, with "#N" for its checkpoint N > 1
    module: str
    layers: tuple[CaseLayer, ...]
    expected: frozenset[frozenset[str]]  # the census's default containers for this checkpoint, each its spec classes
    # Containers the census says this checkpoint may get under the default setting (a link it cannot prove).
    possible: frozenset[frozenset[str]] = frozenset()
    checkpoint: tuple[str, ...] = ()  # its "LayerClass:SpecClass" kinds

    @property
    def model_name(self) -> str:
        return self.model.split("#", 1)[0]

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
    """One case per checkpoint of each model whose layers the census knows (kvlint.analysis.census.
    compositions.checkpoints), in the census's order; [] without a census."""
    census = index.census
    if census is None:
        return []
    expected: dict[tuple[str, tuple[str, ...]], tuple[set, set]] = {}
    for composition in index.container_compositions() or ():
        if composition.kind == "opt-in":
            continue  # the oracle asks vLLM with the default settings
        for key in composition.checkpoints:
            sides = expected.setdefault((composition.model, key), (set(), set()))
            sides[0 if composition.is_default else 1].add(composition.spec_classes)
    cases = []
    for model in census.models:
        for number, kinds in enumerate(checkpoints(census, model), start=1):
            key = checkpoint_key(kinds)
            default, possible = expected.get((model.name, key), (set(), set()))
            name = model.name if number == 1 else f"{model.name}#{number}"
            layers = _case_layers(kinds)
            cases.append(CensusCase(name, model.module, layers, frozenset(default), frozenset(possible - default), key))
    return cases


def _case_layers(kinds) -> tuple[CaseLayer, ...]:
    """The checkpoint's layers: layers of one spec class whose census records differ are different layers
    (a variant each, so the child gives them different shapes); those the census reads alike share one. A
    setting a spec's `merge` asserts one value of, which the layer classes write apart (kvlint.analysis.census.
    merges), gets a different stand-in per way it is written (`setting:<field>`: 1, 2, …; unset: the default)."""
    records: dict[str, list[tuple]] = {}
    written: dict[str, list[str]] = {}  # field → its ways of being written ("" unset), in the checkpoint's order
    by_class: dict[str, dict[str, set[str]]] = {}  # spec class → field → its ways among that class's layers
    fields = {field for layer, _ in kinds for field, _ in layer.spec_settings}
    for layer, spec in kinds:
        settings = dict(layer.spec_settings)
        for field in fields:
            value = settings.get(field, "")
            by_class.setdefault(spec, {}).setdefault(field, set()).add(value)
            if value not in written.setdefault(field, []):
                written[field].append(value)
    apart = {(spec, field) for spec, ways in by_class.items() for field, values in ways.items() if len(values) > 1}
    layers = []
    for position, (layer, spec) in enumerate(kinds):
        record = (layer.spec_fields, layer.layouts, layer.spec_settings)
        seen = records.setdefault(spec, [])
        if record not in seen:
            seen.append(record)
        params = {field: _literal(value) for field, value in layer.spec_fields if _LITERAL.match(value)}
        params["variant"] = seen.index(record)
        for field, value in layer.spec_settings:
            if (spec, field) not in apart or field in params:
                continue
            quoted = re.fullmatch(r"([\"'])(\w*)\1", value)
            if quoted or _LITERAL.match(value):  # written as a literal: that value
                params[field] = quoted.group(2) if quoted else _literal(value)
            else:
                params[f"setting:{field}"] = written[field].index(value) + 1  # 1, 2, …: "" may hold a place
        layers.append(
            CaseLayer(
                f"model.layers.{position}.{layer.name}.{spec}",
                layer.name,
                spec,
                tuple(sorted(params.items())),
                layer.layouts,
            )
        )
    return tuple(layers)


def _literal(value: str) -> bool | int | str | None:
    if value in ("True", "False"):
        return value == "True"
    if value == "None":
        return None
    return int(value) if value.isdigit() else value
