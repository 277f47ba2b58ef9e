"""Cross-file findings a pull request causes without touching the file they are reported in.

Some rules compare every sizing path with the scheduler's (the tree's reference path, which goes through
the resolver) or every DCP predicate with the resolver; each says so in `COMPARED_WITH`. A pull request
that changes the reference or the resolver can make an untouched connector diverge: that finding names a
path the pull request touched, so it belongs to the review, anchored on the changed lines of the touched
function.
"""

from __future__ import annotations

import ast
import dataclasses
import os
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from kvlint.engine.lint import lint_bytes
from kvlint.engine.rule import Rule
from kvlint.filesystem import describe, read_file_inside
from kvlint.review.diff import ChangedFile
from kvlint.scan.config import Config
from kvlint.scan.jobs import WorkerState, job_for_file, request_for
from kvlint.types import Finding


def issue_key(divergence) -> tuple:
    """What a divergence of the sizing analysis says, wherever it sits: the same kind of record about the
    same function with the same paths and counterexamples, at any line, is the same divergence."""
    said = tuple(
        (f.name, getattr(divergence, f.name))
        for f in dataclasses.fields(divergence)
        if f.name not in ("line", "column")
    )
    return (type(divergence).__name__, *said)


def _reporting_rule(divergence, rules: tuple[type[Rule], ...]) -> type[Rule] | None:
    """The selected rule that reports this kind of divergence (a rule declares it in `REPORTS`)."""
    return next((rule for rule in rules if isinstance(divergence, getattr(rule, "REPORTS", ()))), None)


def function_spans(text: str) -> dict[str, tuple[int, int]]:
    """qualname -> (first line, last line) of every function in the source."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError):
        return {}
    spans: dict[str, tuple[int, int]] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    first = min([child.lineno, *(d.lineno for d in child.decorator_list)])
                    spans[name] = (first, child.end_lineno or child.lineno)
                visit(child, f"{name}.")

    visit(tree, "")
    return spans


def _repository_path(root: str, module_path: str, tree: Path) -> str | None:
    try:
        return Path(os.path.relpath(Path(root, module_path).resolve(), tree.resolve())).as_posix()
    except ValueError:
        return None


def touched_targets(
    project, tree: Path, changes: dict[str, ChangedFile], texts: dict[str, str]
) -> dict[str, tuple[str, str, int]]:
    """role ("reference" | "resolver") -> (path name, repository path, first changed line in it)."""
    analysis = project.sizing
    if analysis is None or project.root is None:
        return {}
    touched: dict[str, tuple[str, str, int]] = {}
    for role, name in (("reference", analysis.reference), ("resolver", analysis.resolver)):
        path = next((p for p in analysis.paths if p.name == name), None)
        if path is None:
            continue
        repository_path = _repository_path(project.root, path.module_path, tree)
        changed = changes.get(repository_path or "")
        if changed is None or repository_path not in texts:
            continue
        span = function_spans(texts[repository_path]).get(path.qualname)
        anchor = changed.first_added(*span) if span else None
        if anchor is not None:
            touched[role] = (name, repository_path, anchor)
    return touched


def findings_through_touched_targets(
    project,
    tree: Path,
    changes: dict[str, ChangedFile],
    texts: dict[str, str],
    scanned: list[Finding],
    rules: tuple[type[Rule], ...],
    config: Config,
    base_issue_keys: Callable[[], set[tuple]],
    failures: list[str] | None = None,
) -> tuple[list[Finding], list[Finding]]:
    """(findings re-anchored on the touched reference/resolver, the scanned findings they replace).

    Only divergences the change creates count: one the base revision already had (same record, path and
    counterexamples) is not the pull request's doing, even if it edits the target. An untouched file that
    must be linted for it but cannot be read is a line in `failures`, never dropped in silence.
    """
    touched = touched_targets(project, tree, changes, texts)
    if not touched:
        return [], []
    before = base_issue_keys()
    analysis = project.sizing
    anchored: list[Finding] = []
    replaced: list[Finding] = []
    linted: dict[str, list[Finding]] = {}
    seen: set[int] = set()
    for divergence in analysis.divergences:
        rule = _reporting_rule(divergence, rules)
        roles = [role for role in getattr(rule, "COMPARED_WITH", ()) if role in touched]
        if rule is None or not roles or issue_key(divergence) in before:
            continue
        repository_path = _repository_path(project.root, divergence.module_path, tree)
        if repository_path is None or repository_path.startswith("../"):
            continue
        if repository_path in changes:
            candidates = [f for f in scanned if f.path == repository_path]
        else:
            if repository_path not in linted:
                linted[repository_path] = _lint_one(tree, repository_path, project, rules, config, failures)
            candidates = linted[repository_path]
        # Through the engine, so that suppression comments and per-file-ignores still hold; a divergence
        # folded into another finding of its root cause (kvlint.engine.grouping) is reported by that one.
        finding = next((f for f in candidates if _reports(f, rule.CODE, divergence.line)), None)
        if finding is None or id(finding) in seen:
            continue
        seen.add(id(finding))
        if changes.get(repository_path, ChangedFile("")).touches(finding.line, max(finding.end_line, finding.line)):
            continue
        name, target_path, anchor = touched[roles[0]]
        what = "the scheduler's sizing path" if roles[0] == "reference" else "the shared resolver"
        anchored.append(
            replace(
                finding,
                path=target_path,
                line=anchor,
                column=1,
                end_line=anchor,
                end_column=1,
                fix=None,
                message=f"{finding.message} (reported at `{repository_path}:{finding.line}`; this change touches {what}, `{name}`)",
            )
        )
        if repository_path in changes:
            replaced.append(finding)
    return anchored, replaced


def _reports(finding: Finding, code: str, line: int) -> bool:
    return (finding.code, finding.line) == (code, line) or any(
        (r.code, r.line) == (code, line) for r in finding.related
    )


def _lint_one(
    tree: Path,
    repository_path: str,
    project,
    rules: tuple[type[Rule], ...],
    config: Config,
    failures: list[str] | None,
) -> list[Finding]:
    """The findings of one file the pull request does not touch, linted as a scan would lint it; read with
    kvlint's one reader, never through a link (a regular file inside the tree, at most 10 MiB)."""
    try:
        data = read_file_inside(tree, repository_path)
    except OSError as error:
        if failures is not None:
            failures.append(f"cross-file analysis incomplete: {repository_path} not read: {describe(error)}")
        return []
    path = tree / repository_path
    job = job_for_file(path, repository_path, tuple(rule.CODE for rule in rules), config, project, data)
    return list(lint_bytes(request_for(job, WorkerState(project, config.rule_settings())), data).findings)
