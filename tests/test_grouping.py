"""One finding per root cause (kvlint.engine.grouping): which findings fold, which is the primary, what
happens to their fixes, and that `related` survives every path a finding takes (cache, fix, reporters)."""

from __future__ import annotations

import json
import pickle
from dataclasses import replace

import pytest
from click.testing import CliRunner

from conftest import OFFLOADING_CONFIG
from kvlint.cli import main
from kvlint.engine.grouping import ROLE_ORDER, FunctionSpan, fold_root_causes, root_cause_roles
from kvlint.engine.registry import all_rules
from kvlint.types import Applicability, FileResult, Finding, Fix, RelatedLocation, Severity, TextEdit
from test_cli import BUGGY, make_tree

ROLES = {"OUT": "outcome", "DEC": "decision", "DEC2": "decision", "CHK": "check"}
# def f at 1:1-20:10 holding def inner at 10:5-12:20.
FUNCTIONS = [FunctionSpan(1, 1, 20, 10), FunctionSpan(10, 5, 12, 20)]


def finding(code, line, column, end_line, end_column, severity=Severity.ERROR, fix=None, unavailable=None):
    return Finding(
        "m.py", line, column, end_line, end_column, code, code.lower(), f"{code} says", severity, fix, unavailable
    )


def fix_at(start: int, replacement: str = "resolve(spec, dcp)", title: str = "Replace") -> Fix:
    return Fix(title, Applicability.SAFE, (TextEdit(start, start + 5, replacement, 3, 5, 3, 10),))


def fold(*findings):
    return fold_root_causes(findings, ROLES, lambda: FUNCTIONS)


def shape(results):
    return [(f.code, f.line, [(r.code, r.line) for r in f.related]) for f in results]


def test_findings_on_one_expression_fold_into_the_outermost():
    scaling = finding("DEC", 3, 5, 5, 10)
    gate = finding("CHK", 4, 9, 4, 30)
    predicate = finding("DEC2", 4, 9, 4, 30)
    assert shape(fold(gate, predicate, scaling)) == [("DEC", 3, [("CHK", 4), ("DEC2", 4)])]


def test_a_whole_function_outcome_folds_the_decisions_made_in_it_only():
    path = finding("OUT", 1, 1, 20, 10)
    scaling = finding("DEC", 3, 5, 3, 40)
    gate = finding("CHK", 3, 20, 3, 30)
    unrelated_check = finding("CHK", 6, 5, 6, 30)  # a check that decides no size: a root cause of its own
    in_nested_def = finding("DEC", 11, 9, 11, 30)  # in `inner`: not a decision of f's own
    results = fold(path, scaling, gate, unrelated_check, in_nested_def)
    # The decision is the root cause; the path that diverges through it is its effect.
    assert shape(results) == [
        ("DEC", 3, [("OUT", 1), ("CHK", 3)]),
        ("CHK", 6, []),
        ("DEC", 11, []),
    ]


def test_two_findings_on_one_def_fold():
    helper_path = finding("OUT", 10, 5, 12, 20)
    helper_predicate = finding("DEC", 10, 5, 12, 20)
    pick = finding("DEC2", 11, 9, 11, 30)
    assert shape(fold(helper_predicate, pick, helper_path)) == [("DEC", 10, [("OUT", 10), ("DEC2", 11)])]


def test_two_findings_at_one_position_fold():
    # mutant: `_contains` with strict bounds (a check and a predicate reported on the very same expression)
    check = finding("CHK", 4, 9, 4, 30)
    predicate = finding("DEC2", 4, 9, 4, 30)
    assert shape(fold(check, predicate)) == [("DEC2", 4, [("CHK", 4)])]


def test_a_folded_findings_own_related_locations_are_kept():
    # mutant: the related locations of the primary and of the folded findings dropped when they fold again
    earlier = RelatedLocation("m.py", 2, 5, 2, 9, "KV104", "a layer pick")
    scaling = replace(finding("DEC", 3, 5, 5, 10), related=(earlier,))
    later = RelatedLocation("m.py", 7, 5, 7, 9, "KV101", "a dominated check")
    gate = replace(finding("CHK", 4, 9, 4, 30), related=(later,))
    assert shape(fold(gate, scaling)) == [("DEC", 3, [("KV104", 2), ("CHK", 4), ("KV101", 7)])]


def test_findings_apart_or_in_other_functions_stay_apart():
    a = finding("DEC", 3, 5, 3, 20)
    b = finding("CHK", 3, 25, 3, 40)  # same line, not nested
    c = finding("DEC", 25, 1, 25, 20)  # module level
    d = finding("CHK", 25, 5, 25, 10)  # module level, inside c
    assert shape(fold(a, b, c, d)) == [("DEC", 3, []), ("CHK", 3, []), ("DEC", 25, [("CHK", 25)])]


def test_the_primary_is_the_most_severe_then_by_role():
    error_outcome = finding("OUT", 1, 1, 20, 10)
    warning_decision = finding("DEC", 3, 5, 3, 40, severity=Severity.WARNING)
    [primary] = fold(error_outcome, warning_decision)
    assert (primary.code, primary.severity, [r.code for r in primary.related]) == ("OUT", Severity.ERROR, ["DEC"])
    [primary] = fold(finding("OUT", 1, 1, 20, 10), finding("DEC", 3, 5, 3, 40))
    assert primary.code == "DEC"  # the cause before its effect
    assert ROLE_ORDER == ("decision", "outcome", "check")


def test_the_group_keeps_the_one_fix_and_the_primary_carries_it():
    fix = fix_at(40)
    path = finding("OUT", 1, 1, 20, 10)
    scaling = finding("DEC", 3, 5, 5, 10, fix=fix)
    # Another rule's finding with the same edits (its own title) is the same fix.
    gate = finding("CHK", 4, 9, 4, 30, fix=fix_at(40, title="Replace the gated scaling"))
    [primary] = fold(path, scaling, gate)
    assert primary.code == "DEC" and primary.fix == fix and len(primary.related) == 2
    # A primary without a fix of its own carries the group's.
    [primary] = fold(finding("OUT", 10, 5, 12, 20), finding("CHK", 10, 5, 12, 20, fix=fix))
    assert primary.code == "OUT" and primary.fix == fix


def test_a_finding_whose_fix_differs_is_not_folded():
    scaling = finding("DEC", 3, 5, 5, 10, fix=fix_at(40))
    gate = finding("CHK", 4, 9, 4, 30, fix=fix_at(60, "other(spec)"))
    predicate = finding("DEC2", 4, 9, 4, 30)
    results = fold(scaling, gate, predicate)
    assert shape(results) == [("DEC", 3, [("DEC2", 4)]), ("CHK", 4, [])]
    assert results[0].fix == scaling.fix and results[1].fix == gate.fix


def test_a_fix_unavailable_note_reaches_the_primary():
    path = finding("OUT", 1, 1, 20, 10)
    pick = finding("DEC", 3, 5, 3, 40)
    scaling = finding("DEC2", 3, 10, 3, 30, unavailable="no shared resolver in this tree")
    [primary] = fold(path, pick, scaling)
    assert primary.code == "DEC" and primary.fix is None
    assert primary.fix_unavailable == "no shared resolver in this tree"


def test_rules_without_a_role_are_never_folded_and_spans_are_read_only_when_needed():
    unreadable = finding("KV000", 1, 1, 1, 1)
    lone = finding("DEC", 3, 5, 3, 40)

    def no_functions():
        raise AssertionError("the file's functions are not needed for one candidate")

    assert fold_root_causes([lone, unreadable], ROLES, no_functions) == [unreadable, lone]


def test_folding_twice_changes_nothing():
    once = fold(finding("OUT", 1, 1, 20, 10), finding("DEC", 3, 5, 3, 40), finding("CHK", 3, 9, 3, 20))
    assert fold(*once) == once


def test_every_rule_declares_a_known_role_or_none():
    roles = root_cause_roles(all_rules())
    assert set(roles.values()) <= set(ROLE_ORDER)
    assert "KV000" not in roles
    with pytest.raises(ValueError, match="ROOT_CAUSE_ROLE"):
        root_cause_roles([type("Bad", (), {"CODE": "X", "ROOT_CAUSE_ROLE": "symptom"})])


# --- through the real pipeline --------------------------------------------------------------------------


@pytest.fixture
def project(tmp_path, monkeypatch):
    make_tree(tmp_path)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def check_json(*args):
    result = CliRunner().invoke(main, ["check", "--format", "json", "--select", "KV101,KV102", *args])
    return result, json.loads(result.stdout)


def test_a_gated_scaling_is_one_finding_with_its_check_related(project):
    result, findings = check_json("--no-cache", "pkg")
    assert result.exit_code == 1
    assert [(f["code"], [(r["code"], r["line"], r["column"]) for r in f["related"]]) for f in findings] == [
        ("KV102", [("KV101", 6, 46)])
    ]
    assert findings[0]["fix"]["applicability"] == "safe"


def test_a_suppressed_primary_suppresses_its_root_cause(project):
    # the finding shown suppressed: its related check goes with it (kvlint.engine.suppress; tests/test_suppression.py)
    (project / "pkg" / "buggy.py").write_text(BUGGY.replace("else 1)\n", "else 1)  # kvlint: ignore[KV102]\n"))
    _, findings = check_json("--no-cache", "pkg")
    assert findings == []


def test_the_result_cache_keeps_related_locations(project):
    cold, cold_findings = check_json("--cache-dir", str(project / "cache"), "pkg")
    warm, warm_findings = check_json("--cache-dir", str(project / "cache"), "pkg")
    assert cold_findings == warm_findings and warm_findings[0]["related"]


def test_fix_applies_the_fix_of_a_folded_finding(project):
    result = CliRunner().invoke(main, ["fix", "--no-cache", "--select", "KV101,KV102", "pkg"])
    fixed = (project / "pkg" / "buggy.py").read_text()
    assert "resolve_dcp_kv_block_size(" in fixed and "isinstance" not in fixed
    assert result.exit_code == 0, result.output
    assert "from vllm.v1.core.kv_cache_utils import resolve_dcp_kv_block_size\n" in fixed


def test_findings_round_trip_through_plain_data():
    fix = Fix("Replace", Applicability.UNSAFE, (TextEdit(1, 4, "x", 1, 2, 1, 5),), ())
    related = (RelatedLocation("a.py", 2, 3, 2, 9, "KV101", "a check"),)
    original = Finding("a.py", 1, 2, 3, 4, "KV103", "divergent", "msg", Severity.WARNING, fix, None, related)
    data = json.loads(json.dumps(original.to_data()))
    assert Finding.from_data(data) == original
    result = FileResult("a.py", (original,), suppressed=2, detail="trace")
    assert FileResult.from_data(json.loads(json.dumps(result.to_data()))) == result
    assert pickle.loads(pickle.dumps(result)) == result
    with pytest.raises((KeyError, TypeError, ValueError)):
        Finding.from_data({**data, "severity": "fatal"})


@pytest.mark.slow
def test_029_build_offloading_config_is_one_root_cause(vllm_release, kvlint_in_release):
    """On 0.29.0 the connector's hand-written span (a scaling, its container check, its predicate and the
    path that diverges through them) is one finding whose fix `kvlint fix` applies."""
    root = vllm_release("0.29.0")
    result = kvlint_in_release("0.29.0", "check", "--no-cache", "--format", "json", ".")  # the goldens' scan
    findings = [f for f in json.loads(result.stdout) if f["path"].endswith(OFFLOADING_CONFIG)]
    scaling_lines = range(44, 50)  # `group.kv_cache_spec.block_size * (dcp if isinstance(...) else 1)`
    [root_cause] = [f for f in findings if f["line"] in scaling_lines]
    codes = {root_cause["code"], *(r["code"] for r in root_cause["related"])}
    assert len(codes) >= 3, root_cause  # several rules, one root cause
    assert root_cause["fix"] and root_cause["fix"]["edits"][0]["line"] == 44
    # The function's divergent path is its effect, a related location on the def.
    source = (root / OFFLOADING_CONFIG).read_text().splitlines()
    defs = [r for r in root_cause["related"] if source[r["line"] - 1].startswith("def build_offloading_config(")]
    assert defs, root_cause


def test_function_spans_finds_every_def_a_full_visit_finds():
    import libcst as cst
    from libcst.metadata import MetadataWrapper, PositionProvider

    from kvlint.engine.grouping import function_spans

    source = """\
def a():
    def b():
        pass
    class C:
        def m(self):
            if x:
                def d(): pass
            elif y:
                def d2(): pass
            try:
                pass
            except E:
                def e(): pass
            finally:
                def f(): pass
    with w:
        def g(): pass
    match q:
        case 1:
            def h(): pass
    for i in r:
        pass
    else:
        def j(): pass
    lam = lambda: 1
@dec
async def k(): pass
"""
    module = cst.parse_module(source)
    positions = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)

    class Defs(cst.CSTVisitor):
        def __init__(self):
            self.lines = []

        def visit_FunctionDef(self, node):
            self.lines.append(positions[node].start.line)

    visitor = Defs()
    module.visit(visitor)
    spans = function_spans(module, positions.__getitem__)
    assert [s.line for s in spans] == visitor.lines and len(spans) == 11
    assert spans[0] == FunctionSpan(1, 1, 25, 20)  # `a`, from its def to the end of its last statement


def _components_by_every_pair(placed):
    """The groups as the pairwise reading made them before (every pair compared): the yardstick below."""
    from kvlint.engine.grouping import _same_cause

    parent = list(range(len(placed)))

    def root(i):
        while parent[i] != i:
            i = parent[i]
        return i

    for i in range(len(placed)):
        for j in range(i + 1, len(placed)):
            if _same_cause(placed[i], placed[j]):
                parent[root(j)] = root(i)
    groups = {}
    for i, item in enumerate(placed):
        groups.setdefault(root(i), []).append(item)
    return list(groups.values())


def test_the_groups_are_those_every_pair_compared_would_make_on_random_findings():
    """`_components` reads each scope once (whole defs, the decisions made in them, ranges holding ranges, in one
    sweep): the same groups, in the same order, as comparing every pair, on 2,000 random sets of findings with
    shared starts and ends, nested and overlapping ranges, whole defs and every role."""
    import random

    from kvlint.engine.grouping import _components, _Placed

    rng = random.Random(31)
    scopes = [None, *FUNCTIONS]
    for _ in range(2000):
        placed = []
        for _ in range(rng.randint(0, 12)):
            scope = rng.choice(scopes)
            if scope is not None and rng.random() < 0.2:
                item = finding("OUT", scope.line, scope.column, scope.end_line, scope.end_column)
                placed.append(_Placed(item, rng.choice(ROLE_ORDER), scope, whole=True))
                continue
            line, column = rng.randint(1, 4), rng.randint(1, 3)
            end_line = line + rng.randint(0, 3)
            end_column = rng.randint(column if end_line == line else 1, 6)
            placed.append(
                _Placed(finding("DEC", line, column, end_line, end_column), rng.choice(ROLE_ORDER), scope, False)
            )
        assert _components(placed) == _components_by_every_pair(placed), placed


def _random_spans(rng, lines=60):
    """Function spans as `function_spans` gives them: nested or apart, outer before inner (random trees)."""
    spans = []

    def add(first, last, depth):
        line = first
        while line < last and len(spans) < 12:
            if rng.random() < 0.5:
                end = rng.randint(line, last)
                spans.append(FunctionSpan(line, rng.randint(1, 4), end, rng.randint(5, 9)))
                if depth < 4 and end > line + 1:
                    add(line + 1, end - 1, depth + 1)
                line = end + 1
            else:
                line += rng.randint(1, 5)

    add(1, lines, 0)
    return spans


def test_the_innermost_function_of_each_finding_is_the_last_span_holding_it():
    """`_innermost` finds a finding's function by bisection and its outer spans: the same span as asking every one
    (the last that holds it), on 3,000 random trees of functions; and on random spans that are no tree, each asked."""
    import random

    from kvlint.engine.grouping import _innermost

    rng = random.Random(30)
    for trial in range(3000):
        if trial % 3:
            spans = _random_spans(rng)
        else:  # any ranges at all: overlapping, in order of their starts or not
            spans = []
            for _ in range(rng.randint(0, 6)):
                line = rng.randint(1, 40)
                spans.append(FunctionSpan(line, rng.randint(1, 4), line + rng.randint(0, 20), rng.randint(1, 9)))
            if trial % 2:
                spans = sorted({(s.line, s.column): s for s in spans}.values(), key=lambda s: (s.line, s.column))
        findings = []
        for _ in range(rng.randint(0, 10)):
            line = rng.randint(1, 62)
            end_line = line + rng.randint(0, 2)
            findings.append(finding("DEC", line, rng.randint(1, 9), end_line, rng.randint(1, 9)))
        asked = [next((s for s in reversed(spans) if s.holds(f)), None) for f in findings]
        assert _innermost(findings, spans) == asked, (spans, findings)
