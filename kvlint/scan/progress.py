"""What someone waiting on a scan sees on stderr: one line per phase in a log, a live counter on a terminal.

In a log (stderr not a terminal: CI), each phase is said once when it begins — `kvlint: indexing the
tree…`, `kvlint: linting 2512 files…`, `kvlint: parsing 83 of them (9.6 MB)…` — and nothing is redrawn.
On a terminal one line is redrawn in place, `kvlint: checked 2441/2512 files (parsing: 3.1/9.6 MB, 14 s)`:
the parse phase, where nearly all of a cold scan's time goes, counts in megabytes and seconds as well as
files, so the line moves while the largest files are parsed. stdout is never written.
"""

from __future__ import annotations

import enum
import sys
import time

# On a terminal, a progress line appears only once a scan has run this long, and is redrawn at most this often.
PROGRESS_DELAY_S = 1.0
PROGRESS_INTERVAL_S = 0.1
_MB = 1_000_000


class Display(enum.Enum):
    NONE = "none"  # --quiet
    LINES = "lines"  # one line per phase: stderr is a log
    LIVE = "live"  # one line redrawn in place: stderr is a terminal


def display_for(quiet: bool, stream=None) -> Display:
    """NONE when quiet, else LIVE on a terminal and LINES elsewhere."""
    if quiet:
        return Display.NONE
    stream = stream if stream is not None else sys.stderr
    isatty = getattr(stream, "isatty", None)
    return Display.LIVE if isatty is not None and isatty() else Display.LINES


def _size(size: int) -> str:
    return f"{size / _MB:.1f} MB" if size >= _MB // 10 else f"{max(size // 1000, 1)} kB"


class Progress:
    """The phases and counts of one command's wait, shown as `display` says (True: LIVE, False: NONE)."""

    def __init__(self, display: Display | bool = Display.NONE, total: int = 0):
        if isinstance(display, bool):
            display = Display.LIVE if display else Display.NONE
        self.display = display
        self.total = total
        self.done = 0
        self.parse_bytes = 0  # the bytes of the files the parse phase lints; 0 before it begins
        self.parsed_bytes = 0
        self.parse_started = 0.0
        self.started = time.monotonic()
        self.drawn_at = 0.0
        self.visible = False

    def phase(self, text: str) -> None:
        """A phase begins: one line in a log; on a terminal the counter says enough."""
        if self.display is Display.LINES:
            _write(f"kvlint: {text}…\n")

    def counting(self, total: int) -> None:
        """The files to settle are known: `linting N files`."""
        self.total = total
        self.phase(f"linting {total:,} file{'s' if total != 1 else ''}")

    def parsing(self, files: int, size: int) -> None:
        """The files the rules must parse are known (the rest were settled from their text or the cache)."""
        self.parse_bytes = max(size, 1)
        self.parse_started = time.monotonic()
        self.phase(f"parsing {files:,} of them ({_size(size)})")

    def advance(self, size: int = 0) -> None:
        """One more file settled; `size`: its bytes, when it was parsed."""
        self.done += 1
        self.parsed_bytes += size
        self.tick()

    def tick(self) -> None:
        """Redraw the live line if it is due (called while waiting on workers, so that its clock moves)."""
        if self.display is not Display.LIVE:
            return
        now = time.monotonic()
        if now - self.started < PROGRESS_DELAY_S or now - self.drawn_at < PROGRESS_INTERVAL_S:
            return
        self.drawn_at = now
        self.visible = True
        _write(f"\r{self.live_line(now)}\x1b[K")

    def live_line(self, now: float) -> str:
        line = f"kvlint: checked {self.done}/{self.total} files"
        if self.parse_bytes:
            parsed = min(self.parsed_bytes, self.parse_bytes)
            seconds = int(now - self.parse_started)
            line += f" (parsing: {parsed / _MB:.1f}/{self.parse_bytes / _MB:.1f} MB, {seconds} s)"
        return line

    def close(self) -> None:
        if self.visible:
            _write("\r\x1b[K")  # leave the line empty for what the command prints next
            self.visible = False


def _write(text: str) -> None:
    """To stderr, as a transient line: a recorded run (kvlint.scan.replay) does not keep it, since its replay
    has no phases to show."""
    write = getattr(sys.stderr, "write_transient", sys.stderr.write)
    write(text)
    sys.stderr.flush()
