"""The census of a tree's models: which layer classes each model builds, and what each layer reports.

Read statically from the tree, never from a list in kvlint: the model registry (the module that maps
architecture names to `(module, class)`), each model module and the modules of its own package it imports,
the layer classes (every class that defines or inherits `get_kv_cache_spec`) with the spec classes that
method builds and the attribute values it copies into the spec (`mamba_type=self.mamba_type`), and each
layer's attention backend with the KV cache layouts it declares (`supported_kv_cache_layouts`). A model's
layers are the layer classes its modules construct by name, and those the layers' own classes construct.

Text-level (kvlint.analysis.census.class_texts): it reads hundreds of modules once per tree index. It
over-approximates where text cannot tell (a model module that imports another model's module gets that
module's layers too); a layer whose spec or backend cannot be read is kept with what is known.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from dataclasses import dataclass, replace
from posixpath import dirname, join

from kvlint.analysis.census.ancestry import BACKEND, LAYOUTS, SPEC_METHOD, Ancestry, attribute_question
from kvlint.analysis.census.budget import Budget
from kvlint.analysis.census.built import Built
from kvlint.analysis.census.class_texts import ClassText, classes_of, returned_texts
from kvlint.analysis.census.instantiation import Program
from kvlint.analysis.census.layouts import block_outermost, layout_setting, mamba_page_padding
from kvlint.analysis.census.merges import settings_merges, written_setting
from kvlint.analysis.census.parsing import ModuleTrees
from kvlint.analysis.census.spec_branches import SpecBranching, spec_branching

# No pattern of the census has two unbounded quantifiers side by side over characters both accept: each
# would backtrack over the other on a crafted module (issue 27 item 2). `^[ \t]*`, never `^\s*`, which
# crosses blank lines from every line start.
_REGISTRY_ENTRY = re.compile(r'^[ \t]*"(\w+)":\s*\(\s*"([\w.]+)",\s*"(\w+)",?\s*\)', re.MULTILINE)
# A module-level table of the registry (`_SPECULATIVE_DECODING_MODELS = {`), and the words that name its
# draft models' table.
_TABLE = re.compile(r"^(\w+)[ \t]*(?::[^=\n]{0,200})?=[ \t]*\{", re.MULTILINE)
_DRAFT_TABLE = re.compile(r"SPECULATIVE|DRAFT", re.IGNORECASE)
# The registry's tables of pooling models (embedding, scoring, classification, reward): they build KV caches
# but generate no tokens, so a maintainer reads a connector's or offloader's witness among them as far-fetched.
_POOLING_TABLE = re.compile(r"EMBEDDING|POOLING|LATE_INTERACTION|CLASSIFICATION|REWARD|SCORING|CROSS_ENCODER", re.I)
_CALLED = re.compile(r"\b([A-Z]\w*)\s*\(")
_KEYWORD_FROM_SELF = re.compile(r"\b(\w+)\s*=\s*self\.(\w+)\b(?!\s*\()")


@dataclass(frozen=True)
class LayerClass:
    """A class whose instances report a KV cache spec. Plain data: part of the tree index."""

    name: str
    where: str  # "module:line" of its class statement
    spec_classes: frozenset[str]  # the spec classes its `get_kv_cache_spec` builds (own or inherited)
    # Spec fields copied from the layer, with the values the layer's class sets: (("mamba_type", "MAMBA2"),).
    spec_fields: tuple[tuple[str, str], ...]
    # Layer attributes the census was asked about → their values ("?" when set at run time).
    attributes: tuple[tuple[str, str], ...]
    # The layouts its attention backend declares; None when it declares none (any layout).
    layouts: tuple[str, ...] | None
    # (field, value as its spec call writes it) for the fields a settings-only `merge` asserts one value of
    # (kvlint.analysis.census.merges.settings_merges); a field its call leaves unset is absent.
    spec_settings: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Model:
    name: str  # the first architecture name the registry gives it
    module: str  # relative path of its module
    layers: frozenset[str]  # layer class names: every class some alternative builds
    # What one checkpoint builds on the default platform: each alternative a set of layer classes (a config
    # branch makes two); `merged`: alternatives too many to keep apart were joined (kvlint.analysis.census.
    # instantiation), so a set may hold layers no one checkpoint builds together.
    alternatives: tuple[frozenset[str], ...] = ()
    merged: bool = False
    # (layer class, "module:line") where the model's code builds it (the call or reference that names it).
    sites: tuple[tuple[str, str], ...] = ()
    # A draft model: the registry lists it among the speculative-decoding models (it runs beside a main
    # model, never alone), so a witness names the main model that builds the same layers first.
    draft: bool = False
    # A pooling model: the registry lists it among embedding, scoring or classification models (no generation).
    pooling: bool = False
    # The other architecture names the registry maps to the same class (0.27.1: `DeepseekV32ForCausalLM` →
    # deepseek_v2's `DeepseekV3ForCausalLM`): a witness names the one its layers are named after.
    aliases: tuple[str, ...] = ()
    # The layer classes the model's code builds with an argument read from the layer's position (kvlint.
    # analysis.census.built.Built.varied).
    varied: frozenset[str] = frozenset()
    # (layer class, spec class) the model's calls of it can build, "*" for any of the class's (kvlint.analysis.
    # census.built.Built.specs): MLA layers built with no window never build the sliding-window MLA spec.
    specs: tuple[tuple[str, str], ...] = ()


def witness_order(model: Model) -> tuple:
    """Which model to name first as a witness: one whose alternatives were kept apart, that generates tokens,
    that runs alone (not a draft), then by name (stable across runs)."""
    return (model.merged, model.pooling, model.draft, model.name)


@dataclass(frozen=True)
class Census:
    layers: tuple[LayerClass, ...]
    models: tuple[Model, ...]
    block_outermost: frozenset[str]  # the layouts whose block dimension is outermost
    layout_setting: str  # how a user picks a layout ("VLLM_KV_CACHE_LAYOUT"), or ""
    # Where the default platform pads a hybrid model's Mamba pages to its attention page ("module:line" of
    # the `….mamba_page_size_padded = …` assignment), or "" when the tree does not.
    mamba_page_padding: str = ""
    # Models of the registry the census could not read (their class not found in the tree), by name.
    unread: tuple[str, ...] = ()
    # Spec classes whose `merge` never tells layers of different shapes apart (kvlint.analysis.census.merges).
    merge_ignores_shapes: frozenset[str] = frozenset()
    # Of those, (spec class, the fields its merge asserts one value of): layers setting one apart are not alike.
    merge_settings: tuple[tuple[str, frozenset[str]], ...] = ()

    def layer(self, name: str) -> LayerClass | None:
        return next((layer for layer in self.layers if layer.name == name), None)


def read_census(
    texts: dict[str, bytes],
    spec_classes: frozenset[str],
    budget: Budget | None = None,
    trees: ModuleTrees | None = None,
) -> Census | None:
    """The census from the selected modules' texts (relative path → bytes); None without a model registry.
    Raises BudgetExceeded past `budget`. `trees`: those texts parsed, shared with the index's other readers."""
    budget = budget if budget is not None else Budget()
    registry = _registry(texts)
    if not registry:
        return None
    classes: dict[str, list[ClassText]] = {}
    by_module: dict[str, list[ClassText]] = {}
    for relative, data in texts.items():
        budget.spend(len(data), relative)
        if b"class " in data:
            by_module[relative] = classes_of(relative, data)
            for cls in by_module[relative]:
                classes.setdefault(cls.name, []).append(cls)
    reader = _Reader(classes, spec_classes, budget)
    roots = _spec_roots(texts, by_module)
    merges = settings_merges(texts, spec_classes)
    layers = reader.layer_classes(_flags(classes, roots), roots, frozenset().union(*(f for _, f in merges)))
    program = Program(texts, {layer.name: reader.branching(layer) for layer in layers}, budget, trees)
    models, unread = [], []
    for name, relative, class_name, draft, pooling, aliases in registry:
        built = model_layers(program, relative, class_name) if relative else None
        if built is None:
            unread.append(name)
            continue
        alternatives = tuple(a for a in built.alternatives if a)
        if alternatives:
            sites = tuple(sorted(built.sites))
            union = frozenset().union(*alternatives)
            model = Model(name, relative, union, alternatives, built.merged, sites, draft, pooling, aliases)
            models.append(replace(model, varied=built.varied, specs=tuple(sorted(built.specs))))
    return Census(
        tuple(layers),
        tuple(models),
        block_outermost(texts),
        layout_setting(texts),
        mamba_page_padding(texts),
        tuple(unread),
        frozenset(name for name, _ in merges),
        merges,
    )


def _registry(texts: dict[str, bytes]) -> list[tuple[str, str, str, bool, bool, tuple[str, ...]]]:
    """(architecture, module path, class, draft, pooling) per model class, from the module holding the most
    entries; the path is "" for a module the tree does not have; draft when the entry lies in the registry's
    table of speculative-decoding models, pooling when in one of pooling models; with the other architecture
    names the registry gives the class."""
    best: list[tuple[str, str, str, bool, bool, tuple[str, ...]]] = []
    for relative, data in texts.items():
        if not relative.endswith("registry.py") or b'": (' not in data:
            continue
        text = data.decode("utf-8", "replace")
        entries = list(_REGISTRY_ENTRY.finditer(text))
        if len(entries) > len(best):
            package = dirname(relative)
            tables = [(m.start(), m.group(1)) for m in _TABLE.finditer(text)]
            starts = [start for start, _ in tables]
            seen: dict[tuple[str, str], list[str]] = {}
            best = []
            for entry in entries:
                architecture, module, class_name = entry.groups()
                # A module the tree lacks is kept as "": its model is one the census could not read.
                path = _module_path(texts, module, package) or ""
                # The nearest table opened before the entry (bisected: a crafted registry of many tables and
                # entries costs its size, not their product).
                at = bisect_left(starts, entry.start())
                table = tables[at - 1][1] if at else ""
                names = seen.get((path or module, class_name))
                if names is not None:
                    names.append(architecture)
                    continue
                seen[(path or module, class_name)] = names = []
                draft = _DRAFT_TABLE.search(table) is not None
                pooling = _POOLING_TABLE.search(table) is not None
                best.append((architecture, path, class_name, draft, pooling, names))  # type: ignore[arg-type]
            best = [(*entry[:5], tuple(dict.fromkeys(n for n in entry[5] if n != entry[0]))) for entry in best]
    return best


def _module_path(texts: dict[str, bytes], module: str, package: str) -> str | None:
    base = module.replace(".", "/") if module.startswith("vllm") else join(package, module.replace(".", "/"))
    for candidate in (f"{base}.py", f"{base}/__init__.py"):
        if candidate in texts:
            return candidate
    return None


_FLAG = re.compile(r"^[ \t]+(\w+)[ \t]*:[ \t]*bool[ \t]*=[ \t]*(?:True|False)[ \t]*$", re.MULTILINE)


def _flags(classes: dict[str, list[ClassText]], roots: set[str]) -> tuple[str, ...]:
    """The boolean class attributes the spec-reporting classes declare (`use_flashinfer_replayssm: bool = False`):
    the layer attributes a check's code may select layers by."""
    return tuple(sorted({flag for name in roots for cls in classes[name] for flag in _FLAG.findall(cls.body)}))


_SPEC_METHOD = re.compile(rb"^([ \t]+)def[ \t]+get_kv_cache_spec\b", re.MULTILINE)


def _spec_roots(texts: dict[str, bytes], by_module: dict[str, list[ClassText]]) -> set[str]:
    """The classes that define `get_kv_cache_spec` themselves: the last class above each definition indented less
    (no class body read). Each class is kept once, until one below it indented as little hides it (linear)."""
    roots = set()
    for relative, data in texts.items():
        if b"def get_kv_cache_spec" not in data:
            continue
        above: list[tuple[int, str]] = []  # (indentation, name), increasing: (n,) bisects before those indented n
        pending, line, position = list(reversed(by_module.get(relative, ()))), 1, 0  # the next class below: last
        for match in _SPEC_METHOD.finditer(data):
            line, position = line + data.count(b"\n", position, match.start()), match.start()
            while pending and pending[-1].line < line:
                cls = pending.pop()
                while above and above[-1][0] >= cls.indent:
                    above.pop()
                above.append((cls.indent, cls.name))
            less = bisect_left(above, (len(match.group(1).expandtabs()),))
            if less:
                roots.add(above[less - 1][1])
    return roots


class _Reader:
    def __init__(self, classes: dict[str, list[ClassText]], spec_classes: frozenset[str], budget: Budget | None = None):
        self.classes = classes
        self.spec_classes = spec_classes
        self._ancestry = Ancestry(classes, budget)  # each question read once per class name, from its bases' answers

    def _spec_method(self, name: str) -> tuple[set[str], list[str]]:
        """(spec classes built, method texts read): the nearest `get_kv_cache_spec` in the bases, and the
        bases' only through `super().get_kv_cache_spec`. One that builds no spec class (`return None`: an
        encoder-only layer) gives the layer no KV cache, whatever its bases build."""
        texts = list(self._ancestry.answer(name, SPEC_METHOD).found)
        return {spec for method in texts for spec in _CALLED.findall(method) if spec in self.spec_classes}, texts

    def branching(self, layer: LayerClass) -> SpecBranching | None:
        """How the layer chooses among its spec classes; None when it builds one."""
        methods = self._spec_method(layer.name)[1]
        return spec_branching(methods, self.spec_classes) if len(layer.spec_classes) > 1 else None

    def _value(self, name: str, attribute: str) -> str | None:
        values = self._ancestry.answer(name, attribute_question(attribute))
        return "|".join(sorted(values.found)) if values.found else None

    def _layouts(self, name: str) -> tuple[str, ...] | None:
        method = self._ancestry.answer(name, BACKEND).found
        if not method:
            return None
        backend = [name for name in returned_texts(method[0]) if name.isidentifier()]
        if len(backend) != 1:
            return None
        declared = self._ancestry.answer(backend[0], LAYOUTS).found
        if declared:
            members = re.findall(r"\bKVCacheLayout\.(\w+)", declared[0])
            return tuple(dict.fromkeys(members)) or None
        return None

    def _descendants(self, roots: set[str]) -> set[str]:
        """The roots and every class deriving from one, by base names (no body read)."""
        children: dict[str, set[str]] = {}
        for name, found in self.classes.items():
            for cls in found:
                for base in cls.bases:
                    children.setdefault(base, set()).add(name)
        result, todo = set(roots), list(roots)
        while todo:
            for child in children.get(todo.pop(), ()):
                if child not in result:
                    result.add(child)
                    todo.append(child)
        return result

    def layer_classes(
        self, asked: tuple[str, ...], roots: set[str], settings: frozenset[str] = frozenset()
    ) -> list[LayerClass]:
        layers = []
        for name in sorted(self._descendants(roots)):
            built, methods = self._spec_method(name)
            if not built:
                continue
            fields = []
            for method in methods:
                for keyword, attribute in _KEYWORD_FROM_SELF.findall(method):
                    value = self._value(name, attribute)
                    if value is not None and (keyword, value) not in fields:
                        fields.append((keyword, value))
            attributes = tuple((a, v) for a in asked if (v := self._value(name, a)) is not None)
            first = self.classes[name][0]
            written = tuple((field, value) for field in sorted(settings) if (value := written_setting(methods, field)))
            layers.append(
                LayerClass(name, first.where, frozenset(built), tuple(fields), attributes, self._layouts(name), written)
            )
        return layers


def model_layers(program: Program, relative: str, class_name: str) -> Built | None:
    """What the registry's model class builds; None when the class cannot be found in the tree."""
    found = program.resolve(relative, class_name)
    if found is None or found[1] != "class":
        return None
    module, _, cls = found
    return program.of_class(module, cls, passed=frozenset())  # type: ignore[arg-type]  # vLLM passes no more than its config
