"""kvlint's own walk of a stdlib syntax tree finds what `ast.walk` finds, in its order (the census and the sizing
readers take the first match in places): on every module of kvlint itself, and on a node built by hand."""

from __future__ import annotations

import ast
from pathlib import Path

from kvlint.analysis.ast_helpers import walk

ROOT = Path(__file__).resolve().parent.parent


def test_the_walk_finds_every_node_in_ast_walks_order():
    modules = sorted([*(ROOT / "kvlint").rglob("*.py"), *(ROOT / "rules").rglob("*.py")])
    assert len(modules) > 100
    for path in modules:
        tree = ast.parse(path.read_bytes())
        assert [id(node) for node in walk(tree)] == [id(node) for node in ast.walk(tree)], path


def test_a_field_a_node_built_by_hand_never_set_is_skipped_as_ast_walk_skips_it():
    call = ast.Call(func=ast.Name(id="f", ctx=ast.Load()), args=[ast.Constant(1)])  # no `keywords`
    assert (
        [type(n) for n in walk(call)]
        == [type(n) for n in ast.walk(call)]
        == [ast.Call, ast.Name, ast.Constant, ast.Load]
    )
