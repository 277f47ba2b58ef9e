"""The index is built with Python's cyclic collector paused and frozen after (kvlint.collector). That is right only
while the build makes no reference cycles: one made there would never be freed. These tests fail when one comes
back (a nested function calling itself, `ast.dump`'s among them; an object and its helper pointing at each other)."""

from __future__ import annotations

import ast
import gc
import random
from pathlib import Path
from types import SimpleNamespace

import pytest

from kvlint.analysis.ast_helpers import shape
from kvlint.analysis.census.constructor_shapes import differing_keywords
from kvlint.analysis.hierarchy import hierarchy_of_source
from kvlint.analysis.sizing.program import Program
from kvlint.analysis.tree_index import build_tree_index
from kvlint.collector import paused_for_one_file, paused_while_building
from kvlint.engine.lint import LintRequest, lint_bytes
from kvlint.engine.registry import all_rules
from tests.mini_vllm import CONFIG_PATH, MINI_VLLM, write_tree
from tests.test_platform_reach import cpu_tree

KVLINT = Path(__file__).resolve().parent.parent / "kvlint"


def cyclic_garbage(build):
    """(what `build()` returns, the objects it left that only the cyclic collector would free)."""
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        result = build()
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        found = list(gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        if was_enabled:
            gc.enable()
    return result, found


def kinds(objects) -> list[str]:
    return sorted({getattr(o, "__qualname__", type(o).__qualname__) for o in objects})[:12]


def test_building_a_model_trees_index_leaves_no_cycle(tmp_path):
    tree = cpu_tree(tmp_path)
    index, garbage = cyclic_garbage(lambda: build_tree_index(tree))
    assert index.census is not None and index.compositions and index.sizing is not None  # every reader ran
    assert garbage == [], kinds(garbage)


def test_building_the_mini_vllms_index_leaves_no_cycle(tmp_path):
    tree = write_tree(tmp_path / "mini", MINI_VLLM)
    index, garbage = cyclic_garbage(lambda: build_tree_index(tree))
    assert index.sizing is not None and index.sizing.paths
    assert garbage == [], kinds(garbage)


def test_linting_a_file_with_findings_and_fixes_leaves_no_cycle(tmp_path):
    """A file's lint runs with the collector paused (kvlint.scan.jobs): its trees must go by reference counting."""
    tree = write_tree(tmp_path / "mini", MINI_VLLM)
    request = LintRequest(CONFIG_PATH, CONFIG_PATH, build_tree_index(tree), all_rules())
    data = (tree / CONFIG_PATH).read_bytes()
    lint_bytes(request, data)  # the first lint makes what is made once (classes, caches): cycles that stay
    result, garbage = cyclic_garbage(lambda: lint_bytes(request, data))
    assert "KV102" in {f.code for f in result.findings} and any(f.fix for f in result.findings)
    assert garbage == [], kinds(garbage)


@pytest.mark.slow
@pytest.mark.parametrize("version", ["0.29.0", "0.34.0"])
def test_building_a_release_index_leaves_no_cycle(vllm_release, version):
    tree = vllm_release(version)  # fetched and its manifest checked outside the build
    index, garbage = cyclic_garbage(lambda: build_tree_index(tree))
    assert index.census is not None and index.census.models and index.sizing is not None
    assert garbage == [], kinds(garbage)


def test_the_keywords_an_if_gives_apart_leave_no_cycle():
    branch = ast.parse(
        "if first:\n    Attention(window=config.window, scale=2)\nelse:\n    Attention(window=-1, scale=2)\n"
    ).body[0]
    found, garbage = cyclic_garbage(lambda: differing_keywords(branch.body, branch.orelse))
    assert [keyword for _, keyword in found] == ["window"]
    assert garbage == [], kinds(garbage)


def test_a_spec_classes_bases_are_read_depth_first_once_each_without_a_cycle():
    source = (
        "class KVCacheSpec: pass\nclass AttentionSpec(KVCacheSpec): pass\nclass Mixin: pass\n"
        "class FullAttentionSpec(AttentionSpec, Mixin): pass\nclass MLASpec(FullAttentionSpec, KVCacheSpec): pass\n"
    )
    program = Program(hierarchy_of_source(source.encode(), "interface.py"), {}, {})
    order, garbage = cyclic_garbage(lambda: program.mro("MLASpec"))
    assert order == ["MLASpec", "FullAttentionSpec", "AttentionSpec", "KVCacheSpec", "Mixin"]
    assert garbage == [], kinds(garbage)


def recursive_mro(bases: dict[str, tuple[str, ...]], name: str) -> list[str]:
    """The order Program.mro gave as a nested function calling itself (a reference cycle per call)."""
    order: list[str] = []

    def visit(current: str) -> None:
        if current in order:
            return
        order.append(current)
        for base in bases.get(current, ()):
            visit(base)

    visit(name)
    return order


def test_the_bases_order_is_the_recursive_walks_on_random_hierarchies():
    generator = random.Random(30)
    for _ in range(300):
        names = [f"C{i}" for i in range(generator.randint(1, 12))]
        # Any base, a class's own name and loops included: a crafted interface is not a DAG.
        bases = {n: tuple(generator.sample(names, generator.randint(0, min(3, len(names))))) for n in names}
        program = Program(SimpleNamespace(bases=bases), {}, {})  # type: ignore[arg-type]  # mro reads the bases only
        for name in names:
            assert program.mro(name) == recursive_mro(bases, name), (bases, name)


def expressions(limit: int) -> list[ast.AST]:
    nodes: list[ast.AST] = []
    for path in sorted(KVLINT.rglob("*.py")):
        nodes += [n for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, (ast.expr, ast.keyword))]
    return random.Random(7).sample(nodes, limit)


def test_a_nodes_shape_is_equal_exactly_where_its_dump_is():
    nodes = expressions(3000)
    # Constants that compare equal and dump apart: 1, 1.0 and True; and the same text in two places.
    nodes += [ast.parse(text, mode="eval").body for text in ("1", "1.0", "True", "x.y", "x.y", "(1, 2)", "[1, 2]")]
    by_dump: dict[str, object] = {}
    by_shape: dict[object, str] = {}
    for node in nodes:
        dumped, key = ast.dump(node), shape(node)
        assert by_dump.setdefault(dumped, key) == key, dumped
        assert by_shape.setdefault(key, dumped) == dumped, dumped
    assert len(by_dump) < len(nodes)  # some nodes were alike, so the test compared equal shapes too


def test_a_sum_of_1500_terms_has_a_shape():
    """Deeper than `ast.dump` (or a key built by recursion) can go: a pull request's module must not stop the census."""
    deep = [ast.parse("+".join(["1"] * n), mode="eval").body for n in (1500, 1500, 1499)]
    with pytest.raises(RecursionError):
        ast.dump(deep[0])
    assert shape(deep[0]) == shape(deep[1]) != shape(deep[2])


def test_the_collector_is_paused_while_building_and_what_was_built_is_frozen():
    gc.enable()
    frozen = gc.get_freeze_count()
    with paused_while_building():
        assert not gc.isenabled()
        kept = [object() for _ in range(10)] + [[n] for n in range(10)]
    assert gc.isenabled()
    assert gc.get_freeze_count() >= frozen + 10  # the lists built inside are out of the collector's reach now
    gc.unfreeze()
    assert kept


@pytest.mark.parametrize("paused", [paused_while_building, paused_for_one_file])
def test_a_failed_build_or_lint_leaves_the_collector_as_it_was(paused):
    gc.disable()
    try:
        with pytest.raises(ValueError), paused():
            raise ValueError("failed")
        assert not gc.isenabled()  # a caller that paused it keeps it paused
    finally:
        gc.enable()
    with pytest.raises(ValueError), paused():
        assert not gc.isenabled()
        raise ValueError("failed")
    assert gc.isenabled()
    gc.unfreeze()
