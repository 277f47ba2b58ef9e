"""The working tree as a git tree object, built from the files' bytes as they are on disk.

`git diff` against the working tree would run the clean filter, eol and encoding conversions that the
pull request's `.gitattributes` select (a configured `filter.<name>.clean` runs on every file the pull
request points it at). Here kvlint reads each tracked file itself (symbolic links as links, never
followed; any other file with kvlint.filesystem's reader: regular files only, size capped before reading)
and git only hashes those bytes (`hash-object --no-filters`) and writes a tree from a scratch index. The
objects go to a scratch object folder; the repository's own is an alternate, never written to.
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

from kvlint.filesystem import FileTooLarge, NotRegularFile, describe, read_regular_file
from kvlint.review.git import (
    GITLINK_MODE,
    SYMLINK_MODE,
    ReviewError,
    decoded_path,
    git,
    safe_relative_path,
)


def snapshot_working_tree(repo: Path, scratch: Path) -> tuple[str, dict[str, str], dict[str, str]]:
    """A tree object of the tracked files' bytes as they are on disk: (tree, git environment that can
    read it, path -> why a file was left as the index has it)."""
    objects = scratch / "objects"
    objects.mkdir(parents=True, exist_ok=True)
    repository_objects = Path(
        repo, git(repo, "rev-parse", "--git-path", "objects").decode("utf-8", "surrogateescape").strip()
    )
    environment = {
        "GIT_INDEX_FILE": str(scratch / "snapshot-index"),
        "GIT_OBJECT_DIRECTORY": str(objects),
        "GIT_ALTERNATE_OBJECT_DIRECTORIES": str(repository_objects.resolve()),
    }
    hash_name = _object_format(repo)
    root = os.path.realpath(repo)
    entries: dict[bytes, tuple[str, str]] = {}  # path -> (mode, object id)
    pending: list[tuple[bytes, str, Path]] = []  # (path, mode, scratch copy) for content git must hash
    left_out: dict[str, str] = {}
    blobs = scratch / "blobs"
    blobs.mkdir(exist_ok=True)
    for record in git(repo, "ls-files", "-s", "-z").split(b"\0"):
        if not record:
            continue
        meta, _, raw_path = record.partition(b"\t")
        mode, object_id, _stage = meta.decode("ascii", "replace").split()
        entries.setdefault(raw_path, (mode, object_id))  # an unmerged path: its first stage stands in
    for raw_path, (mode, object_id) in list(entries.items()):
        if mode == GITLINK_MODE:
            continue
        path = decoded_path(raw_path)
        if safe_relative_path(path) is not None:
            continue  # kept as committed; changed_files refuses it by name
        content, why = _read_working_file(root, path)
        if why is not None:
            left_out[path] = why
            continue
        if content is None:
            continue  # not on disk (deleted, or outside a sparse checkout): kept as the index has it
        new_mode, data = content
        if new_mode != SYMLINK_MODE and mode in ("100644", "100755"):
            new_mode = mode
        if new_mode == mode and _object_id(hash_name, data) == object_id:
            continue
        copy = blobs / str(len(pending))
        copy.write_bytes(data)
        pending.append((raw_path, new_mode, copy))
    if pending:
        # Scratch copies have plain names outside the repository: no attribute can apply, and --no-filters says so.
        names = b"".join(str(copy).encode() + b"\n" for _, _, copy in pending)
        hashed = git(
            repo, "hash-object", "-w", "--no-filters", "--stdin-paths", input_bytes=names, environment=environment
        ).split()
        if len(hashed) != len(pending):
            raise ReviewError("git hash-object did not hash every changed file")
        for (raw_path, new_mode, _), object_id in zip(pending, hashed):
            entries[raw_path] = (new_mode, object_id.decode("ascii"))
    index_info = b"".join(
        f"{mode} {object_id}\t".encode() + raw_path + b"\0" for raw_path, (mode, object_id) in entries.items()
    )
    git(repo, "update-index", "-z", "--index-info", input_bytes=index_info, environment=environment)
    tree = git(repo, "write-tree", environment=environment).decode().strip()
    return tree, environment, left_out


def _object_format(repo: Path) -> str:
    try:
        name = git(repo, "rev-parse", "--show-object-format").decode().strip()
    except ReviewError:
        name = ""
    return "sha256" if name == "sha256" else "sha1"


def _object_id(hash_name: str, data: bytes) -> str:
    digest = hashlib.new(hash_name)
    digest.update(b"blob %d\0" % len(data))
    digest.update(data)
    return digest.hexdigest()


def _read_working_file(root: str, path: str) -> tuple[tuple[str, bytes] | None, str | None]:
    """((mode, bytes) or None when absent, why it is not read): symbolic links as links, never followed; any
    other file through kvlint's one reader (regular files only, size capped before reading, no blocking)."""
    full = os.path.join(root, path)
    parent = os.path.dirname(full)
    if os.path.realpath(parent) != os.path.normpath(parent):
        return None, "under a symbolic link"
    try:
        status = os.lstat(full)
        if stat.S_ISLNK(status.st_mode):
            return (SYMLINK_MODE, os.fsencode(os.readlink(full))), None
        data = read_regular_file(full, follow_symlinks=False)
    except (FileNotFoundError, NotADirectoryError):
        return None, None
    except (NotRegularFile, FileTooLarge, IsADirectoryError) as error:
        return None, describe(error)
    except OSError as error:
        return None, f"cannot be read ({describe(error)})"
    return ("100755" if status.st_mode & 0o100 else "100644", data), None
