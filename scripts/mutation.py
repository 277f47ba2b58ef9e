"""A mutation gate for kvlint's analysis core: does the fast loop fail when this code is wrong?

    python scripts/mutation.py [MODULE.py ...] [--changed REF] [--jobs 2] [--budget SECONDS] [--report]

Each module (default: the analysis core, `CORE` below) is mutated one small change at a time — a flipped
comparison or guard, `and` ↔ `or`, `all` ↔ `any`, a dropped `not`, a branch that never runs, an off-by-one, an
empty result — and for each mutant only the fast tests that run the mutated lines are run (a per-test coverage
map made once, with coverage's dynamic contexts). A mutant is *killed* when one of them fails, *survives* when
all pass, and is *uncovered* when no fast test runs its lines. The report, per module, is written into
docs/reliability.md between its generated markers (`--report`), and every survivor is listed with its line:
each is a test to write, or a mutant to mark equivalent, with the reason, in `EQUIVALENT`
(scripts/mutation_equivalent.py; the mutants themselves are made in scripts/mutation_operators.py).

An edit that moves lines leaves the recorded verdicts keyed by old lines: `scripts/mutation_carry.py REF MODULE…`
carries them (and names the equivalents to move).

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
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

# The gate's helper modules lie beside it (scripts/ is no package: this file runs as a script).
sys.path.insert(0, str(Path(__file__).resolve().parent))
from mutation_equivalent import EQUIVALENT  # noqa: E402
from mutation_operators import Mutant, mutants_of  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
# The code that decides what is an error and whether a fix is safe (issue 31).
CORE = (
    "kvlint/analysis/census",
    "kvlint/analysis/census_selection.py",
    "kvlint/analysis/layer_mixes.py",
    "kvlint/analysis/construction_sites.py",
    "kvlint/analysis/flow/provenance.py",
    "kvlint/analysis/flow/consumers.py",
    "kvlint/analysis/flow/dominance.py",
    "kvlint/analysis/flow/layer_selection.py",
    "kvlint/engine/suppress.py",
    "kvlint/engine/grouping.py",
    "rules/_fix_scope.py",
    "rules/_unwrap_fix.py",
    "rules/kv101_container_isinstance.py",
)
TEST_TIMEOUT = 120  # seconds for one mutant's tests: a loop the mutant made is a kill
MARK_BEGIN, MARK_END = "<!-- generated:mutation -->", "<!-- /generated:mutation -->"


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
    parser.add_argument(
        "--tests", nargs="+", default=["tests"], help="the test folder or files the coverage map is made from"
    )
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
        print(f"mutation: per-test coverage of the fast loop over {' '.join(options.tests)}…", file=sys.stderr)
    replaying = bool(options.replay and options.retry)
    covered = (
        {} if replaying else coverage_map(["-m", "not slow", *options.tests], options.coverage_cache, options.jobs)
    )
    mutants = [m for module in modules for m in mutants_of(module, ROOT)]
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
    """The lines that run when the module is imported: module-level code, class bodies and the signatures of
    their functions (a default value is made there), not the functions' bodies."""
    lines: set[int] = set()

    def add(statements: list[ast.stmt]) -> None:
        for statement in statements:
            if isinstance(statement, ast.ClassDef):
                add(statement.body)
            elif isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines.update(range(statement.lineno, statement.body[0].lineno))  # none for a one-line def
            else:
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
        + f"\n\nEquivalent mutants (not counted; `EQUIVALENT` in scripts/mutation_equivalent.py says why):\n\n{same_listing}"
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
