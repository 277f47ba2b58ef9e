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


def test_a_functions_nodes_are_kept_and_a_class_is_walked_as_it_is_now():
    tree = ast.parse("class A:\n    def f(self):\n        return g(1)\n    x = 1\n")
    cls = tree.body[0]
    function = cls.body[0]
    first = [id(node) for node in walk(function)]
    assert first == [id(node) for node in walk(function)] == [id(node) for node in ast.walk(function)]
    partial = walk(function)
    next(partial)  # a walk left early keeps nothing half-listed
    assert [id(node) for node in walk(function)] == first
    # A class's body may change (census/skeletons.py completes a stubbed method in place): never kept.
    walk(cls)
    cls.body[1] = ast.parse("y = h(2)").body[0]
    assert [type(n).__name__ for n in walk(cls)] == [type(n).__name__ for n in ast.walk(cls)]
    assert any(isinstance(n, ast.Name) and n.id == "h" for n in walk(cls))


def test_a_walked_function_is_not_kept_alive_by_its_nodes():
    import gc
    import weakref

    function = ast.parse("def f(x):\n    return g(x) + 1\n").body[0]
    assert len(list(walk(function))) == len(list(ast.walk(function)))
    gone = weakref.ref(function)
    del function
    gc.collect()
    assert gone() is None  # the kept nodes let the tree go with its scan
