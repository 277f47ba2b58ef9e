"""The review as data, for the fork-safe workflow: stage one saves it, stage two posts what kvlint renders.

Stage one runs on a fork's pull request, whose workflow file the fork controls, so the saved review is
untrusted. It therefore holds no markdown at all, only fields (`--format review-data`): per comment its
path, lines, and per finding the rule code, the message, the marker fingerprint and whether a safe fix
exists; the suggestion's replacement lines; notes as kinds with numbers and import names; the summary as
counts. Stage two checks every field's type, range and shape, takes each rule's name from kvlint's own
registry, and renders every body with render.py, so whatever the file says reaches GitHub escaped, in
kvlint's sentences, as a COMMENT review. Anything else is refused with the field that is wrong.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass

from kvlint.engine.registry import rule_by_code, rule_codes
from kvlint.filesystem import FileTooLarge, describe, read_regular_file
from kvlint.review.diff import ReviewError, safe_relative_path
from kvlint.review.fitting import MAX_RELATED, MAX_SUGGESTION, MAX_TEXT, MAX_TITLE, fit_comments
from kvlint.review.review import (
    FINGERPRINT,
    NOT_READ_SHOWN,
    NOTE_KINDS,
    Note,
    Region,
    Review,
    ReviewComment,
    Summary,
    fingerprint_of,
    marker,
)
from kvlint.types import Applicability, Finding, Fix, RelatedLocation, Severity

FORMAT_VERSION = 1
MAX_FILE_BYTES = 16 * 1024 * 1024
_MAX_COMMENTS = 5_000
_MAX_FINDINGS_PER_COMMENT = 50
# A message, a related location's message, a suggestion: stage one fits them to these (kvlint.review.fitting).
_MAX_RELATED = MAX_RELATED  # related locations of one finding (the other findings of its root cause)
_MAX_TEXT = MAX_TEXT
_MAX_SUGGESTION = MAX_SUGGESTION
_MAX_LINE = 10_000_000
_MAX_COUNT = 10_000_000
_COMMIT = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
_DOTTED_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass
class SavedReview:
    summary: Summary
    comments: list[ReviewComment]
    commit: str | None


def review_data(review: Review, summary: Summary) -> dict:
    """What stage one writes: everything stage two needs to render the review, and no markdown."""
    return {
        "kvlint_review": FORMAT_VERSION,
        "commit": review.commit,
        "summary": {
            "in_diff": _counts_data(summary.in_diff),
            "outside_diff": _counts_data(summary.outside_diff),
            "omitted": _counts_data(summary.omitted),
            "fixable": summary.fixable,
            "files_checked": summary.files_checked,
            "refused": summary.refused,
            "incomplete": summary.incomplete,
            "not_read": [{"path": path, "why": why} for path, why in summary.not_read],
            "analysis_unread": summary.analysis_unread,
            "suppressions_added": [{"path": path, "line": line} for path, line in summary.suppressions_added],
        },
        "comments": [_comment_data(comment) for comment in review.comments],
    }


def _counts_data(counts: list[tuple[str, str, int]]) -> list[dict]:
    return [{"code": code, "count": count} for code, _, count in counts]


def _comment_data(comment: ReviewComment) -> dict:
    findings = []
    for finding, marker_text in zip(comment.findings, comment.markers):
        safe = finding.fix is not None and finding.fix.applicability is Applicability.SAFE
        findings.append(
            {
                "code": finding.code,
                "message": finding.message,
                "fingerprint": fingerprint_of(marker_text),
                "safe_fix": safe,
                "fix_title": finding.fix.title if safe else None,
                "severity": finding.severity.value,
                "related": [
                    {
                        "path": r.path,
                        "line": r.line,
                        "column": r.column,
                        "end_line": r.end_line,
                        "end_column": r.end_column,
                        "code": r.code,
                        "message": r.message,
                    }
                    for r in finding.related
                ],
            }
        )
    suggestion = comment.suggestion
    return {
        "path": comment.path,
        "line": comment.line,
        "start_line": comment.start_line,
        "companion_of": comment.companion_of,
        "findings": findings,
        "suggestion": None
        if suggestion is None
        else {"first": suggestion.first, "last": suggestion.last, "text": suggestion.text},
        "notes": [
            {"kind": n.kind, "line": n.line, "last": n.last, "imports": [list(pair) for pair in n.imports]}
            for n in comment.notes
        ],
    }


def load(path: str) -> dict:
    """The saved review's JSON, read with a size cap (the file comes from an untrusted run)."""
    try:  # a regular file only, size capped before reading, never waited on (a FIFO in its place)
        data = read_regular_file(path, MAX_FILE_BYTES)
    except FileTooLarge:
        raise ReviewError(f"{path}: the saved review is larger than {MAX_FILE_BYTES // (1024 * 1024)} MiB") from None
    except OSError as error:
        raise ReviewError(f"{path}: cannot read the saved review: {describe(error)}") from None
    try:
        return json.loads(data)
    except (ValueError, RecursionError) as error:
        raise ReviewError(f"{path}: the saved review is not JSON ({error})") from None


def review_from_data(data) -> SavedReview:
    """The saved review, every field checked; a ReviewError naming the first field that is wrong."""
    known = set(rule_codes())
    names: dict[str, str] = {}

    def name_of(code) -> str:
        if not isinstance(code, str) or code not in known:
            _refuse(f"unknown rule code {str(code)[:20]!r}")
        if code not in names:
            names[code] = rule_by_code(code).NAME
        return names[code]

    if not isinstance(data, dict) or "kvlint_review" not in data:
        _refuse("not a kvlint review-data file (stage one must run `kvlint review --format review-data`)")
    if data.get("kvlint_review") != FORMAT_VERSION:
        _refuse(f"format version {str(data.get('kvlint_review'))[:20]!r}, this kvlint reads {FORMAT_VERSION}")
    commit = data.get("commit")
    if commit is not None and (not isinstance(commit, str) or not _COMMIT.fullmatch(commit)):
        _refuse("commit")
    summary = _summary_from(_dict(data.get("summary"), "summary"), name_of)
    raw_comments = data.get("comments")
    if not isinstance(raw_comments, list) or len(raw_comments) > _MAX_COMMENTS:
        _refuse(f"comments (a list of at most {_MAX_COMMENTS})")
    comments = [_comment_from(_dict(entry, "comment"), name_of) for entry in raw_comments]
    mains = {(c.path, c.line) for c in comments if c.companion_of is None}
    for comment in comments:
        if comment.companion_of is not None and (comment.path, comment.companion_of) not in mains:
            _refuse("companion_of names no comment")
    comments.sort(key=lambda c: (c.path, c.line))
    return SavedReview(summary, comments, commit)


def _refuse(why: str):
    raise ReviewError(f"the saved review is not one kvlint writes: {why}")


def _dict(value, what: str) -> dict:
    if not isinstance(value, dict):
        _refuse(f"{what} is not an object")
    return value


def _integer(value, what: str, low: int = 0, high: int = _MAX_COUNT) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        _refuse(what)
    return value


def _text(value, what: str, limit: int = _MAX_TEXT) -> str:
    if not isinstance(value, str) or len(value) > limit:
        _refuse(what)
    return value


def _path(value) -> str:
    if not isinstance(value, str) or len(value) > 1_000 or safe_relative_path(value) is not None:
        _refuse("a comment or suppression path")
    return value


def _summary_from(raw: dict, name_of) -> Summary:
    def counts(key: str) -> list[tuple[str, str, int]]:
        entries = raw.get(key, [])
        if not isinstance(entries, list) or len(entries) > 1_000:
            _refuse(f"summary.{key}")
        total: Counter = Counter()
        for entry in entries:
            entry = _dict(entry, f"summary.{key}")
            code = entry.get("code")
            total[(code, name_of(code))] += _integer(entry.get("count"), f"summary.{key} count")
        return sorted((code, name, count) for (code, name), count in total.items())

    suppressions = raw.get("suppressions_added", [])
    if not isinstance(suppressions, list) or len(suppressions) > 10_000:
        _refuse("summary.suppressions_added")
    return Summary(
        in_diff=counts("in_diff"),
        outside_diff=counts("outside_diff"),
        omitted=counts("omitted"),
        fixable=_integer(raw.get("fixable", 0), "summary.fixable"),
        files_checked=_integer(raw.get("files_checked", 0), "summary.files_checked"),
        refused=_integer(raw.get("refused", 0), "summary.refused"),
        incomplete=_integer(raw.get("incomplete", 0), "summary.incomplete"),
        not_read=_not_read_from(raw.get("not_read", [])),
        analysis_unread=_integer(raw.get("analysis_unread", 0), "summary.analysis_unread"),
        suppressions_added=[
            (_path(_dict(s, "suppression").get("path")), _integer(s.get("line"), "suppression line", 1, _MAX_LINE))
            for s in suppressions
        ],
        max_comments=0,  # the posting stage's own limit
    )


def _not_read_from(raw) -> list[tuple[str, str]]:
    """The files stage one could not read, as it names them: a path and a reason, each one line of printable
    text (stage one escapes them; stage two escapes them again when it renders)."""
    if not isinstance(raw, list) or len(raw) > NOT_READ_SHOWN:
        _refuse(f"summary.not_read (a list of at most {NOT_READ_SHOWN})")
    entries = []
    for entry in raw:
        entry = _dict(entry, "summary.not_read entry")
        path = _text(entry.get("path"), "summary.not_read path", 1_000)
        why = _text(entry.get("why"), "summary.not_read why", 200)
        if not path or not why or not path.isprintable() or not why.isprintable():
            _refuse("summary.not_read entry")
        entries.append((path, why))
    return entries


def _comment_from(raw: dict, name_of) -> ReviewComment:
    path = _path(raw.get("path"))
    line = _integer(raw.get("line"), "comment line", 1, _MAX_LINE)
    start_line = raw.get("start_line")
    if start_line is not None:
        start_line = _integer(start_line, "comment start_line", 1, line - 1)
    companion_of = raw.get("companion_of")
    if companion_of is not None:
        companion_of = _integer(companion_of, "comment companion_of", 1, _MAX_LINE)
    raw_findings = raw.get("findings")
    if not isinstance(raw_findings, list) or not 1 <= len(raw_findings) <= _MAX_FINDINGS_PER_COMMENT:
        _refuse("comment findings")
    findings: list[Finding] = []
    markers: list[str] = []
    for entry in raw_findings:
        entry = _dict(entry, "finding")
        code = entry.get("code")
        name = name_of(code)
        fingerprint = entry.get("fingerprint")
        if not isinstance(fingerprint, str) or not FINGERPRINT.fullmatch(fingerprint):
            _refuse("finding fingerprint")
        if fingerprint.endswith("+imports") != (companion_of is not None):
            _refuse("finding fingerprint")
        fix = None
        if entry.get("safe_fix") is True:
            fix = Fix(
                title=_text(entry.get("fix_title"), "finding fix_title", MAX_TITLE),
                applicability=Applicability.SAFE,
                edits=(),
            )
        message = _text(entry.get("message"), "finding message")
        severity = entry.get("severity", Severity.ERROR.value)
        if severity not in {s.value for s in Severity}:
            _refuse("finding severity")
        related = _related_from(entry.get("related", []), name_of)
        findings.append(Finding(path, line, 1, line, 1, code, name, message, Severity(severity), fix, related=related))
        markers.append(marker(code, path, fingerprint))
    suggestion = None
    if raw.get("suggestion") is not None:
        raw_suggestion = _dict(raw.get("suggestion"), "suggestion")
        first = raw_suggestion.get("first")
        last = raw_suggestion.get("last")
        # A suggestion replaces exactly the comment's lines, and only a safe fix makes one.
        if first != (start_line or line) or last != line or not any(f.fix for f in findings):
            _refuse("suggestion lines")
        suggestion = Region(first, last, _text(raw_suggestion.get("text"), "suggestion text", _MAX_SUGGESTION))
    raw_notes = raw.get("notes", [])
    if not isinstance(raw_notes, list) or len(raw_notes) > 10:
        _refuse("comment notes")
    notes = [_note_from(_dict(note, "note")) for note in raw_notes]
    return ReviewComment(path, line, start_line, findings, markers, suggestion, notes, companion_of)


def _related_from(raw, name_of) -> tuple[RelatedLocation, ...]:
    if not isinstance(raw, list) or len(raw) > _MAX_RELATED:
        _refuse("finding related")
    related = []
    for entry in raw:
        entry = _dict(entry, "related location")
        code = entry.get("code")
        name_of(code)  # a rule kvlint has
        line = _integer(entry.get("line"), "related line", 1, _MAX_LINE)
        end_line = _integer(entry.get("end_line"), "related end_line", line, _MAX_LINE)
        related.append(
            RelatedLocation(
                _path(entry.get("path")),
                line,
                _integer(entry.get("column"), "related column", 1, _MAX_LINE),
                end_line,
                _integer(entry.get("end_column"), "related end_column", 1, _MAX_LINE),
                code,
                _text(entry.get("message"), "related message"),
            )
        )
    return tuple(related)


def _note_from(raw: dict) -> Note:
    kind = raw.get("kind")
    if kind not in NOTE_KINDS:
        _refuse("note kind")
    imports = raw.get("imports", [])
    if not isinstance(imports, list) or len(imports) > 10:
        _refuse("note imports")
    pairs: list[tuple[str, str]] = []
    for pair in imports:
        if (
            not isinstance(pair, list)
            or len(pair) != 2
            or not all(isinstance(part, str) and len(part) <= 200 for part in pair)
            or not _DOTTED_NAME.fullmatch(pair[0])
            or not _NAME.fullmatch(pair[1])
        ):
            _refuse("note imports")
        pairs.append((pair[0], pair[1]))
    return Note(
        kind,
        _integer(raw.get("line", 0), "note line", 0, _MAX_LINE),
        _integer(raw.get("last", 0), "note last", 0, _MAX_LINE),
        tuple(pairs),
    )


def with_limit(saved: SavedReview, max_comments: int) -> tuple[Summary, list[ReviewComment]]:
    """The saved review cut to this stage's comment limit, the comments left out counted in the summary."""
    from kvlint.review.review import cap_comments, count_by_rule

    kept, dropped = cap_comments(saved.comments, max_comments)
    kept = fit_comments(kept)  # a body GitHub would refuse (422) is degraded, not the whole review lost
    omitted: Counter = Counter({(code, name): count for code, name, count in saved.summary.omitted})
    for code, name, count in count_by_rule(dropped):
        omitted[(code, name)] += count
    summary = saved.summary
    summary.omitted = sorted((code, name, count) for (code, name), count in omitted.items())
    summary.max_comments = max_comments
    return summary, kept
