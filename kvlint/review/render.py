"""A review as GitHub's "create a review" JSON body, as one markdown summary, or as reviewdog's rdjson.

Everything quoted from the pull request (code in messages, paths) is escaped: code spans hold no backtick,
text outside them has HTML and markdown punctuation escaped and @-mentions broken, and a suggestion's
fence is longer than any backtick run inside it.
"""

from __future__ import annotations

import html
import re
from collections import Counter

from kvlint.engine.registry import rule_class
from kvlint.review.review import Review, ReviewComment, why_sentence
from kvlint.types import Applicability, Finding

SOURCE_NAME = "kvlint"
SOURCE_URL = "https://pypi.org/project/kvlint/"
SUMMARY_MARKER = "<!-- kvlint:summary -->"
# Inline markup anywhere (emphasis, links, tables, strikethrough); block markup only where a line starts.
_MARKDOWN_PUNCTUATION = re.compile(r"([\\*_\[\]|~])")
_LINE_START_MARKUP = re.compile(r"^(\s*)([#+\-=]|\d+[.)])")


def escape_text(text: str) -> str:
    """Plain text that renders as itself: no HTML, no emphasis or links, no @-mentions, one line."""
    flat = re.sub(r"\s+", " ", text)
    escaped = html.escape(flat, quote=False)
    escaped = _MARKDOWN_PUNCTUATION.sub(r"\\\1", escaped).replace("`", "\\`")
    escaped = _LINE_START_MARKUP.sub(lambda m: m.group(1) + m.group(2)[:-1] + "\\" + m.group(2)[-1], escaped)
    return escaped.replace("@", "@\u200b")  # a zero-width space: no one is pinged by quoted code


def code_span(text: str) -> str:
    flat = " ".join(text.split())
    if not flat or "`" in flat:
        return escape_text(flat)
    # A code span shows its content literally: no HTML, no mentions; only a backtick could end it early.
    return f"`{flat}`"


def escape_message(message: str) -> str:
    """A kvlint message with its `code` spans kept as code spans; everything else escaped as text.

    Splitting on backticks leaves no backtick inside a span, so quoted code cannot close it early; with
    an odd number of backticks the pairing is unknowable and the whole message is escaped as text.
    """
    parts = message.split("`")
    if len(parts) % 2 == 0:
        return escape_text(message)
    return "".join(code_span(part) if index % 2 else escape_text(part) for index, part in enumerate(parts))


def fence_for(text: str) -> str:
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def _counts(findings: list[Finding]) -> list[tuple[str, int]]:
    counter = Counter(f"{f.code} {f.name}" for f in findings)
    return sorted(counter.items())


def summary_body(review: Review) -> str:
    lines = [SUMMARY_MARKER]
    if review.in_diff:
        lines.append(f"**kvlint** found {len(review.in_diff)} KV-cache sizing issue(s) on lines this pull request changes:")
        lines.append("")
        lines.append("| rule | findings |")
        lines.append("|---|---|")
        lines.extend(f"| {escape_text(name)} | {count} |" for name, count in _counts(review.in_diff))
        fixable = sum(1 for f in review.in_diff if f.fix and f.fix.applicability is Applicability.SAFE)
        if fixable:
            lines.append("")
            lines.append(f"{fixable} have a safe fix, offered as a suggestion where the diff allows; `kvlint fix` applies them with their imports.")
    else:
        lines.append(f"**kvlint** found no KV-cache sizing issue on the lines this pull request changes ({review.files_checked} file(s) checked).")
    if review.outside_diff:
        lines.append("")
        lines.append(
            f"{len(review.outside_diff)} more finding(s) in the changed files are on lines this pull request does not touch; "
            "they are not commented (`kvlint check` lists them): "
            + ", ".join(f"{escape_text(name)} × {count}" for name, count in _counts(review.outside_diff))
            + "."
        )
    if review.refused:
        lines.append("")
        lines.append(f"Not read: {len(review.refused)} path(s) that leave the repository or are symbolic links.")
    return "\n".join(lines) + "\n"


def comment_body(comment: ReviewComment, markers: bool = True, language: str = "suggestion") -> str:
    """A review comment: hidden markers (how a later run recognises it), what and why, the suggestion."""
    parts = ["\n".join(comment.markers)] if markers else []
    if comment.companion_of is not None:
        finding = comment.findings[0]
        parts.append(f"**kvlint {finding.code}**: the import part of the fix suggested at line {comment.companion_of}.")
    else:
        for finding in comment.findings:
            why = why_sentence(finding.code)
            sentence = f"**kvlint {finding.code} {escape_text(finding.name)}**: {escape_message(finding.message)}."
            if why:
                sentence += f" {escape_message(why)}"
            parts.append(sentence)
    fixes = [f for f in comment.findings if f.fix and f.fix.applicability is Applicability.SAFE]
    if comment.suggestion is not None:
        title = fixes[0].fix.title if fixes else "Apply the fix"
        if comment.companion_of is None:
            parts.append(f"Suggested fix (safe): {escape_message(title)}.")
        fence = fence_for(comment.suggestion.text)
        parts.append(f"{fence}{language}\n{comment.suggestion.text}\n{fence}")
    parts.extend(escape_message(note) for note in comment.notes)
    return "\n\n".join(parts) + "\n"


def github_review(review: Review) -> dict:
    """The JSON body of POST /repos/{owner}/{repo}/pulls/{pull_number}/reviews."""
    comments = []
    for comment in review.comments:
        entry: dict = {"path": comment.path, "line": comment.line, "side": "RIGHT", "body": comment_body(comment)}
        if comment.start_line is not None:
            entry["start_line"] = comment.start_line
            entry["start_side"] = "RIGHT"
        comments.append(entry)
    payload: dict = {"event": "COMMENT", "body": summary_body(review), "comments": comments}
    if review.commit:
        payload["commit_id"] = review.commit
    return payload


def markdown(review: Review) -> str:
    """One summary comment: the counts, then every finding in the diff with its suggestion."""
    lines = [summary_body(review).rstrip("\n")]
    for comment in review.comments:
        if comment.companion_of is not None:
            continue
        lines.append("")
        where = f"{comment.start_line}–{comment.line}" if comment.start_line else f"{comment.line}"
        lines.append(f"### {code_span(comment.path)} line {where}")
        lines.append("")
        lines.append(comment_body(comment, markers=False, language="python").rstrip("\n"))
    return "\n".join(lines) + "\n"


def _utf8_column(line_text: str, column: int) -> int:
    """A 1-based character column as reviewdog wants it: 1-based, counted in UTF-8 bytes."""
    return len(line_text[: max(column - 1, 0)].encode("utf-8", "surrogatepass")) + 1


def rdjson(review: Review, texts: dict[str, str]) -> dict:
    """reviewdog's DiagnosticResult (rdjson) for the findings in the diff."""
    diagnostics = []
    for comment in review.comments:
        if comment.companion_of is not None:
            continue
        for finding in comment.findings:
            lines = texts.get(finding.path, "").splitlines()

            def position(line: int, column: int) -> dict:
                text = lines[line - 1] if 0 < line <= len(lines) else ""
                return {"line": line, "column": _utf8_column(text, column)}

            if getattr(rule_class(finding.code), "REPORTS_WHOLE_FUNCTION", False) or finding.end_line - finding.line > 20:
                # A whole function: point at the changed line the comment sits on.
                location_range = {"start": {"line": comment.line}}
            else:
                location_range = {"start": position(finding.line, finding.column), "end": position(finding.end_line, finding.end_column)}
            diagnostic: dict = {
                "message": f"{finding.message}",
                "location": {"path": finding.path, "range": location_range},
                "severity": "ERROR" if finding.severity.value == "error" else "WARNING",
                "code": {"value": finding.code, "url": f"{SOURCE_URL}#{finding.code.lower()}"},
            }
            if comment.suggestion is not None and finding.fix and finding.fix.applicability is Applicability.SAFE:
                suggestions = [comment.suggestion] + [
                    c.suggestion for c in review.comments if c.companion_of == comment.line and c.path == comment.path and c.suggestion
                ]
                # Line-wise ranges (no columns): the lines first..last, replaced by the text.
                diagnostic["suggestions"] = [
                    {"range": {"start": {"line": s.first}, "end": {"line": s.last}}, "text": s.text} for s in suggestions
                ]
            diagnostics.append(diagnostic)
    return {"source": {"name": SOURCE_NAME, "url": SOURCE_URL}, "severity": "ERROR" if diagnostics else "INFO", "diagnostics": diagnostics}
