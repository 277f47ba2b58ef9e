"""A mutation gate for kvlint's analysis core: does the fast loop fail when this code is wrong?

    python scripts/mutation.py [MODULE.py ...] [--changed REF] [--jobs 2] [--budget SECONDS] [--report]

Each module (default: the analysis core, `CORE` below) is mutated one small change at a time — a flipped
comparison or guard, `and` ↔ `or`, `all` ↔ `any`, a dropped `not`, a branch that never runs, an off-by-one, an
empty result — and for each mutant only the fast tests that run the mutated lines are run (a per-test coverage
map made once, with coverage's dynamic contexts). A mutant is *killed* when one of them fails, *survives* when
all pass, and is *uncovered* when no fast test runs its lines. The report, per module, is written into
docs/reliability.md between its generated markers (`--report`), and every survivor is listed with its line:
each is a test to write, or a mutant to mark equivalent in `EQUIVALENT` with the reason.

Mutants run in scratch copies of the checkout (one per job), never in the checkout itself; each test run is
bounded in time (a mutant that loops is killed by its timeout and counted killed).
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The code that decides what is an error and whether a fix is safe (issue 31).
CORE = (
    "kvlint/analysis/census",
    "kvlint/analysis/layer_mixes.py",
    "kvlint/analysis/provenance.py",
    "kvlint/analysis/consumers.py",
    "kvlint/analysis/dominance.py",
    "kvlint/analysis/layer_selection.py",
    "kvlint/engine/suppress.py",
    "kvlint/engine/grouping.py",
    "rules/_unwrap_fix.py",
    "rules/kv101_container_isinstance.py",
)
# (module, line, operator) → why the mutant cannot change behaviour; it is then not counted.
EQUIVALENT: dict[tuple[str, int, str], str] = {
    (
        "kvlint/engine/suppress.py",
        29,
        "if-branch never taken",
    ): "a fast path: a source without the word holds no directive",
    (
        "kvlint/analysis/dominance.py",
        54,
        "and -> or",
    ): "a guard that only saves work: `_exits` is False for all it lets through (an expression, an `else` or "
    "`elif` clause, None), none of them a block ending in an exit",
    ("kvlint/analysis/layer_selection.py", 183, "0 -> 1"): "every layer set's count shifted by one: the order of "
    "witnesses, which alone uses it, is the same",
    ("kvlint/analysis/layer_selection.py", 183, "1 -> 2"): "every count doubled: the same order of witnesses",
    ("kvlint/analysis/layer_selection.py", 188, "0 -> 1"): "without a census every witness is equally near: "
    "any constant gives the same order",
    ("kvlint/analysis/consumers.py", 46, "if-branch never taken"): "a fast path: with no accessor the empty "
    "pattern's reads name no accessor, and none is consumed",
    ("kvlint/analysis/consumers.py", 54, "if-branch never taken"): "a fast path: a name read by the worker "
    "once stays so",
    ("kvlint/analysis/consumers.py", 75, "0 -> 1"): "only a read on line 2 after an empty line 1 differs, "
    "and nothing above it can enclose it",
    ("kvlint/analysis/consumers.py", 80, "if-branch never taken"): "a fast exit: no class indentation is "
    "below 0, so a line at the margin gets no class either way",
    ("kvlint/analysis/census/compositions.py", 57, "1 -> 2"): "a maxsplit: the first part is the same",
    ("kvlint/analysis/census/reading.py", 73, "16 -> 17"): "the fingerprint's length: a longer prefix of the "
    "same digest tells the same changes apart",
    ("kvlint/analysis/census/reading.py", 210, "if-branch never taken"): "a fast path: a module without the "
    "words has no match of the method's pattern either",
    ("kvlint/analysis/census/reading.py", 212, "1 -> 2"): "every definition's line one later: no class "
    "statement shares a line with the def it holds, so `c.line < line` picks the same classes",
    ("kvlint/analysis/census/paths.py", 158, "1 -> 2"): "a maxsplit: the first line is the same",
    ("kvlint/analysis/census/paths.py", 138, "4000 -> 4001"): "a bound on the text read for a filter, "
    "against crafted modules: its size is a cost, not a decision",
    ("kvlint/analysis/census/instantiation.py", 132, "if-branch never taken"): "a cache: the bindings read "
    "again are the same",
    ("kvlint/analysis/census/instantiation.py", 200, "if-branch never taken"): "a cache: the constructor "
    "read again builds the same (only the budget, not the answer, tells)",
    ("kvlint/analysis/census/instantiation.py", 230, "if-branch never taken"): "a cache, as for constructors",
    ("kvlint/analysis/census/instantiation.py", 299, "if-branch never taken"): "a fast path: `resolve_expr` "
    "resolves no attribute of anything but a name, so the reference builds nothing either way",
    ("kvlint/analysis/census/instantiation.py", 285, "if-branch never taken"): "a lambda read as any other "
    "expression visits the same child, its body (its defaults are read by neither)",
    ("kvlint/analysis/census/instantiation.py", 339, "if-branch never taken"): "`_reference` builds a class "
    "the same way, at the callee's line, which is the call's",
    ("kvlint/analysis/census/instantiation.py", 220, "1000 -> 1001"): "what one constructor costs the "
    "budget: a unit, not a decision (the budget's own tests bound it)",
}
TEST_TIMEOUT = 120  # seconds for one mutant's tests: a loop the mutant made is a kill
MARK_BEGIN, MARK_END = "<!-- generated:mutation -->", "<!-- /generated:mutation -->"


@dataclass(frozen=True)
class Mutant:
    module: str  # relative to ROOT
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


def mutants_of(module: str, root: Path = ROOT) -> Iterator[Mutant]:
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


def coverage_map(pytest_args: list[str], cache: Path | None = None, jobs: int = 1) -> dict[str, dict[int, set[str]]]:
    """module → line → the fast tests that run it (coverage's per-test dynamic contexts, one run). With `cache`,
    a map saved there is read back instead (it is only as fresh as the tests and code it was made from: make
    it again after changing either), and a new one is saved there."""
    if cache is not None and cache.is_file():
        saved = json.loads(cache.read_text())
        return {m: {int(n): set(t) for n, t in by_line.items()} for m, by_line in saved.items()}
    data_file = ROOT / ".mutation-coverage"
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "-rf",
        *(["-n", str(jobs)] if jobs > 1 else []),
        *pytest_args,
        "--cov=kvlint",
        "--cov=rules",
        "--cov-context=test",
        "--cov-report=",
        f"--cov-config={_coverage_rc()}",
    ]
    env = dict(os.environ, COVERAGE_FILE=str(data_file))
    run = subprocess.run(command, cwd=ROOT, env=env, check=False, stdout=subprocess.PIPE, text=True)
    # A test that fails on the unmutated code would "kill" every mutant it covers: it is left out of the map.
    failing = {line.split()[1] for line in run.stdout.splitlines() if line.startswith("FAILED ")}
    if run.returncode not in (0, 1) or not data_file.exists():
        sys.exit(f"mutation: the coverage run failed (exit {run.returncode}):\n{run.stdout[-3000:]}")
    for name in sorted(failing):
        print(f"mutation: {name} fails without any mutant; it is left out", file=sys.stderr)
    from coverage import CoverageData

    data = CoverageData(basename=str(data_file))
    data.read()
    lines: dict[str, dict[int, set[str]]] = {}
    for measured in data.measured_files():
        relative = os.path.relpath(measured, ROOT)
        by_line = data.contexts_by_lineno(measured)
        lines[relative] = {
            number: {c.rsplit("|", 1)[0] for c in contexts if c} - failing for number, contexts in by_line.items()
        }
    data_file.unlink(missing_ok=True)
    if cache is not None:
        cache.write_text(json.dumps({m: {n: sorted(t) for n, t in b.items()} for m, b in lines.items()}))
    return lines


def _coverage_rc() -> str:
    handle, path = tempfile.mkstemp(suffix=".coveragerc")
    with os.fdopen(handle, "w") as stream:
        stream.write("[run]\nrelative_files = False\n")
    return path


def scratch_copy(destination: Path) -> Path:
    """A copy of what the tests import and read: kvlint/, rules/, tests/, pyproject.toml."""
    for name in ("kvlint", "rules", "tests", "scripts"):
        shutil.copytree(ROOT / name, destination / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(ROOT / "pyproject.toml", destination / "pyproject.toml")
    return destination


def run_mutant(mutant: Mutant, tests: list[str], copy: Path) -> str:
    target = copy / mutant.module
    original = target.read_text()
    target.write_text(mutant.source)
    try:
        # PYTHONPATH: the copy's kvlint, not the checkout's editable install; rules/ maps to kvlint.rules
        env = dict(os.environ, PYTHONPATH=str(copy), PYTHONDONTWRITEBYTECODE="1")
        command = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-m", "not slow", *tests]
        try:
            completed = subprocess.run(command, cwd=copy, env=env, capture_output=True, timeout=TEST_TIMEOUT)
        except subprocess.TimeoutExpired:
            return "killed"
        return "survived" if completed.returncode == 0 else "killed"
    finally:
        target.write_text(original)


def modules_from(arguments: list[str], changed: str | None) -> list[str]:
    chosen = arguments or list(CORE)
    if changed:
        names = subprocess.run(
            ["git", "diff", "--name-only", changed, "--"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.split()
        chosen = [
            n for n in names if n.endswith(".py") and any(n == c or n.startswith(c.rstrip("/") + "/") for c in chosen)
        ]
    found = []
    for name in chosen:
        path = ROOT / name
        if path.is_dir():
            found += sorted(str(p.relative_to(ROOT)) for p in path.rglob("*.py") if p.name != "__init__.py")
        elif path.is_file():
            found.append(name)
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("modules", nargs="*", help="modules or folders (default: the analysis core)")
    parser.add_argument("--changed", metavar="REF", help="only the modules among them that differ from REF")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--budget", type=float, default=1800.0, help="stop starting mutants after this many seconds")
    parser.add_argument("--report", action="store_true", help="write the scores into docs/reliability.md")
    parser.add_argument("--tests", default="tests", help="the test folder or files the coverage map is made from")
    parser.add_argument(
        "--results", type=Path, metavar="FILE", help="write every mutant's verdict to FILE (JSON lines)"
    )
    parser.add_argument(
        "--retry", type=Path, metavar="FILE", help="run only the mutants FILE (from --results) lists as surviving"
    )
    parser.add_argument(
        "--replay", action="store_true", help="with --retry: run nothing, report the verdicts FILE records"
    )
    parser.add_argument(
        "--coverage-cache", type=Path, metavar="FILE", help="reuse the per-test coverage map saved in FILE, or save it"
    )
    options = parser.parse_args()
    start = time.monotonic()
    modules = modules_from(options.modules, options.changed)
    if not modules:
        print("mutation: no module to mutate")
        return 0
    if not (options.replay and options.retry):
        print(f"mutation: per-test coverage of the fast loop over {options.tests}…", file=sys.stderr)
    replaying = bool(options.replay and options.retry)
    covered = {} if replaying else coverage_map(["-m", "not slow", options.tests], options.coverage_cache, options.jobs)
    mutants = [m for module in modules for m in mutants_of(module)]
    reach = _reach(covered)
    import_time = {module: _import_time_lines(ROOT / module) for module in modules}

    def order(test: str) -> tuple[int, str]:
        return reach.get(test, 0), test

    results: dict[str, dict[str, list[Mutant]]] = {
        m: {"killed": [], "survived": [], "uncovered": [], "not run": []} for m in modules
    }
    if options.retry:
        mutants = _carry_over(mutants, options.retry, results, replay=options.replay)
    print(f"mutation: {len(mutants)} mutants of {len(modules)} module(s) to run", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="kvlint-mutation-") as scratch:
        copies = [scratch_copy(Path(scratch) / f"copy{i}") for i in range(max(1, options.jobs))]
        free = list(copies)

        def work(mutant: Mutant) -> tuple[Mutant, str]:
            tests = sorted(
                {
                    t
                    for line in range(mutant.line, mutant.end_line + 1)
                    for t in covered.get(mutant.module, {}).get(line, ())
                },
                key=order,
            )
            if not tests and mutant.line in import_time.get(mutant.module, ()):
                # Run once, at import, where no test's context sees it: every test of the module imported it.
                tests = sorted({t for by in covered.get(mutant.module, {}).values() for t in by}, key=order)
            if not tests:
                return mutant, "uncovered"
            if time.monotonic() - start > options.budget:
                return mutant, "not run"
            copy = free.pop()
            try:
                return mutant, run_mutant(mutant, tests, copy)
            finally:
                free.append(copy)

        with ThreadPoolExecutor(max_workers=len(copies)) as pool:
            for mutant, verdict in pool.map(work, mutants):
                results[mutant.module][verdict].append(mutant)
                print(f"{verdict:9} {mutant.module}:{mutant.line} {mutant.operator}", file=sys.stderr, flush=True)
                if options.results:
                    record = {"module": mutant.module, "line": mutant.line, "operator": mutant.operator}
                    with options.results.open("a") as stream:
                        stream.write(json.dumps({**record, "verdict": verdict}) + "\n")
    how = f"The verdicts recorded in `{options.retry.name}`, replayed" if replaying else ""
    report = render(results, time.monotonic() - start, how)
    print(report)
    if options.report:
        write_report(report)
    return 0


def _import_time_lines(path: Path) -> set[int]:
    """The lines that run when the module is imported: module-level code and class bodies, not functions."""
    lines: set[int] = set()

    def add(statements: list[ast.stmt]) -> None:
        for statement in statements:
            if isinstance(statement, ast.ClassDef):
                add(statement.body)
            elif not isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines.update(range(statement.lineno, (statement.end_lineno or statement.lineno) + 1))

    add(ast.parse(path.read_text()).body)
    return lines


def _reach(covered: dict[str, dict[int, set[str]]]) -> dict[str, int]:
    """Test → how many lines it runs. The tests that run the fewest go first: a unit test of the mutated
    code fails soonest and cheapest, and `-x` stops there."""
    reach: dict[str, int] = {}
    for by_line in covered.values():
        for tests in by_line.values():
            for test in tests:
                reach[test] = reach.get(test, 0) + 1
    return reach


def _carry_over(
    mutants: list[Mutant], retry: Path, results: dict[str, dict[str, list[Mutant]]], replay: bool = False
) -> list[Mutant]:
    """The mutants to run again: those not killed in the run `retry` recorded. The others count as killed
    (tests only added since that run, the code unchanged: a mutant killed then is killed now)."""
    last = {}  # (module, line, operator) → its latest verdict (the file may hold several runs)
    for line in retry.read_text().splitlines():
        if line.strip():
            record = json.loads(line)
            last[record["module"], record["line"], record["operator"]] = record["verdict"]
    again = []
    for mutant in mutants:
        verdict = last.get((mutant.module, mutant.line, mutant.operator), "not run")
        if verdict == "killed" or replay:
            results[mutant.module][verdict].append(mutant)
        else:
            again.append(mutant)
    return again


def render(results: dict[str, dict[str, list[Mutant]]], seconds: float, how: str = "") -> str:
    rows = [
        "| module | mutants | killed | survived | uncovered | equivalent | score |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    survivors = []
    equivalent = []
    for module, verdicts in results.items():
        run = len(verdicts["killed"]) + len(verdicts["survived"]) + len(verdicts["uncovered"])
        score = f"{len(verdicts['killed']) / run:.0%}" if run else "—"
        same = sorted((line, operator, why) for (m, line, operator), why in EQUIVALENT.items() if m == module)
        rows.append(
            f"| `{module}` | {run} | {len(verdicts['killed'])} | {len(verdicts['survived'])} "
            f"| {len(verdicts['uncovered'])} | {len(same)} | {score} |"
        )
        survivors += [
            f"- `{m.module}:{m.line}` {m.operator} ({kind})"
            for kind in ("survived", "uncovered")
            for m in verdicts[kind]
        ]
        equivalent += [f"- `{module}:{line}` {operator}: {why}" for line, operator, why in same]
    skipped = sum(len(v["not run"]) for v in results.values())
    tail = f"\n\n{skipped} mutant(s) not run (over the time budget)." if skipped else ""
    listing = "\n".join(survivors) if survivors else "(none)"
    same_listing = "\n".join(equivalent) if equivalent else "(none)"
    return (
        "\n".join(rows)
        + f"\n\n{how or f'In {seconds / 60:.0f} min (`python scripts/mutation.py --report`)'}. Survivors:\n\n{listing}{tail}"
        + f"\n\nEquivalent mutants (not counted; `EQUIVALENT` in scripts/mutation.py says why):\n\n{same_listing}"
    )


def write_report(report: str) -> None:
    path = ROOT / "docs" / "reliability.md"
    text = path.read_text()
    block = f"{MARK_BEGIN}\n{report}\n{MARK_END}"
    if MARK_BEGIN in text:
        before, rest = text.split(MARK_BEGIN, 1)
        text = before + block + rest.split(MARK_END, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n## Mutation score of the analysis core\n\n" + block + "\n"
    path.write_text(text)


if __name__ == "__main__":
    sys.exit(main())
