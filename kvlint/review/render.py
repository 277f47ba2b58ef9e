"""A review as GitHub's "create a review" JSON body, as one markdown summary, or as reviewdog's rdjson.

Everything quoted from the pull request (code in messages, paths) is escaped: code spans hold no backtick,
text outside them has HTML and markdown punctuation escaped and @-mentions broken, and a suggestion's
fence is longer than any backtick run inside it.
"""

from __future__ import annotations

import html
import re

from kvlint.engine.registry import rule_by_code, rule_class
from kvlint.escaping import printable
from kvlint.review.review import (
    DEFAULT_MAX_COMMENTS,
    SHOWN_PATH,
    Note,
    Region,
    Review,
    ReviewComment,
    Summary,
    shorten,
    summarise,
)
from kvlint.types import Applicability, Finding, Severity

SOURCE_NAME = "kvlint"
# No URLs in rdjson: kvlint has no published home (the PyPI name `kvlint` is another project's); a rule's
# documentation is `kvlint explain CODE`, or docs/rules/CODE.md in kvlint's repository.
SUMMARY_MARKER = "<!-- kvlint:summary -->"
# reviewdog's severities (rdjson) for kvlint's; the result's own severity is its most severe diagnostic's.
RDJSON_SEVERITIES = {Severity.ERROR: "ERROR", Severity.WARNING: "WARNING"}
# Inline markup anywhere (emphasis, links, tables, strikethrough); block markup only where a line starts.
_MARKDOWN_PUNCTUATION = re.compile(r"([\\*_\[\]|~])")
_LINE_START_MARKUP = re.compile(r"^(\s*)([#+\-=]|\d+[.)])")
_SUPPRESSIONS_SHOWN = 10
# What GitHub turns into a link or a cross-reference in plain text gets a zero-width space: `#\u200b2`,
# `org/repo#\u200b5`, `https\u200b://`, `www\u200b.`.
_REFERENCE = re.compile(r"#(?=\w)")
_SCHEME = re.compile(r"\b(https?|ftp|mailto|file):", re.IGNORECASE)
_WWW = re.compile(r"\b(www)\.", re.IGNORECASE)


def escape_text(text: str) -> str:
    """Plain text that renders as itself: no HTML, no emphasis or links, no @-mentions, one line."""
    flat = printable(re.sub(r"[ \t\n\r\f\v]+", " ", text))
    escaped = html.escape(flat, quote=False)
    escaped = _MARKDOWN_PUNCTUATION.sub(r"\\\1", escaped).replace("`", "\\`")
    escaped = _LINE_START_MARKUP.sub(lambda m: m.group(1) + m.group(2)[:-1] + "\\" + m.group(2)[-1], escaped)
    escaped = escaped.replace("@", "@\u200b")  # a zero-width space: no one is pinged by quoted code
    # Nor does quoted text become a link or a reference: `#2`, `org/repo#5`, a bare URL or `www.` host.
    return _WWW.sub("\\1\u200b.", _SCHEME.sub("\\1\u200b:", _REFERENCE.sub("#\u200b", escaped)))


def code_span(text: str) -> str:
    """`text` shown literally as code: no HTML, no mentions, no links. Its delimiters are one backtick more
    than its longest run of backticks (padded with spaces), so a backtick in quoted code cannot end it."""
    flat = printable(" ".join(text.split()))
    if not flat:
        return ""
    if "`" not in flat:
        return f"`{flat}`"
    fence = "`" * (max(len(run) for run in re.findall(r"`+", flat)) + 1)
    return f"{fence} {flat} {fence}"


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


def _rule_list(counts: list[tuple[str, str, int]]) -> str:
    return ", ".join(f"{escape_text(f'{code} {name}')} × {count}" for code, name, count in counts)


def summary_body(summary: Summary) -> str:
    """The review's body: counts by rule and plain sentences; nothing in it is quoted from the pull request
    except the file names of added suppressions, escaped."""
    lines = [SUMMARY_MARKER]
    if summary.in_diff:
        lines.append(
            f"**kvlint** found {summary.in_diff_total} KV-cache sizing issue(s) on lines this pull request changes:"
        )
        lines.append("")
        lines.append("| rule | findings |")
        lines.append("|---|---|")
        lines.extend(f"| {escape_text(f'{code} {name}')} | {count} |" for code, name, count in summary.in_diff)
        if summary.fixable:
            lines.append("")
            lines.append(
                f"{summary.fixable} have a safe fix, offered as a suggestion where the diff allows; `kvlint fix` applies them with their imports."
            )
    else:
        lines.append(
            f"**kvlint** found no KV-cache sizing issue on the lines this pull request changes ({summary.files_checked} file(s) checked)."
        )
    if summary.omitted:
        omitted = sum(count for _, _, count in summary.omitted)
        lines.append("")
        lines.append(
            f"This review holds at most {summary.max_comments} comments: {omitted} finding(s) on changed lines are counted here "
            f"without a comment (`kvlint check` lists them): {_rule_list(summary.omitted)}."
        )
    if summary.outside_diff:
        lines.append("")
        lines.append(
            f"{sum(count for _, _, count in summary.outside_diff)} more finding(s) in the changed files are on lines this pull request "
            f"does not touch; they are not commented (`kvlint check` lists them): {_rule_list(summary.outside_diff)}."
        )
    if summary.suppressions_added:
        shown = summary.suppressions_added[:_SUPPRESSIONS_SHOWN]
        more = len(summary.suppressions_added) - len(shown)
        places = ", ".join(f"{code_span(shorten(path, SHOWN_PATH))} line {line}" for path, line in shown) + (
            f" and {more} more" if more else ""
        )
        lines.append("")
        lines.append(
            f"This pull request adds {len(summary.suppressions_added)} `# kvlint: ignore` comment(s), which silence kvlint on "
            f"their lines: {places}."
        )
    if summary.refused:
        lines.append("")
        lines.append(
            f"Not read: {summary.refused} path(s) that leave the repository, are symbolic links or cannot be read safely"
            + (":" if summary.not_read else ".")
        )
        lines.extend(not_read_list(summary))
    if summary.analysis_unread:
        lines.append("")
        lines.append(
            f"**The cross-file analysis did not read {summary.analysis_unread} of these file(s)**, which it reads "
            "(files under `vllm/`), so findings that compare sizing paths across files may be missing from this review."
        )
    if summary.incomplete:
        lines.append("")
        lines.append(
            f"**The cross-file analysis is incomplete**: {summary.incomplete} file(s) or step(s) it needs could not be "
            "read or done (the run's log names them), so findings that compare sizing paths across files may be "
            "missing from this review."
        )
    return "\n".join(lines) + "\n"


def not_read_list(summary: Summary) -> list[str]:
    """The files the review could not read, one item each: the path as code, the reason as text (both
    escaped: a name is the pull request's), then how many more the run's log names."""
    items = [
        f"- {code_span(shorten(printable(path), SHOWN_PATH))}: {escape_text(shorten(why, 200))}"
        for path, why in summary.not_read
    ]
    more = summary.refused - len(summary.not_read)
    if items and more > 0:
        items.append(f"- and {more} more (the run's log names them)")
    return items


def note_sentence(note: Note, path: str) -> str:
    """A note under a comment, in kvlint's words; only numbers, the comment's path and import names vary."""
    if note.kind == "fix-does-not-compile":
        return (
            f"No suggestion is offered: with this fix the file does not compile for Python {note.line}.{note.last}, "
            "the oldest this project supports, so `kvlint fix` does not apply it either."
        )
    if note.kind == "fix-too-long":
        return (
            "The suggestion is left out: it is longer than a GitHub comment holds; "
            f"{code_span(f'kvlint fix {path}')} applies the fix."
        )
    if note.kind == "fix-not-checked":
        return (
            "No suggestion is offered: too many of this file's fixes fail `kvlint fix`'s compile check for kvlint "
            "to check this one."
        )
    if note.kind == "fix-beyond-diff":
        return f"A safe fix exists but reaches beyond the lines this pull request changes: {code_span(f'kvlint fix {path}')} applies it."
    if note.kind == "commit-with-imports":
        return f"Commit this together with the import suggestion at line {note.line}."
    if note.kind == "function-first-change":
        return f"kvlint reports the whole-function finding at line {note.line}, where the function starts; it is shown here, on the function's first changed line."
    if note.kind.startswith("new-finding-"):
        where = {
            "new-finding-at-call": "this changed line calls the function it is in",
            "new-finding-in-function": "this is the nearest changed line of the function it is in",
        }.get(note.kind, "this is the nearest changed line (no changed line leads to it directly)")
        return (
            f"The finding at line {note.line} sits on a line this pull request does not change, but the base "
            f"revision does not have it: the change causes it. It is shown here because {where}."
        )
    if note.kind == "related-line-changed":
        return (
            f"This changed line is part of the finding at line {note.line}: kvlint reports that root cause once, "
            "there, and lists this line among its related locations."
        )
    if note.kind == "fix-needs-imports":
        what = "the fix also adds " + ", ".join(
            code_span(f"from {module} import {name}") for module, name in note.imports
        )
    else:
        what = f"the fix also changes lines {note.line}–{note.last}"
    return f"This suggestion alone is not the whole fix: {what}, outside this diff; {code_span(f'kvlint fix {path}')} applies both."


def comment_body(comment: ReviewComment, markers: bool = True, language: str = "suggestion") -> str:
    """A review comment: hidden markers (how a later run recognises it), what and why, the suggestion."""
    parts = ["\n".join(comment.markers)] if markers else []
    if comment.companion_of is not None:
        finding = comment.findings[0]
        parts.append(
            f"**kvlint {escape_text(finding.code)}**: the import part of the fix suggested at line {comment.companion_of}."
        )
    else:
        for finding in comment.findings:
            why = why_sentence(finding.code)
            sentence = (
                f"**kvlint {escape_text(finding.code)} {escape_text(finding.name)}** ({finding.severity.value}): "
                f"{escape_message(finding.message)}."
            )
            if why:
                sentence += f" {escape_message(why)}"
            parts.append(sentence)
            if finding.related:
                parts.append(related_list(finding))
    fixes = [f for f in comment.findings if f.fix and f.fix.applicability is Applicability.SAFE]
    if comment.suggestion is not None:
        title = fixes[0].fix.title if fixes else "Apply the fix"
        if comment.companion_of is None:
            parts.append(f"Suggested fix (safe): {escape_message(title)}.")
        fence = fence_for(comment.suggestion.text)
        parts.append(f"{fence}{language}\n{comment.suggestion.text}\n{fence}")
    parts.extend(note_sentence(note, comment.path) for note in comment.notes)
    return "\n\n".join(parts) + "\n"


def related_list(finding: Finding) -> str:
    """The other findings of a root cause, one bullet each: where, which rule, what it says (escaped)."""
    lines = ["Same root cause, also reported at:"]
    for r in finding.related:
        lines.append(f"- {code_span(r.path)} line {r.line}, {escape_text(r.code)}: {escape_message(r.message)}")
    return "\n".join(lines)


def review_payload(summary: Summary, comments: list[ReviewComment], commit: str | None) -> dict:
    """The JSON body of POST /repos/{owner}/{repo}/pulls/{pull_number}/reviews."""
    entries = []
    for comment in comments:
        entry: dict = {"path": comment.path, "line": comment.line, "side": "RIGHT", "body": comment_body(comment)}
        if comment.start_line is not None:
            entry["start_line"] = comment.start_line
            entry["start_side"] = "RIGHT"
        entries.append(entry)
    payload: dict = {"event": "COMMENT", "body": summary_body(summary), "comments": entries}
    if commit:
        payload["commit_id"] = commit
    return payload


def github_review(review: Review, max_comments: int = DEFAULT_MAX_COMMENTS) -> dict:
    """The review as GitHub's "create a review" body (comments already limited with review.limit_review)."""
    return review_payload(summarise(review, max_comments), review.comments, review.commit)


def markdown(review: Review, max_comments: int = DEFAULT_MAX_COMMENTS) -> str:
    """One summary comment: the counts, then every finding in the diff with its suggestion."""
    lines = [summary_body(summarise(review, max_comments)).rstrip("\n")]
    for comment in review.comments:
        if comment.companion_of is not None:
            continue
        lines.append("")
        where = f"{comment.start_line}–{comment.line}" if comment.start_line else f"{comment.line}"
        lines.append(f"### {code_span(comment.path)} line {where}")
        lines.append("")
        lines.append(comment_body(comment, markers=False, language="python").rstrip("\n"))
    return "\n".join(lines) + "\n"


def _placement_sentences(comment: ReviewComment, finding) -> list[str]:
    """Why a finding is shown on its comment's line rather than its own (kvlint.review.placement)."""
    return [
        note_sentence(note, comment.path)
        for note in comment.notes
        if note.line == finding.line
        and (note.kind.startswith("new-finding-") or note.kind in ("function-first-change", "related-line-changed"))
    ]


def _utf8_column(line_text: str, column: int) -> int:
    """A 1-based character column as reviewdog wants it: 1-based, counted in UTF-8 bytes."""
    return len(line_text[: max(column - 1, 0)].encode("utf-8", "surrogatepass")) + 1


def rdjson(review: Review, texts: dict[str, str]) -> dict:
    """reviewdog's DiagnosticResult (rdjson) for the findings in the diff (JSON-encoded by the caller)."""
    diagnostics = []
    lines_of: dict[str, list[str]] = {}
    companions: dict[tuple[str, int], list[Region]] = {}
    for comment in review.comments:
        if comment.companion_of is not None and comment.suggestion is not None:
            companions.setdefault((comment.path, comment.companion_of), []).append(comment.suggestion)
    for comment in review.comments:
        if comment.companion_of is not None:
            continue
        for finding in comment.findings:
            if finding.path not in lines_of:
                lines_of[finding.path] = texts.get(finding.path, "").splitlines()
            lines = lines_of[finding.path]

            def position(line: int, column: int, lines: list[str] = lines) -> dict:
                text = lines[line - 1] if 0 < line <= len(lines) else ""
                return {"line": line, "column": _utf8_column(text, column)}

            if (
                getattr(rule_class(finding.code), "REPORTS_WHOLE_FUNCTION", False)
                or finding.end_line - finding.line > 20
                or not finding.line <= comment.line <= max(finding.end_line, finding.line)
            ):
                # A whole function, or a finding the change causes elsewhere: the changed line the comment sits on.
                location_range = {"start": {"line": comment.line}}
            else:
                location_range = {
                    "start": position(finding.line, finding.column),
                    "end": position(finding.end_line, finding.end_column),
                }
            diagnostic: dict = {
                # reviewdog posts the message as markdown: escaped like a review comment's.
                "message": " ".join([escape_message(finding.message), *_placement_sentences(comment, finding)]),
                "location": {"path": finding.path, "range": location_range},
                "severity": RDJSON_SEVERITIES[finding.severity],
                "code": {"value": finding.code},
            }
            if finding.related:
                diagnostic["related_locations"] = [
                    {
                        "message": escape_message(f"{r.code}: {r.message}"),
                        "location": {
                            "path": r.path,
                            # Columns only where the text is known: a finding re-anchored on a change to
                            # another file (review.crossfile) keeps related locations in its own file.
                            "range": {"start": position(r.line, r.column), "end": position(r.end_line, r.end_column)}
                            if r.path == finding.path
                            else {"start": {"line": r.line}},
                        },
                    }
                    for r in finding.related
                ]
            if comment.suggestion is not None and finding.fix and finding.fix.applicability is Applicability.SAFE:
                suggestions = [comment.suggestion, *companions.get((comment.path, comment.line), [])]
                # Line-wise ranges (no columns): the lines first..last, replaced by the text.
                diagnostic["suggestions"] = [
                    {"range": {"start": {"line": s.first}, "end": {"line": s.last}}, "text": s.text}
                    for s in suggestions
                ]
            diagnostics.append(diagnostic)
    ranks = {name: severity.rank for severity, name in RDJSON_SEVERITIES.items()}
    return {
        "source": {"name": SOURCE_NAME},
        "severity": max((d["severity"] for d in diagnostics), key=ranks.__getitem__, default="INFO"),
        "diagnostics": diagnostics,
    }


def why_sentence(code: str) -> str:
    """The first sentence of the rule's "Why is this bad?" section."""
    rule = rule_by_code(code)
    flat = rule.doc_section("Why is this bad?") if rule is not None else ""
    match = re.match(r"(.+?[.!?])(\s|$)", flat)
    return match.group(1) if match else flat
