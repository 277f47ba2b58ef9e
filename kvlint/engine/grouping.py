"""One finding per root cause: fold the findings of one file that describe the same defect into a primary
finding whose `related` lists the others.

One hand-written sizing expression can trip several rules at once: in vLLM 0.29.0 `build_offloading_config`
scales `group.kv_cache_spec.block_size` by hand (a scaling), gated on `isinstance(group.kv_cache_spec,
AttentionSpec)` (a check, and a DCP predicate that differs from the resolver's), and so its whole function
gives another token span than the scheduler (a divergent path). That is one defect with one fix.

A rule takes part by declaring `ROOT_CAUSE_ROLE` (a rule without it is never folded):
- "decision": an expression or a helper that decides a DCP factor (a scaling, a predicate, a layer pick):
  the place a root cause is, and fixed;
- "outcome": reported on a whole function, as the result of the decisions made in it (a divergent path);
- "check": a spec check, part of a decision when it lies inside one, a root cause of its own otherwise.

Within one function (the innermost `def` whose range holds the finding's; module level counts as one; a
finding reported on a def is in that def), two findings fold when
- both are expressions and one's range contains the other's (the same expression, or one inside the other),
- both are reported on the function's whole `def` (two rules about the same helper), or
- one is reported on the whole `def` and the other is a decision made directly in that function (not in a
  function nested in it): a path diverges because of the scaling or predicate it computes its size with.
Folding is transitive. The primary is the most severe finding, then the first in role order (decision,
outcome, check: the cause before its effect), then the outermost (the whole expression before a part of
it); the others become its related locations, in file order. So in the example the scaling is the finding,
where its fix applies; the path's counterexample, the gate and the predicate are its related locations.

Fixes: a group keeps one fix. A finding whose fix makes other edits than the group's is not folded and
stays a finding of its own, so `kvlint fix` applies every fix it applied before; the primary carries the
group's fix (and, without one, the first "fix unavailable" note of the group).
"""

from __future__ import annotations

import heapq
from bisect import bisect_right
from collections.abc import Callable, Container, Iterable, Mapping
from dataclasses import dataclass, replace

import libcst as cst
from libcst.metadata import CodeRange

from kvlint.analysis.cst_walk import children
from kvlint.types import Finding, Fix, RelatedLocation

ROLE_ORDER = ("decision", "outcome", "check")


@dataclass(frozen=True)
class FunctionSpan:
    """Where a `def` is, as libcst places it (and so as a finding reported on the def is placed)."""

    line: int
    column: int
    end_line: int
    end_column: int

    def holds(self, finding: Finding) -> bool:
        return (self.line, self.column) <= (finding.line, finding.column) and (
            finding.end_line,
            finding.end_column,
        ) <= (self.end_line, self.end_column)

    def is_reported_on(self, finding: Finding) -> bool:
        return (self.line, self.column, self.end_line, self.end_column) == (
            finding.line,
            finding.column,
            finding.end_line,
            finding.end_column,
        )


@dataclass(frozen=True)
class _Placed:
    finding: Finding
    role: str
    scope: FunctionSpan | None  # the innermost function around it; None at module level
    whole: bool  # reported on its scope's whole def


def root_cause_roles(rules: Iterable[type]) -> dict[str, str]:
    """code → role of the rules that take part in folding."""
    roles = {}
    for rule in rules:
        role = getattr(rule, "ROOT_CAUSE_ROLE", None)
        if role is not None:
            if role not in ROLE_ORDER:
                raise ValueError(f"{rule.__name__}.ROOT_CAUSE_ROLE must be one of {ROLE_ORDER}, not {role!r}")
            roles[rule.CODE] = role
    return roles


# What can hold a `def`: statements and the suites and clauses of compound statements, never an expression.
_STRUCTURE = (cst.BaseSuite, cst.BaseCompoundStatement, cst.ExceptHandler, cst.Else, cst.Finally, cst.MatchCase)
if hasattr(cst, "ExceptStarHandler"):  # libcst versions before 0.4.8 have no `except*`
    _STRUCTURE = (*_STRUCTURE, cst.ExceptStarHandler)


def function_spans(
    module: cst.Module,
    position: Callable[[cst.CSTNode], CodeRange],
    holders: Container[cst.CSTNode] | None = None,
) -> list[FunctionSpan]:
    """Every function of the module, outer before inner, with 1-based columns like a finding's. Walks the
    statements only: a full visit of a large module costs a second, this a few milliseconds."""
    spans = []
    pending: list[cst.CSTNode] = list(reversed(module.body))
    while pending:
        node = pending.pop()
        # `holders`: the functions around a reported node; no other function's span holds a finding.
        if isinstance(node, cst.FunctionDef) and (holders is None or node in holders):
            where = position(node)
            spans.append(FunctionSpan(where.start.line, where.start.column + 1, where.end.line, where.end.column + 1))
        if isinstance(node, _STRUCTURE):
            pending.extend(reversed([child for child in children(node) if isinstance(child, _STRUCTURE)]))
    return spans


def fold_root_causes(
    findings: Iterable[Finding], roles: Mapping[str, str], functions: Callable[[], list[FunctionSpan]]
) -> list[Finding]:
    """The findings of one file with those of one root cause folded into one (see the module docstring),
    sorted by `Finding.sort_key`. `functions` gives the file's functions, outer before inner; it is called
    only when two findings could fold."""
    findings = list(findings)
    taking_part = [f for f in findings if f.code in roles]
    if len(taking_part) < 2:
        return sorted(findings, key=Finding.sort_key)
    spans = functions()
    scopes = _innermost(taking_part, spans)
    placed = [_place(f, roles[f.code], scope) for f, scope in zip(taking_part, scopes)]
    groups = _components(placed)
    result = [f for f in findings if f.code not in roles]
    for group in groups:
        result.extend(_fold(group))
    return sorted(result, key=Finding.sort_key)


def _place(finding: Finding, role: str, scope: FunctionSpan | None) -> _Placed:
    return _Placed(finding, role, scope, whole=scope is not None and scope.is_reported_on(finding))


def _innermost(findings: list[Finding], spans: list[FunctionSpan]) -> list[FunctionSpan | None]:
    """Per finding, the last of `spans` (outer before inner) that holds it, or None. Not by asking every span
    (a module of thousands of functions, each with its findings, asked millions): the spans are a tree of ranges
    in preorder, so the innermost holding a finding is the last one starting at or before it or one of that
    one's outer spans. Spans that are not such a tree (never from `function_spans`) are each asked, as before."""
    parents = _nesting(spans)
    if parents is None:
        return [next((s for s in reversed(spans) if s.holds(f)), None) for f in findings]
    starts = [(s.line, s.column) for s in spans]
    found = []
    for finding in findings:
        at = bisect_right(starts, (finding.line, finding.column)) - 1
        while at >= 0 and not spans[at].holds(finding):
            at = parents[at]
        found.append(spans[at] if at >= 0 else None)
    return found


def _nesting(spans: list[FunctionSpan]) -> list[int] | None:
    """Each span's nearest outer span (its index, -1 for none), when the spans are ranges each inside or after
    the ones before it (preorder); None otherwise."""
    parents: list[int] = []
    open_: list[int] = []  # the spans holding the one read last, outermost first
    for index, span in enumerate(spans):
        while open_ and not _holds_span(spans[open_[-1]], span):
            if (spans[open_[-1]].end_line, spans[open_[-1]].end_column) >= (span.line, span.column):
                return None  # overlapping without one holding the other, or before the one read last
            open_.pop()
        parents.append(open_[-1] if open_ else -1)
        open_.append(index)
    return parents


def _holds_span(outer: FunctionSpan, inner: FunctionSpan) -> bool:
    return (outer.line, outer.column) <= (inner.line, inner.column) and (inner.end_line, inner.end_column) <= (
        outer.end_line,
        outer.end_column,
    )


def _contains(outer: Finding, inner: Finding) -> bool:
    return (outer.line, outer.column) <= (inner.line, inner.column) and (inner.end_line, inner.end_column) <= (
        outer.end_line,
        outer.end_column,
    )


def _same_cause(a: _Placed, b: _Placed) -> bool:
    if a.scope != b.scope:
        return False
    if a.whole and b.whole:
        return True
    if not a.whole and not b.whole:
        return _contains(a.finding, b.finding) or _contains(b.finding, a.finding)
    inside = b if a.whole else a
    return inside.role == "decision"


def _components(placed: list[_Placed]) -> list[list[_Placed]]:
    """The groups `_same_cause` makes, transitively, in the order of their first member. Not by comparing every
    pair (a function of a thousand checks made a million comparisons): per scope, its whole-def findings are one
    group with every decision made directly in it, and its other findings join where one's range holds
    another's, read in one sweep."""
    parent = list(range(len(placed)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    def join(i: int, j: int) -> None:
        parent[root(j)] = root(i)

    by_scope: dict[FunctionSpan | None, list[int]] = {}
    for i, item in enumerate(placed):
        by_scope.setdefault(item.scope, []).append(i)
    for members in by_scope.values():
        whole = [i for i in members if placed[i].whole]
        for i in whole[1:]:
            join(whole[0], i)
        if whole:
            for i in members:
                if not placed[i].whole and placed[i].role == "decision":
                    join(whole[0], i)
        _join_nested([i for i in members if not placed[i].whole], placed, join)
    groups: dict[int, list[_Placed]] = {}
    for i, item in enumerate(placed):
        groups.setdefault(root(i), []).append(item)
    return list(groups.values())


def _join_nested(members: list[int], placed: list[_Placed], join: Callable[[int, int], None]) -> None:
    """Join each finding with every earlier one whose range holds it, by start, then the longer first: the
    earlier ranges that hold one are those ending at or after it, so each group of them is kept with its
    furthest end, and those ending at or after the range met join it (a heap: each group taken out once)."""
    order = sorted(members, key=lambda i: (_start(placed[i]), _negated_end(placed[i])))
    groups: list[tuple[tuple[int, int], int]] = []  # (furthest end, negated; a member), most far-reaching first
    for i in order:
        end = _end(placed[i])
        furthest = end
        while groups and (-groups[0][0][0], -groups[0][0][1]) >= end:
            reach, member = heapq.heappop(groups)
            join(member, i)
            furthest = max(furthest, (-reach[0], -reach[1]))
        heapq.heappush(groups, ((-furthest[0], -furthest[1]), i))


def _start(item: _Placed) -> tuple[int, int]:
    return item.finding.line, item.finding.column


def _end(item: _Placed) -> tuple[int, int]:
    return item.finding.end_line, item.finding.end_column


def _negated_end(item: _Placed) -> tuple[int, int]:
    return -item.finding.end_line, -item.finding.end_column


def _primary_order(item: _Placed) -> tuple:
    f = item.finding
    return (-f.severity.rank, ROLE_ORDER.index(item.role), f.line, f.column, -f.end_line, -f.end_column, f.code)


def _same_edits(a: Fix, b: Fix) -> bool:
    return (a.applicability, a.edits, a.imports) == (b.applicability, b.edits, b.imports)


def _fold(group: list[_Placed]) -> list[Finding]:
    """The group as one primary finding, plus any member whose fix differs from the group's, alone."""
    ordered = [item.finding for item in sorted(group, key=_primary_order)]
    primary = ordered[0]
    fix = primary.fix or next((f.fix for f in ordered if f.fix is not None), None)
    # `fix` is the first of the group's fixes in primary order: its owner is always folded.
    folded = [f for f in ordered[1:] if f.fix is None or _same_edits(f.fix, fix)]
    apart = [f for f in ordered[1:] if f.fix is not None and not _same_edits(f.fix, fix)]
    if not folded:
        return ordered
    unavailable = primary.fix_unavailable
    if fix is None and unavailable is None:
        unavailable = next((f.fix_unavailable for f in folded if f.fix_unavailable), None)
    related = sorted(
        [_related(f) for f in folded] + [r for f in [primary, *folded] for r in f.related],
        key=lambda r: (r.path, r.line, r.column, r.code),
    )
    return [replace(primary, fix=fix, fix_unavailable=unavailable, related=tuple(related)), *apart]


def _related(finding: Finding) -> RelatedLocation:
    return RelatedLocation(
        finding.path,
        finding.line,
        finding.column,
        finding.end_line,
        finding.end_column,
        finding.code,
        finding.message,
        finding.headline,
        finding.kinds,
    )
