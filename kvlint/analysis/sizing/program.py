"""The code the sizing evaluator reads: the modules of interest of a tree, parsed with stdlib `ast`.

`read_program` picks them cheaply. One pass over the tree's text (a substring test per file) selects the
candidates: modules that size a block near a DCP size or define a (spec, dcp) helper, then modules calling
one of those helpers, plus the spec interface and the module that builds the DSA indexer's spec. Only those
are parsed, most of them partially (the top-level blocks that may size blocks). Nothing is imported.
"""

from __future__ import annotations

import ast
import re
from bisect import bisect_left, bisect_right
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import accumulate
from pathlib import Path

from kvlint.analysis.ast_helpers import parse_at
from kvlint.analysis.hierarchy import SpecHierarchy
from kvlint.analysis.sizing.values import Layer
from kvlint.analysis.tree_files import TreeFiles
from kvlint.analysis.vocabulary import (
    DCP_WORDS,
    DEFAULT_SCHEDULER_ONLY_PATHS,
    INTERFACE_MODULE,
    MANAGER_FACTORY,
    dcp_aliases,
)

# A function taking a spec and a DCP size: a helper that may decide the DCP factor itself.
# A def's parameters (up to the first `)`) naming a spec, then a DCP size: `def f(spec, dcp_size)`.
_DEF_OPEN = re.compile(r"def \w+\(", re.IGNORECASE)
_SPEC_WORD = re.compile(r"spec\b", re.IGNORECASE)
_DCP_WORD = re.compile(r"\bdcp", re.IGNORECASE)
_DCP_LINE = re.compile(r"dcp|decode_context_parallel|cp_world_size")
_SPEC = re.compile(r"spec", re.IGNORECASE)
_WINDOW = 8  # lines: a block size and a DCP size this close may be multiplied together
_DCP_BYTES = tuple(word.encode() for word in DCP_WORDS)
_INDEXER_CLASS = re.compile(r"^class (\w*Indexer\w*)\b", re.MULTILINE)


@dataclass
class Module:
    """One parsed module (maybe only its relevant top-level blocks) and the DCP aliases its text assigns."""

    path: str  # relative to the tree root, "/"-separated
    tree: ast.Module
    text: str
    dcp_aliases: frozenset[str] = frozenset()
    functions: dict[str, ast.FunctionDef] = field(default_factory=dict)  # module level, by name
    _lines: list[str] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        for node in self.tree.body:
            if isinstance(node, ast.FunctionDef):
                self.functions[node.name] = node

    def segment(self, node: ast.AST) -> str:
        if self._lines is None:
            self._lines = self.text.splitlines()
        return "\n".join(self._lines[node.lineno - 1 : node.end_lineno])

    @property
    def dotted(self) -> str:
        name = self.path[:-3] if self.path.endswith(".py") else self.path
        return name.replace("/", ".").removesuffix(".__init__")

    def column(self, node: ast.AST) -> int:
        """1-based character column of `node` (ast gives UTF-8 byte offsets)."""
        if self._lines is None:
            self._lines = self.text.splitlines()
        line = self._lines[node.lineno - 1] if node.lineno - 1 < len(self._lines) else ""
        return len(line.encode("utf-8")[: node.col_offset].decode("utf-8", "replace")) + 1


@dataclass
class Program:
    """What the evaluator may read: the spec hierarchy, spec class bodies, and the modules of interest."""

    hierarchy: SpecHierarchy
    classes: dict[str, ast.ClassDef]
    modules: dict[str, Module]
    # The indexer layer of a DSA group, as the tree builds it (class and literal constructor arguments).
    indexer: Layer | None = None
    source: str = ""
    # Module paths that only receive the scheduler's (flattened) config: `scheduler-only-paths`.
    scheduler_only_paths: tuple[str, ...] = DEFAULT_SCHEDULER_ONLY_PATHS
    # The tree's files this program was read from (its modules, the indexer's): a plugin's analysis reads them again.
    sources: tuple[str, ...] = ()
    # The modules whose sizing paths are judged (a plugin's, kvlint.analysis.sizing.against_target); None: all.
    focus: frozenset[str] | None = None
    # The spec kinds, when known already (the release's, for a plugin's analysis); None: read from the program.
    kinds: tuple | None = None
    # The spec classes of each container the tree's census says its models build (any setting): the
    # container kinds compared are those; None (no census): every standard container kind.
    built_containers: tuple[frozenset[str], ...] | None = None

    def function(self, name: str, near: str | None = None) -> tuple[Module, ast.FunctionDef] | None:
        if near is not None and near in self.modules and name in self.modules[near].functions:
            return self.modules[near], self.modules[near].functions[name]
        found = [(m, m.functions[name]) for m in self.modules.values() if name in m.functions]
        if len(found) == 1:
            return found[0]
        preferred = [f for f in found if f[0].path.startswith("vllm/v1/")]
        return preferred[0] if len(preferred) == 1 else None

    def mro(self, name: str) -> list[str]:
        """`name` and its bases, depth first, each once (a stack, not a nested function calling itself: that is a
        reference cycle, and the index is built with the collector paused, kvlint.collector)."""
        order: list[str] = []
        seen: set[str] = set()  # not `in order`: a crafted interface of many classes would make each check linear
        stack = [name]
        while stack:
            current = stack.pop()
            if current not in seen:
                seen.add(current)
                order.append(current)
                stack.extend(reversed(self.hierarchy.bases.get(current, ())))
        return order


def parse_module(path: str, text: str, partial: bool = False) -> Module | None:
    """Parse a module; `partial` parses only its top-level blocks that may size blocks (much cheaper)."""
    tree = _parse_relevant(text, path) if partial else None
    if tree is None:
        try:
            tree = ast.parse(text, filename=path)
        except (SyntaxError, ValueError, RecursionError):
            return None
    return Module(path, tree, text, dcp_aliases(text))


def _relevant(block: str) -> bool:
    return _mentions_dcp(block) and ("block_size" in block or "spec" in block)


def _parse_relevant(text: str, path: str) -> ast.Module | None:
    """The top-level defs and classes that mention a DCP size and a block size or spec, parsed alone and
    placed at their lines. None when a block does not parse on its own (the caller parses everything)."""
    lines = text.splitlines()
    starts: list[int] = []
    after_decorator = False
    for index, line in enumerate(lines):
        if not line or line[0] in " \t#)]}":
            continue
        if after_decorator:
            after_decorator = line.startswith("@")
            continue
        starts.append(index)
        after_decorator = line.startswith("@")
    body: list[ast.stmt] = []
    for start, end in zip(starts, [*starts[1:], len(lines)]):
        first = lines[start]
        if not first.startswith(("def ", "async def ", "class ", "@")):
            continue
        block = "\n".join(lines[start:end])
        if not _relevant(block):
            continue
        try:
            chunk = parse_at(block, start + 1, path)
        except (SyntaxError, ValueError, RecursionError):
            return None
        body.extend(chunk.body)
    return ast.Module(body=body, type_ignores=[])


def helper_signature(text: str) -> bool:
    """Whether the text defines a function taking a spec and a DCP size: `def name(`, then before the next `)` a
    word ending in `spec` and later one starting with `dcp` (any case). A def that opens inside the parameters
    of one already read has no other `)` to reach: skipped (a pattern with two unbounded runs around `spec` took
    time cubic in a crafted line of `def f(spec def f(spec …`)."""
    read_to = 0
    for opened in _DEF_OPEN.finditer(text):
        if opened.start() < read_to:
            continue
        closed = text.find(")", opened.end())
        read_to = closed if closed >= 0 else len(text)
        spec = _SPEC_WORD.search(text, opened.end(), read_to)
        if spec is not None and _DCP_WORD.search(text, spec.end(), read_to) is not None:
            return True
    return False


def _decides_allocation(text: str) -> bool:
    """Builds the KV cache managers (the allocation, kvlint.analysis.sizing.allocator) or checks every group's
    kind under DCP (a refusal, kvlint.analysis.sizing.kinds)."""
    return MANAGER_FACTORY in text or ("assert isinstance(" in text and ".kv_cache_spec" in text)


def _mentions_dcp(text: str) -> bool:
    return any(word in text for word in DCP_WORDS)


def _sizes_near_dcp(text: str) -> bool:
    """A block size and a DCP size within a few lines of each other (a product may span lines). Lines as
    `splitlines` counts them; each word found in the whole text, its line by bisection on the lines' ends, and the
    nearest DCP line to each size line by bisection too (every pair compared was quadratic in a crafted module)."""
    lines = text.splitlines(keepends=True)
    ends = list(accumulate(map(len, lines)))
    dcp_lines = sorted({bisect_right(ends, match.start()) for match in _DCP_LINE.finditer(text)})
    if not dcp_lines:
        return False
    for match in re.finditer("block_size", text):
        line = bisect_right(ends, match.start())
        nearest = bisect_left(dcp_lines, line - _WINDOW)
        if nearest < len(dcp_lines) and dcp_lines[nearest] <= line + _WINDOW and _SPEC.search(lines[line]):
            return True
    return False


def sizes_blocks(text: str) -> bool:
    """Whether a module is one the analysis reads for itself: it sizes a block near a DCP size, defines a
    (spec, dcp) helper, or decides the allocation."""
    return _mentions_dcp(text) and (
        ("block_size" in text and _sizes_near_dcp(text)) or helper_signature(text) or _decides_allocation(text)
    )


def calls_a_helper(text: str, modules: Iterable[Module]) -> bool:
    """Whether a module that mentions a DCP size calls one of the (spec, dcp) helpers `modules` define."""
    return HelperCalls(modules).called_in(text)


class HelperCalls:
    """The (spec, dcp) helpers some modules define, looked for in a text in one pass: a helper's name right before
    a `(` (as text: `block_size(` calls a helper `size`). Each `(` is read once, backwards along the helpers' names
    spelled from their ends (a search of the text per name cost the helpers times the text)."""

    def __init__(self, modules: Iterable[Module]):
        self._endings: dict = {}  # a character per level, from a name's last; None marks a whole name
        for name in helper_names(modules):
            level = self._endings
            for character in reversed(name):
                level = level.setdefault(character, {})
            level[None] = True

    def called_in(self, text: str) -> bool:
        """Whether a module that mentions a DCP size calls one of the helpers."""
        if not (self._endings and _mentions_dcp(text)):
            return False
        bracket = text.find("(")
        while bracket >= 0:
            # No name holds a `(`: the characters read back from each `(` are read for no other.
            level, at = self._endings, bracket - 1
            while at >= 0 and (level := level.get(text[at])) is not None:
                if None in level:
                    return True
                at -= 1
            bracket = text.find("(", bracket + 1)
        return False


def helper_names(modules: Iterable[Module]) -> set[str]:
    """The module-level functions taking a spec and a DCP size."""
    return {
        name
        for module in modules
        for name, function in module.functions.items()
        if any("spec" in a.arg.lower() for a in function.args.args)
        and any(_mentions_dcp(a.arg) for a in [*function.args.args, *function.args.kwonlyargs])
    }


def could_size(relative: str, data: bytes) -> bool:
    """Whether `read_program` reads the file: the interface, a module naming a DCP size, or an indexer's.
    Most files are none of these: told from the bytes (their ASCII words decode unchanged), never decoded."""
    return relative == INTERFACE_MODULE or _reads_indexer(data) or any(word in data for word in _DCP_BYTES)


def _reads_indexer(data: bytes) -> bool:
    return b"Indexer" in data and b"get_kv_cache_spec" in data


def read_program(
    root: Path,
    hierarchy: SpecHierarchy,
    only: frozenset[str] | None = None,
    files: TreeFiles | None = None,
    texts: dict[str, bytes] | None = None,
) -> Program:
    """Candidate modules: the interface; modules sizing a block near a DCP size or defining a (spec, dcp)
    helper; then, once helpers are known, modules calling one of them.

    `only` (paths relative to root) limits the files read to a known superset of the candidates — the
    project cache's files that "could matter" — in the same order as a full walk. `files`: the tree's files
    as its index reads them (regular files only, size capped; what cannot be read is written down there).
    `texts`: the files `could_size` accepts, already read in walk order (the tree index reads each file once)."""
    if texts is None:
        files = files if files is not None else TreeFiles(root, only)
        texts = {r: d for r in files.relatives() if (d := files.read(r)) is not None and could_size(r, d)}
    selected: dict[str, str] = {}
    maybe_callers: dict[str, str] = {}
    indexer_texts: list[tuple[str, str]] = []
    for relative, data in texts.items():
        if not could_size(relative, data):
            continue
        indexer = _reads_indexer(data)
        text = data.decode("utf-8", "replace")
        if indexer:
            indexer_texts.append((relative, text))
        if relative == INTERFACE_MODULE or sizes_blocks(text):
            selected[relative] = text
        elif _mentions_dcp(text):
            maybe_callers[relative] = text
    modules = {
        r: m
        for r, m in ((r, parse_module(r, t, partial=r != INTERFACE_MODULE)) for r, t in selected.items())
        if m is not None
    }
    helpers = HelperCalls(modules.values())
    for relative, text in maybe_callers.items():
        if helpers.called_in(text):
            module = parse_module(relative, text, partial=True)
            if module is not None:
                modules[relative] = module
    interface = modules.get(INTERFACE_MODULE)
    classes = spec_classes(interface, hierarchy) if interface is not None else {}
    found = ((r, layer) for r, layer in ((r, _indexer_layer(t, hierarchy)) for r, t in indexer_texts) if layer)
    indexer_source, indexer = next(found, (None, None))
    sources = tuple(sorted(modules)) + ((indexer_source,) if indexer_source and indexer_source not in modules else ())
    return Program(hierarchy, classes, dict(sorted(modules.items())), indexer, source=str(root), sources=sources)


def spec_classes(module: Module, hierarchy: SpecHierarchy) -> dict[str, ast.ClassDef]:
    """The bodies of the spec classes a module defines, by name."""
    return {n.name: n for n in module.tree.body if isinstance(n, ast.ClassDef) and n.name in hierarchy.bases}


def _indexer_layer(text: str, hierarchy: SpecHierarchy) -> Layer | None:
    """The spec a DSA indexer cache layer builds: `class …Indexer…: def get_kv_cache_spec(…): return XSpec(…)`."""
    if not _INDEXER_CLASS.search(text):
        return None
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError):
        return None
    for node in tree.body:
        if not (isinstance(node, ast.ClassDef) and "Indexer" in node.name):
            continue
        for item in node.body:
            if isinstance(item, ast.FunctionDef) and item.name == "get_kv_cache_spec":
                layer = _returned_spec(item, hierarchy)
                if layer is not None:
                    return layer
    return None


def _returned_spec(function: ast.FunctionDef, hierarchy: SpecHierarchy) -> Layer | None:
    """The first `return XSpec(…)` of a spec class, with its literal keyword arguments."""
    for statement in ast.walk(function):
        if isinstance(statement, ast.Return) and isinstance(statement.value, ast.Call):
            call = statement.value
            name = call.func.id if isinstance(call.func, ast.Name) else getattr(call.func, "attr", None)
            if name in hierarchy.bases:
                overrides = [
                    (k.arg, k.value.value) for k in call.keywords if k.arg and isinstance(k.value, ast.Constant)
                ]
                return Layer(name, tuple(overrides))
    return None
