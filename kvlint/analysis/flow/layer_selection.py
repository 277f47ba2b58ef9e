"""Which layers a group-spec check is about, read from the code around it, and which containers the tree
builds of such layers (kvlint.analysis.census.compositions).

Two shapes narrow a check to some layers:
- a test of a spec field in the same `and` (`isinstance(s, MambaSpec) and s.mamba_type in (E.MAMBA1,
  E.MAMBA2)`): only layers whose spec carries one of those values (the census reads what each layer class
  copies into its spec);
- a test of a layer's flag in the same function (`isinstance(layer, MambaBase) and
  layer.use_flashinfer_replayssm`): the function acts only on layers whose class may set the flag, so a
  container of other layers takes the same way whichever branch the check sends it down.
"""

from __future__ import annotations

from dataclasses import dataclass
from os.path import commonprefix

import libcst as cst

from kvlint.analysis.census.compositions import ContainerComposition
from kvlint.analysis.census.reading import Census
from kvlint.analysis.cst_walk import preorder
from kvlint.analysis.flow.cst_bindings import asked
from kvlint.analysis.flow.provenance import dotted
from kvlint.analysis.hierarchy import SpecHierarchy
from kvlint.analysis.value_uses import first_group_fallback, past_single_group_exit, single_group_binding
from kvlint.analysis.whole_answer import answers_alike, refused_with_a_layer

_FALSY = frozenset({"False", "None", "0"})


@dataclass(frozen=True)
class LayerSelection:
    fields: tuple[tuple[str, frozenset[str]], ...] = ()  # spec field → the values the check admits
    flags: tuple[str, ...] = ()  # layer flags the function selects its layers by

    def describe(self) -> str:
        parts = [f"{field} in {{{', '.join(sorted(values))}}}" for field, values in self.fields]
        parts += [f"`{flag}` set" for flag in self.flags]
        return " and ".join(parts)


def selection_at(
    node: cst.CSTNode, subject: str, parent, function: cst.CSTNode | None, remembered=None
) -> LayerSelection:
    """The narrowing around the check `node` on `subject` (`parent`: the module's parent lookup; `remembered`:
    SpecFlow.remembered, which reads the function's flag tests once for all its checks)."""
    fields = []
    holder = parent(node)
    while isinstance(holder, cst.BooleanOperation) and isinstance(holder.operator, cst.And):
        for operand in (holder.left, holder.right):
            found = _field_test(operand, subject)
            if found is not None:
                fields.append(found)
        holder = parent(holder)
    flags = asked("flag tests", function, _flag_tests, remembered) if function is not None else ()
    return LayerSelection(tuple(fields), flags)


def _field_test(node: cst.CSTNode, subject: str) -> tuple[str, frozenset[str]] | None:
    if not isinstance(node, cst.Comparison) or len(node.comparisons) != 1:
        return None
    left, target = node.left, node.comparisons[0]
    if not isinstance(left, cst.Attribute) or dotted(left.value) != subject:
        return None
    comparator = target.comparator
    if isinstance(target.operator, cst.In) and isinstance(comparator, (cst.Tuple, cst.List, cst.Set)):
        items = [element.value for element in comparator.elements]
    elif isinstance(target.operator, (cst.Equal, cst.Is)):
        items = [comparator]
    else:
        return None
    values = [item.attr.value if isinstance(item, cst.Attribute) else None for item in items]
    if None in values:
        return None
    return left.attr.value, frozenset(values)  # type: ignore[arg-type]


def _flag_tests(function: cst.CSTNode) -> tuple[str, ...]:
    """`isinstance(x, C) and x.flag` anywhere in the function: the flags its layers are picked by."""
    flags = []
    for node in preorder(function):
        if not isinstance(node, cst.BooleanOperation) or not isinstance(node.operator, cst.And):
            continue
        left, right = node.left, node.right
        if (
            isinstance(left, cst.Call)
            and isinstance(left.func, cst.Name)
            and left.func.value == "isinstance"
            and left.args
            and isinstance(right, cst.Attribute)
            and dotted(right.value) == dotted(_target(left.args[0].value))
        ):
            flags.append(right.attr.value)
    return tuple(dict.fromkeys(flags))


def _target(node: cst.CSTNode) -> cst.CSTNode:
    """`layer := …` names `layer`."""
    return node.target if isinstance(node, cst.NamedExpr) else node


def built_containers(
    compositions: tuple[ContainerComposition, ...],
    census: Census | None,
    hierarchy: SpecHierarchy,
    checked: frozenset[str],
    exact: bool,
    selection: LayerSelection,
    refused: frozenset[str] = frozenset(),
) -> tuple[ContainerComposition, ...]:
    """The compositions whose every layer answers the check True and is one the check is about; none with a
    layer in `refused` (the platform the checking code runs on refuses it: kvlint.analysis.platform_reach)."""
    found = []
    for composition in compositions:
        if composition.layer_classes & refused:
            continue
        answers = (
            composition.spec_classes <= checked
            if exact
            else all(any(hierarchy.is_subclass(spec, c) for c in checked) for spec in composition.spec_classes)
        )
        if answers and all(_selected(census, name, selection) for name in composition.layer_classes):
            found.append(composition)
    return tuple(found)


def _selected(census: Census | None, layer_name: str, selection: LayerSelection) -> bool:
    layer = census.layer(layer_name) if census is not None else None
    if layer is None:
        return True
    fields = dict(layer.spec_fields)
    for field, values in selection.fields:
        value = fields.get(field, "?")
        if "?" not in value.split("|") and not set(value.split("|")) & values:
            return False
    attributes = dict(layer.attributes)
    for flag in selection.flags:
        value = attributes.get(flag)
        if value is not None and set(value.split("|")) <= _FALSY:
            return False
    return True


def reaching(
    built: tuple[ContainerComposition, ...],
    census: Census | None,
    hierarchy: SpecHierarchy,
    check: cst.CSTNode,
    subject: str,
    function: cst.CSTNode | None,
    parent,
    remembered=None,
) -> tuple[ContainerComposition, ...]:
    """Of the containers whose layers answer the check True, those that reach it and get a different answer
    from the code than their layers: a name bound only with one group (`spec = groups[0].kv_cache_spec if
    len(groups) == 1 else None`) is reached only by a whole-model container; a check past an early exit taken
    with one group (`if len(groups) == 1: return …`) never by one, nor one whose loop over the groups returns
    the index it tests or falls back to 0 (kvlint.analysis.value_uses.first_group_fallback); and the whole `and`/`or`/`not` expression
    holding the check must answer the container otherwise than some layer, and an `and` gate must not refuse
    one of its layers as it refuses the container (kvlint.analysis.whole_answer)."""
    # `remembered` (SpecFlow.remembered): the function's and its blocks' reads kept for every check in them.
    if single_group_binding(subject, function, remembered):
        built = tuple(c for c in built if c.alone)  # some checkpoint's only group (compositions)
    if past_single_group_exit(check, function, parent, remembered) or first_group_fallback(
        check, function, parent, remembered
    ):
        built = tuple(c for c in built if not c.alone)
    return tuple(
        c
        for c in built
        if not answers_alike(check, subject, parent, hierarchy, c.spec_classes, remembered)
        and not refused_with_a_layer(check, subject, parent, hierarchy, c.spec_classes, remembered)
    )


def rank_witnesses(
    compositions: tuple[ContainerComposition, ...], census: Census | None
) -> tuple[ContainerComposition, ...]:
    """The witnesses to name, best first: by default, then possible under the default settings (a condition the
    census does not decide), then opt-in (a setting the user must choose); then a main model before a draft
    model (the registry's speculative-decoding models run only beside a main model); then the layers most of
    the tree's models put in one container (the way most users meet it); then a model whose module lies
    nearest a module defining one of those layers (the model the layers were written for, not one that
    borrows them); then, among architecture names the registry maps to one class, the name nearest one of the
    layers' names (DeepseekV32ForCausalLM for DeepseekV32IndexerCache, not DeepseekForCausalLM beside it)."""
    sharing: dict[frozenset[str], int] = {}
    for composition in compositions:
        sharing[composition.layer_classes] = sharing.get(composition.layer_classes, 0) + 1

    def nearness(composition: ContainerComposition) -> int:
        """How much of its path the model's module shares with the module defining one of the layers."""
        if census is None:
            return 0
        model = next((m for m in census.models if m.name == composition.model), None)
        homes = [census.layer(name).where.split(":")[0] for name in composition.layer_classes if census.layer(name)]
        return max((len(commonprefix([model.module, home])) for home in homes), default=0) if model else 0

    drafts = {model.name for model in census.models if model.draft} if census is not None else set()
    pooling = {model.name for model in census.models if model.pooling} if census is not None else set()

    def order(composition: ContainerComposition) -> tuple:
        opt_in = composition.setting.startswith("opt-in: ")
        draft = composition.model in drafts
        named = max((len(commonprefix([composition.model, layer])) for layer in composition.layer_classes), default=0)
        return (
            not composition.is_default,
            opt_in,
            draft,
            composition.model in pooling,  # a generating model is the witness a maintainer checks first
            bool(composition.config_branch),  # one that builds these layers whatever its config, before a branch
            -sharing[composition.layer_classes],
            -nearness(composition),
            -named,
        )

    return tuple(sorted(compositions, key=order))


def accepted_under_dcp(
    built: tuple[ContainerComposition, ...], refused: frozenset[str]
) -> tuple[ContainerComposition, ...]:
    """The containers some checkpoint of which vLLM accepts when DCP > 1: a checkpoint with a layer whose spec
    class is in `refused` (a sliding-window MLA layer: `max_memory_usage_bytes` asserts DCP == 1) fails at
    startup under DCP, so a check that matters only then (the gate of a DCP scaling) meets none of its groups."""
    return tuple(
        c
        for c in built
        if not c.checkpoints
        or any(not {kind.split(":", 1)[1] for kind in checkpoint} & refused for checkpoint in c.checkpoints)
    )
