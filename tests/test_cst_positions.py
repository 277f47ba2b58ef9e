"""kvlint.analysis.cst_positions: positions generated per statement are libcst's own, node for node."""

from __future__ import annotations

import ast
import textwrap

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from kvlint.analysis import cst_positions
from kvlint.analysis.cst_positions import StatementPositions
from kvlint.analysis.cst_walk import ModuleShape
from kvlint.engine.lint import line_offsets
from tests.test_cst_walk import SOURCE

SHAPES = {
    "many node kinds": SOURCE,
    "classes, decorators and comments": textwrap.dedent(
        '''
        #!/usr/bin/env python
        # header comment

        import os; import sys  # two statements, one line

        # a comment before the decorator
        @decorator

        # between decorators
        @other(1,
               2)
        class Outer(Base):
            """Doc."""

            # leading comment
            x = 1; y = 2

            @staticmethod
            def method(a, b):  # trailing
                if a:
                    return (a *
                            b)
                return b

            class Inner:
                def deep(self):
                    return self
        def tail(): return 1
        '''
    ),
    "tabs and no final newline": "class A:\n\tdef f(self):\n\t\treturn 1\n\n\n# footer\nx = 2",
    "crlf": "def f():\r\n    return 1\r\n\r\nclass C:\r\n    y = f()\r\n",
}


@pytest.mark.parametrize("source", SHAPES.values(), ids=SHAPES.keys())
def test_every_nodes_position_is_libcsts(source):
    module = cst.parse_module(source)
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    expected = wrapper.resolve(PositionProvider)
    shape = ModuleShape(module)
    positions = StatementPositions(wrapper, source, line_offsets(source), shape.parents, ast.parse(source))
    # Ask from the innermost nodes out, as findings do, so that statements are generated one at a time.
    # What findings are reported on: expressions and statements (whitespace defaults are shared objects).
    reportable = (cst.BaseExpression, cst.BaseStatement, cst.BaseSmallStatement, cst.Arg, cst.Param)
    in_statements = [
        n
        for n in reversed(shape.preorder)
        if isinstance(n, reportable) and _top(n, shape.parents, module) in module.body
    ]
    assert len(in_statements) > 10
    for node in in_statements:
        assert positions[node] == expected[node], node
    assert positions._whole is None, "a statement had to fall back to the whole module"


def _top(node, parents, module):
    while parents.get(node) not in (module, None):
        node = parents[node]
    return node


def test_a_statement_whose_text_differs_falls_back_to_the_whole_module(monkeypatch):
    source = SHAPES["classes, decorators and comments"]
    module = cst.parse_module(source)
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    shape = ModuleShape(module)
    # Every start a line late: no generated statement matches the text there.
    starts = cst_positions.statement_starts
    monkeypatch.setattr(
        cst_positions, "statement_starts", lambda m, t: {k: (line + 1, i) for k, (line, i) in starts(m, t).items()}
    )
    positions = StatementPositions(wrapper, source, line_offsets(source), shape.parents, ast.parse(source))
    node = next(n for n in shape.preorder if isinstance(n, cst.Return))
    assert positions[node] == wrapper.resolve(PositionProvider)[node]
    assert positions._whole is not None
