"""Positions of a libcst module's nodes, generated one top-level statement at a time.

libcst's PositionProvider generates the code of the whole module to learn where each node is: a second or
more for a large file, paid for one finding. A top-level statement's positions depend only on the line it
starts on (it starts a line, and nothing before it is indented), and Python's own parse of the same text
says where each statement starts: so only the statements holding a node asked about are generated, from
their line. Each generated statement is checked against the text it must reproduce there; on any mismatch
(a shape this mapping does not foresee) the whole module is generated as before, so the positions are
libcst's own either way (tests/test_cst_walk.py compares them on every node).
"""

from __future__ import annotations

import ast
from collections.abc import Mapping

import libcst as cst
from libcst.metadata import CodeRange, MetadataWrapper

from kvlint.analysis.cst_walk import code_positions

try:  # libcst's own codegen state for positions; without it, the whole module's positions as before
    from libcst.metadata.position_provider import PositionProvider, PositionProvidingCodegenState
except ImportError:  # pragma: no cover - a libcst that moved it
    PositionProvidingCodegenState = None


def statement_starts(module: cst.Module, tree: ast.Module) -> dict[cst.CSTNode, tuple[int, tuple[str, ...]]]:
    """Each top-level statement of `module`, and each statement of a class or function body under those,
    → (the line its code starts on, its leading comments and blank lines included; the indentation its
    blocks add), read from `tree`, Python's parse of the same text. Statements of a body whose statements
    do not pair up with Python's are left out (their enclosing statement is generated whole)."""
    starts: dict[cst.CSTNode, tuple[int, tuple[str, ...]]] = {}
    pending = [(module.body, tree.body, ())]
    while pending:
        statements, body, indents = pending.pop()
        paired = _paired(statements, body)
        if paired is None:
            continue
        for statement, first in paired:
            starts[statement] = (_start_line(statement, first), indents)
            block = getattr(statement, "body", None)
            if isinstance(statement, (cst.ClassDef, cst.FunctionDef)) and isinstance(block, cst.IndentedBlock):
                indent = module.default_indent if block.indent is None else block.indent
                pending.append((block.body, first.body, (*indents, indent)))
    return starts


def _paired(statements, body: list[ast.stmt]) -> list[tuple[cst.CSTNode, ast.stmt]] | None:
    """libcst's statements with Python's first statement of each; None when the counts differ."""
    paired, index = [], 0
    for statement in statements:
        if index >= len(body):
            return None
        paired.append((statement, body[index]))
        # `a = 1; b = 2` is one libcst line, two Python statements
        index += len(statement.body) if isinstance(statement, cst.SimpleStatementLine) else 1
    return paired if index == len(body) else None


def _start_line(statement: cst.CSTNode, first: ast.stmt) -> int:
    line = first.lineno
    leading = len(getattr(statement, "leading_lines", ()))
    decorators = getattr(statement, "decorators", ())
    if decorators and getattr(first, "decorator_list", None):
        line = first.decorator_list[0].lineno
        leading += len(decorators[0].leading_lines)
    return line - leading


class StatementPositions(Mapping):
    """`code_positions(wrapper)`, generated lazily per top-level statement (see the module docstring)."""

    def __init__(
        self,
        wrapper: MetadataWrapper,
        text: str,
        line_offsets: list[int],
        parents: Mapping[cst.CSTNode, cst.CSTNode],
        tree: ast.Module | None,
    ):
        self.wrapper, self.text, self.line_offsets, self.parents = wrapper, text, line_offsets, parents
        self._tree = tree
        self._starts: dict[cst.CSTNode, tuple[int, tuple[str, ...]]] | None = None
        self._computed: dict[cst.CSTNode, CodeRange] = {}
        self._done: set[cst.CSTNode] = set()
        self._whole: Mapping[cst.CSTNode, CodeRange] | None = None

    def __getitem__(self, node: cst.CSTNode) -> CodeRange:
        if self._whole is None:
            found = self._computed.get(node)
            if found is not None:
                return found
            statement = self._statement_of(node)
            if statement is not None and statement not in self._done and self._generate(statement):
                found = self._computed.get(node)
                if found is not None:
                    return found
            self._whole = code_positions(self.wrapper)
        return self._whole[node]

    def __iter__(self):
        return iter(self._everything())

    def __len__(self) -> int:
        return len(self._everything())

    def _everything(self) -> Mapping[cst.CSTNode, CodeRange]:
        if self._whole is None:
            self._whole = code_positions(self.wrapper)
        return self._whole

    def _statement_of(self, node: cst.CSTNode) -> cst.CSTNode | None:
        """The innermost statement holding `node` (or `node` itself) whose start is known."""
        if self._starts is None:
            self._starts = statement_starts(self.wrapper.module, self._tree) if self._tree is not None else {}
        current: cst.CSTNode | None = node
        while current is not None and current not in self._starts:
            current = self.parents.get(current)
        return current

    def _generate(self, statement: cst.CSTNode) -> bool:
        """Positions of `statement`'s nodes from its start line; False when its code is not the text there."""
        self._done.add(statement)
        start, indents = self._starts[statement]
        if PositionProvidingCodegenState is None or not 1 <= start <= len(self.line_offsets):
            return False
        module = self.wrapper.module
        provider = PositionProvider()
        state = PositionProvidingCodegenState(
            default_indent=module.default_indent,
            default_newline=module.default_newline,
            provider=provider,
            indent_tokens=list(indents),
            line=start,
        )
        statement._codegen(state)
        code = "".join(state.tokens)
        offset = self.line_offsets[start - 1]
        if not self.text.startswith(code, offset):
            # The file's last statement without its final newline is still the text there.
            end = len(self.text) - offset
            if module.has_trailing_newline or not code.startswith(self.text[offset:]) or len(code) - end > 2:
                return False
        self._computed.update(provider._computed)
        return True
