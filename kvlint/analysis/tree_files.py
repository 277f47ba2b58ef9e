"""The Python files of a tree as its analysis reads them, and what that analysis could not read or do.

Every reader of the tree index (the hierarchy, the resolver, the sizing program, the containers) lists and
reads files through one TreeFiles: the walk and the read are kvlint.filesystem's (regular files only, at most
10 MiB, never through a link out of the tree). A file the walk listed that then cannot be read, and an
analysis that fails, is written down in `failures`, which the tree index carries and the scan reports: a
cross-file finding never vanishes in silence.
"""

from __future__ import annotations

import os
from pathlib import Path

from kvlint.filesystem import FileTooLarge, NotRegularFile, describe, is_inside, read_regular_file, walk_python

# Why a file is refused by kvlint's own reading rules: what the file is, not a failure of the run.
_REFUSALS = (FileTooLarge, NotRegularFile, IsADirectoryError)


class UnreadFile(str):
    """A failure line for a file the analysis needed and that kvlint's reading rules refuse (not a regular
    file, a link out of the tree, too large): the line `check` says (and exits 2 on), with its path and
    reason kept apart, so that `review` can list it as a file of the pull request it could not read."""

    def __new__(cls, path: str, why: str):
        line = super().__new__(cls, f"cross-file analysis incomplete: {path} not read: {why}")
        line.path, line.why = path, why
        return line

    def __reduce__(self):  # pickled whole (a worker's index), not as the plain line
        return (UnreadFile, (self.path, self.why))


def is_hidden(path: str) -> bool:
    # The analysis has never read hidden folders (.github, .cache, …) under vllm/; the project cache's
    # snapshot lists exactly the files this walk lists.
    return os.path.basename(path).startswith(".")


def python_files(root: Path) -> list[str]:
    """The regular `.py` files under root/vllm, relative to root and "/"-separated, in walk order."""
    base = str(root)
    prefix = len(base) + 1
    return [path[prefix:].replace(os.sep, "/") for path, _ in walk_python(os.path.join(base, "vllm"), is_hidden)]


class TreeFiles:
    """The files of the tree at `root` that its analysis may read; `only` (relative paths), when known, the
    subset that could matter (the project cache knows it), kept in walk order. `overlay` (relative path →
    bytes): texts read in place of files the tree holds, the fixed files of `kvlint fix --diff`."""

    def __init__(self, root: Path, only: frozenset[str] | None = None, overlay: dict[str, bytes] | None = None):
        self.root = Path(root)
        self.only = only
        self.overlay = overlay or {}
        self.failures: list[str] = []
        self._listed: list[str] | None = None

    def relatives(self) -> list[str]:
        """The files to read, in walk order (walked once, on first use)."""
        if self._listed is None:
            listed = python_files(self.root)
            self._listed = listed if self.only is None else [r for r in listed if r in self.only]
        return self._listed

    def read(self, relative: str) -> bytes | None:
        """The file's bytes; None (and a failure written down) when it cannot be read."""
        if relative in self.overlay:
            return self.overlay[relative]
        try:
            return read_regular_file(self.root / relative)
        except _REFUSALS as error:
            self.failures.append(UnreadFile(relative, describe(error)))
            return None
        except OSError as error:
            self.failures.append(f"cross-file analysis incomplete: {relative} not read: {describe(error)}")
            return None

    def read_if_present(self, relative: str) -> bytes | None:
        """A file the analysis looks for by name (the interface, the resolver's home): None when absent; when
        it is there but cannot be read (not a regular file, a link out of the tree), None and a failure."""
        path = self.root / relative
        if not os.path.lexists(path):
            return None
        if not is_inside(os.path.realpath(path), os.path.realpath(self.root)):
            self.failures.append(UnreadFile(relative, "a symbolic link out of the tree"))
            return None
        return self.read(relative)

    def note(self, failure: str) -> None:
        self.failures.append(failure)
