"""The `kvlint` program: a `check` (or `fix --diff`) whose kept run still holds is replayed (kvlint.scan.replay)
before the command line, click or any analysis is imported; every other run goes to the command group
(kvlint.cli), recorded when it is one that could be replayed next time."""

from __future__ import annotations

import sys


def main() -> None:
    from kvlint.scan import replay

    arguments = sys.argv[1:]
    status = replay.replayed(arguments)
    if status is not None:
        sys.exit(status)
    replay.start_recording(arguments)
    from kvlint.cli import main as command_line

    command_line()
