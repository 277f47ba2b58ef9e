"""scripts/mutation.py makes the mutants it says: each compiles, keeps every line where it was (coverage's line
numbers must still name the mutated code), and changes exactly the operator it names."""

from __future__ import annotations

import importlib.util
import json
import sys
import textwrap
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "mutation.py"


def load_script():
    spec = importlib.util.spec_from_file_location("kvlint_mutation_script", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


SAMPLE = textwrap.dedent(
    '''\
    """A docstring is left alone."""


    def pick(specs, wanted):
        if wanted and not specs:
            return []
        chosen = [
            spec
            for spec in specs
            if spec.kind == wanted
            or all(layer.ok for layer in spec.layers)
        ]
        return [spec for spec in chosen if spec.size > 0]
    '''
)


def test_every_mutant_compiles_keeps_its_lines_and_names_its_change(tmp_path):
    mutation = load_script()
    (tmp_path / "sample.py").write_text(SAMPLE)
    mutants = list(mutation.mutants_of("sample.py", root=tmp_path))
    operators = {(m.line, m.operator) for m in mutants}
    assert {
        (5, "and -> or"),
        (5, "not x -> x"),
        (5, "if-branch never taken"),
        (10, "== -> !="),
        (10, "or -> and"),
        (11, "all -> any"),
        (13, "> -> >="),
        (13, "0 -> 1"),
        (13, "empty result"),
    } <= operators, sorted(operators)
    for mutant in mutants:
        compile(mutant.source, "sample.py", "exec")
        assert mutant.source.count("\n") == SAMPLE.count("\n"), mutant.operator
        assert mutant.source != SAMPLE
        changed = [n for n, (a, b) in enumerate(zip(SAMPLE.splitlines(), mutant.source.splitlines()), 1) if a != b]
        assert changed and changed[0] == mutant.line, (mutant.operator, changed)
    assert (6, "empty result") not in operators  # `return []` emptied is no mutant


def test_the_multi_line_or_becomes_one_line_inside_its_brackets(tmp_path):
    mutation = load_script()
    (tmp_path / "sample.py").write_text(SAMPLE)
    (flipped,) = [m for m in mutation.mutants_of("sample.py", root=tmp_path) if m.operator == "or -> and"]
    lines = flipped.source.splitlines()
    assert "spec.kind == wanted and all(" in lines[9] and lines[10].strip() == ""


def test_a_decorator_is_not_mutated_and_import_time_lines_are_known(tmp_path):
    mutation = load_script()
    source = "from dataclasses import dataclass\nLIMIT = 16\n\n\n@dataclass(frozen=True)\nclass A:\n    x: int = 0\n\n    def f(self):\n        return self.x > LIMIT\n"
    (tmp_path / "a.py").write_text(source)
    operators = {(m.line, m.operator) for m in mutation.mutants_of("a.py", root=tmp_path)}
    assert (5, "True -> False") not in operators and (2, "16 -> 17") in operators and (10, "> -> >=") in operators
    assert mutation._import_time_lines(tmp_path / "a.py") == {1, 2, 7, 9}  # 9: `def f(self):`, its defaults


def test_a_retry_runs_only_what_was_not_killed_and_counts_the_rest_killed(tmp_path):
    mutation = load_script()
    (tmp_path / "sample.py").write_text(SAMPLE)
    mutants = list(mutation.mutants_of("sample.py", root=tmp_path))
    first, second = mutants[0], mutants[1]
    records = [
        {"module": "sample.py", "line": first.line, "operator": first.operator, "verdict": "survived"},
        {"module": "sample.py", "line": first.line, "operator": first.operator, "verdict": "killed"},
        {"module": "sample.py", "line": second.line, "operator": second.operator, "verdict": "survived"},
    ]
    retry = tmp_path / "verdicts.jsonl"
    retry.write_text("".join(json.dumps(r) + "\n" for r in records))
    results = {"sample.py": {"killed": [], "survived": [], "uncovered": [], "not run": []}}
    again = mutation._carry_over([first, second], retry, results)
    assert again == [second] and results["sample.py"]["killed"] == [first]  # the latest verdict counts
