"""Where a tree defines the shared resolver `resolve_dcp_kv_block_size`, and how it decides, read statically.

0.29/0.30 check every layer with `isinstance(…, AttentionSpec)`; 0.31+ read `spec.dcp_sharded`; older
trees have no resolver at all.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

from kvlint.analysis.ast_helpers import class_names, parse_file, parse_source
from kvlint.analysis.tree_files import TreeFiles
from kvlint.analysis.vocabulary import RESOLVER_HOME, RESOLVER_NAME


@dataclass(frozen=True)
class ResolverRule:
    """How the resolver decides whether a (non-container) spec is DCP-sharded."""

    # The classes its per-layer isinstance check accepts (0.29/0.30: AttentionSpec); empty otherwise.
    layer_classes: frozenset[str] = frozenset()
    # 0.31+: it reads `spec.dcp_sharded` instead of checking classes.
    reads_dcp_sharded: bool = False


def defines_resolver(data: bytes | None) -> bool:
    # A bytes search finds an ASCII name exactly where the decoded text has it, without decoding the tree.
    return data is not None and f"def {RESOLVER_NAME}(".encode() in data


def find_resolver(root: Path, files: TreeFiles | None = None) -> Path | None:
    """The file defining the resolver: its upstream home first, then the first one in walk order (sorted).
    `files`: the tree's files as its index reads them (a file that cannot be read is written down there)."""
    files = files if files is not None else TreeFiles(root)
    if defines_resolver(files.read_if_present(RESOLVER_HOME)):
        return root / RESOLVER_HOME
    for relative in files.relatives():
        if relative != RESOLVER_HOME and defines_resolver(files.read(relative)):
            return root / relative
    return None


def read_resolver_rule(path: Path, data: bytes | None = None) -> ResolverRule:
    """How the resolver in `path` decides; `data`: that file's text when already known (an unwritten fix)."""
    module = parse_file(path) if data is None else parse_source(data, str(path))
    function = (
        next(
            (n for n in ast.walk(module) if isinstance(n, ast.FunctionDef) and n.name == RESOLVER_NAME),
            None,
        )
        if module is not None
        else None
    )
    if function is None:
        return ResolverRule()
    classes: set[str] = set()
    for call in ast.walk(function):
        if (
            isinstance(call, ast.Call)
            and isinstance(call.func, ast.Name)
            and call.func.id == "isinstance"
            and len(call.args) == 2
        ):
            classes.update(class_names(call.args[1]))
    return ResolverRule(frozenset(classes), "dcp_sharded" in ast.unparse(function))


# `replace(spec, dcp_sharded=False)`, `Spec(..., dcp_sharded=False)`, `spec.dcp_sharded = False`: an instance
# whose flag is not its class' default (a field declaration `dcp_sharded: bool = …` has a colon first).
_CLEARED = re.compile(rb"\bdcp_sharded\s*=\s*False\b")
_NEWLINE = b"\n"


def clears_dcp_sharded(relative: str, data: bytes) -> str:
    """ "path:line" where this module builds a spec whose `dcp_sharded` is cleared, or "": then a resolver
    that reads the flag sizes that instance unscaled whatever its class (vLLM 0.32.0's V2 runner clears it
    for a draft model's layers), so a kind's class does not fix what the resolver gives it."""
    if b"dcp_sharded" not in data:
        return ""
    found = _CLEARED.search(data)
    if found is None:
        return ""
    return f"{relative}:{data.count(_NEWLINE, 0, found.start()) + 1}"
