"""Which findings a pull request is answerable for, and the review comments that say so.

A finding belongs to the review when a line it spans was added or changed by the pull request (a finding
on a divergent sizing path spans that path's function, so it counts when the function was touched). Each
comment sits on changed lines; a safe fix becomes a ```suggestion``` that replaces exactly the lines it
is anchored to, computed by applying the fix to the file's text (kvlint.review.suggestions).
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from dataclasses import dataclass, field
from urllib.parse import quote

from kvlint.engine.registry import rule_by_code
from kvlint.engine.summary import DEFAULT_FAIL_ON
from kvlint.engine.suppress import suppressions
from kvlint.escaping import printable
from kvlint.fixing.syntax_gate import judged_version
from kvlint.review.diff import ChangedFile
from kvlint.review.fix_gate import REFUSED, Suggestions
from kvlint.review.hosts import Comments, has_room
from kvlint.review.suggestions import Region
from kvlint.types import Applicability, Finding, Severity

MARKER_PREFIX = "<!-- kvlint:"
_MARKER = re.compile(r"<!-- kvlint:([A-Z]+\d+):([^:\s]*):([0-9a-f]+(?:-\d+)?(?:\+[a-z]+)?) -->")
FINGERPRINT = re.compile(r"[0-9a-f]{12}(?:-\d{1,6})?(?:\+imports)?")
# Enough for a pull request a person reviews; the rest is counted in the summary (--max-comments).
DEFAULT_MAX_COMMENTS = 50
NOT_READ_SHOWN = 10  # files the review's body names among those it could not read; the log names them all
SHOWN_PATH = 300  # characters of a path the review's body names (a pull request's names can be long)
SHORTENED = " [… shortened; kvlint check shows it whole]"


def shorten(text: str, limit: int) -> str:
    """`text` if it fits in `limit` characters, else its start and SHORTENED, `limit` characters in all."""
    return text if len(text) <= limit else text[: max(limit - len(SHORTENED), 0)] + SHORTENED


@dataclass(frozen=True)
class Note:
    """A sentence kvlint adds under a comment, kept as data (render.note_sentence words it), so that the
    second stage of the fork-safe workflow can render it without taking text from the saved review.

    kind: "fix-beyond-diff" (the fix reaches past the changed lines), "commit-with-imports" (`line`: the
    import suggestion's first line), "fix-needs-imports" (`imports`: (module, name) the fix adds outside
    the diff), "fix-changes-lines" (the fix also changes lines `line`..`last` outside the diff);
    "function-first-change": a finding on a whole function (at `line`) shown on its first changed line;
    "new-finding-at-call" / "-in-function" / "-in-file": a finding the pull request causes at `line`, which
    it does not change, shown on a changed call to its function / the nearest changed line of its function
    / of its file (kvlint.review.placement); "related-line-changed": a finding at `line` whose root cause
    includes this changed line (one of its related locations); "fix-does-not-compile": the safe fix fails
    `kvlint fix`'s gate, the file with it applied does not compile for Python `line`.`last` (the oldest the
    project supports); "fix-not-checked": that gate's budget for the file ran out before this fix;
    "fix-too-long": the suggestion was left out, longer than a comment holds (kvlint.review.fitting).
    """

    kind: str
    line: int = 0
    last: int = 0
    imports: tuple[tuple[str, str], ...] = ()


NOTE_KINDS = (
    "fix-beyond-diff",
    "commit-with-imports",
    "fix-needs-imports",
    "fix-changes-lines",
    "function-first-change",
    "new-finding-at-call",
    "new-finding-in-function",
    "new-finding-in-file",
    "related-line-changed",
    "fix-does-not-compile",
    "fix-not-checked",
    "fix-too-long",
)
# A safe fix that fails `kvlint fix`'s gate: no suggestion, and no "kvlint fix applies it" either.
_REFUSED_FIX = ("fix-does-not-compile", "fix-not-checked")


@dataclass
class ReviewComment:
    path: str
    line: int
    start_line: int | None  # set for a multi-line comment
    findings: list[Finding]
    markers: list[str]
    suggestion: Region | None = None
    # A safe fix that could not be offered as a suggestion here, or what its suggestion leaves out.
    notes: list[Note] = field(default_factory=list)
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
    refused: list[tuple[str, str]]  # (path, why) of each file the review could not read
    files_checked: int
    commit: str | None = None
    # (path, line) of each `# kvlint: ignore` comment on a line the pull request adds or changes.
    suppressions_added: list[tuple[str, int]] = field(default_factory=list)
    omitted: list[Finding] = field(default_factory=list)  # in the diff, but past the comment limit
    # What the cross-file analysis could not read or do, one line each: said on stderr and in the body, exit 2.
    incomplete: list[str] = field(default_factory=list)
    fail_on: Severity = DEFAULT_FAIL_ON  # the configuration's (the base revision's): which findings fail the run
    # How many of `refused` the cross-file analysis needed: its findings may be missing; fails the run as a
    # finding does (not an error: the review is posted, and --exit-zero passes it).
    analysis_unread: int = 0


@dataclass
class Summary:
    """What the review body says, as counts: (code, name, count) per rule, sorted by code."""

    in_diff: list[tuple[str, str, int]]
    outside_diff: list[tuple[str, str, int]]
    omitted: list[tuple[str, str, int]]
    fixable: int
    files_checked: int
    refused: int
    suppressions_added: list[tuple[str, int]]
    max_comments: int
    incomplete: int = 0  # lines of Review.incomplete: cross-file findings may be missing
    not_read: list[tuple[str, str]] = field(default_factory=list)  # the first of `refused`, (path, why), escaped
    analysis_unread: int = 0  # Review.analysis_unread

    @property
    def in_diff_total(self) -> int:
        return sum(count for _, _, count in self.in_diff)


def count_by_rule(findings) -> list[tuple[str, str, int]]:
    counter = Counter((f.code, f.name) for f in findings)
    return sorted((code, name, count) for (code, name), count in counter.items())


def summarise(review: Review, max_comments: int) -> Summary:
    return Summary(
        in_diff=count_by_rule(review.in_diff),
        outside_diff=count_by_rule(review.outside_diff),
        omitted=count_by_rule(review.omitted),
        fixable=sum(1 for f in review.in_diff if f.fix and f.fix.applicability is Applicability.SAFE),
        files_checked=review.files_checked,
        refused=len(review.refused),
        suppressions_added=[(shorten(path, SHOWN_PATH), line) for path, line in review.suppressions_added],
        max_comments=max_comments,
        incomplete=len(review.incomplete),
        # As stage two accepts them (kvlint.review.saved): one line of printable text each, of bounded length.
        not_read=[
            (shorten(printable(path), SHOWN_PATH), shorten(printable(why), 200))
            for path, why in review.refused[:NOT_READ_SHOWN]
        ],
        analysis_unread=review.analysis_unread,
    )


def marker(code: str, path: str, fingerprint: str) -> str:
    # The path is percent-encoded: whatever a file is called, it cannot end the HTML comment.
    return f"{MARKER_PREFIX}{code}:{quote(path, safe='/._-')}:{fingerprint} -->"


def markers_in(body: str) -> tuple[str, ...]:
    return tuple(sorted(match.group(0) for match in _MARKER.finditer(body or "")))


def leading_markers(body: str) -> tuple[str, ...]:
    """The markers a kvlint comment starts with, each a whole line; () for any other text.

    A comment counts as kvlint's only when its first line is a complete marker, so quoting or mentioning
    one (`<!-- kvlint:` anywhere, or a truncated marker) does not make a person's comment kvlint's.
    """
    found: list[str] = []
    for line in (body or "").split("\n"):
        if _MARKER.fullmatch(line) is None:
            break
        found.append(line)
    return tuple(sorted(found))


def fingerprint_of(marker_text: str) -> str:
    match = _MARKER.fullmatch(marker_text)
    return match.group(3) if match else ""


def fingerprint(finding: Finding, lines: list[str]) -> str:
    """Stable across pushes that only move the finding: rule, file, message and the flagged line's text."""
    first = lines[finding.line - 1] if 0 < finding.line <= len(lines) else ""
    material = "\0".join([finding.code, finding.path, " ".join(finding.message.split()), " ".join(first.split())])
    return hashlib.sha256(material.encode("utf-8", "surrogatepass")).hexdigest()[:12]


def in_diff(finding: Finding, changed: ChangedFile | None) -> bool:
    return changed is not None and changed.touches(finding.line, max(finding.end_line, finding.line))


def added_suppressions(changes: dict[str, ChangedFile], texts: dict[str, str]) -> list[tuple[str, int]]:
    """Each `# kvlint: ignore` on a line the pull request adds or changes: it silences kvlint for itself."""
    found: list[tuple[str, int]] = []
    for path in sorted(changes):
        text = texts.get(path)
        if text is None or "kvlint" not in text:
            continue
        found.extend((path, line) for line in sorted(suppressions(text)) if line in changes[path].added)
    return found


def build_review(
    findings: list[Finding],
    changes: dict[str, ChangedFile],
    texts: dict[str, str],
    refused: list[tuple[str, str]],
    files_checked: int,
    placed: dict[int, tuple[int, Note]] | None = None,
    oldest: tuple[int, int] | None = None,
) -> Review:
    """`placed`: id(finding) -> (changed line, note) for a finding the pull request causes on lines it
    does not change (kvlint.review.placement); it belongs to the review, shown on that line. `oldest`: the
    oldest Python the project supports, for which a suggestion must compile as `kvlint fix`'s output must."""
    placed = dict(placed or {})
    inside: list[Finding] = []
    outside: list[Finding] = []
    for finding in findings:
        changed = changes.get(finding.path)
        if id(finding) not in placed and not in_diff(finding, changed):
            related_line = _changed_related_line(finding, changed)
            if related_line is not None:  # the pull request edits a part of this root cause, not its primary line
                placed[id(finding)] = (related_line, Note("related-line-changed", line=finding.line))
        (inside if id(finding) in placed or in_diff(finding, changed) else outside).append(finding)
    comments = Comments()
    seen: dict[str, int] = {}
    lines_of: dict[str, list[str]] = {}
    suggestions = Suggestions([f for f in inside if id(f) not in placed and _has_safe_fix(f)], texts, oldest)

    def marker_for(finding: Finding, suffix: str = "") -> str:
        if finding.path not in lines_of:
            lines_of[finding.path] = texts.get(finding.path, "").splitlines()
        base = fingerprint(finding, lines_of[finding.path])
        count = seen.get(base + suffix, 0) + 1
        seen[base + suffix] = count
        return marker(finding.code, finding.path, base + (f"-{count}" if count > 1 else "") + suffix)

    # Findings with a safe fix first: their suggestion fixes the comment's range, and what else is found on
    # those lines joins that comment instead of opening a second thread on the same code.
    ordered = sorted(inside, key=lambda f: (not _has_safe_fix(f), f.path, f.line, f.code))
    for finding in ordered:
        changed = changes[finding.path]
        if id(finding) in placed:
            anchor, note = placed[id(finding)]
            _add_on_line(comments, finding, anchor, [note], marker_for)
            continue
        regions, refusal = suggestions.of(finding) if _has_safe_fix(finding) else (None, None)
        gate_notes = _refusal_notes(refusal, oldest)
        if regions:
            main, companions = regions
            host = comments.with_suggestion(finding.path, main)
            if host is not None and has_room(host, finding):
                host.findings.append(finding)
                host.markers.append(marker_for(finding))
                continue
            # A full host: this finding gets a comment of its own below, without a second copy of the suggestion.
            if host is None and all(line in changed.visible for line in range(main.first, main.last + 1)):
                comment = ReviewComment(
                    finding.path,
                    main.last,
                    main.first if main.last > main.first else None,
                    [finding],
                    [marker_for(finding)],
                    main,
                )
                comments.add(comment)
                for region in companions:
                    _add_companion(comments, comment, finding, region, changed, marker_for)
                continue
        anchor = (
            finding.line
            if finding.line in changed.added
            else changed.first_added(finding.line, max(finding.end_line, finding.line))
        )
        whole_function = anchor != finding.line and getattr(rule_by_code(finding.code), "REPORTS_WHOLE_FUNCTION", False)
        _add_on_line(
            comments,
            finding,
            anchor,
            ([Note("function-first-change", line=finding.line)] if whole_function else []) + gate_notes,
            marker_for,
        )
    ordered_comments = sorted(comments.all, key=lambda c: (c.path, c.line))
    return Review(
        ordered_comments, inside, outside, refused, files_checked, suppressions_added=added_suppressions(changes, texts)
    )


def _refusal_notes(refusal: str | None, oldest: tuple[int, int] | None) -> list[Note]:
    """Why a safe fix has no suggestion, when it fails `kvlint fix`'s gate (kvlint.review.fix_gate)."""
    if refusal is None:
        return []
    if refusal == REFUSED:
        major, minor = judged_version(oldest)
        return [Note("fix-does-not-compile", line=major, last=minor)]
    return [Note("fix-not-checked")]


def _changed_related_line(finding: Finding, changed: ChangedFile | None) -> int | None:
    """The first line the pull request adds among the finding's related locations in its own file (the other
    findings folded into this root cause), or None."""
    if changed is None:
        return None
    for related in sorted(finding.related, key=lambda r: r.line):
        if related.path == finding.path:
            line = changed.first_added(related.line, max(related.end_line, related.line))
            if line is not None:
                return line
    return None


def _add_on_line(comments: Comments, finding: Finding, line: int, notes: list[Note], marker_for) -> None:
    """A comment on `line` for a finding without a suggestion there; joins a comment already on that line."""
    host = comments.covering(finding.path, line)
    if host is not None and has_room(host, finding, notes):
        host.findings.append(finding)
        host.markers.append(marker_for(finding))
        host.notes.extend(note for note in notes if note not in host.notes)
        return
    comment = ReviewComment(finding.path, line, None, [finding], [marker_for(finding)], notes=list(notes))
    if _has_safe_fix(finding) and not any(note.kind in _REFUSED_FIX for note in notes):
        comment.notes.append(Note("fix-beyond-diff"))
    comments.add(comment)
    if host is not None:
        comments.replace_host(comment)


def cap_comments(comments: list[ReviewComment], limit: int) -> tuple[list[ReviewComment], list[Finding]]:
    """(the first comments in file order, at most `limit`; the findings of those left out).

    A fix's import suggestion stays with its main comment: both are kept or both left out, so no kept
    comment points at a suggestion that is not there.
    """
    threads: dict[tuple[str, int], list[ReviewComment]] = {}
    for comment in comments:
        owner = comment.line if comment.companion_of is None else comment.companion_of
        threads.setdefault((comment.path, owner), []).append(comment)
    kept: list[ReviewComment] = []
    dropped: list[Finding] = []
    full = False
    for _, thread in sorted(threads.items()):
        if full or len(kept) + len(thread) > limit:
            full = True
            dropped.extend(f for c in thread if c.companion_of is None for f in c.findings)
            continue
        kept.extend(thread)
    return sorted(kept, key=lambda c: (c.path, c.line)), dropped


def limit_review(review: Review, limit: int) -> Review:
    review.comments, dropped = cap_comments(review.comments, limit)
    review.omitted = review.omitted + dropped
    return review


def _add_companion(
    comments: Comments, main_comment: ReviewComment, finding: Finding, region: Region, changed: ChangedFile, marker_for
) -> None:
    """The part of a fix outside the main suggestion (the resolver's import): a suggestion of its own if
    GitHub shows those lines, else a note on the main comment."""
    if all(line in changed.visible for line in range(region.first, region.last + 1)):
        comments.add(
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
        main_comment.notes.append(Note("commit-with-imports", line=region.first))
        return
    needed = tuple((change.module, change.name) for change in finding.fix.imports if change.add)
    if needed:
        main_comment.notes.append(Note("fix-needs-imports", imports=needed))
    else:
        main_comment.notes.append(Note("fix-changes-lines", line=region.first, last=region.last))


def _has_safe_fix(finding: Finding) -> bool:
    return finding.fix is not None and finding.fix.applicability is Applicability.SAFE and bool(finding.fix.edits)
