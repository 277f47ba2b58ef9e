"""Every comment within what GitHub and stage two accept: one long line degrades its own comment, never the review.

GitHub refuses a review whose body, or any comment's body, is over 65,536 characters (422: nothing is
posted); stage two refuses a saved review with a field over its limit (kvlint.review.saved). A pull request
controls how long a quoted check is, so a message or a suggestion can be any length. `fit_comments` is run
by both stages, on the comments they are about to render: it shortens a long message or fix title (saying
so at its end), leaves out a suggestion longer than a comment holds (a note says so, and `kvlint fix`
applies it), and then measures each rendered body, shortening further until it fits. Stage one therefore
writes only what stage two accepts, and a forged file stage two accepts still renders within GitHub's limit.
"""

from __future__ import annotations

from dataclasses import replace

from kvlint.review.render import comment_body
from kvlint.review.review import Note, ReviewComment, shorten
from kvlint.types import Finding

GITHUB_BODY_LIMIT = 65_536  # characters, as GitHub counts them (UTF-16 code units, the strictest count)
_BODY_BUDGET = GITHUB_BODY_LIMIT - 1_536  # what a rendered body may use, with room to spare
# Stage two's field limits (kvlint.review.saved reads them from here).
MAX_TEXT = 4_000  # a message, a related location's message
MAX_TITLE = 200  # a fix title
MAX_SUGGESTION = 65_000  # a suggestion's text
MAX_RELATED = 50  # related locations of one finding
_SHORTER = (2_000, 1_000, 500, 250, 120)  # message lengths tried, in turn, while a rendered body is too long


def body_length(body: str) -> int:
    """A body's length as GitHub counts it: UTF-16 code units (a character outside the BMP counts two)."""
    return len(body.encode("utf-16-le", "surrogatepass")) // 2


def fit_comments(comments: list[ReviewComment]) -> list[ReviewComment]:
    """The comments, each within stage two's limits and GitHub's; a companion (a fix's import part) is
    left out with its main comment's suggestion."""
    left_out: set[tuple[str, int]] = set()  # (path, line) of main comments whose suggestion was left out
    fitted = []
    for comment in comments:
        if comment.companion_of is not None:
            fitted.append(comment)
            continue
        comment.findings = [_fit_finding(finding, MAX_TEXT) for finding in comment.findings]
        suggestion = comment.suggestion
        if suggestion is not None and (
            len(suggestion.text) > MAX_SUGGESTION or body_length(comment_body(comment)) > _BODY_BUDGET
        ):
            _leave_out_suggestion(comment)
            left_out.add((comment.path, comment.line))
        for limit in _SHORTER:
            if body_length(comment_body(comment)) <= _BODY_BUDGET:
                break
            comment.findings = [_fit_finding(finding, limit) for finding in comment.findings]
        if body_length(comment_body(comment)) > _BODY_BUDGET:
            # At most 25 findings of 120 characters, however escaped, and kvlint's own sentences: this fits.
            comment.findings = [replace(finding, related=()) for finding in comment.findings]
        fitted.append(comment)
    kept = []
    for comment in fitted:
        if comment.companion_of is not None:
            if (comment.path, comment.companion_of) in left_out:
                continue
            comment.findings = [_fit_finding(finding, MAX_TEXT) for finding in comment.findings]
            if comment.suggestion is not None and len(comment.suggestion.text) > MAX_SUGGESTION:
                continue  # an import part cannot be that long; if it were, the main comment's note stands
        kept.append(comment)
    return kept


def _leave_out_suggestion(comment: ReviewComment) -> None:
    comment.suggestion = None
    comment.notes = [note for note in comment.notes if note.kind != "commit-with-imports"]
    comment.notes.append(Note("fix-too-long"))


def _fit_finding(finding: Finding, limit: int) -> Finding:
    """The finding with its message (and its related locations' messages) at most `limit` characters, its
    fix title at most MAX_TITLE, and at most MAX_RELATED related locations."""
    related = tuple(replace(r, message=shorten(r.message, limit)) for r in finding.related[:MAX_RELATED])
    fix = finding.fix
    if fix is not None and len(fix.title) > MAX_TITLE:
        fix = replace(fix, title=shorten(fix.title, MAX_TITLE))
    if related == finding.related and fix is finding.fix and len(finding.message) <= limit:
        return finding
    return replace(finding, message=shorten(finding.message, limit), fix=fix, related=related)
