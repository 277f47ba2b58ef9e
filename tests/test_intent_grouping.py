"""Where kvlint.engine.grouping finds a file's functions (a finding is placed in the innermost that holds it):
a `def` in any statement that can hold one. One snippet per place, named after the behaviour; written
against the mutants scripts/mutation.py made of that module (issue 31)."""

from __future__ import annotations

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from kvlint.engine.grouping import FunctionSpan, function_spans


def spans(source: str) -> list[FunctionSpan]:
    wrapper = MetadataWrapper(cst.parse_module(source))
    positions = wrapper.resolve(PositionProvider)
    return function_spans(wrapper.module, lambda node: positions[node])


@pytest.mark.parametrize(
    "holder",
    [
        "if x:\n    pass\nelse:\n",
        "try:\n    pass\nexcept ValueError:\n",
        "try:\n    pass\nexcept* ValueError:\n",  # an exception group's handler
        "try:\n    pass\nfinally:\n",
        "while x:\n",
        "with x:\n",
        "match x:\n    case 1:\n",
        "class C:\n",
    ],
)
def test_a_def_in_any_statement_that_can_hold_one_is_a_function(holder):
    opener = holder.splitlines()[-1]  # the def goes one level below the clause that holds it
    indent = " " * (len(opener) - len(opener.lstrip()) + 4)
    source = f"{holder}{indent}def inner():\n{indent}    return 1\n"
    last = source.count("\n")
    assert spans(source) == [FunctionSpan(last - 1, len(indent) + 1, last, len(indent) + 13)]
