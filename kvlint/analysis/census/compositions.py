"""Which containers a tree builds: its models' layers (kvlint.analysis.census) × its grouping paths
(kvlint.analysis.census.paths), each with the setting that builds it.

Each path is evaluated on what one checkpoint builds (each alternative of a model,
kvlint.analysis.census.instantiation). A path that takes every layer of a model builds one container of
all of them when they share one uniform type (the spec registry's `uniform_type_base_spec`) and are not all
one kind — DeepSeek-V3.2's MLA plus indexer, by default — or none. The full-allocation fallback (a path
that returns early unless the model has layers of each of some classes) builds one container of the whole
model, only for models that have them. A bucketing path gated on a block-outermost layout builds one container per uniform-type bucket of
a model whose layers have more than one bucket (mixed page sizes): by default when one of the model's layers
has a backend that declares only block-outermost layouts (the resolved layout is then one of them), else
only when the user picks such a layout (opt-in). A model whose alternatives were merged gives compositions
that are only possible. Plain data: part of the tree index.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from os.path import commonprefix

from kvlint.analysis.census.merges import settings_apart, unproven_unlike
from kvlint.analysis.census.paths import GroupingPath
from kvlint.analysis.census.reading import Census, LayerClass, Model
from kvlint.analysis.census.uniformity import bucket_key, first_layers_making_uniform
from kvlint.analysis.hierarchy import SpecHierarchy

DEFAULT = "default"
POSSIBLE = "possible: "
MERGED = "the model's constructor branches more ways than the census keeps apart, so that these layers are built together by one checkpoint is unproven"


@dataclass(frozen=True)
class ContainerComposition:
    """One container a model of the tree builds: its layers, the setting and the path that build it, and
    the evidence: where the model builds each layer, the guard that lets them through, the checkpoints."""

    layer_classes: frozenset[str]
    spec_classes: frozenset[str]  # what the container holds (after the path's promotions)
    # "default", "opt-in: <the setting that builds it>", or "possible: <the link the census could not prove>"
    setting: str
    model: str
    path: str  # "module:function"
    line: int  # the `from_specs` call of the path
    guard: str = ""  # what in the path's code lets these layers through
    # (layer class, "module:line") where the model's code builds each layer class.
    built_at: tuple[tuple[str, str], ...] = ()
    # The checkpoints that build it, each its sorted "LayerClass:SpecClass" kinds (kvlint.analysis.census.
    # compositions.checkpoints): what one checkpoint of the model has.
    checkpoints: tuple[tuple[str, ...], ...] = ()
    # The layer classes of it that only some checkpoints of the model build (a config branch of its
    # constructor, `if is_v32:`): the witness is a checkpoint whose config takes that branch, not every one.
    config_branch: tuple[str, ...] = ()
    # The architecture name to show: of the names the registry gives the model's class, the one nearest its
    # layers' names (0.27.1's `DeepseekV32ForCausalLM` for DeepseekV32IndexerCache, not `DeepseekV3ForCausalLM`).
    architecture: str = ""
    # Some checkpoint gets it as its only group: the container holds every layer that checkpoint has (a
    # whole-model path); a bucketing path's containers always come with other groups.
    alone: bool = False

    @property
    def is_default(self) -> bool:
        return self.setting == DEFAULT

    @property
    def kind(self) -> str:
        """ "default", "opt-in" or "possible"."""
        return self.setting.split(":", 1)[0]

    def where(self) -> str:
        module = self.path.split(":")[0].rsplit("/", 1)[-1]
        return f"{module}:{self.line}"


def _config_branch(model: Model, layers: frozenset[str]) -> tuple[str, ...]:
    """The layer classes of `layers` some alternative of the model does not build (none when its alternatives
    were merged: then which ones a checkpoint builds together is not known, and the setting says so)."""
    if model.merged or len(model.alternatives) < 2:
        return ()
    return tuple(sorted(name for name in layers if any(name not in alternative for alternative in model.alternatives)))


def _architecture(model: Model, layers: frozenset[str]) -> str:
    def nearness(name: str) -> tuple[int, bool]:
        return max((len(commonprefix([name, layer])) for layer in layers), default=0), name == model.name

    return max([model.name, *model.aliases], key=nearness)


Kind = tuple[LayerClass, str]  # a layer class and the spec class it builds in one checkpoint


def checkpoints(census: Census, model: Model) -> list[tuple[Kind, ...]]:
    """The (layer, spec class) kinds each checkpoint of the model has: per alternative of its constructor
    (kvlint.analysis.census.instantiation), per choice of spec for a layer class that builds one of several
    by its config. Each once, in a stable order."""
    layers = {layer.name: layer for layer in census.layers}
    found: dict[tuple[str, ...], tuple[Kind, ...]] = {}
    for alternative in model.alternatives or (model.layers,):
        present = [_as_called(layers[name], model) for name in sorted(alternative) if name in layers]
        for kinds in _spec_choices(present, model.varied):
            found.setdefault(checkpoint_key(kinds), tuple(kinds))
    return list(found.values())


def _as_called(layer: LayerClass, model: Model) -> LayerClass:
    """The layer class with the spec classes the model's calls of it can build (Model.specs)."""
    built = {spec for name, spec in model.specs if name == layer.name}
    if not built or "*" in built or not built & layer.spec_classes:
        return layer
    return replace(layer, spec_classes=layer.spec_classes & frozenset(built))


def checkpoint_key(kinds) -> tuple[str, ...]:
    return tuple(sorted(f"{layer.name}:{spec}" for layer, spec in kinds))


def compose(
    census: Census, paths: tuple[GroupingPath, ...], hierarchy: SpecHierarchy, bases: dict[str, str]
) -> tuple[ContainerComposition, ...]:
    found: dict[tuple, ContainerComposition] = {}
    for model in census.models:
        sites: dict[str, list[str]] = {}
        for name, site in model.sites:
            sites.setdefault(name, []).append(site)
        for kinds in checkpoints(census, model):
            key = checkpoint_key(kinds)
            for composition in _evaluate(census, model, kinds, paths, hierarchy, bases):
                built_at = tuple((name, ", ".join(sites.get(name, ()))) for name in sorted(composition.layer_classes))
                branch = _config_branch(model, composition.layer_classes)
                composition = replace(
                    composition,
                    built_at=built_at,
                    checkpoints=(key,),
                    config_branch=branch,
                    architecture=_architecture(model, composition.layer_classes),
                )
                index = (composition.layer_classes, composition.spec_classes, composition.setting)
                index += (composition.path, model.name)
                if index in found:
                    before = found[index]
                    composition = replace(
                        before,
                        checkpoints=tuple(sorted({*before.checkpoints, key})),
                        alone=before.alone or composition.alone,
                    )
                found[index] = composition
    return tuple(sorted(found.values(), key=lambda c: (not c.is_default, c.path, sorted(c.layer_classes))))


_MAX_CHOICES = 16


def _spec_choices(model_layers: list[LayerClass], apart: frozenset[str] = frozenset()) -> list[list[Kind]]:
    """The (layer, spec class) kinds one checkpoint can have: a layer class whose `get_kv_cache_spec` builds
    one of several classes by its config (an MLA layer with or without a sliding window) builds one of them
    in a checkpoint whose layers share that config; and, when the model configures its layers of that class
    apart (`apart`: Model.varied, read by kvlint.analysis.census.built), all of them at once. Capped: past
    it, only the all-at-once reading."""
    every = [(layer, spec) for layer in model_layers for spec in sorted(layer.spec_classes)]
    choices: list[list[Kind]] = [[]]
    for layer in model_layers:
        options = [[(layer, spec)] for spec in sorted(layer.spec_classes)]
        if len(options) > 1 and layer.name in apart:
            options.append([(layer, spec) for spec in sorted(layer.spec_classes)])
        choices = [choice + option for choice in choices for option in options]
        if len(choices) > _MAX_CHOICES:
            return [every]
    return [every, *(choice for choice in choices if choice != every)] if every in choices else choices


def _evaluate(census, model, kinds, paths, hierarchy, bases) -> list[ContainerComposition]:
    """The containers one checkpoint gets, path by path in the order the grouping code reaches them: a path
    whose container ends the grouping (the whole-model one) first; when it builds one by default, no
    other path runs for this checkpoint. A path that promotes only under a setting is read without its
    promotions; what it builds with them and not without is only possible (see _promoted_variant)."""
    built = []
    for path in sorted(paths, key=lambda p: not p.guards.returns_container):
        if path.guards.promoted_when:
            plain = replace(path, guards=replace(path.guards, promotions=(), promoted_when=""))
            found = _on_path(census, model, kinds, plain, hierarchy, bases)
            built += found + _promoted_variant(census, model, kinds, path, hierarchy, bases, found)
        else:
            built += _on_path(census, model, kinds, path, hierarchy, bases)
        if path.guards.returns_container and any(c.is_default for c in built):
            break
    return built


def _promoted_variant(census, model, kinds, path, hierarchy, bases, plain) -> list[ContainerComposition]:
    """The containers `path` builds only with its promotions (`if disable_hybrid_kv_cache_manager:` turns
    sliding-window layers into full ones): a setting's, and layers a promotion makes one kind merge as alike
    unless their shapes differ, which the census does not decide: possible, never default."""
    seen = {(c.layer_classes, c.spec_classes) for c in plain}
    promotions = ", ".join(f"{source} → {target}" for source, target in path.guards.promotions)
    why = (
        POSSIBLE + f"only when `{path.guards.promoted_when}` (then {promotions}), and only when the promoted "
        "layers' shapes differ from the others', which the census does not decide"
    )
    return [
        replace(c, setting=c.setting if c.kind == "possible" else why)
        for c in _on_path(census, model, kinds, path, hierarchy, bases)
        if (c.layer_classes, c.spec_classes) not in seen
    ]


def _on_path(census, model, kinds, path, hierarchy, bases) -> list[ContainerComposition]:
    """The containers one path builds from one checkpoint, each with its setting."""
    reached = _reached(census, path, kinds, hierarchy)
    if reached is None:
        return []
    built = []
    setting, guard = reached
    alike = {spec: dict(census.merge_settings).get(spec, frozenset()) for spec in census.merge_ignores_shapes}
    for bucket in _containers(path, kinds, hierarchy, bases, alike):
        unproven = _unproven_requirement(path, kinds, hierarchy) or _unproven_block_size(path, bucket)
        unproven = unproven or _unproven_order(bucket, hierarchy, bases) or unproven_unlike(bucket, alike)
        # Each bucket's own: one bucket's unproven link says nothing of the next bucket's.
        said = POSSIBLE + MERGED if model.merged else POSSIBLE + unproven if unproven else setting
        built.append(
            ContainerComposition(
                frozenset(layer.name for layer, _, _ in bucket),
                frozenset(spec for _, _, spec in bucket),
                said,
                model.name,
                path.name,
                path.line,
                guard,
                alone=len(bucket) == len(kinds),
            )
        )
    return built


_UNDECIDED_PAGES = "with mixed page sizes, which the census does not decide"


def _reached(census: Census, path: GroupingPath, kinds, hierarchy) -> tuple[str, str] | None:
    """(setting, guard) under which the grouping code reaches `path` for this checkpoint; None: never."""
    guards = path.guards
    specs = [spec for _, spec in kinds]
    refused = sorted(c for c in guards.refuses if any(hierarchy.is_subclass(s, c) for s in specs))
    if refused:
        return None
    text = []
    if path.requires:
        text.append(f"the model has {' and '.join(sorted(path.requires))} layers")
    if guards.refuses:
        text.append(f"none of {', '.join(sorted(guards.refuses))}")
    if guards.returns_container:
        text.append("all of the model's layers are one uniform type (not all alike)")
    if guards.after_failure:
        return POSSIBLE + f"only when {guards.after_failure} ({_UNDECIDED_PAGES})", "; ".join(
            [f"after {guards.after_failure}", *text]
        )
    if guards.page_gated or path.layout_gated:
        if guards.page_gated and not _pages_can_differ(census, kinds, hierarchy):
            return None
        if path.layout_gated:
            layout = _layout(census, kinds, guards.page_gated)
            if layout is None:
                return None
            text.insert(0, "a block-outermost KV cache layout and mixed page sizes")
            return layout, "; ".join(text)
        text.insert(0, "mixed page sizes")
        return POSSIBLE + _UNDECIDED_PAGES, "; ".join(text)
    return DEFAULT, "; ".join(text)


def _pages_can_differ(census: Census, kinds, hierarchy) -> bool:
    """Whether the checkpoint's pages can differ in size. Where the tree pads a hybrid model's Mamba pages to
    its attention page (`mamba_page_size_padded`, set by the platform), Mamba layers beside one attention
    kind never make mixed page sizes: a plain Mamba hybrid does not reach a page-gated path."""
    if not census.mamba_page_padding:
        return len(kinds) > 1
    state = [kind for kind in kinds if hierarchy.is_subclass(kind[1], "MambaSpec")]
    others = [kind for kind in kinds if kind not in state]
    return len(others) > 1 or (not others and len(state) > 1)


def _layout(census: Census, kinds, page_gated: bool) -> str | None:
    """How a checkpoint gets a block-outermost layout: by default when a backend of its layers declares only
    such layouts; opt-in through the layout setting otherwise; None when a backend declares none (the
    setting then fails: no backend of the model can run it)."""
    outermost = census.block_outermost
    declared = [(layer, layer.layouts) for layer, _ in kinds if layer.layouts]
    if any(not set(layouts) & outermost for _, layouts in declared):
        return None
    forced = sorted({layer.name for layer, layouts in declared if outermost and set(layouts) <= outermost})
    if forced:
        return (
            POSSIBLE
            + f"{_UNDECIDED_PAGES} (block-outermost by default: {', '.join(forced)}'s backend allows no other layout)"
        )
    choice = "|".join(sorted(outermost)) or "a block-outermost layout"
    name = census.layout_setting or "the KV cache layout"
    return f"opt-in: {name}={choice} (a block-outermost layout), {_UNDECIDED_PAGES}"


def _unproven_requirement(path: GroupingPath, kinds, hierarchy: SpecHierarchy) -> str:
    """Why a path's guard (`requires`) is met only through a layer class that builds other kinds too (an MLA
    layer that builds a sliding-window spec only when its config asks): "" when every required class is
    built by a layer class that builds nothing else."""
    for required in sorted(path.requires):
        sure = {
            layer.name
            for layer, _ in kinds
            if layer.spec_classes and all(hierarchy.is_subclass(spec, required) for spec in layer.spec_classes)
        }
        if not sure:
            maybe = sorted({layer.name for layer, spec in kinds if hierarchy.is_subclass(spec, required)})
            return (
                f"that a layer of {', '.join(maybe)} builds a {required} is unproven (its spec depends on its config)"
            )
    return ""


def _unproven_block_size(path: GroupingPath, bucket) -> str:
    """A container of several layers needs one block size; a layer that sets its own at run time leaves
    that unproven."""
    own = sorted({layer.name for layer, _, _ in bucket if dict(layer.spec_fields).get("block_size") == "?"})
    if own and len(bucket) > 1:
        return f"that {', '.join(own)} share the others' block size is unproven (set at run time)"
    return ""


def _promoted(path: GroupingPath, spec: str, hierarchy: SpecHierarchy) -> str:
    """The class the path's promotions turn `spec` into: the nearest promoted base (as the code's MRO walk)."""
    matching = [(source, target) for source, target in path.guards.promotions if hierarchy.is_subclass(spec, source)]
    for source, target in matching:
        if all(hierarchy.is_subclass(source, other) for other, _ in matching):
            return target
    return spec


def _containers(path: GroupingPath, kinds, hierarchy: SpecHierarchy, bases: dict[str, str], alike=None):
    """The containers `path` builds from one checkpoint's (layer, spec class) kinds, each a list of
    (layer, spec class, the class it holds after the path's promotions), evaluated as its code decides: a
    whole-model path puts every layer in one container or builds none; a bucketing path one per uniform-type
    bucket; a path handed only some classes, one per bucket of them."""
    if path.requires and not all(any(hierarchy.is_subclass(spec, c) for _, spec in kinds) for c in path.requires):
        return []
    pool = [
        (layer, spec, _promoted(path, spec, hierarchy))
        for layer, spec in kinds
        if not any(hierarchy.is_subclass(spec, c) for c in path.excluded)
        and (not path.only or any(hierarchy.is_subclass(spec, c) for c in path.only))
    ]
    buckets: dict[tuple, list] = {}
    for layer, spec, held in pool:
        buckets.setdefault(bucket_key(layer, held, hierarchy, bases), []).append((layer, spec, held))
    if path.buckets:
        return list(buckets.values()) if len(buckets) > 1 else []
    if path.requires:
        # One container of the whole model, when its (promoted) layers share one uniform type.
        return [pool] if pool and len(buckets) == 1 else []
    if path.only:
        return [bucket for bucket in buckets.values() if len(bucket) > 1]
    # The whole model: one uniform type, not all alike, or no container at all. Layers all of one spec class
    # whose `merge` ignores shapes (`alike`: that class → the settings it asserts one value of) are all alike,
    # however shaped, unless their layer classes write one of those settings apart.
    held = {spec for _, _, spec in pool}
    if len(held) == 1 and held <= (alike or {}).keys() and not settings_apart(pool, alike[next(iter(held))]):
        return []
    uniform = len(buckets) == 1 or bool(first_layers_making_uniform(held, hierarchy, bases))
    return [pool] if uniform and len(pool) > 1 else []


def _unproven_order(bucket, hierarchy: SpecHierarchy, bases: dict[str, str]) -> str:
    """A whole-model container whose layers are one uniform type only when some of them come first (a
    bucket of a bucketing path, or the promoted pool of a path requiring classes, is one base: never)."""
    held = {spec for _, _, spec in bucket}
    firsts = first_layers_making_uniform(held, hierarchy, bases)
    if not firsts or len(firsts) == len(held):
        return ""
    return (
        f"only when a {' or '.join(firsts)} layer comes first in the model (each layer is tested against the "
        "first one's uniform base), which the census does not decide"
    )
