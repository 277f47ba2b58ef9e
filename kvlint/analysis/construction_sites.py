"""Classes that only the scheduler builds: the config they are handed is the scheduler's (flattened).

A class defined outside the scheduler-only paths (`RoutedExpertsManager`, in a model layer module) may still
only ever meet the scheduler's config: when every construction site of it in the tree is in scheduler-only
code (the scheduler builds it with its own `kv_cache_config`), no container reaches its group-spec checks.

`read_construction_sites` runs once per tree index build, with stdlib `ast`, over the texts that may construct a
KV cache user (vocabulary.could_construct). Any other mention of the class — passed on as a value, used as a
base, tested with isinstance — could construct it elsewhere: such a class is not claimed. A module is parsed
only for the candidates its code names (comment lines and quoted words aside: a module that does not parse rules
out the classes named elsewhere in it), and each module's answer is kept in the index for the next build, which
parses again only the modules whose text changed.
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import re
import sys
from collections import Counter
from dataclasses import dataclass

from kvlint.analysis.vocabulary import sees_only_scheduler_config

_CLASS_LINE = re.compile(rb"^class[ \t]+(\w+)", re.MULTILINE)
# A class whose name ends so (a connector's scheduler half): what is built inside it sees the scheduler's config.
# Any `class` statement Python reads so: a form feed in the indentation, a line continuation, a non-ASCII name.
_SCHEDULER_CLASS = re.compile(rb"^[ \t\f]*class\b[\s\\]*[^\s(:\[]*Scheduler\b", re.MULTILINE)
_WORD = re.compile(rb"\w+")
# Text that never holds a mention the visitor reads: a line that is a comment (or a string's line starting so, but
# not one with a `{`: an f-string's line may hold code), and a word between quotes (`"KVCacheManager"`: a string,
# or an annotation as a string), which no code can be.
_COMMENT_LINE = re.compile(rb"^[ \t]*#[^{\n]*$", re.MULTILINE)
_QUOTED_WORD = re.compile(rb"[\"'](\w+)[\"']")


@dataclass(frozen=True)
class ModuleSites:
    """What one module says of the classes it was asked about: those it builds only in scheduler-only code and
    those it mentions otherwise. Plain data kept in the tree index, so that the next build after an edit parses
    again only the modules whose text (or question) changed."""

    module: str
    digest: str  # of the module's text
    reading: str  # the scheduler-only paths and the Python that parsed it (what else its answer depends on)
    asked: tuple[str, ...]  # the candidate classes it was read for, sorted
    built: tuple[str, ...]
    elsewhere: tuple[str, ...]


def scheduler_built_classes(
    texts: dict[str, bytes], patterns: tuple[str, ...], type_names: frozenset[str] | None = None
) -> frozenset[str]:
    """Top-level classes of `texts` whose every mention there is a construction in scheduler-only code;
    `type_names`: the spec classes a type test can name (the tree's hierarchy; None: any class)."""
    return read_construction_sites(texts, patterns, type_names)[0]


def read_construction_sites(
    texts: dict[str, bytes],
    patterns: tuple[str, ...],
    type_names: frozenset[str] | None = None,
    earlier: tuple[ModuleSites, ...] = (),
) -> tuple[frozenset[str], tuple[ModuleSites, ...]]:
    """(scheduler_built_classes' answer, what each module read said); `earlier`: what a build of the same tree
    with the same `patterns` said before, reused for a module whose text and question are the same."""
    # The candidates: classes of modules that read KV cache groups (where a group-spec check can be) whose text
    # could test a spec's type (the only classes KV101 asks this about).
    names = None if type_names is None else [name.encode() for name in sorted(type_names)]
    defined = {name for data in texts.values() if b"kv_cache_groups" in data for name in _testing_classes(data, names)}
    # Only a class some scheduler-only code calls can be claimed: the others are not looked for (each module's
    # mentions are judged one class at a time, so leaving a class out changes nothing for the rest).
    called = _called_where_scheduler_only(texts, defined, patterns)
    if not called:
        return frozenset(), ()
    reading = hashlib.blake2b(repr((patterns, sys.version_info[:2])).encode(), digest_size=8).hexdigest()
    kept = {(sites.module, sites.digest, sites.reading, sites.asked): sites for sites in earlier}
    built: set[str] = set()
    elsewhere: set[str] = set()
    read: list[ModuleSites] = []
    # A class mentioned outside scheduler-only code once is out for good: modules most likely to rule
    # classes out are read first, and a module that mentions only classes already out is not parsed.
    for relative in sorted(texts, key=lambda r: (sees_only_scheduler_config(r, [], patterns), len(texts[r]), r)):
        data = texts[relative]
        # A class's own `class X` line is no mention (the visitor never reads a definition's name), nor a comment
        # line or a quoted word. Every word counted, then the candidates kept: as `\bName\b` would find them, four
        # times faster; what is subtracted is counted once (comment lines are gone before).
        code = _COMMENT_LINE.sub(b"", data)
        found = Counter(word for word in _WORD.findall(code) if word in called)
        found.subtract(m.group(1) for m in _CLASS_LINE.finditer(code))
        found.subtract(m.group(1) for m in _QUOTED_WORD.finditer(code))
        named = {name.decode() for name, count in found.items() if count > 0} - elsewhere
        if not named:
            continue
        digest, asked = hashlib.blake2b(data, digest_size=16).hexdigest(), tuple(sorted(named))
        sites = kept.get((relative, digest, reading, asked))
        sites = sites or _module_sites(relative, data, ModuleSites(relative, digest, reading, asked, (), ()), patterns)
        read.append(sites)
        built.update(sites.built)
        elsewhere.update(sites.elsewhere)
    return frozenset(built - elsewhere), tuple(read)


def _called_where_scheduler_only(texts: dict[str, bytes], names: set[bytes], patterns: tuple[str, ...]) -> set[bytes]:
    """The `names` some text that may hold scheduler-only code (a scheduler-only path, or a module with a
    `class …Scheduler`) calls as `Name(` or `x.Name(`: a superset of those the visitor can find built there
    (whitespace, a line continuation, a comment or a closing bracket may stand between the name and its call)."""
    texts_of_scheduler = [
        data
        for relative, data in texts.items()
        if sees_only_scheduler_config(relative, [], patterns) or _SCHEDULER_CLASS.search(data)
    ]
    if not texts_of_scheduler or not names:
        return set()
    alternatives = b"|".join(re.escape(name) for name in sorted(names))  # `\b` after: any order finds the whole word
    # Between the name and its `(`: whitespace, closing brackets, continuations and comments, each comment taken to
    # its line's end (one way to read a run of `#`: a choice per `#` was exponential in a crafted line).
    call = re.compile(rb"\b(" + alternatives + rb")\b(?=(?:[\s)\\]|#[^\r\n]*[\r\n])*\()")
    return {match.group(1) for data in texts_of_scheduler for match in call.finditer(data)}


def _module_sites(relative: str, data: bytes, question: ModuleSites, patterns: tuple[str, ...]) -> ModuleSites:
    """The answer to `question` (its module, digest, reading and the classes asked), read from the module's tree."""
    built: set[str] = set()
    elsewhere: set[str] = set()
    try:
        tree = ast.parse(data, filename=relative)
    except (SyntaxError, ValueError, RecursionError):
        elsewhere.update(question.asked)  # unread: any of them may be built there
    else:
        _Sites(relative, patterns, set(question.asked), built, elsewhere).visit(tree)
    return dataclasses.replace(question, built=tuple(sorted(built)), elsewhere=tuple(sorted(elsewhere)))


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
            if isinstance(node.func, ast.Attribute):
                # `A.B(…)` builds B and mentions A: each class is judged by its own mentions alone.
                self.visit(node.func.value)
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
