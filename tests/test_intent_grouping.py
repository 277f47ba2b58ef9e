"""Where kvlint.engine.grouping finds a file's functions (a finding is placed in the innermost that holds it):
a `def` in any statement that can hold one. One snippet per place, named after the behaviour; written
against the mutants scripts/mutation.py made of that module (issue 31)."""

from __future__ import annotations

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from kvlint.engine.grouping import FunctionSpan, function_spans
from test_grouping import finding, fix_at, fold


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


def test_with_holders_only_the_functions_around_a_reported_node_are_spanned():
    wrapper = MetadataWrapper(cst.parse_module("def a():\n    pass\n\ndef b():\n    pass\n"))
    positions = wrapper.resolve(PositionProvider)
    b = wrapper.module.body[1]
    assert function_spans(wrapper.module, lambda node: positions[node], holders={b}) == [FunctionSpan(4, 1, 5, 9)]


def test_a_member_with_another_fix_stays_apart_whatever_its_rank_and_the_fix_has_no_unavailable_note():
    primary = finding("DEC", 3, 5, 3, 30, fix=fix_at(10))
    other_fix = finding("DEC2", 3, 12, 3, 18, fix=fix_at(40))  # ranked second: a decision, further right
    note_only = finding("CHK", 3, 10, 3, 20, unavailable="no automatic fix: why")
    results = fold(primary, other_fix, note_only)
    assert [(f.code, [r.code for r in f.related]) for f in results] == [("DEC", ["CHK"]), ("DEC2", [])]
    assert results[0].fix == primary.fix and results[0].fix_unavailable is None  # a fix, so no note of none
