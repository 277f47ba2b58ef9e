"""The texts of a tree's files, read when asked and only a few kept: a review's memory does not grow with
the size of the pull request's files.

Each read goes through kvlint's one reader (a regular file inside the tree, never through a link, at most
10 MiB); a file that cannot be read or decoded is not there. The last few texts asked for are kept (the
review asks for one file's text several times in a row); any other is read again when asked.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

from kvlint.engine.source import decode_source
from kvlint.errors import UnreadableSource
from kvlint.filesystem import read_file_inside

KEPT = 3  # texts kept at once


class TreeTexts(Mapping[str, str]):
    """path (relative to `root`) -> decoded text, for the files `paths` names."""

    def __init__(self, root: Path, paths: Iterable[str]):
        self.root = root
        self.paths = frozenset(paths)
        self._kept: OrderedDict[str, str | None] = OrderedDict()

    def __getitem__(self, path: str) -> str:
        if path not in self.paths:
            raise KeyError(path)
        if path in self._kept:
            self._kept.move_to_end(path)
        else:
            self._kept[path] = self._read(path)
            while len(self._kept) > KEPT:
                self._kept.popitem(last=False)
        text = self._kept[path]
        if text is None:
            raise KeyError(path)
        return text

    def _read(self, path: str) -> str | None:
        try:
            return decode_source(read_file_inside(self.root, path)).text
        except (OSError, UnreadableSource):
            return None

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self.paths))

    def __len__(self) -> int:
        return len(self.paths)

    def keep(self, paths: Iterable[str]) -> dict[str, str]:
        """The texts of `paths` that can be read, as a plain dict (for use once the tree is gone)."""
        return {path: self[path] for path in sorted(set(paths)) if path in self}
