"""What a pull request changes, read from git: changed lines per file, and the head tree's sources.

The pull request never decides how its own diff is read, and nothing it ships runs. git gets an argument
list (never a shell) and only ever compares two trees: with `--head` the commit's, without it a snapshot
of the working tree that kvlint builds from the files' bytes as they are on disk (`snapshot_working_tree`),
so no clean filter, eol or encoding conversion runs on a file the pull request selected. Every diff is
`--text --no-textconv --no-ext-diff`: a `.gitattributes` saying `*.py -diff`, `binary` or `diff=driver`
changes nothing kvlint sees. Blobs are read with `git cat-file`, which applies no filter. Paths that would
leave the repository, or that this system cannot hold, are refused with a reason.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from kvlint.review.git import (  # noqa: F401  (ReviewError, git, … are this module's interface too)
    GITLINK_MODE,
    MAX_FILE_BYTES,
    SYMLINK_MODE,
    SYMLINK_REFUSAL,
    WRITE_FAILURE,
    ReviewError,
    decoded_path,
    git,
    git_lines,
    materialise_python_tree,
    merge_base,
    read_blob,
    repository_root,
    resolve_commit,
    safe_relative_path,
    too_large,
)
from kvlint.review.line_runs import LineRuns
from kvlint.review.snapshot import snapshot_working_tree

# GitHub shows three lines of context around each change; a review comment may sit on any of them.
CONTEXT_LINES = 3
# Both listings of a diff use the same options, so the file list and the hunks agree on every path.
_DIFF_OPTIONS = ("-r", "--find-renames", "--diff-filter=AMRCT", "--no-ext-diff", "--no-textconv")
_MAX_PATHSPEC_CHARS = 256 * 1024
_HUNK_HEADER = re.compile(rb"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


@dataclass
class ChangedFile:
    """One file the pull request adds or modifies, on the head side ("RIGHT" in GitHub's terms). Its lines
    are kept as runs (kvlint.review.line_runs), not one int each: a 10 MiB added module is one run."""

    path: str
    added: LineRuns = field(default_factory=LineRuns)  # lines the pull request adds or changes
    visible: LineRuns = field(default_factory=LineRuns)  # added lines plus the context lines GitHub shows

    def __post_init__(self):
        if not isinstance(self.added, LineRuns):
            self.added = LineRuns(self.added)
        if not isinstance(self.visible, LineRuns):
            self.visible = LineRuns(self.visible)

    def touches(self, first: int, last: int) -> bool:
        return self.added.first_within(first, last) is not None

    def first_added(self, first: int, last: int) -> int | None:
        return self.added.first_within(first, last)


@dataclass
class Change:
    files: dict[str, ChangedFile]
    refused: list[tuple[str, str]]  # (path, why) for each changed path kvlint will not read


@dataclass
class Trees:
    """The two trees a review compares, and the git environment that can read them."""

    base: str  # the merge base of the base revision and the head
    head: str  # the head commit, or the tree of the working-tree snapshot
    environment: dict[str, str] = field(default_factory=dict)
    left_out: dict[str, str] = field(default_factory=dict)  # working-tree path -> why the snapshot left it out


def changed_files(repo: Path, trees: Trees) -> Change:
    """The lines each file changes from `trees.base` to `trees.head`; paths kvlint will not read are refused.

    A file over MAX_FILE_BYTES on the head side (by the size git lists, before anything of it is read) is
    left out of the patch, like a file the working-tree snapshot left out: its diff is never read.
    """
    environment = trees.environment
    listing = git(repo, "diff-tree", "-z", *_DIFF_OPTIONS, trees.base, trees.head, environment=environment)
    entries = _parse_listing(listing)
    oversized = _oversized(repo, entries, environment)
    skipped = [*trees.left_out, *oversized]
    # Literal: a name with `*` or `:` is itself; beyond a generous length, the patch is read whole instead.
    excluded = [f":(exclude,literal){path}" for path in skipped]
    if sum(len(p) for p in excluded) > _MAX_PATHSPEC_CHARS:
        excluded = []
    patch = git_lines(
        repo,
        "diff-tree",
        "-p",
        "--text",  # a `-diff`/`binary` attribute must not turn a Python file into "Binary files differ"
        "--no-color",
        f"--unified={CONTEXT_LINES}",
        "--src-prefix=a/",
        "--dst-prefix=b/",
        *_DIFF_OPTIONS,
        trees.base,
        trees.head,
        "--",
        *excluded,
        environment=environment,
    )
    hunks = _lines_by_path(patch)  # read as git writes it, one line at a time
    files: dict[str, ChangedFile] = {}
    refused = list(trees.left_out.items())
    for _status, mode, _sha, raw_path in entries:
        path = decoded_path(raw_path)
        if path in trees.left_out:
            continue
        why = safe_relative_path(path)
        if why is None and mode == SYMLINK_MODE:
            why = SYMLINK_REFUSAL
        if why is None and path in oversized:
            if not path.endswith(".py"):
                continue  # never reviewed: nothing to say
            why = too_large(path, oversized[path])
        if why is not None:
            refused.append((path, why))
            continue
        if mode == GITLINK_MODE:
            continue  # a submodule: its files are another repository's
        added, visible = hunks.get(raw_path, (set(), set()))
        files[path] = ChangedFile(path, added, visible)
    return Change(files, refused)


def _oversized(repo: Path, entries, environment: dict[str, str]) -> dict[str, int]:
    """path -> size of each changed regular file whose head-side blob is over MAX_FILE_BYTES (one
    `git cat-file --batch-check`, which reads sizes only)."""
    blobs = [(decoded_path(raw), sha) for _, mode, sha, raw in entries if mode in ("100644", "100755")]
    if not blobs:
        return {}
    answer = git(
        repo,
        "cat-file",
        "--batch-check=%(objectsize)",
        input_bytes="".join(f"{sha}\n" for _, sha in blobs).encode(),
        environment=environment,
    ).split(b"\n")
    sizes = [int(line) if line.isdigit() else 0 for line in answer[: len(blobs)]]
    return {path: size for (path, _), size in zip(blobs, sizes) if size > MAX_FILE_BYTES}


def _parse_listing(listing: bytes) -> list[tuple[str, str, str, bytes]]:
    """(status letter, head-side mode, head-side object id, head-side path) from `git diff-tree -z`
    (NUL-separated: any name works)."""
    fields = listing.split(b"\0")
    entries: list[tuple[str, str, str, bytes]] = []
    position = 0
    while position < len(fields):
        meta = fields[position]
        position += 1
        if not meta:
            continue
        parts = meta[1:].split()
        if not meta.startswith(b":") or len(parts) != 5:
            raise ReviewError("cannot parse git's list of changed files")
        status = parts[4][:1].decode("ascii", "replace")
        count = 2 if status in ("R", "C") else 1
        if position + count > len(fields):
            raise ReviewError("cannot parse git's list of changed files")
        mode, sha = parts[1].decode("ascii", "replace"), parts[3].decode("ascii", "replace")
        entries.append((status, mode, sha, fields[position + count - 1]))
        position += count
    return entries


def _lines_by_path(lines: Iterable[bytes]) -> dict[bytes, tuple[LineRuns, LineRuns]]:
    """Head path -> (added lines, lines shown), from a unified diff's lines (without their newlines).

    The head path is read from the `+++` line, which holds the whole name (git quotes any name with a
    control character); the hunks are consumed by their line counts, so no file content can be taken for
    a header. Only the current line is held.
    """
    stream = iter(lines)
    result: dict[bytes, tuple[LineRuns, LineRuns]] = {}
    current: tuple[LineRuns, LineRuns] | None = None
    for line in stream:
        if line.startswith(b"diff --git "):
            current = None
        elif line.startswith(b"+++ ") and current is None:
            name = _unquoted(line[4:])
            # `+++ /dev/null`: the file's old side, deleted (a type change shows it before the new side's own
            # diff): its hunks are consumed and belong to no head-side file.
            fresh = (LineRuns(), LineRuns())
            current = result.setdefault(name[2:], fresh) if name.startswith(b"b/") else fresh
        elif line.startswith(b"@@ "):
            match = _HUNK_HEADER.match(line)
            if match is None or current is None:
                raise ReviewError("cannot parse git's diff: a hunk outside a file")
            added, visible = current
            old_left = int(match.group(2)) if match.group(2) is not None else 1
            new_left = int(match.group(4)) if match.group(4) is not None else 1
            number = int(match.group(3))
            while old_left > 0 or new_left > 0:
                body = next(stream, None)
                if body is None:
                    raise ReviewError("cannot parse git's diff: a hunk ends early")
                kind = body[:1]
                if kind == b"+":
                    added.add(number)
                    visible.add(number)
                    number, new_left = number + 1, new_left - 1
                elif kind == b"-":
                    old_left -= 1
                elif kind in (b" ", b""):
                    visible.add(number)
                    number, new_left, old_left = number + 1, new_left - 1, old_left - 1
                elif kind != b"\\":  # "\ No newline at end of file" counts for neither side
                    raise ReviewError("cannot parse git's diff: an unexpected line in a hunk")
    return result


_C_ESCAPES = {b"a": 7, b"b": 8, b"t": 9, b"n": 10, b"v": 11, b"f": 12, b"r": 13, b'"': 34, b"\\": 92}


def _unquoted(name: bytes) -> bytes:
    """A file name as git prints it in a diff header: C-quoted when it holds a control character or a
    quote, followed by a tab when it holds a space."""
    if not name.startswith(b'"'):
        return name[:-1] if name.endswith(b"\t") else name
    out = bytearray()
    position = 1
    while position < len(name) and name[position : position + 1] != b'"':
        char = name[position : position + 1]
        if char != b"\\":
            out += char
            position += 1
            continue
        escape = name[position + 1 : position + 2]
        if escape in _C_ESCAPES:
            out.append(_C_ESCAPES[escape])
            position += 2
        else:
            out.append(int(name[position + 1 : position + 4], 8) & 0xFF)
            position += 4
    return bytes(out)


def review_trees(repo: Path, base_commit: str, head_commit: str | None, scratch: Path) -> Trees:
    """The trees to compare: merge base → head commit, or merge base (with HEAD) → working-tree snapshot."""
    if head_commit is not None:
        return Trees(merge_base(repo, base_commit, head_commit), head_commit)
    tree, environment, left_out = snapshot_working_tree(repo, scratch)
    return Trees(merge_base(repo, base_commit, resolve_commit(repo, "HEAD")), tree, environment, left_out)
