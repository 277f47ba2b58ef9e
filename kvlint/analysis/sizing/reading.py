"""Read the parts of a vLLM tree that size KV cache blocks, cheaply, into a `semantics.Program`.

One pass over the tree's text (a substring test per file) picks the candidate modules: those that talk
about a block size and a DCP size, plus the spec interface and the module that builds the DSA indexer's
spec. Only those are parsed, with stdlib `ast`. Nothing is imported.
"""

from __future__ import annotations

import ast
import dataclasses
import os
import re
from pathlib import Path

from kvlint.analysis.hierarchy import SpecHierarchy
from kvlint.analysis.sizing.semantics import Layer, Module, Program, SizingAnalysis, analyse_program
from kvlint.analysis.vocabulary import DCP_WORDS, DEFAULT_SCHEDULER_ONLY_PATHS, INTERFACE_MODULE, dcp_aliases

# A function taking a spec and a DCP size: a helper that may decide the DCP factor itself.
_HELPER_SIGNATURE = re.compile(r"def \w+\([^)]*spec\b[^)]*\bdcp\w*", re.IGNORECASE)
_DCP_LINE = re.compile(r"dcp|decode_context_parallel|cp_world_size")
_SPEC = re.compile(r"spec", re.IGNORECASE)
_WINDOW = 8  # lines: a block size and a DCP size this close may be multiplied together
_INDEXER_CLASS = re.compile(r"^class (\w*Indexer\w*)\b", re.MULTILINE)

# Definitions a lone file is analysed against when no tree is scanned (vLLM 0.29.0's, like
# project._DEFAULT_BASES); a file's own definitions take precedence.
BUILTIN_MODULE = "vllm/v1/core/kv_cache_utils.py"
BUILTIN_SOURCE = '''
def iter_layer_specs(kv_cache_spec):
    if isinstance(kv_cache_spec, UniformTypeKVCacheSpecs):
        return kv_cache_spec.kv_cache_specs.values()
    return (kv_cache_spec,)


def resolve_dcp_kv_block_size(spec, dcp_world_size):
    layer_specs = iter_layer_specs(spec)
    if len(layer_specs) > 0 and all(isinstance(layer_spec, AttentionSpec) for layer_spec in layer_specs):
        return spec.block_size * dcp_world_size
    return spec.block_size


def resolve_kv_cache_block_sizes(kv_cache_config, vllm_config):
    dcp = vllm_config.parallel_config.decode_context_parallel_size
    groups = kv_cache_config.kv_cache_groups
    group_block_sizes = [resolve_dcp_kv_block_size(g.kv_cache_spec, dcp) for g in groups]
    return group_block_sizes
'''


def _module(path: str, text: str, partial: bool = False) -> Module | None:
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
            chunk = ast.parse("\n" * start + block, filename=path)  # leading newlines keep line numbers
        except (SyntaxError, ValueError, RecursionError):
            return None
        body.extend(chunk.body)
    return ast.Module(body=body, type_ignores=[])


def helper_signature(text: str) -> bool:
    """Whether the text defines a function taking a spec and a DCP size."""
    return _HELPER_SIGNATURE.search(text) is not None


def _mentions_dcp(text: str) -> bool:
    return any(word in text for word in DCP_WORDS)


def _sizes_near_dcp(text: str) -> bool:
    """A block size and a DCP size within a few lines of each other (a product may span lines)."""
    lines = text.splitlines()
    dcp_lines = [i for i, line in enumerate(lines) if _DCP_LINE.search(line)]
    if not dcp_lines:
        return False
    size_lines = [i for i, line in enumerate(lines) if "block_size" in line and _SPEC.search(line)]
    return any(abs(i - j) <= _WINDOW for i in size_lines for j in dcp_lines)


def read_program(root: Path, hierarchy: SpecHierarchy, only: frozenset[str] | None = None) -> Program:
    """Candidate modules: the interface; modules sizing a block near a DCP size or defining a (spec, dcp)
    helper; then, once helpers are known, modules calling one of them.

    `only` (paths relative to root) limits the files read to a known superset of the candidates — the
    project cache's files that "could matter" — in the same order as a full walk."""
    selected: dict[str, str] = {}
    maybe_callers: dict[str, str] = {}
    indexer_texts: list[str] = []
    for folder, dirs, files in os.walk(root / "vllm"):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "__pycache__")
        for name in sorted(files):
            if not name.endswith(".py"):
                continue
            full = Path(folder) / name
            if only is not None and full.relative_to(root).as_posix() not in only:
                continue
            try:
                text = full.read_bytes().decode("utf-8", "replace")
            except OSError:
                continue
            relative = full.relative_to(root).as_posix()
            if "Indexer" in text and "get_kv_cache_spec" in text:
                indexer_texts.append(text)
            if relative == INTERFACE_MODULE:
                selected[relative] = text
            elif _mentions_dcp(text):
                if ("block_size" in text and _sizes_near_dcp(text)) or _HELPER_SIGNATURE.search(text):
                    selected[relative] = text
                else:
                    maybe_callers[relative] = text
    modules = {r: m for r, m in ((r, _module(r, t, partial=r != INTERFACE_MODULE)) for r, t in selected.items()) if m is not None}
    helper_names = {
        name
        for module in modules.values()
        for name, function in module.functions.items()
        if any("spec" in a.arg.lower() for a in function.args.args)
        and any(_mentions_dcp(a.arg) for a in [*function.args.args, *function.args.kwonlyargs])
    }
    for relative, text in maybe_callers.items():
        if any(f"{name}(" in text for name in helper_names):
            module = _module(relative, text, partial=True)
            if module is not None:
                modules[relative] = module
    interface = modules.get(INTERFACE_MODULE)
    classes = _spec_classes(interface, hierarchy) if interface is not None else {}
    indexer = next((layer for layer in map(lambda t: _indexer_layer(t, hierarchy), indexer_texts) if layer), None)
    return Program(hierarchy, classes, dict(sorted(modules.items())), indexer, source=str(root))


def _spec_classes(module: Module, hierarchy: SpecHierarchy) -> dict[str, ast.ClassDef]:
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
                for statement in ast.walk(item):
                    if isinstance(statement, ast.Return) and isinstance(statement.value, ast.Call):
                        call = statement.value
                        name = call.func.id if isinstance(call.func, ast.Name) else getattr(call.func, "attr", None)
                        if name in hierarchy.bases:
                            overrides = []
                            for keyword in call.keywords:
                                if keyword.arg and isinstance(keyword.value, ast.Constant):
                                    overrides.append((keyword.arg, keyword.value.value))
                            return Layer(name, tuple(overrides))
    return None


def build_sizing_analysis(
    root: Path | None,
    hierarchy: SpecHierarchy,
    only: frozenset[str] | None = None,
    scheduler_only_paths: tuple[str, ...] = DEFAULT_SCHEDULER_ONLY_PATHS,
) -> SizingAnalysis | None:
    """The cross-file analysis of a tree; None when there is no tree (rules then analyse each file alone)."""
    if root is None:
        return None
    try:
        program = read_program(Path(root), hierarchy, only)
        return analyse_program(dataclasses.replace(program, scheduler_only_paths=tuple(scheduler_only_paths)))
    except Exception:  # noqa: BLE001 - the per-file rules must still run; they then report nothing cross-file
        return None


_SINGLE_FILE_CACHE: dict[tuple[str, int], SizingAnalysis | None] = {}


def analyse_single_file(module_path: str, text: str, hierarchy: SpecHierarchy) -> SizingAnalysis | None:
    """A lone file against the built-in definitions (its own take precedence): for scans without a tree."""
    key = (module_path, hash(text))
    if key in _SINGLE_FILE_CACHE:
        return _SINGLE_FILE_CACHE[key]
    module = _module(module_path, text)
    result = None
    if module is not None:
        modules = {module_path: module}
        builtin = _module(BUILTIN_MODULE, BUILTIN_SOURCE)
        if builtin is not None:
            own = set(module.functions)
            builtin.functions = {n: f for n, f in builtin.functions.items() if n not in own}
            builtin.tree.body = [n for n in builtin.tree.body if not (isinstance(n, ast.FunctionDef) and n.name in own)]
            if module_path != BUILTIN_MODULE:
                modules[BUILTIN_MODULE] = builtin
            else:
                module.functions = {**builtin.functions, **module.functions}
        classes = {n.name: n for n in module.tree.body if isinstance(n, ast.ClassDef) and n.name in hierarchy.bases}
        try:
            result = analyse_program(Program(hierarchy, classes, modules, None, source=f"{module_path} (alone)"))
        except RecursionError:
            result = None
    if len(_SINGLE_FILE_CACHE) > 256:
        _SINGLE_FILE_CACHE.clear()
    _SINGLE_FILE_CACHE[key] = result
    return result
