"""Where a tree defines the shared resolver `resolve_dcp_kv_block_size`, and how it decides, read statically.

0.29/0.30 check every layer with `isinstance(…, AttentionSpec)`; 0.31+ read `spec.dcp_sharded`; older
trees have no resolver at all.
"""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass
from pathlib import Path

from kvlint.analysis.ast_helpers import class_names, parse_file
from kvlint.analysis.vocabulary import RESOLVER_HOME, RESOLVER_NAME


@dataclass(frozen=True)
class ResolverRule:
    """How the resolver decides whether a (non-container) spec is DCP-sharded."""

    # The classes its per-layer isinstance check accepts (0.29/0.30: AttentionSpec); empty otherwise.
    layer_classes: frozenset[str] = frozenset()
    # 0.31+: it reads `spec.dcp_sharded` instead of checking classes.
    reads_dcp_sharded: bool = False


def defines_resolver(path: Path) -> bool:
    # A bytes search finds an ASCII name exactly where the decoded text has it, without decoding the tree.
    try:
        return f"def {RESOLVER_NAME}(".encode() in path.read_bytes()
    except OSError:
        return False


def find_resolver(root: Path) -> Path | None:
    """The file defining the resolver: its upstream home first, then the first one in a sorted walk."""
    home = root / RESOLVER_HOME
    if home.is_file() and defines_resolver(home):
        return home
    for folder, dirs, files in os.walk(root / "vllm"):
        dirs.sort()
        for name in sorted(files):
            candidate = Path(folder) / name
            if name.endswith(".py") and defines_resolver(candidate):
                return candidate
    return None


def read_resolver_rule(path: Path) -> ResolverRule:
    module = parse_file(path)
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
