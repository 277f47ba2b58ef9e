"""Which findings a pull request is answerable for, and the review comments that say so.

A finding belongs to the review when a line it spans was added or changed by the pull request (a finding
on a divergent sizing path spans that path's function, so it counts when the function was touched). Each
comment sits on changed lines; a safe fix becomes a ```suggestion``` that replaces exactly the lines it
is anchored to, computed by applying the fix to the file's text (kvlint.fixing.apply.apply_fixes).
"""

from __future__ import annotations

import difflib
import hashlib
import re
from dataclasses import dataclass, field
from urllib.parse import quote

from kvlint.errors import FixError
from kvlint.fixing.apply import apply_fixes
from kvlint.engine.registry import rule_by_code
from kvlint.review.diff import ChangedFile
from kvlint.types import Applicability, Finding

MARKER_PREFIX = "<!-- kvlint:"
_MARKER = re.compile(r"<!-- kvlint:([A-Z]+\d+):([^:\s]*):([0-9a-f]+(?:-\d+)?(?:\+[a-z]+)?) -->")


@dataclass(frozen=True)
class Region:
    """Lines first..last (1-based, inclusive) of the head file, to be replaced by `text` (lines joined by \\n)."""

    first: int
    last: int
    text: str


@dataclass
class ReviewComment:
    path: str
    line: int
    start_line: int | None  # set for a multi-line comment
    findings: list[Finding]
    markers: list[str]
    suggestion: Region | None = None
    # A safe fix that could not be offered as a suggestion here, or what its suggestion leaves out.
    notes: list[str] = field(default_factory=list)
    # For a companion comment (the import part of a fix), the line of the comment holding the main part.
    companion_of: int | None = None

    @property
    def first_line(self) -> int:
        return self.start_line or self.line


@dataclass
class Review:
    comments: list[ReviewComment]
    in_diff: list[Finding]
    outside_diff: list[Finding]  # in changed files, on lines the pull request does not touch
    refused: list[str]
    files_checked: int
    commit: str | None = None


def marker(code: str, path: str, fingerprint: str) -> str:
    # The path is percent-encoded: whatever a file is called, it cannot end the HTML comment.
    return f"{MARKER_PREFIX}{code}:{quote(path, safe='/._-')}:{fingerprint} -->"


def markers_in(body: str) -> tuple[str, ...]:
    return tuple(sorted(match.group(0) for match in _MARKER.finditer(body or "")))


def fingerprint(finding: Finding, lines: list[str]) -> str:
    """Stable across pushes that only move the finding: rule, file, message and the flagged line's text."""
    first = lines[finding.line - 1] if 0 < finding.line <= len(lines) else ""
    material = "\0".join([finding.code, finding.path, " ".join(finding.message.split()), " ".join(first.split())])
    return hashlib.sha256(material.encode("utf-8", "surrogatepass")).hexdigest()[:12]


def in_diff(finding: Finding, changed: ChangedFile | None) -> bool:
    return changed is not None and changed.touches(finding.line, max(finding.end_line, finding.line))


def build_review(findings: list[Finding], changes: dict[str, ChangedFile], texts: dict[str, str], refused: list[str], files_checked: int) -> Review:
    inside = [f for f in findings if in_diff(f, changes.get(f.path))]
    outside = [f for f in findings if f not in inside]
    comments: list[ReviewComment] = []
    seen: dict[str, int] = {}

    def marker_for(finding: Finding, suffix: str = "") -> str:
        base = fingerprint(finding, texts.get(finding.path, "").splitlines())
        count = seen.get(base + suffix, 0) + 1
        seen[base + suffix] = count
        return marker(finding.code, finding.path, base + (f"-{count}" if count > 1 else "") + suffix)

    # Findings with a safe fix first: their suggestion fixes the comment's range, and what else is found on
    # those lines joins that comment instead of opening a second thread on the same code.
    ordered = sorted(inside, key=lambda f: (not _has_safe_fix(f), f.path, f.line, f.code))
    for finding in ordered:
        changed = changes[finding.path]
        text = texts.get(finding.path)
        regions = _fix_regions(text, finding) if text is not None and _has_safe_fix(finding) else None
        if regions:
            main, companions = regions
            host = next((c for c in comments if c.path == finding.path and c.suggestion == main), None)
            if host is not None:
                host.findings.append(finding)
                host.markers.append(marker_for(finding))
                continue
            if all(line in changed.visible for line in range(main.first, main.last + 1)):
                comment = ReviewComment(
                    finding.path, main.last, main.first if main.last > main.first else None, [finding], [marker_for(finding)], main
                )
                comments.append(comment)
                for region in companions:
                    _add_companion(comments, comment, finding, region, changed, marker_for)
                continue
        anchor = finding.line if finding.line in changed.added else changed.first_added(finding.line, max(finding.end_line, finding.line))
        host = next((c for c in comments if c.path == finding.path and c.first_line <= anchor <= c.line and c.companion_of is None), None)
        if host is not None:
            host.findings.append(finding)
            host.markers.append(marker_for(finding))
            continue
        comment = ReviewComment(finding.path, anchor, None, [finding], [marker_for(finding)])
        if _has_safe_fix(finding):
            comment.notes.append(f"A safe fix exists but reaches beyond the lines this pull request changes: `kvlint fix {finding.path}` applies it.")
        comments.append(comment)
    comments.sort(key=lambda c: (c.path, c.line))
    return Review(comments, inside, outside, refused, files_checked)


def _add_companion(comments, main_comment: ReviewComment, finding: Finding, region: Region, changed: ChangedFile, marker_for) -> None:
    """The part of a fix outside the main suggestion (the resolver's import): a suggestion of its own if
    GitHub shows those lines, else a note on the main comment."""
    if all(line in changed.visible for line in range(region.first, region.last + 1)):
        comments.append(
            ReviewComment(
                finding.path,
                region.last,
                region.first if region.last > region.first else None,
                [finding],
                [marker_for(finding, "+imports")],
                region,
                companion_of=main_comment.line,
            )
        )
        main_comment.notes.append(f"Commit this together with the import suggestion at line {region.first}.")
        return
    needed = [f"`from {change.module} import {change.name}`" for change in finding.fix.imports if change.add]
    what = f"the fix also adds {', '.join(needed)}" if needed else f"the fix also changes lines {region.first}–{region.last}"
    main_comment.notes.append(f"This suggestion alone is not the whole fix: {what}, outside this diff; `kvlint fix {finding.path}` applies both.")


def _has_safe_fix(finding: Finding) -> bool:
    return finding.fix is not None and finding.fix.applicability is Applicability.SAFE and bool(finding.fix.edits)


def _fix_regions(text: str, finding: Finding) -> tuple[Region, list[Region]] | None:
    """(the region holding the fix's edits, the other regions it changes — imports), or None."""
    try:
        outcome = apply_fixes(text, [finding], unsafe=False)
    except FixError:
        return None
    if not outcome.applied or outcome.text == text:
        return None
    old, new = text.splitlines(), outcome.text.splitlines()
    blocks = [op for op in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes() if op[0] != "equal"]
    if not blocks:
        return None
    first_edit = min(edit.line for edit in finding.fix.edits)
    last_edit = max(edit.end_line for edit in finding.fix.edits)
    main = [op for op in blocks if _old_span(op)[0] <= last_edit and _old_span(op)[1] >= first_edit]
    if not main:
        return None
    others = [op for op in blocks if op not in main]
    # Merging the blocks around the edit is exact: the equal lines between them map one to one.
    merged = ("replace", min(op[1] for op in main), max(op[2] for op in main), min(op[3] for op in main), max(op[4] for op in main))
    return _region(merged, old, new), [_region(op, old, new) for op in others]


def _old_span(op) -> tuple[int, int]:
    """The 1-based old lines a block touches; an insertion touches the line before it (or after, at the top)."""
    _, i1, i2, _, _ = op
    if i1 == i2:
        return (i1, i1) if i1 > 0 else (1, 1)
    return i1 + 1, i2


def _region(op, old: list[str], new: list[str]) -> Region:
    _, i1, i2, j1, j2 = op
    if i1 == i2:  # a pure insertion: a suggestion must replace at least one line, so take a neighbour along
        if i1 > 0:
            i1, j1 = i1 - 1, j1 - 1
        else:
            i2, j2 = i2 + 1, j2 + 1
    return Region(i1 + 1, i2, "\n".join(new[j1:j2]))


def why_sentence(code: str) -> str:
    """The first sentence of the rule's "Why is this bad?" section."""
    rule = rule_by_code(code)
    flat = rule.doc_section("Why is this bad?") if rule is not None else ""
    match = re.match(r"(.+?[.!?])(\s|$)", flat)
    return match.group(1) if match else flat
