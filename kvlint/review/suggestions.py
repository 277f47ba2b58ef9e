"""Where a safe fix becomes a ```suggestion```: the lines of the head file it replaces, and their new text.

The exact answer (`exact_fix_regions`) applies the fix to the whole file — the edit, then the imports
through libcst (kvlint.fixing.apply.apply_fixes) — and diffs the result. That is a parse of the whole file
per finding: a pull request with many findings in one file took time quadratic in them. `FixRegions`
gives the same answer in time linear in the file plus the edits: the edit's lines are spliced and diffed
on their own, and the import change, which does not depend on where the edit is, is computed once per file
and set of imports. Where the edit could change the import change (it removes the last use of a name the
fix drops when unused) or sits next to it, or the file has line breaks other than \\n and \\r, the exact
answer is computed instead.
"""

from __future__ import annotations

import bisect
import difflib
import io
import tokenize
from dataclasses import dataclass

from kvlint.errors import FixError
from kvlint.fixing.apply import apply_fixes
from kvlint.types import Finding, Fix, TextEdit

# str.splitlines() breaks lines at these too, the parser does not: line numbers would disagree.
_OTHER_LINE_BREAKS = "\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"


@dataclass(frozen=True)
class Region:
    """Lines first..last (1-based, inclusive) of the head file, to be replaced by `text` (lines joined by \\n)."""

    first: int
    last: int
    text: str


Regions = tuple[Region, list[Region]]  # (the region holding the fix's edits, the others: its imports)


class FixRegions:
    """The suggestion regions of every safe fix in one file's text, each computed once."""

    def __init__(self, text: str):
        self.text = text
        self.lines = text.splitlines()
        self._starts: list[int] = []
        offset = 0
        for line in text.splitlines(keepends=True):
            self._starts.append(offset)
            offset += len(line)
        self._exact_only = any(char in text for char in _OTHER_LINE_BREAKS)
        self._by_fix: dict[Fix, Regions | None] = {}
        self._imports: dict[tuple, tuple[list[tuple], list[str]] | None] = {}
        self._uses: dict[str, list[int]] | None = None

    def of(self, finding: Finding) -> Regions | None:
        fix = finding.fix
        if fix not in self._by_fix:
            fast = _EXACT if self._exact_only or not self.lines else self._fast(finding)
            self._by_fix[fix] = exact_fix_regions(self.text, finding) if fast is _EXACT else fast
        return self._by_fix[fix]

    def _fast(self, finding: Finding):
        fix = finding.fix
        edits = sorted(fix.edits, key=lambda e: e.start)
        low, high = edits[0].start, max(e.end for e in edits)
        first = bisect.bisect_right(self._starts, low) - 1
        last = bisect.bisect_right(self._starts, max(high - 1, low)) - 1
        # One unchanged line each side: a pure insertion takes a neighbour along, and it must be in the window.
        top, bottom = max(first - 1, 0), min(last + 1, len(self.lines) - 1)
        window_start = self._starts[top]
        window_end = self._starts[bottom + 1] if bottom + 1 < len(self._starts) else len(self.text)
        new_window = _spliced(self.text[window_start:window_end], edits, window_start).splitlines()
        old_window = self.lines[top : bottom + 1]
        blocks = _changed_blocks(old_window, new_window)
        if any(
            (op[1] == 0 and top > 0) or (op[2] == len(old_window) and bottom < len(self.lines) - 1) for op in blocks
        ):
            return _EXACT  # the change reaches the window's edge: only the whole file can say
        first_edit = min(edit.line for edit in fix.edits)
        last_edit = max(edit.end_line for edit in fix.edits)
        main = [op for op in blocks if _old_span(op, top)[0] <= last_edit and _old_span(op, top)[1] >= first_edit]
        imports = self._import_blocks(fix) if fix.imports else ([], [])
        if imports is None:
            return None
        import_blocks, new_lines = imports
        if self._edit_may_change_imports(fix, low, high) or _near(import_blocks, top, bottom):
            return _EXACT
        if not main:
            return None
        merged = (
            "replace",
            min(op[1] for op in main),
            max(op[2] for op in main),
            min(op[3] for op in main),
            max(op[4] for op in main),
        )
        return _region(merged, old_window, new_window, top), [
            _region(op, self.lines, new_lines, 0) for op in import_blocks
        ]

    def _import_blocks(self, fix: Fix):
        """The changed blocks (whole-file coordinates) and new lines of this file with only the fix's imports applied."""
        key = tuple(sorted((change.module, change.name, change.add) for change in fix.imports))
        if key not in self._imports:
            # A no-op edit at the top carries the imports through apply_fixes, which then only updates them.
            carrier = Finding(
                "",
                1,
                1,
                1,
                1,
                "",
                "",
                "",
                fix=Fix(fix.title, fix.applicability, (TextEdit(0, 0, "", 1, 1, 1, 1),), fix.imports),
            )
            try:
                updated = apply_fixes(self.text, [carrier], unsafe=True).text
            except FixError:
                self._imports[key] = None
            else:
                new_lines = updated.splitlines()
                self._imports[key] = (_changed_blocks(self.lines, new_lines), new_lines)
        return self._imports[key]

    def _edit_may_change_imports(self, fix: Fix, low: int, high: int) -> bool:
        """True when a name the fix removes if unused is used nowhere but inside the edit (or the file does
        not tokenize): removing the edit's code may then remove the import too."""
        removed = [change.name for change in fix.imports if not change.add]
        if not removed:
            return False
        uses = self._name_uses()
        if uses is None:
            return True
        return any(all(low <= offset < high for offset in uses.get(name, ())) for name in removed)

    def _name_uses(self) -> dict[str, list[int]] | None:
        """Offsets of each name read in the code: not in an import statement, not after a dot."""
        if self._uses is None:
            uses: dict[str, list[int]] = {}
            try:
                in_import = False
                at_start = True
                previous = ""
                for token in tokenize.generate_tokens(io.StringIO(self.text).readline):
                    if token.type in (tokenize.NEWLINE, tokenize.ENDMARKER):
                        in_import, at_start = False, True
                        continue
                    if token.type in (tokenize.NL, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT):
                        continue
                    if at_start:
                        in_import = token.type == tokenize.NAME and token.string in ("import", "from")
                        at_start = False
                    if token.type == tokenize.NAME and not in_import and previous != ".":
                        row, column = token.start
                        uses.setdefault(token.string, []).append(
                            self._starts[row - 1] + column if row - 1 < len(self._starts) else -1
                        )
                    previous = token.string if token.type == tokenize.OP else ""
            except (tokenize.TokenError, SyntaxError):
                return None
            self._uses = uses
        return self._uses


_EXACT = object()  # FixRegions._fast cannot answer: compute the exact regions


def exact_fix_regions(text: str, finding: Finding) -> Regions | None:
    """The fix applied to the whole file (edit and imports), diffed against it."""
    try:
        outcome = apply_fixes(text, [finding], unsafe=False)
    except FixError:
        return None
    if not outcome.applied or outcome.text == text:
        return None
    old, new = text.splitlines(), outcome.text.splitlines()
    blocks = _changed_blocks(old, new)
    if not blocks:
        return None
    first_edit = min(edit.line for edit in finding.fix.edits)
    last_edit = max(edit.end_line for edit in finding.fix.edits)
    main = [op for op in blocks if _old_span(op, 0)[0] <= last_edit and _old_span(op, 0)[1] >= first_edit]
    if not main:
        return None
    others = [op for op in blocks if op not in main]
    # Merging the blocks around the edit is exact: the equal lines between them map one to one.
    merged = (
        "replace",
        min(op[1] for op in main),
        max(op[2] for op in main),
        min(op[3] for op in main),
        max(op[4] for op in main),
    )
    return _region(merged, old, new, 0), [_region(op, old, new, 0) for op in others]


def _spliced(window: str, edits: list[TextEdit], offset: int) -> str:
    for edit in reversed(edits):
        window = window[: edit.start - offset] + edit.replacement + window[edit.end - offset :]
    return window


def _changed_blocks(old: list[str], new: list[str]) -> list[tuple]:
    return [op for op in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes() if op[0] != "equal"]


def _near(blocks: list[tuple], top: int, bottom: int) -> bool:
    """Whether a block (whole-file, 0-based old lines) touches or adjoins the window top..bottom."""
    return any(op[1] <= bottom + 1 and op[2] >= top - 1 for op in blocks)


def _old_span(op, offset: int) -> tuple[int, int]:
    """The 1-based old lines a block touches; an insertion touches the line before it (or after, at the top)."""
    _, i1, i2, _, _ = op
    i1, i2 = i1 + offset, i2 + offset
    if i1 == i2:
        return (i1, i1) if i1 > 0 else (1, 1)
    return i1 + 1, i2


def _region(op, old: list[str], new: list[str], offset: int) -> Region:
    """A block as a Region; `offset` is where `old` and `new` start in the file (0 for whole files)."""
    _, i1, i2, j1, j2 = op
    if i1 == i2:  # a pure insertion: a suggestion must replace at least one line, so take a neighbour along
        if i1 + offset > 0:
            i1, j1 = i1 - 1, j1 - 1
        else:
            i2, j2 = i2 + 1, j2 + 1
    return Region(i1 + offset + 1, i2 + offset, "\n".join(new[j1:j2]))
