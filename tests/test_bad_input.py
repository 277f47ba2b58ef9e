"""Bad input: each case gives one clear line naming the file and the cause, the scan goes on, no traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kvlint.analysis.hierarchy import BUILTIN_BASES, SpecHierarchy
from kvlint.analysis.tree_index import TreeIndex
from kvlint.engine.lint import LintRequest
from kvlint.engine.registry import all_rules
from test_cli import BUGGY, make_tree

SELECT = ("--select", "KV000,KV101,KV102")


def build_bad_tree(root: Path) -> dict[str, str | None]:
    """Write every bad-input case under root/pkg; return {file: expected cause substring, or None for silence}."""
    make_tree(root)
    pkg = root / "pkg"
    cases: dict[str, str | None] = {}

    def add(name: str, data: bytes, cause: str | None) -> None:
        (pkg / name).write_bytes(data)
        cases[name] = cause

    add("syntax.py", b"def f(:\n    isinstance(kv_cache_groups, AttentionSpec)\n", "syntax error")
    add("undecodable.py", b"x = '\xff\xfe'\n", "cannot decode as utf-8")
    add("nul.py", b"x = 1\x00\n", "NUL bytes")
    add("empty.py", b"", None)
    add("huge.py", b"x = 1\n" * (2 * 1024 * 1024), "too large")
    add("crlf_bom.py", b"\xef\xbb\xbf" + BUGGY.replace("\n", "\r\n").encode(), None)
    add("tabs.py", BUGGY.replace("    ", "\t").encode(), None)
    modern = (
        b"type Alias[T] = list[T]\n"
        b"def first[T](items: list[T]) -> T:\n    return items[0]\n"
        b"match command:\n    case [x, *rest]:\n        pass\n"
        b"print(f\"{f'{1 + 1}'}\")\n"
    )
    add("modern.py", modern, None)
    (pkg / "folder.py").mkdir()  # a folder named like source: silently not source
    cases["folder.py"] = None
    os.symlink("nowhere.py", pkg / "dangling.py")
    cases["dangling.py"] = "dangling symbolic link"
    (pkg / "loop").mkdir()
    os.symlink("..", pkg / "loop" / "up")  # a symlink loop back to pkg
    return cases


@pytest.fixture
def bad_tree(tmp_path, monkeypatch):
    cases = build_bad_tree(tmp_path)
    monkeypatch.chdir(tmp_path)
    return tmp_path, cases


def test_every_bad_input_case(bad_tree):
    root, cases = bad_tree
    completed = subprocess.run(
        [sys.executable, "-m", "kvlint", "check", "--no-cache", "--format", "json", *SELECT, "pkg"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert completed.returncode == 1
    assert "Traceback" not in completed.stderr
    findings = json.loads(completed.stdout)
    by_file: dict[str, list[dict]] = {}
    for f in findings:
        by_file.setdefault(Path(f["path"]).name, []).append(f)
    for name, cause in cases.items():
        kv000 = [f for f in by_file.get(name, []) if f["code"] == "KV000"]
        if cause is None:
            assert kv000 == [], f"{name}: unexpected {kv000}"
        else:
            assert len(kv000) == 1, f"{name}: expected one KV000, got {kv000}"
            assert cause in kv000[0]["message"] and "\n" not in kv000[0]["message"]
    # Every other finding is kept: the real bug in each readable buggy file is still reported, once (one root
    # cause: the scaling, with the check in its gate as a related location).
    for name in ("buggy.py", "crlf_bom.py", "tabs.py"):
        assert [(f["code"], [r["code"] for r in f["related"]]) for f in by_file[name]] == [("KV102", ["KV101"])], name
    assert not any("loop" in f["path"] for f in findings), "walked into the symlink loop"


def test_text_output_is_one_line_per_problem(bad_tree):
    _, cases = bad_tree
    completed = subprocess.run(
        [sys.executable, "-m", "kvlint", "check", "--no-cache", "--output-format", "concise", *SELECT, "pkg"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert completed.returncode == 1, completed.stderr
    codes_by_file: dict[str, list[str]] = {}
    for line in completed.stdout.splitlines():
        path, row, column, rest = line.split(":", 3)
        assert path.startswith("pkg/") and row.isdigit() and column.isdigit() and rest.startswith(" KV")
        codes_by_file.setdefault(path.removeprefix("pkg/"), []).append(rest.split()[0])
    # Every problem has its line: one KV000 per unreadable file, the bug of each readable buggy file.
    unreadable = {name for name, cause in cases.items() if cause is not None}
    assert {name for name, codes in codes_by_file.items() if "KV000" in codes} == unreadable
    assert all(codes_by_file[name] == ["KV000"] for name in unreadable)
    # One root cause per buggy file: the KV101 check folds under the KV102 scaling it gates (one expression).
    for name in ("buggy.py", "crlf_bom.py", "tabs.py"):
        assert codes_by_file[name] == ["KV102"], name


def _scan_with_failing_read(tmp_path, monkeypatch, error: OSError) -> list:
    """Scan a folder whose `victim.py` fails to read the way `error` says (simulated where the read happens)."""
    from kvlint.scan import runner
    from kvlint.scan.config import Config
    from kvlint.scan.runner import scan

    (tmp_path / "victim.py").write_text(BUGGY)
    (tmp_path / "buggy.py").write_text(BUGGY)
    real_read = runner.read_regular_file

    def failing(path, *more, **options):
        if Path(path).name == "victim.py":
            raise error
        return real_read(path, *more, **options)

    monkeypatch.setattr(runner, "read_regular_file", failing)
    result = scan([tmp_path], Config(), ["KV000", "KV101", "KV102"], [], jobs=1, cache_dir=None)
    return result.findings


def test_file_that_vanishes_between_listing_and_reading(tmp_path, monkeypatch):
    findings = _scan_with_failing_read(tmp_path, monkeypatch, FileNotFoundError(2, "No such file or directory"))
    victim = [f for f in findings if f.path.endswith("victim.py")]
    assert [(f.code, f.message) for f in victim] == [
        ("KV000", "cannot analyse this file: vanished before it could be read")
    ]
    assert [(f.code, [r.code for r in f.related]) for f in findings if f.path.endswith("buggy.py")] == [
        ("KV102", ["KV101"])
    ]


def test_unreadable_file(tmp_path, monkeypatch):
    # Tests run as root, which reads anything: simulate the refusal.
    findings = _scan_with_failing_read(tmp_path, monkeypatch, PermissionError(13, "Permission denied"))
    victim = [f for f in findings if f.path.endswith("victim.py")]
    assert [(f.code, f.message) for f in victim] == [("KV000", "cannot analyse this file: permission denied")]


def test_internal_error_is_one_line_with_a_hint(monkeypatch):
    from kvlint.analysis.flow import provenance as flow
    from kvlint.engine.lint import lint_bytes

    def explode(self, node, depth=0):
        raise RuntimeError("boom")

    monkeypatch.setattr(flow.SpecFlow, "classify", explode)
    project = TreeIndex(root=None, hierarchy=SpecHierarchy(bases=dict(BUILTIN_BASES)))
    result = lint_bytes(LintRequest("buggy.py", "buggy.py", project, all_rules()), BUGGY.encode())
    (finding,) = [f for f in result.findings if f.code == "KV000"]
    assert "internal error" in finding.message and "--verbose" in finding.message and "\n" not in finding.message
    assert "RuntimeError: boom" in result.detail


def test_an_internal_errors_line_is_bounded_whatever_its_text(monkeypatch):
    """A node's repr is its whole subtree, and a deep one exhausts the stack when printed: the line says the
    error's type and the start of its text, and is written even where the text cannot be made."""
    from kvlint.analysis.flow import provenance as flow
    from kvlint.engine.lint import lint_bytes

    class Unprintable(Exception):
        def __str__(self):
            raise RecursionError("maximum recursion depth exceeded while getting the repr of an object")

    for error, expected in [
        (RuntimeError("x" * 100_000), "RuntimeError: " + "x" * 200 + "…"),
        (Unprintable(), "Unprintable"),
    ]:

        def explode(self, node, depth=0, error=error):
            raise error

        monkeypatch.setattr(flow.SpecFlow, "classify", explode)
        project = TreeIndex(root=None, hierarchy=SpecHierarchy(bases=dict(BUILTIN_BASES)))
        result = lint_bytes(LintRequest("buggy.py", "buggy.py", project, all_rules()), BUGGY.encode())
        (finding,) = [f for f in result.findings if f.code == "KV000"]
        assert f"internal error in kvlint ({expected}); re-run with --verbose" in finding.message


def test_a_chain_of_elifs_past_the_stack_is_nested_too_deeply_not_an_escaping_error():
    """libcst's position codegen recurses once per `elif`; 800 of them exhaust the stack there, and libcst turns
    that into a KeyError whose repr recursed again out of the lint (a red team's crafted module): one line."""
    from kvlint.engine.lint import lint_bytes

    lines = [
        "from vllm.v1.kv_cache_interface import AttentionSpec",
        "def f(spec, k, dcp_world_size):",
        "    if k == -1:",
        "        x = 0",
    ]
    for i in range(800):
        lines += [
            f"    elif k == {i}:",
            "        x = isinstance(spec, AttentionSpec) and spec.block_size * dcp_world_size",
        ]
    project = TreeIndex(root=None, hierarchy=SpecHierarchy(bases=dict(BUILTIN_BASES)))
    result = lint_bytes(LintRequest("deep.py", "deep.py", project, all_rules()), "\n".join(lines).encode())
    assert [(f.code, f.message) for f in result.findings] == [
        ("KV000", "cannot analyse this file: nested too deeply to analyse")
    ]
