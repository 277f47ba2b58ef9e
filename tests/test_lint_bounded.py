"""What a crafted file of many checks costs stays linear in them, where the lint used to read the whole function
or file again for each (docs/security.md §6a): the reaching definitions' walk is bounded by a count of the state
entries it copies (a function past it is given no map, as one using `match` is), a block's established tests are
read once for all the sites in it, and a rewrite finds the start and end of its line without reading the file
from its start. Each is held to the reading it replaces, so no finding or fix changes."""

from __future__ import annotations

import random

import libcst as cst
import pytest

from kvlint.analysis import agreement, value_uses
from kvlint.analysis.cst_walk import walk
from kvlint.analysis.flow import cst_bindings, reaching
from kvlint.analysis.flow.provenance import Kind, SpecFlow
from kvlint.analysis.flow.reaching import MAX_STATE_ENTRIES, ReachingDefinitions
from kvlint.analysis.hierarchy import builtin_hierarchy
from kvlint.analysis.sizing import evaluator
from kvlint.analysis.tree_index import TreeIndex, build_tree_index
from kvlint.engine.lint import LintRequest, collect_parents, line_offsets, lint_bytes
from kvlint.engine.registry import all_rules
from kvlint.rules._resolver_call import _line_end, _line_start
from kvlint.types import FileResult
from tests.mini_vllm import CONFIG_PATH, MINI_VLLM, write_tree

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


# A red team's crafted modules (2026-12-07), each a few kilobytes: what a site's verdict reads of its function,
# block or statement, read once for all the sites there; the sizing evaluator's calls bounded per run.
HEADER = "from vllm.v1.kv_cache_interface import AttentionSpec, FullAttentionSpec, MambaSpec\n\n"


def _linted(request_: LintRequest, source: str) -> FileResult:
    return lint_bytes(request_, source.encode())


@pytest.fixture(scope="module")
def mini_request(tmp_path_factory) -> LintRequest:
    tree = write_tree(tmp_path_factory.mktemp("bounded") / "mini", MINI_VLLM)
    return LintRequest(CONFIG_PATH, CONFIG_PATH, build_tree_index(tree), all_rules())


def _counted(monkeypatch, module, name: str) -> list:
    """Each call of `module.name`, its first argument recorded."""
    seen: list = []
    original = getattr(module, name)
    monkeypatch.setattr(module, name, lambda first, *rest: seen.append(first) or original(first, *rest))
    return seen


def test_a_group_index_chosen_by_many_tests_is_read_once_per_function(monkeypatch, mini_request) -> None:
    """`groups[idx].kv_cache_spec.block_size * dcp` at 40 sites, `idx` assigned under 40 isinstance tests: the
    function's assignments and its group tests are read once (per site and per assignment, it took 27 s at 100)."""
    lines = [HEADER + "def f(kv_cache_config, dcp_world_size):", "    groups = kv_cache_config.kv_cache_groups"]
    lines += ["    for i, g in enumerate(groups):"]
    for k in range(40):
        lines += ["        if isinstance(g.kv_cache_spec, FullAttentionSpec):", f"            idx = i + {k}"]
    lines += [f"    x{k} = groups[idx].kv_cache_spec.block_size * dcp_world_size" for k in range(40)]
    assignments = _counted(monkeypatch, value_uses, "_function_assignments")
    guards = _counted(monkeypatch, value_uses, "_guards")
    result = _linted(mini_request, "\n".join(lines) + "\n")
    assert len([f for f in result.findings if f.code == "KV102"]) == 40
    assert len(assignments) == 1 and len(guards) == 1


def test_a_block_of_many_sites_each_read_by_an_if_is_read_once(monkeypatch, mini_request) -> None:
    """`bs = spec.block_size * dcp` then an `if` reading it, 60 times in one block: the block's reads are
    gathered once, not once per site over the rest of the block."""
    lines = [HEADER + "def f(kv_cache_config, dcp_world_size):", "    for g in kv_cache_config.kv_cache_groups:"]
    lines += ["        spec = g.kv_cache_spec"]
    for k in range(60):
        lines += [f"        bs{k} = spec.block_size * dcp_world_size", "        if isinstance(spec, MambaSpec):"]
        lines += [f"            use(bs{k}, {k})"]
    blocks = _counted(monkeypatch, value_uses, "_last_reads")
    result = _linted(mini_request, "\n".join(lines) + "\n")
    assert len([f for f in result.findings if f.code == "KV102"]) == 60
    assert len(blocks) == 1


def test_each_elif_of_a_chain_of_checks_is_read_once(monkeypatch, mini_request) -> None:
    """A chain of 60 `elif isinstance(spec, AttentionSpec) and …:`: the `if` heading it holds the whole chain, and
    each check asked whether its statement also tests for a container walked the rest of the chain again."""
    lines = [HEADER + "def f(kv_cache_config, dcp_world_size):", "    for group in kv_cache_config.kv_cache_groups:"]
    lines += ["        spec = group.kv_cache_spec", "        if spec.block_size == -1:", "            x = 0"]
    for i in range(60):
        lines += [f"        elif isinstance(spec, AttentionSpec) and spec.block_size == {i}:"]
        lines += ["            x = spec.block_size * dcp_world_size"]
    statements = _counted(monkeypatch, cst_bindings, "_container_subjects_here")
    result = _linted(mini_request, "\n".join(lines) + "\n")
    assert len([f for f in result.findings if f.code == "KV102"]) == 60
    assert len(statements) == len({id(s) for s in statements}) <= 61


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("if isinstance(spec, UniformTypeKVCacheSpecs): pass\nelif isinstance(x, AttentionSpec): pass\n", {"spec"}),
        (
            "if a:\n    pass\nelif isinstance(g.kv_cache_spec, UniformTypeKVCacheSpecs):\n    pass\n",
            {"g.kv_cache_spec"},
        ),
        ("if a:\n    pass\nelif b:\n    pass\nelse:\n    isinstance(s, (UniformTypeKVCacheSpecs, A))\n", {"s"}),
        ("x = [isinstance(a, UniformTypeKVCacheSpecs), isinstance(b, AttentionSpec)]\n", {"a"}),
    ],
)
def test_a_statements_container_tests_are_those_of_its_whole_text(source: str, expected: set[str]) -> None:
    """Read per `elif` and shared up the chain: the same subjects as one walk of the whole statement."""
    statement = cst.parse_module(source).body[0]
    memo: dict = {}
    assert cst_bindings.container_subjects(statement, memo) == expected
    whole = cst_bindings.ContainerCheckFinder()
    walk(statement, whole)
    assert whole.tested == expected
    if isinstance(statement, cst.If) and isinstance(statement.orelse, cst.If):  # the elif answered from the memo
        assert cst_bindings.container_subjects(statement.orelse, memo) <= expected


def test_helpers_that_fan_out_stop_at_the_call_budget(monkeypatch) -> None:
    """Ten helpers each calling the next three times (1.5 KB) cost 3^10 calls a run, 26 s to lint: each run now
    stops at MAX_CALLS_PER_RUN (a call past it is UNKNOWN, as past the depth), and the lint still reports."""
    lines = [HEADER]
    for i in range(10):
        lines += [
            f"def f{i}(spec, dcp_world_size):",
            "    return " + " + ".join([f"f{i + 1}(spec, dcp_world_size)"] * 3),
        ]
    lines += ["def f10(spec, dcp_world_size):"]
    lines += ["    return spec.block_size * dcp_world_size if isinstance(spec, AttentionSpec) else spec.block_size"]
    runs: list[int] = []
    original = evaluator.Evaluator.call

    def counted(self, *arguments, **keywords):
        if self.depth == 0:
            runs.append(0)
        runs[-1] += 1
        return original(self, *arguments, **keywords)

    monkeypatch.setattr(evaluator.Evaluator, "call", counted)
    project = TreeIndex(root=None, hierarchy=builtin_hierarchy())
    request = LintRequest("vllm/plugins/fan.py", "vllm/plugins/fan.py", project, all_rules())
    result = lint_bytes(request, "\n".join(lines).encode())
    assert result.findings and runs
    # Past the budget the calls pending on the stack each return at once: at most three per level left.
    assert max(runs) <= evaluator.MAX_CALLS_PER_RUN + 3 * evaluator.MAX_DEPTH


def test_with_a_census_a_functions_flags_and_an_expressions_answers_are_read_once(monkeypatch, tmp_path) -> None:
    """KV101 with a tree whose census builds containers: the layer flags a function tests (`selection_at`) and
    whether the expression holding a check answers a container as its layers (`answers_alike`) were read again
    for every check and every container (a second red team: an `and` of 150 checks took 52 s, 11 KB)."""
    from kvlint.analysis import whole_answer
    from kvlint.analysis.flow import layer_selection
    from tests.test_compositions import CONNECTOR, files

    index = build_tree_index(write_tree(tmp_path / "tree", files()))
    assert index.container_compositions()
    checks = " and ".join(f"isinstance(spec, MLAAttentionSpec) and spec.block_size != {i}" for i in range(30))
    lines = ["from vllm.v1.kv_cache_interface import MLAAttentionSpec", "", "def pick(kv_cache_config):"]
    lines += [
        "    for g in kv_cache_config.kv_cache_groups:",
        "        spec = g.kv_cache_spec",
        f"        if {checks}:",
    ]
    lines += ["            return g"]
    lines += [
        f"    x{i} = isinstance(kv_cache_config.kv_cache_groups[{i}].kv_cache_spec, MLAAttentionSpec)"
        for i in range(30)
    ]
    flags = _counted(monkeypatch, layer_selection, "_flag_tests")
    asked: list[tuple] = []
    alike = whole_answer._alike
    monkeypatch.setattr(whole_answer, "_alike", lambda *key: asked.append(key) or alike(*key))
    request = LintRequest(CONNECTOR, CONNECTOR, index, all_rules())
    result = lint_bytes(request, ("\n".join(lines) + "\n").encode())
    assert [f.code for f in result.findings].count("KV101") >= 2
    assert len(flags) == 1  # one function
    # Each (holding expression, subject, layers) answered once: the `and` of 30 checks, not 30 times.
    keys = [(id(whole), subject, spec_classes) for whole, subject, _, spec_classes in asked]
    assert asked and len(keys) == len(set(keys))
