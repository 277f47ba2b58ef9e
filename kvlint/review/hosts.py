"""The comments of a review being built: which one a finding joins, and when one is full.

A comment holds at most MAX_FINDINGS_PER_COMMENT findings and about _BODY_BUDGET characters: hundreds of
findings placed on one changed line become several comments on it, each under GitHub's 65,536 characters a
body and stage two's 50 findings and 10 notes a comment (saved.py), instead of one comment that both refuse.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from kvlint.types import Finding

if TYPE_CHECKING:
    from kvlint.review.review import Note, ReviewComment
    from kvlint.review.suggestions import Region

# One comment's share: stage two accepts 50 findings a comment (saved.py), GitHub 65,536 characters a body.
MAX_FINDINGS_PER_COMMENT = 25
MAX_NOTES_PER_COMMENT = 10  # stage two's limit (saved.py): a placed finding brings a note of its own
_BODY_BUDGET = 50_000  # characters, estimated by _weight: a full comment opens a second one on the same line


def _weight(finding: Finding) -> int:
    """An upper estimate of the characters a finding adds to a body (text escaped at most twice over)."""
    title = finding.fix.title if finding.fix is not None else ""
    return (
        2 * (len(finding.message) + len(title) + len(finding.fix_unavailable or "")) + 400 + 200 * len(finding.related)
    )


def has_room(comment: ReviewComment, finding: Finding, notes: Iterable[Note] = ()) -> bool:
    """Whether `comment` can take `finding` (and its `notes`) and stay within every limit."""
    weight = sum(map(_weight, comment.findings)) + _weight(finding)
    added = [note for note in notes if note not in comment.notes]
    return (
        len(comment.findings) < MAX_FINDINGS_PER_COMMENT
        and weight <= _BODY_BUDGET
        and len(comment.notes) + len(added) <= MAX_NOTES_PER_COMMENT
    )


class Comments:
    """The comments being built, indexed so that finding a host for the next finding costs O(1)."""

    def __init__(self):
        self.all: list[ReviewComment] = []
        self._by_suggestion: dict[tuple[str, Region], ReviewComment] = {}
        self._by_line: dict[tuple[str, int], ReviewComment] = {}

    def add(self, comment: ReviewComment) -> None:
        self.all.append(comment)
        if comment.suggestion is not None and comment.companion_of is None:
            self._by_suggestion.setdefault((comment.path, comment.suggestion), comment)
        if comment.companion_of is None:
            for line in range(comment.first_line, comment.line + 1):
                self._by_line.setdefault((comment.path, line), comment)

    def replace_host(self, comment: ReviewComment) -> None:
        """`comment` hosts what comes next on its lines: the one before it there is full."""
        for line in range(comment.first_line, comment.line + 1):
            self._by_line[comment.path, line] = comment

    def with_suggestion(self, path: str, region: Region) -> ReviewComment | None:
        return self._by_suggestion.get((path, region))

    def covering(self, path: str, line: int) -> ReviewComment | None:
        return self._by_line.get((path, line))
