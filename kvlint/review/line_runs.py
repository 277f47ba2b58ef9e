"""A set of line numbers kept as sorted runs of consecutive lines: what a diff adds or shows in a file.

A pull request that adds a 10 MiB module adds every one of its lines; as a set of ints that is hundreds
of bytes a line, as runs it is one pair. Membership is a binary search over the runs.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Iterator


class LineRuns:
    """Line numbers as disjoint (first, last) runs in order; `add` takes lines in increasing order (as a
    diff's hunks give them), anything else goes through `update`."""

    __slots__ = ("_firsts", "_lasts", "_count")

    def __init__(self, lines: Iterable[int] = ()):
        self._firsts: list[int] = []
        self._lasts: list[int] = []
        self._count = 0
        self.update(lines)

    def add(self, line: int) -> None:
        if self._lasts and line <= self._lasts[-1] + 1:
            if line == self._lasts[-1] + 1:
                self._lasts[-1] = line
                self._count += 1
            elif line not in self:
                self.update([line])
            return
        self._firsts.append(line)
        self._lasts.append(line)
        self._count += 1

    def update(self, lines: Iterable[int]) -> None:
        merged = sorted({*self, *lines}) if self._count else sorted(set(lines))
        self._firsts, self._lasts, self._count = [], [], 0
        for line in merged:
            self.add(line)

    def __contains__(self, line: object) -> bool:
        if not isinstance(line, int):
            return False
        at = bisect_right(self._firsts, line) - 1
        return at >= 0 and line <= self._lasts[at]

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[int]:
        for first, last in zip(self._firsts, self._lasts):
            yield from range(first, last + 1)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, LineRuns):
            return (self._firsts, self._lasts) == (other._firsts, other._lasts)
        if isinstance(other, (set, frozenset)):
            return len(other) == self._count and all(line in self for line in other)
        return NotImplemented

    def __repr__(self) -> str:
        return f"LineRuns({list(zip(self._firsts, self._lasts))})"

    def first_within(self, first: int, last: int) -> int | None:
        """The smallest line of the set in first..last, or None."""
        if first > last:
            return None
        at = bisect_right(self._firsts, first) - 1
        if at >= 0 and first <= self._lasts[at]:
            return first
        at += 1
        return self._firsts[at] if at < len(self._firsts) and self._firsts[at] <= last else None

    def within(self, first: int, last: int) -> Iterator[int]:
        """The lines of the set in first..last, in order."""
        at = max(bisect_right(self._firsts, first) - 1, 0)
        while at < len(self._firsts) and self._firsts[at] <= last:
            yield from range(max(self._firsts[at], first), min(self._lasts[at], last) + 1)
            at += 1

    def last_within(self, first: int, last: int) -> int | None:
        """The largest line of the set in first..last, or None."""
        if first > last:
            return None
        at = bisect_right(self._firsts, last) - 1
        if at < 0:
            return None
        line = min(self._lasts[at], last)
        return line if line >= first else None

    def nearest(self, target: int, first: int | None = None, last: int | None = None) -> int | None:
        """The line of the set in first..last (default: anywhere) closest to `target`, the smaller on a tie;
        None when there is none."""
        low = min(self._firsts[0], target) if self._count else target
        high = max(self._lasts[-1], target) if self._count else target
        first = low if first is None else first
        last = high if last is None else last
        below = self.last_within(first, min(target, last))
        above = self.first_within(max(target, first), last)
        candidates = [line for line in (below, above) if line is not None]
        return min(candidates, key=lambda line: (abs(line - target), line), default=None)
