"""The progress line of a long scan: `checked 812/2512 files` on stderr, redrawn in place."""

from __future__ import annotations

import sys
import time

# A progress line appears only when a scan has run this long, and is redrawn at most this often.
PROGRESS_DELAY_S = 1.0
PROGRESS_INTERVAL_S = 0.1


class Progress:
    """Counts settled files; draws only when enabled (on a terminal) and only for slow scans."""

    def __init__(self, total: int, enabled: bool):
        self.total = total
        self.enabled = enabled
        self.done = 0
        self.started = time.monotonic()
        self.drawn_at = 0.0
        self.visible = False

    def advance(self) -> None:
        self.done += 1
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self.started < PROGRESS_DELAY_S or now - self.drawn_at < PROGRESS_INTERVAL_S:
            return
        self.drawn_at = now
        self.visible = True
        sys.stderr.write(f"\rkvlint: checked {self.done}/{self.total} files")
        sys.stderr.flush()

    def close(self) -> None:
        if self.visible:
            sys.stderr.write("\r\x1b[K")  # leave the line empty for what the command prints next
            sys.stderr.flush()
            self.visible = False
