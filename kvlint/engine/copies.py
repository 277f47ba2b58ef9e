"""A function of code outside the tree copied from the target release gets the verdict it gets in the tree.

kvlint.analysis.copied_functions finds a function of the scanned file whose body is one of the target's
(the tree index keeps their prints). The original's module is linted as the tree's own scan lints it (its
path in the tree, so its roles, callers and census are the tree's), and each finding of the rules in the
copy is lined up with the original's at the same node: one the tree does not report there is dropped, one it
reports takes the tree's severity. What the tree reports in the original but the copy does not is not added:
the copy's own module may say more (a narrower caller), never less than the tree.
"""

from __future__ import annotations

import ast
from bisect import bisect_left
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from kvlint.analysis.copied_functions import (
    body_lines,
    could_hold_copies,
    find_function,
    functions,
    node_keys,
    original_of,
)
from kvlint.analysis.tree_files import TreeFiles
from kvlint.filesystem import read_regular_file
from kvlint.types import Finding

# (root, module, rule codes) → (the index it was linted with, its findings): one lint of an original per scan.
_ORIGINALS: dict[tuple, tuple[object, list[Finding]]] = {}
# root → the texts of its modules that read KV cache specs or groups: read once per process.
_TREE_TEXTS: dict[str, dict[str, bytes]] = {}


def judged_as_originals(
    request, tree: ast.Module | None, findings: list[Finding], lint_original: Callable[..., list[Finding]]
) -> list[Finding]:
    """`findings` of a file outside the tree, those in a copy of a target function judged as the tree judges
    the original. `lint_original(request, module_path, text)`: the rules' findings of the tree's module."""
    project = request.project
    if not findings or tree is None or not project.judges_outside or project.root is None:
        return findings  # the tree's own code, or no tree to copy from
    verdicts: dict[tuple[int, int, str], Finding | None] = {}
    # The findings at each place, looked up per node of a copy (not every finding per node: their product).
    at_place: dict[tuple[int, int], list[Finding]] = {}
    for finding in findings:
        at_place.setdefault((finding.line, finding.column), []).append(finding)
    finding_lines = sorted(f.line for f in findings)
    for _, copy in functions(tree):
        lines = body_lines(copy)
        # Whether a finding lies in the body: the first finding line at or past its start, by bisection.
        first = bisect_left(finding_lines, lines.start)
        holds = first < len(finding_lines) and finding_lines[first] < lines.stop
        original = original_of(_tree_texts(project.root), copy) if holds else None
        if original is None:
            continue
        module_path, qualified = original.split(":", 1)
        source, judged = _original(request, module_path, lint_original)
        function = find_function(source, qualified) if source is not None else None
        if function is None:
            continue  # the original cannot be read again: the copy keeps its own verdict
        places = node_keys(function)
        theirs = {(places[(f.line, f.column)], f.code): f for f in judged if (f.line, f.column) in places}
        for place_key, place in node_keys(copy).items():
            for finding in at_place.get(place_key, ()):
                if finding.line in lines:
                    verdicts[(finding.line, finding.column, finding.code)] = theirs.get((place, finding.code))
    kept = []
    for finding in findings:
        key = (finding.line, finding.column, finding.code)
        if key not in verdicts:
            kept.append(finding)
        elif verdicts[key] is not None:
            kept.append(replace(finding, severity=verdicts[key].severity))
    return kept


def _tree_texts(root: str) -> dict[str, bytes]:
    if root not in _TREE_TEXTS:
        files = TreeFiles(Path(root))
        texts = {relative: files.read(relative) for relative in files.relatives()}
        _TREE_TEXTS[root] = {relative: data for relative, data in texts.items() if data and could_hold_copies(data)}
    return _TREE_TEXTS[root]


def _original(request, module_path: str, lint_original) -> tuple[ast.Module | None, list[Finding]]:
    root = request.project.root
    try:
        data = read_regular_file(str(Path(root) / module_path))
        text = data.decode("utf-8")
        source = ast.parse(text)
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError, RecursionError):
        return None, []
    key = (root, module_path, tuple(rule.CODE for rule in request.rules))
    if any(linted_with is not request.project for linted_with, _ in _ORIGINALS.values()):
        _ORIGINALS.clear()  # another scan's index: its originals are linted anew
    kept = _ORIGINALS.get(key)
    if kept is None:
        kept = _ORIGINALS[key] = (request.project, lint_original(request, module_path, text))
    return source, kept[1]
