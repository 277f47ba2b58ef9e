"""The mutants scripts/mutation.py makes of a module: where each mutation operator applies, and the whole
mutated source, with every line kept in place (coverage's line numbers must still name the mutated code)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from mutation_equivalent import EQUIVALENT


@dataclass(frozen=True)
class Mutant:
    module: str  # relative to the checkout
    line: int
    end_line: int
    operator: str  # what was changed, e.g. "and -> or"
    source: str  # the whole mutated module


def _span(node: ast.AST) -> tuple[int, int, int, int]:
    return node.lineno, node.col_offset, node.end_lineno, node.end_col_offset


class _Finder(ast.NodeVisitor):
    """Every place a mutation operator applies: (node, replacement expression text, operator name)."""

    FLIPS = {
        ast.Eq: ast.NotEq,
        ast.NotEq: ast.Eq,
        ast.Lt: ast.LtE,
        ast.LtE: ast.Lt,
        ast.Gt: ast.GtE,
        ast.GtE: ast.Gt,
        ast.In: ast.NotIn,
        ast.NotIn: ast.In,
        ast.Is: ast.IsNot,
        ast.IsNot: ast.Is,
    }

    def __init__(self) -> None:
        self.found: list[tuple[ast.AST, str, str]] = []

    def _add(self, node: ast.AST, replacement: ast.AST | str, operator: str) -> None:
        text = replacement if isinstance(replacement, str) else ast.unparse(replacement)
        self.found.append((node, text, operator))

    def visit_BoolOp(self, node: ast.BoolOp) -> None:
        other = ast.Or() if isinstance(node.op, ast.And) else ast.And()
        self._add(node, ast.BoolOp(op=other, values=node.values), f"{_name(node.op)} -> {_name(other)}")
        self.generic_visit(node)

    def visit_Compare(self, node: ast.Compare) -> None:
        for index, op in enumerate(node.ops):
            flipped = self.FLIPS.get(type(op))
            if flipped is not None:
                ops = list(node.ops)
                ops[index] = flipped()
                mutated = ast.Compare(left=node.left, ops=ops, comparators=node.comparators)
                self._add(node, mutated, f"{_name(op)} -> {_name(flipped())}")
        self.generic_visit(node)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> None:
        if isinstance(node.op, ast.Not):
            self._add(node, node.operand, "not x -> x")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        if isinstance(node.func, ast.Name) and node.func.id in ("all", "any"):
            other = "any" if node.func.id == "all" else "all"
            self._add(
                node,
                ast.Call(func=ast.Name(other), args=node.args, keywords=node.keywords),
                f"{node.func.id} -> {other}",
            )
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if node.value is True or node.value is False:
            self._add(node, repr(not node.value), f"{node.value} -> {not node.value}")
        elif type(node.value) is int:
            self._add(node, repr(node.value + 1), f"{node.value} -> {node.value + 1}")

    def visit_If(self, node: ast.If) -> None:
        self._add(node.test, "False", "if-branch never taken")
        self._add(node.test, f"not ({ast.unparse(node.test)})", "if-condition negated")
        self.generic_visit(node)

    def visit_Return(self, node: ast.Return) -> None:
        empty = _empty_like(node.value)
        if empty is not None:
            self._add(node.value, empty, "empty result")
        self.generic_visit(node)

    def visit_JoinedStr(self, node: ast.JoinedStr) -> None:
        return  # messages: their wording is the goldens' business, not the analysis'

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        # A decorator (`@dataclass(frozen=True)`) declares, it decides nothing, and runs only at import, where
        # no test's coverage context sees it: its mutants could only ever read "uncovered".
        for child in node.body:
            self.visit(child)


def _empty_like(value: ast.AST | None) -> str | None:
    if isinstance(value, (ast.List, ast.ListComp)):
        return "[]"
    if isinstance(value, (ast.Set, ast.SetComp)):
        return "set()"
    if isinstance(value, (ast.Dict, ast.DictComp)):
        return "{}"
    if isinstance(value, ast.Tuple) and value.elts:
        return None  # a tuple of values is a record, not a collection
    if (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Name)
        and value.func.id in ("frozenset", "tuple", "set", "list", "sorted")
    ):
        return {"frozenset": "frozenset()", "tuple": "()", "set": "set()"}.get(value.func.id, "[]")
    return None


def _name(op: ast.AST) -> str:
    return {
        "And": "and",
        "Or": "or",
        "Eq": "==",
        "NotEq": "!=",
        "Lt": "<",
        "LtE": "<=",
        "Gt": ">",
        "GtE": ">=",
        "In": "in",
        "NotIn": "not in",
        "Is": "is",
        "IsNot": "is not",
    }.get(type(op).__name__, type(op).__name__)


def mutants_of(module: str, root: Path) -> Iterator[Mutant]:
    """Every mutant of one module, each a whole source that compiles, with the mutated lines kept in place
    (a multi-line expression becomes one line plus blank ones inside its brackets), so coverage's line numbers
    still name the mutated code."""
    text = (root / module).read_text()
    tree = ast.parse(text)
    finder = _Finder()
    finder.visit(tree)
    lines = text.splitlines(keepends=True)
    seen = set()
    for node, replacement, operator in finder.found:
        first, col, last, end_col = _span(node)
        key = (first, col, last, end_col, replacement)
        if key in seen:
            continue
        seen.add(key)
        head = lines[first - 1][:col]
        tail = lines[last - 1][end_col:]
        middle = "".join(lines[first - 1 : last])
        if "\\\n" in middle:
            continue  # a backslash continuation: blank lines would end the statement
        new = f"({replacement})" if last > first else replacement
        if last > first:
            tail = "\n" * (last - first) + tail
        source = "".join(lines[: first - 1]) + head + new + tail + "".join(lines[last:])
        if source == text:
            continue  # `return []` emptied: no change
        try:
            compile(source, module, "exec")
        except SyntaxError:
            continue
        if (module, first, operator) in EQUIVALENT:
            continue
        yield Mutant(module, first, last, operator, source)
