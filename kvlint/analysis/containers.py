"""Which spec classes a `UniformTypeKVCacheSpecs` container can hold in a tree, read from the tree's own code.

vLLM builds containers (`UniformTypeKVCacheSpecs.from_specs`, `is_uniform_type`, the packed layout) from the
layer→spec dicts the workers report, gathered from each layer's `get_kv_cache_spec`. Some spec classes never
get there: the GPU runner builds encoder-only specs itself and appends them as a plain
`KVCacheGroupSpec(layer_names, spec)`. No container can hold one, so `isinstance(group_spec,
EncoderOnlyAttentionSpec)` answers for a container what each of its layers would.

A class is excluded only on positive evidence: the tree constructs it by name, every construction's value
provably ends as the spec of a group object (`KVCacheGroupSpec(...)`, `AttentionGroup(...)`: a group's own
spec, never a layer of a container) — followed through local names, a dict it keys and that dict's
`popitem()` — and every other mention is inert (an import, an annotation, an isinstance/issubclass test, a
comparison, a base of a class the interface declares). A construction returned from a function, stored, or
handed to any other call, a class object passed around, or a class never constructed by name keeps the
class a possible member (fail open: KV101 keeps reporting).

Files read: the interface module and the files that name `kv_cache_interface` — a file that names a spec
class imports it from there (true of every file of the releases the tests scan). The project cache counts
the same files among those that can change the index (NAMING_WORD). Plain `ast`, parsing only the function
or statement around each mention where it can (kvlint.analysis.statement_units); the code is never run.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from kvlint.analysis.class_mentions import (
    called_name,
    describe,
    innermost_function,
    is_called,
    is_inert_mention,
    is_isinstance_subject,
    line_of,
    lines_naming,
    mentions,
    popped_key,
    returned_construction,
)
from kvlint.analysis.statement_units import parse_unit, unit_spans
from kvlint.analysis.tree_files import TreeFiles

if TYPE_CHECKING:
    from kvlint.analysis.hierarchy import SpecHierarchy

# What a file must contain for this analysis to read it (see the module docstring).
NAMING_WORD = b"kv_cache_interface"
# A call of a class named so builds a group object; the spec handed to it is that group's own spec.
_GROUP_SUFFIXES = ("Group", "GroupSpec")


@dataclass(frozen=True)
class ContainerReachability:
    """What a container can hold. Plain data: part of the project index and of its digests."""

    # The classes X for which a layer a container can hold may answer `isinstance(layer, X)` True: the
    # possible member classes and all their bases. None: undecided, any class may be a member.
    member_classes: frozenset[str] | None
    # Excluded class → the sites that make it a plain group's spec only ("module:line → `Sink(…)` at :line").
    evidence: dict[str, str] = field(default_factory=dict)
    # Member class → why it is one (the first site found that reaches further than a group object).
    member_evidence: dict[str, str] = field(default_factory=dict)
    # The members the tree constructs by name, a construction reaching further than a group object: a
    # container of such layers is a counterexample the tree builds. The other members are kept only
    # because the tree cannot settle them (a class object passed around, never built by name).
    built_members: frozenset[str] = frozenset()

    def may_hold_instance_of(self, class_name: str) -> bool:
        """Whether `isinstance(layer, class_name)` can be True for a layer of a container the tree builds."""
        return self.member_classes is None or class_name not in self.evidence

    def built_layer_class(self, checked: frozenset[str], hierarchy: SpecHierarchy, exact: bool = False) -> str | None:
        """A concrete class of layers a container the tree builds can hold, whose instances answer
        `isinstance(layer, C)` True for some C in `checked` (`type(layer) is C` when `exact`): the checked
        class itself when it is one, else the first in the interface's order. None: no such built class."""
        if self.member_classes is None:
            return None
        built = [c for c in hierarchy.bases if c in self.built_members]
        matching = [c for c in built if (c in checked if exact else any(hierarchy.is_subclass(c, k) for k in checked))]
        own = [c for c in matching if c in checked]
        return (own or matching or [None])[0]


UNDECIDED = ContainerReachability(member_classes=None)


def could_name_a_spec_class(relative: str, data: bytes, interface_module: str) -> bool:
    return relative == interface_module or NAMING_WORD in data


def container_reachability(
    root: Path | str | None,
    hierarchy: SpecHierarchy,
    only: frozenset[str] | None = None,
    *,
    interface_module: str,
    container_class: str,
    files: TreeFiles | None = None,
) -> ContainerReachability:
    """`only` (paths relative to root): a known superset of the files to read, as the project cache has it;
    `files`: the tree's files as its index reads them (what cannot be read is written down there)."""
    if root is None or container_class not in hierarchy.bases:
        return UNDECIDED
    texts = _naming_files(files if files is not None else TreeFiles(Path(root), only), interface_module)
    if interface_module not in texts:  # no interface read: nothing to decide against
        return UNDECIDED
    return _Reader(texts, hierarchy, container_class).result()


def _naming_files(files: TreeFiles, interface_module: str) -> dict[str, bytes]:
    texts: dict[str, bytes] = {}
    for relative in sorted(files.relatives()):
        data = files.read(relative)
        if data is not None and could_name_a_spec_class(relative, data, interface_module):
            texts[relative] = data
    return texts


# --------------------------------------------------------------------------------- the outcomes of a site


class _Plain(NamedTuple):
    """The value ends as a group object's spec (or nowhere)."""

    site: str


class _Leak(NamedTuple):
    """The value (or the class object) goes somewhere this analysis does not follow."""

    reason: str
    # A construction got away (an instance may reach a container), not just the class object or a name.
    built: bool = True


_INERT = None  # a mention that creates nothing


class _Reader:
    def __init__(self, texts: dict[str, bytes], hierarchy: SpecHierarchy, container_class: str):
        self.texts = texts
        self.hierarchy = hierarchy
        self.container_class = container_class
        self.classes = sorted(name for name in hierarchy.bases if name != container_class)
        self.members: dict[str, str] = {}
        self.built: set[str] = set()
        self.excluded: dict[str, str] = {}
        self._trees: dict[str, ast.Module | None] = {}
        self._lines: dict[str, list[bytes]] = {}
        self._units: dict[str, dict[tuple[int, int], ast.Module | None]] = {}
        self._parents: dict[int, dict[ast.AST, ast.AST]] = {}

    def result(self) -> ContainerReachability:
        settling: set[str] = set()
        for name in self.classes:
            self._settle(name, settling)
        return ContainerReachability(
            frozenset(self.members), dict(self.excluded), dict(self.members), frozenset(self.built)
        )

    def _settle(self, name: str, settling: set[str]) -> None:
        """Subclasses first: an instance of a member subclass is an instance of this class too."""
        if name in self.members or name in self.excluded or name in settling:
            return
        settling.add(name)
        children = [c for c in self.classes if name in self.hierarchy.bases.get(c, ())]
        for child in children:
            self._settle(child, settling)
        member_children = [c for c in children if c in self.members]
        leak, sites = self._decide(name)
        if member_children and (leak is None or not leak.built):
            member_child = next((c for c in member_children if c in self.built), member_children[0])
            self.members[name] = f"a {member_child} is one"
            return
        if leak is not None:
            self.members[name] = leak.reason
            if leak.built:
                self.built.add(name)
        elif not sites:
            self.members[name] = "never constructed by name in the tree (assumed a member)"
        else:
            self.excluded[name] = "; ".join(sites)

    def _decide(self, name: str) -> tuple[_Leak | None, list[str]]:
        """(why the class can reach a container, or None; the plain sites of its constructions)."""
        encoded = name.encode()
        files = [relative for relative, data in self.texts.items() if encoded in data]
        # Cheap first: a construction returned as built reaches whatever calls the function (a layer's
        # `get_kv_cache_spec` in vLLM) — no parse needed to keep the class a member.
        for relative in files:
            offset = returned_construction(self.texts[relative], encoded)
            if offset is not None:
                return _Leak(f"{relative}:{line_of(self.texts[relative], offset)}: returned as built"), []
        sites: list[str] = []
        for relative in files:
            lines = lines_naming(self.texts[relative], encoded)
            trees = self._trees_holding(relative, lines)
            if trees is None:
                return _Leak(f"{relative}: cannot be parsed", built=False), []
            for tree in trees:
                for node, ancestors in mentions(tree, name, lines):
                    outcome = self._mention(relative, node, ancestors)
                    if isinstance(outcome, _Leak):
                        return outcome, []
                    if isinstance(outcome, _Plain):
                        sites.append(outcome.site)
        return None, sites

    def _trees_holding(self, relative: str, lines: set[int] | None) -> list[ast.Module] | None:
        """The functions or statements holding `lines`, each parsed alone; the whole module when that fails."""
        text_lines = self._lines.get(relative)
        if text_lines is None:
            text_lines = self._lines[relative] = self.texts[relative].split(b"\n")
        spans = unit_spans(text_lines, lines) if lines is not None else None
        units = []
        for span in spans or ():
            if span not in self._units.setdefault(relative, {}):
                self._units[relative][span] = parse_unit(text_lines, *span)
            units.append(self._units[relative][span])
        if spans is not None and all(unit is not None for unit in units):
            return units
        if relative not in self._trees:
            try:
                self._trees[relative] = ast.parse(self.texts[relative], filename=relative)
            except (SyntaxError, ValueError, RecursionError):
                self._trees[relative] = None
        tree = self._trees[relative]
        return None if tree is None else [tree]

    # ----------------------------------------------------------------------------- one mention of a class

    def _mention(self, relative: str, node: ast.AST, ancestors: tuple[ast.AST, ...]):
        if isinstance(node, ast.alias):  # `from … import Name as Other`: the other name is not followed
            return _Leak(f"{relative}:{ancestors[-1].lineno}: imported as `{node.asname}`", built=False)
        parent = ancestors[-1]
        if isinstance(parent, ast.Call) and parent.func is node:
            outcome = self._value(relative, parent, ancestors[:-1], parent.lineno, set())
            return _Plain(f"{relative}:{parent.lineno} (never used)") if outcome is _INERT else outcome
        if is_inert_mention(node, ancestors, self.hierarchy.bases):
            return _INERT
        return _Leak(f"{relative}:{node.lineno}: the class itself is used ({describe(parent)})", built=False)

    def _value(self, relative: str, value: ast.AST, ancestors: tuple[ast.AST, ...], built: int, seen: set):
        """Where a spec built at line `built` goes from `value` (the construction or a name bound to it)."""
        parent = ancestors[-1]
        call = (
            parent
            if isinstance(parent, ast.Call)
            else ancestors[-2]
            if isinstance(parent, ast.keyword) and len(ancestors) > 1
            else None
        )
        if call is not None and call.func is not value:
            callee = called_name(call)
            if callee and callee.endswith(_GROUP_SUFFIXES):
                return _Plain(f"{relative}:{built} → `{callee}(…)` at :{call.lineno}")
        function = innermost_function(ancestors)
        if isinstance(parent, (ast.Assign, ast.AnnAssign)) and parent.value is value and function is not None:
            targets = parent.targets if isinstance(parent, ast.Assign) else [parent.target]
            if len(targets) == 1 and isinstance(targets[0], ast.Name):
                return self._name(relative, targets[0].id, function, built, seen)
        if (
            isinstance(parent, ast.Subscript)
            and parent.slice is value
            and isinstance(parent.value, ast.Name)
            and function is not None
        ):
            return self._keyed_dict(relative, parent.value.id, function, built, seen)
        where = (
            f"`{function.name}`" if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)) else "module level"
        )
        return _Leak(f"{relative}:{built}: built in {where} and {describe(parent)}")

    def _name(self, relative: str, name: str, function: ast.AST, built: int, seen: set):
        """Every read of `name` in `function` (all of them: a rebinding only adds reads to check)."""
        if (id(function), name, "spec") in seen:
            return _INERT
        seen.add((id(function), name, "spec"))
        plain: list[str] = []
        for use, ancestors in self._reads(function, name):
            parent = ancestors[-1]
            if isinstance(parent, ast.Attribute) and not is_called(parent, ancestors):
                continue  # a field read
            if isinstance(parent, ast.Compare) or is_isinstance_subject(use, parent):
                continue
            outcome = self._value(relative, use, ancestors, built, seen)
            if isinstance(outcome, _Leak):
                return outcome
            if isinstance(outcome, _Plain):
                plain.append(outcome.site)
        return _Plain("; ".join(sorted(set(plain)))) if plain else _INERT

    def _keyed_dict(self, relative: str, name: str, function: ast.AST, built: int, seen: set):
        """A dict the spec keys (`specs[spec].append(layer)`): its keys leave it only through `popitem()`."""
        if (id(function), name, "dict") in seen:
            return _INERT
        seen.add((id(function), name, "dict"))
        plain: list[str] = []
        for use, ancestors in self._reads(function, name):
            parent = ancestors[-1]
            if isinstance(parent, ast.Subscript) and parent.value is use:
                continue  # a value looked up by key; the key stays inside
            if isinstance(parent, ast.Call) and called_name(parent) == "len":
                continue
            popped = popped_key(use, ancestors)
            if popped is None:
                return _Leak(f"{relative}:{built}: keys a dict `{name}` that {describe(parent)}")
            outcome = self._name(relative, popped, function, built, seen)
            if isinstance(outcome, _Leak):
                return outcome
            if isinstance(outcome, _Plain):
                plain.append(outcome.site)
        return _Plain("; ".join(sorted(set(plain)))) if plain else _INERT

    def _reads(self, function: ast.AST, name: str) -> Iterator[tuple[ast.Name, tuple[ast.AST, ...]]]:
        parents = self._parents.get(id(function))
        if parents is None:
            parents = {child: node for node in ast.walk(function) for child in ast.iter_child_nodes(node)}
            self._parents[id(function)] = parents
        for node in parents:
            if isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Load):
                chain = []
                current = node
                while current in parents:
                    current = parents[current]
                    chain.append(current)
                yield node, tuple(reversed(chain))
