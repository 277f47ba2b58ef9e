"""Classes that only the scheduler builds: the config they are handed is the scheduler's (flattened).

A class defined outside the scheduler-only paths (`RoutedExpertsManager`, in a model layer module) may still
only ever meet the scheduler's config: when every construction site of it in the tree is in scheduler-only
code (the scheduler builds it with its own `kv_cache_config`), no container reaches its group-spec checks.

`scheduler_built_classes` runs once per tree index, with stdlib `ast`, over the texts that may construct a
KV cache user (vocabulary.could_construct). Any other mention of the class — passed on as a value, used as a
base, tested with isinstance — could construct it elsewhere: such a class is not claimed.
"""

from __future__ import annotations

import ast
import re
from collections import Counter

from kvlint.analysis.vocabulary import sees_only_scheduler_config

_CLASS_LINE = re.compile(rb"^class[ \t]+(\w+)", re.MULTILINE)
_WORD = re.compile(rb"\w+")


def scheduler_built_classes(
    texts: dict[str, bytes], patterns: tuple[str, ...], type_names: frozenset[str] | None = None
) -> frozenset[str]:
    """Top-level classes of `texts` whose every mention there is a construction in scheduler-only code;
    `type_names`: the spec classes a type test can name (the tree's hierarchy; None: any class)."""
    # The candidates: classes of modules that read KV cache groups (where a group-spec check can be) whose text
    # could test a spec's type (the only classes KV101 asks this about).
    names = None if type_names is None else [name.encode() for name in sorted(type_names)]
    defined = {name for data in texts.values() if b"kv_cache_groups" in data for name in _testing_classes(data, names)}
    if not defined:
        return frozenset()
    built: set[str] = set()
    elsewhere: set[str] = set()
    # A class mentioned outside scheduler-only code once is out for good: modules most likely to rule
    # classes out are read first, and a module that mentions only classes already out is not parsed.
    for relative in sorted(texts, key=lambda r: (sees_only_scheduler_config(r, [], patterns), r)):
        data = texts[relative]
        # A class's own `class X` line is no mention (the visitor never reads a definition's name).
        # Every word counted, then the candidates kept: as `\bName\b` would find them, four times faster.
        found = Counter(word for word in _WORD.findall(data) if word in defined)
        found.subtract(m.group(1) for m in _CLASS_LINE.finditer(data))
        named = {name.decode() for name, count in found.items() if count > 0} - elsewhere
        if not named:
            continue
        try:
            tree = ast.parse(data, filename=relative)
        except (SyntaxError, ValueError, RecursionError):
            elsewhere.update(named)  # unread: any of them may be built there
            continue
        _Sites(relative, patterns, named, built, elsewhere).visit(tree)
    return frozenset(built - elsewhere)


def _testing_classes(data: bytes, names: list[bytes] | None) -> list[bytes]:
    """The module's top-level classes whose text, up to the next top-level class, could hold KV101's test of a
    spec's type: it says `isinstance` or `type` and names one of `names` (None: any)."""
    starts = list(_CLASS_LINE.finditer(data))
    ends = [match.start() for match in starts[1:]] + [len(data)]
    return [
        match.group(1)
        for match, end in zip(starts, ends)
        if (data.find(b"isinstance", match.end(), end) >= 0 or data.find(b"type", match.end(), end) >= 0)
        and (names is None or any(data.find(name, match.end(), end) >= 0 for name in names))
    ]


_METHODS: dict[tuple[type, type], object] = {}  # (visitor class, node type) → the method that visits it


class _Sites(ast.NodeVisitor):
    """Sorts one module's mentions of `named` into scheduler-only constructions and anything else."""

    def __init__(self, relative: str, patterns: tuple[str, ...], named: set[str], built: set, elsewhere: set):
        self.relative, self.patterns, self.named = relative, patterns, named
        self.built, self.elsewhere = built, elsewhere
        self.classes: list[str] = []

    def visit(self, node: ast.AST) -> None:
        # ast.NodeVisitor's, its method found once per node type instead of by name per node.
        key = (type(self), type(node))
        method = _METHODS.get(key)
        if method is None:
            method = _METHODS[key] = getattr(type(self), f"visit_{type(node).__name__}", type(self).generic_visit)
        method(self, node)

    def generic_visit(self, node: ast.AST) -> None:
        # ast.NodeVisitor's, without its generator per node: every child field in order.
        for field in node._fields:
            value = getattr(node, field, None)
            if isinstance(value, list):
                for item in value:
                    if isinstance(item, ast.AST):
                        self.visit(item)
            elif isinstance(value, ast.AST):
                self.visit(value)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for child in [*node.bases, *node.keywords, *node.decorator_list]:
            self.visit(child)
        self.classes.append(node.name)
        for statement in node.body:
            self.visit(statement)
        self.classes.pop()

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        # Annotations name a class without building it.
        for child in [*node.decorator_list, *node.args.defaults, *node.args.kw_defaults, *node.body]:
            if child is not None:
                self.visit(child)

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        for child in (node.target, node.value):
            if child is not None:
                self.visit(child)

    def visit_Call(self, node: ast.Call) -> None:
        name = _name(node.func)
        if name in self.named:
            scheduler = sees_only_scheduler_config(self.relative, list(reversed(self.classes)), self.patterns)
            (self.built if scheduler else self.elsewhere).add(name)
        else:
            self.visit(node.func)
        for child in [*node.args, *node.keywords]:
            self.visit(child)

    def visit_Name(self, node: ast.Name) -> None:
        if node.id in self.named:
            self.elsewhere.add(node.id)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr in self.named:
            self.elsewhere.add(node.attr)
        self.visit(node.value)


def _name(func: ast.expr) -> str | None:
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
