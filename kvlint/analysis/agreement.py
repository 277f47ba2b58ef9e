"""Whether a hand-written DCP scaling agrees, kind by kind, with the rule the tree sizes blocks by.

For each kind of group spec that can reach the site (kvlint.analysis.kind_table), the factor the site
applies is worked out from what decides it — an inline gate (`dcp if isinstance(spec, C) else 1`), an
enclosing `if spec.dcp_sharded:` around `block_size *= dcp`, a factor set on an earlier line or by the
callers (kvlint.analysis.dcp_factor) — and compared with the reference's factor. Kinds are narrowed first by
what the function already established about the spec (`assert isinstance(spec, SlidingWindowSpec)`, an
`if isinstance(spec, MambaSpec): return` above, the branch the site sits in), and by which kinds its value
serves (kvlint.analysis.value_uses: a group index an `isinstance` test chose, a name only some branches read). Containers count where the
spec may be one: a group's spec outside scheduler-only code (proven), or a spec of unknown origin
(possible, never a counterexample on its own).

The outcome is plain data; KV102 words it and picks the severity.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import libcst as cst

from kvlint.analysis.cst_walk import preorder
from kvlint.analysis.dcp_factor import CALLERS, GATED, HANDED, ONE, PLAIN, FactorOrigins, Origin
from kvlint.analysis.flow.cst_bindings import statement_places
from kvlint.analysis.flow.provenance import Kind, SpecFlow, dotted
from kvlint.analysis.kind_table import KindRow
from kvlint.analysis.kind_tests import answer, tested_spec
from kvlint.analysis.scaling import Scaling, is_dcp_size
from kvlint.analysis.sizing.handing import HANDED as HANDED_PARAMETER
from kvlint.analysis.tree_index import TreeIndex
from kvlint.analysis.value_uses import index_tests, use_test
from kvlint.analysis.vocabulary import sees_only_scheduler_config

DIFFERS = "differs"  # a kind that reaches the site, that vLLM accepts under DCP, gets another factor
REJECTED_ONLY = "rejected-only"  # … only kinds the tree itself rejects under DCP
AGREES = "agrees"  # every kind that reaches the site gets the reference's factor
UNSETTLED = "unsettled"  # what decides it is not known here (the callers, a possible container, …)

_EXITS = (cst.Return, cst.Raise, cst.Continue, cst.Break)


@dataclass(frozen=True)
class Verdict:
    outcome: str
    reference: str  # the rule compared with, as a message names it
    how: str  # how the site decides its factor, in words
    counterexample: KindRow | None = None  # DIFFERS / REJECTED_ONLY, or the would-be one of UNSETTLED
    factor: str = "?"  # the site's factor for the counterexample ("dcp", "1")
    also: tuple[str, ...] = ()  # the other kinds that differ
    unsettled: str = ""  # why it is open (UNSETTLED), or what the agreement assumes (AGREES)
    if_so: str = ""  # UNSETTLED with a would-be counterexample: the condition under which it is one
    # `resolve_dcp_kv_block_size(spec, dcp)` in its place gives the same for every plain kind that reaches it.
    rewrite_keeps_plain_kinds: bool = False


@dataclass(frozen=True)
class _Context:
    gates: tuple[cst.BaseExpression, ...]  # tests the scaling applies under (inline gate first)
    inline: int  # how many of `gates` the rewrite removes (the inline gate)
    narrowing: tuple[cst.BaseExpression, ...]  # tests known to hold for the spec where the site runs


def judge(scaling: Scaling, flow: SpecFlow, project: TreeIndex, module_path: str, patterns, aliases) -> Verdict | None:
    """The verdict for one scaling site; None when the tree has no rule to compare with."""
    table = project.kind_table()
    if table is None:
        return None
    hierarchy = project.hierarchy
    operand = _handed(FactorOrigins(flow, aliases).origin(scaling.dcp), table, module_path)
    context = _context(scaling, flow, aliases)
    containers = _containers_in_view(scaling, flow, module_path, patterns)
    # A kind refused on this code's path (a Mamba group alone under the unitary coordinator) is refused here.
    classes = flow.enclosing_class_names(scaling.node)
    rows = [replace(r, rejected_under_dcp=r.refused_on(classes)) for r in table.rows]
    rows = [r for r in rows if not r.is_container or containers != "none"]
    rows = [r for r in rows if all(answer(t, r, hierarchy, aliases) is not False for t in context.narrowing)]

    def factor(row: KindRow, origin: Origin) -> str:
        return _gated(context.gates, row, _base(origin, row, hierarchy, aliases), hierarchy, aliases)

    how = _how(scaling, operand, context)
    # A parameter named for the DCP size that the site itself gates per kind is that size; one it applies
    # to every kind may already be per kind, chosen by callers this module does not hold.
    gated_here = any(tested_spec(t) is not None for t in context.gates)
    settled = operand.kind in (PLAIN, ONE, GATED, HANDED) or (operand.kind == CALLERS and gated_here)
    assumed = operand if operand.kind in (PLAIN, ONE, GATED, HANDED) else Origin(PLAIN)
    factors = {row.label: factor(row, assumed) for row in rows}
    differing = [r for r in rows if "?" not in (factors[r.label], r.reference) and factors[r.label] != r.reference]
    safe = _rewrite_keeps_plain_kinds(rows, operand, context, hierarchy, aliases)
    # A resolver reading `dcp_sharded` follows an instance's flag, which the tree clears on some: only code
    # that follows the same flag keeps every plain spec's span.
    safe = safe and not (project.dcp_sharded_cleared_at and not _follows_the_flag(context, operand))
    built = project.containers.built_members if project.containers is not None else None

    def order(row: KindRow) -> tuple:
        return (
            row.rejected_under_dcp is not None,
            not row.is_container,
            built is not None and row.layers[0] not in built,
        )

    differing.sort(key=order)
    proven = [r for r in differing if settled and (not r.is_container or containers == "proven")]
    common = {"reference": table.reference, "how": how, "rewrite_keeps_plain_kinds": safe}
    if proven:
        first = proven[0]
        outcome = DIFFERS if first.rejected_under_dcp is None else REJECTED_ONLY
        also = tuple(r.label for r in proven[1:] if outcome == REJECTED_ONLY or r.rejected_under_dcp is None)
        return Verdict(outcome, counterexample=first, factor=factors[first.label], also=also, **common)
    # A kind vLLM refuses under DCP is no counterexample, however the open question is answered.
    accepted = [r for r in differing if r.rejected_under_dcp is None]
    if accepted or operand.kind not in (PLAIN, ONE, GATED, CALLERS, HANDED):
        first = accepted[0] if accepted else None
        if settled:
            why = f"`{dotted(scaling.spec)}` may be a container: its origin is not known here"
            if_so = f"`{dotted(scaling.spec)}` is one"
        else:
            why = operand.where or f"`{_code(scaling.dcp)}` is neither known to be the DCP size nor a per-kind factor"
            if_so = f"`{_code(scaling.dcp)}` is the plain DCP size"
        factor_of_first = factors[first.label] if first is not None else "?"
        return Verdict(UNSETTLED, counterexample=first, factor=factor_of_first, unsettled=why, if_so=if_so, **common)
    unknown = [r.label for r in rows if "?" in (factors[r.label], r.reference) and r.rejected_under_dcp is None]
    if unknown or not rows:
        return Verdict(
            UNSETTLED,
            unsettled=f"its factor for {', '.join(unknown[:3]) or 'any kind'} is not known statically",
            **common,
        )
    return Verdict(AGREES, unsettled="" if settled else f"`{_code(scaling.dcp)}`", **common)


def _follows_the_flag(context: _Context, operand: Origin) -> bool:
    """Whether the factor is decided by the spec's `dcp_sharded` (an enclosing test, its gate, the origin of
    its DCP size: `self.dcp_world_size = dcp_world_size if spec.dcp_sharded else 1`)."""
    tests = (*context.gates, *operand.tests)
    return any(isinstance(n, cst.Attribute) and n.attr.value == "dcp_sharded" for t in tests for n in preorder(t))


def _handed(operand: Origin, table, module_path: str) -> Origin:
    """A manager constructor's DCP-size parameter, which the coordinator hands each manager (vLLM 0.29.0:
    `dcp_world_size_for_kv_cache_spec(spec, dcp)`, 1 for Mamba): per kind, what it hands."""
    if not (operand.kind == CALLERS and table.handed_at and module_path == table.manager_module):
        return operand
    function, parameter = operand.callers_of or ("", "")
    if function != "__init__" or parameter != HANDED_PARAMETER:
        return operand
    where = f"`{parameter}` is what the coordinator hands each manager for its kind ({table.handed_at})"
    return Origin(HANDED, where=where)


def _base(origin: Origin, row: KindRow, hierarchy, aliases) -> str:
    if origin.kind == HANDED:
        return row.handed or "?"
    if origin.kind == PLAIN:
        return "dcp"
    if origin.kind == ONE:
        return "1"
    if origin.kind == GATED:
        return _gated(origin.tests, row, "dcp", hierarchy, aliases)
    return "?"


def _gated(tests, row: KindRow, then: str, hierarchy, aliases) -> str:
    answers = [answer(t, row, hierarchy, aliases) for t in tests]
    if False in answers:
        return "1"
    return then if all(a is True for a in answers) else "?"


def _rewrite_keeps_plain_kinds(rows, operand: Origin, context: _Context, hierarchy, aliases) -> bool:
    """`resolve_dcp_kv_block_size(S, D)` for the product: the inline gate goes, D stays, enclosing gates stay.
    The same factor for every plain kind reaching it means only containers change (the intended fix)."""
    kept = context.gates[context.inline :]
    plain = [r for r in rows if not r.is_container]
    for row in plain:
        outer = [answer(t, row, hierarchy, aliases) for t in kept]
        if False in outer:
            continue  # both give the unscaled size there
        if None in outer or row.reference == "?":
            return False
        inline = [answer(t, row, hierarchy, aliases) for t in context.gates[: context.inline]]
        if None in inline:
            return False
        applies = False not in inline
        if operand.kind in (PLAIN, ONE, GATED, HANDED):
            given = _base(operand, row, hierarchy, aliases)
            if given == "?":
                return False
            before = given if applies else "1"
            after = given if row.reference == "dcp" else "1"
            if before != after:
                return False
        elif not (applies and row.reference == "dcp" or not applies and row.reference == "1"):
            return False  # the callers' size passes through unchanged only where both scale or neither does
    return bool(plain)


def _containers_in_view(scaling: Scaling, flow: SpecFlow, module_path: str, patterns) -> str:
    """ "proven": the spec is a group's, seen unflattened; "possible": its origin is unknown; "none"."""
    if sees_only_scheduler_config(module_path, flow.enclosing_class_names(scaling.node), patterns):
        return "none"
    kind = flow.classify(scaling.spec).kind if scaling.spec is not None else Kind.UNKNOWN
    return {Kind.GROUP_SPEC: "proven", Kind.UNKNOWN: "possible"}.get(kind, "none")


def _context(scaling: Scaling, flow: SpecFlow, aliases) -> _Context:
    """The tests the scaling runs under, from the site up to its function."""
    spec = dotted(scaling.spec) if scaling.spec is not None else None
    unscaled = f"{spec}.block_size" if spec else None
    gates = [scaling.gate.test] if scaling.gate is not None else []
    narrowing: list[cst.BaseExpression] = []
    augmented = isinstance(scaling.node, cst.AugAssign)

    def about_spec(test: cst.BaseExpression) -> bool:
        subject = tested_spec(test)
        return spec is not None and subject is not None and dotted(subject) == spec

    child, current = scaling.node, flow.parent(scaling.node)
    while current is not None and not isinstance(current, (cst.FunctionDef, cst.Module)):
        for test, holds in _tests_on_path(current, child, flow):
            condition = test if holds else cst.UnaryOperation(cst.Not(), test)
            other = current.orelse if isinstance(current, cst.IfExp) and holds else None
            gate = augmented and isinstance(current, cst.If)
            gate = gate or (other is not None and dotted(other) == unscaled)
            if gate and (about_spec(test) or _on_dcp_only(test, aliases)):
                gates.append(condition)
            elif about_spec(test):
                narrowing.append(condition)
        child, current = current, flow.parent(current)
    # The kinds the site's value serves: a group index an isinstance test chose, a name only some branches read.
    narrowing.extend(index_tests(scaling.spec, flow.enclosing_function(scaling.node), flow.remembered))
    used = use_test(scaling.node, flow.parent, flow.remembered)
    if used is not None:
        narrowing.append(used)
    return _Context(tuple(gates), 1 if scaling.gate is not None else 0, tuple(narrowing))


def _on_dcp_only(test: cst.BaseExpression, aliases) -> bool:
    return isinstance(test, cst.Comparison) and any(
        is_dcp_size(side, aliases) for side in (test.left, *(c.comparator for c in test.comparisons))
    )


def _tests_on_path(node: cst.CSTNode, child: cst.CSTNode, flow: SpecFlow):
    """(test, whether it holds) that `node` establishes for code in `child`."""
    if isinstance(node, (cst.If, cst.IfExp)) and child is not node.test:
        yield node.test, child is node.body
    elif isinstance(node, cst.IndentedBlock):
        # Read once per block, not once per site in it: a block of many sites would cost their square.
        before = flow.remembered("statement places", node, statement_places).get(id(child), len(node.body))
        for place, test, holds in flow.remembered("tests established in a block", node, _established_in):
            if place >= before:
                return
            yield test, holds


def _established_in(block: cst.IndentedBlock) -> list[tuple[int, cst.BaseExpression, bool]]:
    """(place, test, whether it holds) for what each statement of the block establishes, in order."""
    return [(place, *found) for place, statement in enumerate(block.body) for found in _established_by(statement)]


def _established_by(statement: cst.BaseStatement):
    """What holds after a statement: `assert T`; `if T: <exit>` without else (T is False after it)."""
    if isinstance(statement, cst.SimpleStatementLine):
        for small in statement.body:
            if isinstance(small, cst.Assert):
                yield small.test, True
    elif isinstance(statement, cst.If) and statement.orelse is None and _always_exits(statement.body):
        yield statement.test, False


def _always_exits(body: cst.BaseSuite) -> bool:
    last = body.body[-1] if body.body else None
    if isinstance(last, cst.SimpleStatementLine):
        last = last.body[-1] if last.body else None
    return isinstance(last, _EXITS)


def _how(scaling: Scaling, operand: Origin, context: _Context) -> str:
    """What decides the factor, as a noun phrase: "its `spec.dcp_sharded` gate", "`x` = `dcp if … else 1`"."""
    parts = []
    if scaling.gate is not None:
        parts.append(f"its `{_code(scaling.gate.test)}` gate")
    if operand.kind in (GATED, HANDED) and operand.where:
        parts.append(operand.where)
    enclosing = context.gates[context.inline :]
    if enclosing:
        parts.append(" and ".join(f"`if {_code(t)}`" for t in enclosing))
    if parts:
        return ", ".join(parts)
    if operand.kind == PLAIN:
        return "no gate: the DCP size for every kind"
    return f"`{_code(scaling.dcp)}` for every kind"


def _code(node: cst.CSTNode) -> str:
    return " ".join(cst.Module([]).code_for_node(node).split())
