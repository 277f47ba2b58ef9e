"""Who consumes a value a group-spec check computes, when the code runs for both roles.

A connector is built for the scheduler (its config flattened: no container) and for each worker (its config
as planned: containers). A check in code both run answers a container differently only on the worker side.
That difference changes an outcome only if the worker side uses it:
- a value stored on the connector (`self._pulls_mamba_state = any(isinstance(g.kv_cache_spec, MambaSpec)
  …)`) and read only through a member that only scheduler-side code reads (`supports_divergent_local_hybrid_
  hits`, read by the scheduler): the worker's answer is never consumed;
- a validation (`if isinstance(spec, MambaSpec) and …: unsupported.append(…)` then `raise`) that the
  scheduler half runs too, on the flattened config, where each layer answers: a configuration the worker
  would let through fails on the scheduler side anyway, so the outcome (the engine refuses it) is the same.

`scheduler_consumed_members` runs once per tree index over the modules that mention a connector: the
members whose every read is in scheduler-only code (or in a member of the same name, which delegates).
`unconsumed_divergence` answers for one check, in one module, with libcst.
"""

from __future__ import annotations

import re
from bisect import bisect_left

import libcst as cst

from kvlint.analysis.census.class_texts import classes_of
from kvlint.analysis.cst_walk import preorder
from kvlint.analysis.flow.provenance import call_name, dotted
from kvlint.analysis.vocabulary import sees_only_scheduler_config

_ACCESSOR = re.compile(r"^\s*(?:async\s+)?def\s+\w+\(self\)")
# The returned expression: its line's first to last non-space character (a lazy `(.+?)\s*$` was quadratic in a
# crafted line's spaces).
_RETURNS = re.compile(r"^\s*return\s+(\S(?:.*\S)?)", re.MULTILINE)
_READS_SELF = re.compile(r"\bself\.\w+")
_CLASS_LINE = re.compile(rb"^([ \t]*)class[ \t]+(\w+)", re.MULTILINE)
_DEF_LINE = re.compile(rb"^[ \t]*def[ \t]+(\w+)", re.MULTILINE)
_LEADING_BLANKS = re.compile(rb"[ \t\r\x0b\x0c]*")  # what `bytes.lstrip` strips, short of the line's end


def scheduler_consumed_members(texts: dict[str, bytes], patterns: tuple[str, ...]) -> frozenset[str]:
    """Accessors of connector modules (`def m(self): return <an expression of self.…>`) that only scheduler-side
    code reads."""
    accessors: set[str] = set()
    for relative, data in texts.items():
        if "/kv_connector/" in relative:
            for cls in classes_of(relative, data):
                for name, method in cls.methods.items():
                    returns = _RETURNS.findall(method)
                    # One `return` reading the instance (`return self._x`, or moriio's `return self.mode == …
                    # and self._transfers_mamba_state`): who reads the accessor consumes what it reads.
                    if _ACCESSOR.match(method) and len(returns) == 1 and _READS_SELF.search(returns[0]):
                        accessors.add(name)
    if not accessors:
        return frozenset()
    reads = re.compile(rb"\.(" + b"|".join(re.escape(name.encode()) for name in sorted(accessors)) + rb")\b")
    worker_read: set[str] = set()
    for relative, data in texts.items():
        outline = None  # the file's class and def lines, read once (not once per read: quadratic in a PR's file)
        for match in reads.finditer(data):
            name = match.group(1).decode()
            if name in worker_read:
                continue
            outline = outline or _Outline(data)
            scope = outline.enclosing(match.start())
            if scope["def"] == name:
                continue  # a member of the same name delegating to it: the same consumer
            if not sees_only_scheduler_config(relative, scope["classes"], patterns):
                worker_read.add(name)
    return frozenset(accessors - worker_read)


class _Outline:
    """A file's `class` lines (offset, indent, name) and `def` lines (offset, name), each found once, asked about
    offsets in ascending order (a pattern's matches): the classes open at each line are kept on a stack as the lines
    pass, and each line's start and indent are read once (a slice of the classes above each read, and a search back
    to its line's start, were quadratic in a crafted file's classes and in a long line's reads)."""

    def __init__(self, data: bytes):
        self.data = data
        self.classes = [(m.start(), len(m.group(1)), m.group(2).decode()) for m in _CLASS_LINE.finditer(data)]
        self.defs = [(m.start(), m.group(1).decode()) for m in _DEF_LINE.finditer(data)]
        self._passed = 0  # classes whose line starts before the current line
        # The classes that may enclose the current line: each indented deeper than every one before it on the stack.
        self._open_indents: list[int] = []
        self._open_names: list[str] = []
        self._asked = 0  # the last offset asked about
        self._line_start = 0
        self._blank_end = _LEADING_BLANKS.match(data).end()  # where the current line's leading blanks end

    def enclosing(self, offset: int) -> dict:
        """The innermost def and the classes around `offset`, by indentation of the lines above it."""
        if offset < self._asked:
            raise ValueError("an outline is asked about offsets in ascending order")
        newline = self.data.rfind(b"\n", self._asked, offset)
        self._asked = offset
        if newline >= 0:
            self._line_start = newline + 1
            self._blank_end = _LEADING_BLANKS.match(self.data, self._line_start).end()
        line_start = self._line_start
        while self._passed < len(self.classes) and self.classes[self._passed][0] < line_start:
            _, class_indent, name = self.classes[self._passed]
            while self._open_indents and self._open_indents[-1] >= class_indent:
                self._open_indents.pop()
                self._open_names.pop()
            self._open_indents.append(class_indent)
            self._open_names.append(name)
            self._passed += 1
        indent = min(self._blank_end, offset) - line_start  # as the line's text before `offset` is indented
        # Innermost first: the nearest class above indented less than the line, then the nearest one indented less
        # than that, to the margin.
        classes = self._open_names[: bisect_left(self._open_indents, indent)][::-1]
        before = bisect_left(self.defs, (line_start,))
        return {"classes": classes, "def": self.defs[before - 1][1] if before else None}


# ------------------------------------------------------------------------------------------ one check


def unconsumed_divergence(node: cst.CSTNode, flow, scheduler_consumed: frozenset[str]) -> str | None:
    """Why the worker side's answer for a container changes no outcome here; None when it may."""
    function = flow.enclosing_function(node)
    if function is None:
        return None
    stored = _stored_attribute(node, flow)
    if stored is not None and _both_roles(function, flow):
        readers = _readers(flow, stored)
        if readers and all(reader in scheduler_consumed for reader in readers):
            return (
                f"`self.{stored}` is read only through `{', '.join(sorted(readers))}`, which only the scheduler reads"
            )
    if _is_validation(node, function, flow) and _called_for_both_roles(function, flow):
        return f"`{function.name.value}` validates for both roles: the scheduler half raises on the flattened config"
    return None


def _stored_attribute(node: cst.CSTNode, flow) -> str | None:
    current = flow.parent(node)
    while current is not None and not isinstance(current, (cst.Assign, cst.BaseSmallStatement, cst.FunctionDef)):
        current = flow.parent(current)
    if isinstance(current, cst.Assign) and len(current.targets) == 1:
        target = current.targets[0].target
        if isinstance(target, cst.Attribute) and dotted(target.value) == "self":
            return target.attr.value
    return None


def _both_roles(function: cst.FunctionDef, flow) -> bool:
    """An `__init__` taking the connector's role, in a class that is not one half."""
    names = [param.name.value for param in function.params.params]
    classes = flow.enclosing_class_names(function)
    return (
        function.name.value == "__init__"
        and "role" in names
        and not any(name.endswith(("Scheduler", "Worker")) for name in classes[:1])
    )


def _readers(flow, attribute: str) -> set[str]:
    """The methods (other than `__init__`) that read `self.<attribute>`; {"?"} for a read outside any."""
    readers: set[str] = set()
    for node in flow.nodes:
        if isinstance(node, cst.Attribute) and node.attr.value == attribute and dotted(node.value) == "self":
            parent = flow.parent(node)
            if isinstance(parent, cst.AssignTarget):
                continue
            function = flow.enclosing_function(node)
            readers.add(function.name.value if function is not None else "?")
    readers.discard("__init__")
    return readers


def _is_validation(node: cst.CSTNode, function: cst.FunctionDef, flow) -> bool:
    """The check (or an `and` holding it) is an `if` test whose body only reports a problem: a `raise`, or an
    append to a list the function raises on when it is not empty."""
    test = node
    while isinstance(flow.parent(test), cst.BooleanOperation):
        test = flow.parent(test)
    statement = flow.parent(test)
    if not isinstance(statement, cst.If) or statement.test is not test or statement.orelse is not None:
        return False
    lists = set()
    for line in statement.body.body:
        if not isinstance(line, cst.SimpleStatementLine):
            return False
        for small in line.body:
            if isinstance(small, cst.Raise):
                continue
            call = small.value if isinstance(small, cst.Expr) else None
            if isinstance(call, cst.Call) and call_name(call) == "append" and isinstance(call.func, cst.Attribute):
                lists.add(dotted(call.func.value))
                continue
            return False
    if not lists:
        return True
    return not lists.isdisjoint(flow.remembered("raising tests", function, _raising_tests))


def _raising_tests(function: cst.FunctionDef) -> frozenset[str]:
    """The tests of the function's `if`s whose body raises (read once per function: flow.remembered)."""
    return frozenset(
        dotted(node.test)
        for node in preorder(function)
        if isinstance(node, cst.If)
        and any(
            isinstance(small, cst.Raise)
            for line in node.body.body
            if isinstance(line, cst.SimpleStatementLine)
            for small in line.body
        )
    )


def _called_for_both_roles(function: cst.FunctionDef, flow) -> bool:
    """Every call of the function in this module is in a both-roles `__init__`, outside a branch on the role."""
    calls = [
        node
        for node in flow.nodes
        if isinstance(node, cst.Call) and call_name(node) == function.name.value and node is not function
    ]
    if not calls:
        return False
    for call in calls:
        caller = flow.enclosing_function(call)
        if caller is None or not _both_roles(caller, flow):
            return False
        branch = flow.enclosing(call, (cst.If,))
        while branch is not None:
            if "role" in flow.module.code_for_node(branch.test):
                return False
            branch = flow.enclosing(branch, (cst.If,))
    return True
