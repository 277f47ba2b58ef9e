"""The layer contract of docs/architecture.md, enforced.

`lint-imports` checks the contracts in pyproject.toml ([tool.importlinter]: the layers, who may import the
command line, what the facade, the rules and the leaf modules may import). This module adds what
import-linter cannot say: no import circle, imports inside functions only at the two lazy boundaries, and
rule codes written only in the rules. Every import statement counts, at module level or inside a function;
imports under `if TYPE_CHECKING:` never run and do not count for circles or lazy imports.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# A rule code as a rule writes it ("KV103"); the rules own their codes, the rest of kvlint asks them.
RULE_CODE = re.compile(r"\bKV\d{3}\b")


def python_modules() -> dict[str, Path]:
    """Module name → file for kvlint/ and the rules/ folder, which ships as kvlint.rules."""
    modules = {}
    for base, package in ((ROOT / "kvlint", "kvlint"), (ROOT / "rules", "kvlint.rules")):
        for path in sorted(base.rglob("*.py")):
            parts = list(path.relative_to(base).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join([package, *parts])] = path
    return modules


def _under_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _import_statements(tree: ast.Module) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import that runs, with whether it sits inside a function (a lazy import)."""

    def visit(node: ast.AST, in_function: bool) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _under_type_checking(child):
                yield from (item for statement in child.orelse for item in visit_statement(statement, in_function))
                continue
            yield from visit_statement(child, in_function)

    def visit_statement(node: ast.AST, in_function: bool) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node, in_function
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            yield from visit(node, True)
        else:
            yield from visit(node, in_function)

    yield from visit(tree, False)


def _imported_modules(node: ast.Import | ast.ImportFrom, importer: str, is_package: bool, known: set[str]) -> set[str]:
    """The kvlint modules an import statement loads (`from a import b` loads a.b when b is a module)."""
    if isinstance(node, ast.Import):
        names = {alias.name for alias in node.names}
    else:
        if node.level:
            anchor = importer.split(".")
            anchor = anchor[: len(anchor) - node.level + (1 if is_package else 0)]
            base = ".".join(anchor + ([node.module] if node.module else []))
        else:
            base = node.module or ""
        names = {f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names}
    found = set()
    for name in names:
        # `import kvlint.rules.kv101_x` of a module kvlint does not hold: the nearest package that it does
        while name and name not in known:
            name = name.rpartition(".")[0]
        if name:
            found.add(name)
    return found


def import_graph() -> dict[str, dict[str, list[tuple[int, bool]]]]:
    """importer → imported → [(line, lazy)] over kvlint's own modules."""
    modules = python_modules()
    known = set(modules)
    graph: dict[str, dict[str, list[tuple[int, bool]]]] = {name: {} for name in modules}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node, lazy in _import_statements(tree):
            for imported in _imported_modules(node, name, path.name == "__init__.py", known):
                if imported != name:
                    graph[name].setdefault(imported, []).append((node.lineno, lazy))
    return graph


def find_circles(graph: dict[str, dict[str, object]]) -> list[list[str]]:
    """One circle per strongly connected group of modules (Tarjan), as a path that returns to its start."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def connect(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for imported in sorted(graph[module]):
            if imported not in index:
                connect(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == module:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for module in sorted(graph):
        if module not in index:
            connect(module)
    return [_circle_within(graph, set(group)) for group in groups]


def _circle_within(graph: dict[str, dict[str, object]], group: set[str]) -> list[str]:
    """A shortest path from the group's first module back to itself, staying inside the group."""
    start = min(group)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following = []
        for module in frontier:
            for imported in sorted(graph[module]):
                if imported == start:
                    return [*paths[module], start]
                if imported in group and imported not in paths:
                    paths[imported] = [*paths[module], imported]
                    following.append(imported)
        frontier = following
    raise AssertionError(f"no circle in {sorted(group)}")  # pragma: no cover - Tarjan's groups are circles


def _layer(module: str) -> str:
    """kvlint.scan.runner → kvlint.scan; kvlint.cli → kvlint.cli."""
    return ".".join(module.split(".")[:2])


def lazy_import_allowed(importer: str, imported: str) -> bool:
    """ARCHITECTURE §4.2: lazy imports only where a warm scan must not load libcst or the analysis, or the CLI
    a command."""
    if _layer(importer) == _layer(imported):  # within one package: not a boundary between layers
        return True
    if _layer(importer) == "kvlint.scan" and imported == "kvlint.engine.lint":
        return True
    # ... nor the tree analysis, whose index the cache vouches for: only building or reading an index loads it.
    if (
        importer
        in (
            "kvlint.scan.index_cache",
            "kvlint.scan.tree_snapshot",
            "kvlint.scan.cache_codec",
        )
        and _layer(imported) == "kvlint.analysis"
    ):
        return True
    if importer == "kvlint.engine.registry" and imported == "kvlint.rules":  # the contract's one ignored import
        return True
    # A replayed check (kvlint.scan.replay) imports neither the command line nor the walk's dataclasses: the program
    # loads the command line only when no kept run answers, and a recording loads what it observes and keeps.
    if importer == "kvlint.launch" or importer == "kvlint.scan.replay":
        return True
    return _layer(importer) in ("kvlint.cli", "kvlint.commands")  # commands loaded when invoked


def _lint_imports_command() -> list[str]:
    beside_python = Path(sys.executable).parent / "lint-imports"
    command = str(beside_python) if beside_python.exists() else shutil.which("lint-imports")
    assert command, "lint-imports is missing: pip install -e '.[test]' (import-linter)"
    return [command, "--no-cache", "--no-logo"]


def test_layer_contract():
    if sys.version_info < (3, 11) and importlib.util.find_spec("importlinter") is None:
        pytest.skip("import-linter needs Python 3.11+; the contract is about the source and is checked there")
    completed = subprocess.run(_lint_imports_command(), cwd=ROOT, capture_output=True, text=True, timeout=120)
    report = completed.stdout + completed.stderr
    if completed.returncode != 0:
        broken = report[report.find("Broken contracts") :] if "Broken contracts" in report else report
        pytest.fail(f"lint-imports found imports against the layer contract:\n{broken}", pytrace=False)
    assert "BROKEN" not in report and " KEPT" in report, report


def test_no_import_circle():
    circles = find_circles(import_graph())
    if circles:
        pytest.fail("import circles among kvlint modules:\n" + "\n".join(" → ".join(c) for c in circles), pytrace=False)


def test_lazy_imports_only_at_the_allowed_boundaries():
    misplaced = [
        f"{importer} → {imported} (line {line})"
        for importer, targets in sorted(import_graph().items())
        for imported, places in sorted(targets.items())
        for line, lazy in places
        if lazy and not lazy_import_allowed(importer, imported)
    ]
    if misplaced:
        pytest.fail(
            "imports inside functions across layers (make them module-level, or argue a new boundary in "
            "lazy_import_allowed):\n" + "\n".join(misplaced),
            pytrace=False,
        )


def _docstring_nodes(tree: ast.Module) -> set[int]:
    holders = [
        tree,
        *(n for n in ast.walk(tree) if isinstance(n, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))),
    ]
    return {
        id(holder.body[0].value)
        for holder in holders
        if holder.body and isinstance(holder.body[0], ast.Expr) and isinstance(holder.body[0].value, ast.Constant)
    }


def _is_the_engines_own_code(node: ast.AST, path: Path) -> bool:
    """types.py's UNREADABLE_CODE: KV000 is reported by the engine and the scan, which cannot ask a rule."""
    if path != ROOT / "kvlint" / "types.py" or not isinstance(node, ast.Assign):
        return False
    return any(
        isinstance(t, ast.Tuple) and any(getattr(e, "id", "") == "UNREADABLE_CODE" for e in t.elts)
        for t in node.targets
    )


def rule_codes_outside_rules() -> list[str]:
    """Rule codes in string literals of kvlint/ (docstrings and comments may name a rule)."""
    found = []
    for path in sorted((ROOT / "kvlint").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        docstrings = _docstring_nodes(tree)
        exempt = {
            id(inner) for node in ast.walk(tree) if _is_the_engines_own_code(node, path) for inner in ast.walk(node)
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings | exempt:
                found.extend((str(path.relative_to(ROOT)), node.lineno, code) for code in RULE_CODE.findall(node.value))
    return [f"{path}:{line}: {code}" for path, line, code in sorted(found)]


def test_rule_codes_appear_only_in_the_rules():
    found = rule_codes_outside_rules()
    if found:
        pytest.fail(
            "rule codes written outside rules/ (ask the rule for its CODE):\n" + "\n".join(found), pytrace=False
        )


def test_the_engines_own_code_is_the_kv000_rules():
    from kvlint.engine.registry import rule_by_code
    from kvlint.types import UNREADABLE_CODE, UNREADABLE_NAME

    rule = rule_by_code(UNREADABLE_CODE)
    assert rule is not None and (rule.CODE, rule.NAME) == (UNREADABLE_CODE, UNREADABLE_NAME)


# The checks above must be able to fail: each helper, on a small example.


def test_circle_search_finds_a_circle_and_only_circles():
    assert find_circles({"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1}, "d": {"a": 1}}) == [["a", "b", "c", "a"]]
    assert find_circles({"a": {"b": 1}, "b": {}, "c": {"a": 1, "b": 1}}) == []


def test_imports_are_read_at_every_depth_except_type_checking():
    tree = ast.parse(
        "import kvlint.scan\n"
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from kvlint.engine import rule\n"
        "try:\n    from . import files\nexcept ImportError:\n    pass\n"
        "def f():\n    if True:\n        from kvlint.engine.lint import lint_bytes\n"
    )
    known = {"kvlint.scan", "kvlint.scan.files", "kvlint.engine", "kvlint.engine.lint", "kvlint.engine.rule"}
    found = [
        (_imported_modules(node, "kvlint.scan.runner", False, known), lazy) for node, lazy in _import_statements(tree)
    ]
    assert found == [
        ({"kvlint.scan"}, False),
        (set(), False),
        ({"kvlint.scan.files"}, False),
        ({"kvlint.engine.lint"}, True),
    ]


def test_lazy_boundaries():
    assert lazy_import_allowed("kvlint.scan.runner", "kvlint.engine.lint")
    assert lazy_import_allowed("kvlint.cli", "kvlint.commands.check")
    assert lazy_import_allowed("kvlint.engine.registry", "kvlint.engine.rule")
    assert not lazy_import_allowed("kvlint.scan.runner", "kvlint.engine.rule")
    assert not lazy_import_allowed("kvlint.analysis.tree_index", "kvlint.scan.result_cache")


def test_docstrings_may_name_a_rule_and_strings_may_not():
    tree = ast.parse('"""KV101 docs"""\ndef f():\n    """KV102."""\n    return "KV103", f"{x} KV104"\n')
    docstrings = _docstring_nodes(tree)
    strings = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and id(n) not in docstrings]
    assert [code for s in strings for code in RULE_CODE.findall(s)] == ["KV103", "KV104"]
