"""Which bindings of a name reach a point of a function: reaching definitions over its statements.

Provenance asks what a name holds where it is read, not everything the function ever assigns to it:
after `spec = _unwrap_spec(spec)` the name holds a layer spec, and a one-off `iter_layer_specs(spec)`
two lines up changes nothing about `spec` itself. Each statement (a small statement, or a compound
statement's header) is mapped to the bindings live before it. Straight-line code, if/elif/else, loops
(two passes: a binding at the end of the body reaches its start), break/continue, try/except/else/finally,
with, and early exits (return, raise) are followed.

Container narrowing rides on the same walk: on the branch where `isinstance(X, UniformTypeKVCacheSpecs)`
is False (the else of an if, after `if isinstance(X, …): return`, after `assert not isinstance(X, …)`),
X is known not to be a container. For a name that replaces its bindings with a NOT_CONTAINER marker;
for an attribute chain (`group.kv_cache_spec`) a fact kept under its dotted text until its root is
rebound.

A function using what the walk does not model (match, global/nonlocal) has no map: readers fall back to
every binding of the name in the function. So does one whose walk would cost more than `MAX_STATE_ENTRIES`:
each binding copies the state and each join merges states, so the walk costs statements × live names — a
crafted function of thousands of loops, each binding a name of its own, would take minutes and gigabytes.
vLLM's costliest function reads ~11,000 entries; the bound is a hundred times that, counted, not timed, so
the same file gets the same answer on every machine.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Sequence

import libcst as cst

from kvlint.analysis.cst_walk import walk
from kvlint.analysis.flow.cst_bindings import Binding, call_name, dotted, target_names
from kvlint.analysis.vocabulary import CONTAINER_CLASS

# name or dotted chain → the bindings live there; None: the point cannot be reached.
State = dict[str, tuple[Binding, ...]]

_SCOPES = (cst.FunctionDef, cst.Lambda, cst.ClassDef)
# Loops nested deeper than this are walked once (each level doubles the work).
_MAX_LOOP_PASSES_DEPTH = 4
# The state entries one function's walk may copy and merge before it is given no map (see the module's doc).
MAX_STATE_ENTRIES = 1_000_000


class _Unsupported(Exception):
    """A statement the walk does not model: the function gets no map."""


def container_facts(test: cst.BaseExpression) -> tuple[set[str], set[str]]:
    """(what is known not to be a container when `test` is True, … when it is False), as dotted texts."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        when_true, when_false = container_facts(test.expression)
        return when_false, when_true
    if isinstance(test, cst.BooleanOperation):
        left, right = container_facts(test.left), container_facts(test.right)
        if isinstance(test.operator, cst.And):
            return left[0] | right[0], set()
        return set(), left[1] | right[1]
    if call_name(test) == "isinstance" and isinstance(test, cst.Call) and len(test.args) == 2:
        classes = cst.Module([]).code_for_node(test.args[1].value)
        subject = dotted(test.args[0].value)
        if CONTAINER_CLASS in classes and "…" not in subject:
            return set(), {subject}
    return set(), set()


class ReachingDefinitions:
    """The bindings live before each statement of one function (see the module docstring)."""

    def __init__(
        self,
        function: cst.FunctionDef,
        parameters: dict[str, list[Binding]],
        walrus_holders: Container[cst.CSTNode] | None = None,
    ):
        self.function = function
        # The nodes with a `:=` at or under them (None: unknown, every expression is searched): the walk
        # searches each expression it passes for one, every pass of every loop around it.
        self._walrus_holders = walrus_holders
        self.points: dict[cst.CSTNode, State | None] = {}
        self._bindings: dict[tuple[int, str], Binding] = {}
        # Per enclosing loop: (states at its breaks, states at its continues).
        self._loops: list[tuple[list[State | None], list[State | None]]] = []
        self._collectors: list[list[State | None]] = []
        self._spent = 0  # state entries copied and merged so far (MAX_STATE_ENTRIES)
        self.supported = True
        try:
            self._suite(function.body, {name: tuple(found) for name, found in parameters.items()})
        except _Unsupported:
            self.supported = False
            self.points.clear()

    # -- queries ---------------------------------------------------------------------------------------

    def state_at(self, node: cst.CSTNode, parent_of) -> State | None | bool:
        """The state before the statement holding `node`; False when there is none (read in a nested
        scope, in unreachable code, or the function is not modelled)."""
        if not self.supported:
            return False
        current = node
        while current is not None and current is not self.function:
            if isinstance(current, _SCOPES) and current is not node:
                return False  # a closure runs later: what reaches it is not what reaches its definition
            if current in self.points:
                return self.points[current]
            current = parent_of(current)
        return False

    # -- the walk -------------------------------------------------------------------------------------

    def _record(self, node: cst.CSTNode, state: State | None) -> None:
        self.points[node] = state
        for collector in self._collectors:
            collector.append(state)

    def _binding(self, source: cst.CSTNode, name: str, **fields) -> Binding:
        key = (id(source), name)
        if key not in self._bindings:
            self._bindings[key] = Binding(**fields)
        return self._bindings[key]

    def _spend(self, entries: int) -> None:
        self._spent += entries
        if self._spent > MAX_STATE_ENTRIES:
            raise _Unsupported(f"over {MAX_STATE_ENTRIES:,} state entries")

    def _merge(self, *states: State | None) -> State | None:
        self._spend(sum(len(state) for state in states if state is not None))
        return merge(*states)

    def _narrow(self, state: State | None, subjects: Iterable[str]) -> State | None:
        subjects = list(subjects)
        if state is not None and subjects:
            self._spend(len(state))
        return _narrow(state, subjects)

    def _bind(self, state: State, target: cst.BaseExpression, value, is_loop: bool, source: cst.CSTNode) -> State:
        self._spend(len(state))
        state = dict(state)
        for name, path in target_names(target):
            state[name] = (self._binding(source, name, value=value, path=path, is_loop=is_loop),)
            _forget_facts(state, name)
        if isinstance(target, (cst.Attribute, cst.Subscript)):
            _forget_facts(state, dotted(target))
        return state

    def _suite(self, body: cst.BaseSuite, state: State | None) -> State | None:
        if isinstance(body, cst.SimpleStatementSuite):
            return self._smalls(body.body, state)
        return self._block(body.body, state)

    def _block(self, statements: Sequence[cst.BaseStatement], state: State | None) -> State | None:
        for statement in statements:
            if state is None:
                return None  # the rest is unreachable: it gets no point
            state = self._statement(statement, state)
        return state

    def _smalls(self, statements: Sequence[cst.BaseSmallStatement], state: State | None) -> State | None:
        for small in statements:
            if state is None:
                return None
            self._record(small, state)
            state = self._small(small, state)
        return state

    def _statement(self, node: cst.BaseStatement, state: State) -> State | None:
        if isinstance(node, cst.SimpleStatementLine):
            return self._smalls(node.body, state)
        if isinstance(node, cst.If):
            return self._if(node, state)
        if isinstance(node, cst.For):
            return self._for(node, state)
        if isinstance(node, cst.While):
            return self._while(node, state)
        if isinstance(node, (cst.Try, cst.TryStar)):
            return self._try(node, state)
        if isinstance(node, cst.With):
            self._record(node, state)
            for item in node.items:
                state = self._walrus(item.item, state)
                if item.asname is not None:
                    state = self._bind(state, item.asname.name, None, False, item)
            return self._suite(node.body, state)
        if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            self._record(node, state)
            return self._bind(state, node.name, None, False, node)
        raise _Unsupported(type(node).__name__)

    def _small(self, node: cst.BaseSmallStatement, state: State) -> State | None:
        if isinstance(node, (cst.Return, cst.Raise)):
            return None
        if isinstance(node, (cst.Continue, cst.Break)):
            if not self._loops:
                raise _Unsupported("break outside a loop")
            self._loops[-1][isinstance(node, cst.Continue)].append(state)
            return None
        if isinstance(node, cst.Assert):
            state = self._walrus(node.test, state)
            return self._narrow(state, container_facts(node.test)[0])
        if isinstance(node, cst.Expr):
            return self._walrus(node.value, state)
        if isinstance(node, (cst.Global, cst.Nonlocal)):
            raise _Unsupported(type(node).__name__)
        return self._binding_statement(node, state)

    def _binding_statement(self, node: cst.BaseSmallStatement, state: State) -> State:
        if isinstance(node, cst.Assign):
            state = self._walrus(node.value, state)
            for target in node.targets:
                state = self._bind(state, target.target, node.value, False, target)
            return state
        if isinstance(node, cst.AnnAssign):
            if node.value is None:
                return state  # a declaration binds nothing
            return self._bind(self._walrus(node.value, state), node.target, node.value, False, node)
        if isinstance(node, cst.AugAssign):
            return self._bind(self._walrus(node.value, state), node.target, None, False, node)
        if isinstance(node, cst.Del):
            self._spend(len(state))
            return {k: v for k, v in state.items() if k not in {n for n, _ in target_names(node.target)}}
        if isinstance(node, (cst.Import, cst.ImportFrom)):
            names = () if isinstance(node.names, cst.ImportStar) else node.names
            for alias in names:
                bound = alias.asname.name if alias.asname else alias.name
                if isinstance(bound, cst.Name):
                    state = self._bind(state, bound, None, False, alias)
        return state  # pass

    def _if(self, node: cst.If, state: State) -> State | None:
        self._record(node, state)
        state = self._walrus(node.test, state)
        when_true, when_false = container_facts(node.test)
        body = self._suite(node.body, self._narrow(state, when_true))
        other = self._narrow(state, when_false)
        if isinstance(node.orelse, cst.If):
            other = self._if(node.orelse, other)
        elif isinstance(node.orelse, cst.Else):
            other = self._suite(node.orelse.body, other)
        return self._merge(body, other)

    def _loop(self, node: cst.For | cst.While, before: State, enter) -> tuple[State | None, list]:
        """Walk a loop body twice (once when nested deep); (the state at the loop head, the breaks)."""
        head: State | None = before
        breaks: list[State | None] = []
        passes = 2 if len(self._loops) < _MAX_LOOP_PASSES_DEPTH else 1
        for _ in range(passes):
            breaks, continues = [], []
            self._loops.append((breaks, continues))
            end = self._suite(node.body, enter(head))
            self._loops.pop()
            head = self._merge(before, end, *continues)
        return head, breaks

    def _for(self, node: cst.For, state: State) -> State | None:
        self._record(node, state)
        state = self._walrus(node.iter, state)
        head, breaks = self._loop(
            node, state, lambda head: None if head is None else self._bind(head, node.target, node.iter, True, node)
        )
        after = head
        if node.orelse is not None:
            after = self._suite(node.orelse.body, head)
        return self._merge(after, *breaks)

    def _while(self, node: cst.While, state: State) -> State | None:
        when_true, when_false = container_facts(node.test)

        def enter(head: State | None) -> State | None:
            if head is None:
                return None
            self._record(node, head)  # the test runs at every head: its last record is the merged one
            return self._narrow(self._walrus(node.test, head), when_true)

        head, breaks = self._loop(node, state, enter)
        after = self._narrow(head, when_false) if head is not None else None
        if node.orelse is not None:
            after = self._suite(node.orelse.body, after)
        return self._merge(after, *breaks)

    def _try(self, node: cst.Try | cst.TryStar, state: State) -> State | None:
        seen: list[State | None] = []
        self._collectors.append(seen)
        end = self._suite(node.body, state)
        self._collectors.pop()
        # A handler may start after any statement of the body: whatever any of them saw reaches it.
        handler_in = self._merge(state, end, *seen)
        ends = []
        for handler in node.handlers:
            self._record(handler, handler_in)
            entry = handler_in
            if handler.name is not None and entry is not None:
                entry = self._bind(entry, handler.name.name, None, False, handler)
            ends.append(self._suite(handler.body, entry))
        if node.orelse is not None:
            end = self._suite(node.orelse.body, end)
        normal = self._merge(end, *ends)
        if node.finalbody is None:
            return normal
        final = self._suite(node.finalbody.body, self._merge(normal, handler_in))
        return final if normal is not None else None

    def _walrus(self, expression: cst.CSTNode, state: State) -> State:
        if self._walrus_holders is not None and expression not in self._walrus_holders:
            return state
        finder = _WalrusFinder()
        walk(expression, finder)
        for named in finder.found:
            state = self._bind(state, named.target, named.value, False, named)
        return state


def merge(*states: State | None) -> State | None:
    """The state after paths meet: every binding any path brings; a container fact only if all agree."""
    live = [s for s in states if s is not None]
    if not live:
        return None
    if len(live) == 1:
        return live[0]
    merged: State = {}
    # Per key: the identities of its merged bindings, built only once a second, different tuple arrives
    # (most keys carry the same tuple object down every path: nothing to add).
    seen: dict[str, set[int]] = {}
    for state in live:
        for key, bindings in state.items():
            known = merged.get(key)
            if known is None:
                if "." not in key:
                    merged[key] = bindings
                continue
            if bindings is known:
                continue
            ids = seen.get(key)
            if ids is None:
                ids = seen[key] = {id(b) for b in known}
            added = tuple(b for b in bindings if id(b) not in ids)
            if added:
                ids.update(id(b) for b in added)
                merged[key] = known + added
    for key, bindings in live[0].items():
        if "." in key and all(key in s for s in live[1:]):
            merged[key] = bindings
    return merged


NOT_CONTAINER = Binding(value=None, path=(), is_loop=False, narrowed=True)


def _narrow(state: State | None, subjects: Iterable[str]) -> State | None:
    if state is None:
        return None
    subjects = list(subjects)
    if not subjects:
        return state
    state = dict(state)
    for subject in subjects:
        state[subject] = (NOT_CONTAINER,)
    return state


def _forget_facts(state: State, root: str) -> None:
    """A rebound name or attribute invalidates what was known about chains through it."""
    for key in [k for k in state if k.startswith(root + ".")]:
        del state[key]


class _WalrusFinder(cst.CSTVisitor):
    def __init__(self) -> None:
        self.found: list[cst.NamedExpr] = []

    def visit_Lambda(self, node: cst.Lambda) -> bool:
        return False

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        self.found.append(node)
