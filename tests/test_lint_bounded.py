"""What a crafted file of many checks costs stays linear in them, where the lint used to read the whole function
or file again for each (docs/security.md §6a): the reaching definitions' walk is bounded by a count of the state
entries it copies (a function past it is given no map, as one using `match` is), a block's established tests are
read once for all the sites in it, and a rewrite finds the start and end of its line without reading the file
from its start. Each is held to the reading it replaces, so no finding or fix changes."""

from __future__ import annotations

import random

import libcst as cst
import pytest

from kvlint.analysis import agreement
from kvlint.analysis.flow import reaching
from kvlint.analysis.flow.provenance import Kind, SpecFlow
from kvlint.analysis.flow.reaching import MAX_STATE_ENTRIES, ReachingDefinitions
from kvlint.engine.lint import collect_parents, line_offsets
from kvlint.rules._resolver_call import _line_end, _line_start

# Each loop binds a name of its own: the state grows by one a loop, so the walk copies entries in the square of
# the loops (three binds a loop, two passes: ~3 × loops² entries; 1,000,000 at ~580 loops).
LOOPS = "".join(f"    for group{i} in kv_cache_config.kv_cache_groups:\n        pass\n" for i in range(700))


def _function(body: str) -> cst.FunctionDef:
    module = cst.parse_module(f"def f(kv_cache_config):\n{body}")
    return module.body[0]  # type: ignore[return-value]


def test_a_function_past_the_bound_is_given_no_map_and_stops_counting_there() -> None:
    walked = ReachingDefinitions(_function(LOOPS), {})
    assert not walked.supported and not walked.points
    # Stopped at the bound (plus the one state that crossed it), not after the whole quadratic walk.
    assert MAX_STATE_ENTRIES < walked._spent <= MAX_STATE_ENTRIES + 700


def test_a_function_under_the_bound_is_walked_as_before() -> None:
    small = "".join(LOOPS.splitlines(keepends=True)[:200])  # 100 loops: ~30,000 entries
    walked = ReachingDefinitions(_function(small), {})
    assert walked.supported and walked.points
    assert 0 < walked._spent < MAX_STATE_ENTRIES // 10


SOURCE = """
def f(kv_cache_config):
    for g in kv_cache_config.kv_cache_groups:
        spec = g.kv_cache_spec
        spec = unknown_helper(spec)
        isinstance(spec, AttentionSpec)
"""


@pytest.mark.parametrize(("bound", "expected"), [(MAX_STATE_ENTRIES, Kind.UNKNOWN), (3, Kind.GROUP_SPEC)])
def test_past_the_bound_the_reader_falls_back_to_every_binding(monkeypatch, bound: int, expected: Kind) -> None:
    """Under the bound the rebinding hides the group's spec from the check; past it (a tiny bound here) the
    function has no map and the check sees every binding of `spec` in it: the group's spec among them."""
    monkeypatch.setattr(reaching, "MAX_STATE_ENTRIES", bound)
    module = cst.parse_module(SOURCE)
    flow = SpecFlow(module, lambda: collect_parents(module))
    calls = [
        n for n in collect_parents(module) if isinstance(n, cst.Call) and getattr(n.func, "value", "") == "isinstance"
    ]
    assert flow.classify(calls[0].args[0].value).kind is expected


def test_a_blocks_established_tests_are_read_once_for_all_its_sites(monkeypatch) -> None:
    """`assert`s and early exits before a site narrow it; a block of many sites reads its statements once."""
    lines = ["def f(spec, dcp):", "    out = []"]
    for i in range(60):
        lines += [f"    assert spec.block_size > {i}", "    out.append(spec.block_size * dcp)"]
    module = cst.parse_module("\n".join(lines) + "\n")
    flow = SpecFlow(module, lambda: collect_parents(module))
    block = module.body[0].body  # type: ignore[attr-defined]
    read: list[cst.CSTNode] = []
    established_by = agreement._established_by
    monkeypatch.setattr(agreement, "_established_by", lambda s: read.append(s) or established_by(s))
    sites = [s for s in block.body if "append" in module.code_for_node(s)]
    seen = [[module.code_for_node(t) for t, _ in agreement._tests_on_path(block, site, flow)] for site in sites]
    assert len(read) == len(block.body)  # once per statement, not once per statement before each site
    # As the reading it replaces: every assert before the site, in order, none after it.
    assert seen[5] == [f"spec.block_size > {i}" for i in range(6)]
    assert [len(tests) for tests in seen] == list(range(1, 61))


def _old_line_start(source: str, offset: int) -> int:
    return max(source.rfind("\n", 0, offset), source.rfind("\r", 0, offset)) + 1


def _old_line_end(source: str, offset: int) -> int:
    return min((i for i in (source.find("\n", offset), source.find("\r", offset)) if i >= 0), default=len(source))


def test_a_rewrites_line_start_and_end_are_the_whole_file_searches() -> None:
    """At every offset of random texts of `\\n`, `\\r`, `\\r\\n` lines (the ends of files and lines included), the
    search bounded by the line offsets finds what a search of the whole file finds."""
    generator = random.Random(30)
    for _ in range(400):
        source = "".join(
            generator.choice(["a", "b ", "\n", "\r", "\r\n", "#", "  "]) for _ in range(generator.randint(0, 40))
        )
        offsets = line_offsets(source)
        for offset in range(len(source) + 1):
            assert _line_start(source, offsets, offset) == _old_line_start(source, offset), (source, offset)
            assert _line_end(source, offsets, offset) == _old_line_end(source, offset), (source, offset)
