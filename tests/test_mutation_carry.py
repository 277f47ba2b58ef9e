"""scripts/mutation_carry.py: a mutant whose lines only moved keeps its verdict at its new line; one whose lines
changed is to run again; code moved to another module keeps the verdicts its lines had there."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
from mutation_carry import carried  # noqa: E402


@dataclass
class Mutant:
    line: int
    end_line: int
    operator: str


OLD = ["def f(x):", "    if x > 1:", "        return 2", "    return 3"]


def test_a_mutant_below_added_lines_keeps_its_verdict_at_its_new_line():
    new = ["import os", "", *OLD]
    before = {("m.py", 2, "> -> >="): "killed", ("m.py", 3, "2 -> 3"): "survived"}
    records = carried("m.py", "m.py", OLD, new, before, [Mutant(4, 4, "> -> >="), Mutant(5, 5, "2 -> 3")])
    assert [(r["line"], r["verdict"]) for r in records] == [(4, "killed"), (5, "survived")]


def test_a_mutant_on_a_changed_line_or_spanning_one_is_run_again():
    new = ["def f(x):", "    if x >= 1:", "        return 2", "    return 3"]
    before = {("m.py", 2, "> -> >="): "killed", ("m.py", 3, "2 -> 3"): "killed"}
    records = carried("m.py", "m.py", OLD, new, before, [Mutant(2, 2, ">= -> >"), Mutant(2, 3, "2 -> 3")])
    assert [r["verdict"] for r in records] == ["not run", "not run"]


def test_code_moved_to_another_module_keeps_its_lines_verdicts_there():
    new = ['"""moved"""', "", *OLD[1:3]]
    before = {("old.py", 2, "> -> >="): "killed"}
    records = carried("new.py", "old.py", OLD, new, before, [Mutant(3, 3, "> -> >="), Mutant(4, 4, "2 -> 3")])
    assert [(r["module"], r["line"], r["verdict"]) for r in records] == [
        ("new.py", 3, "killed"),
        ("new.py", 4, "not run"),  # no verdict for it in the old module
    ]
