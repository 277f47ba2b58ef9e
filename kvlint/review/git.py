"""git, run so that nothing a pull request ships is executed: the runner, revisions, and blobs.

git gets an argument list (never a shell), no attributes file outside the trees, no replace refs, no hook, no
fsmonitor and no external diff from the environment. Blobs are read with `git cat-file`, which applies no
filter, and a path is refused before anything is written for it.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

from kvlint.errors import ReviewError
from kvlint.filesystem import MAX_FILE_BYTES, FileTooLarge, describe

SYMLINK_MODE = "120000"
SYMLINK_REFUSAL = "a symbolic link"  # why a link in a pull request is not read
GITLINK_MODE = "160000"
# Why a blob was not written to the scratch tree when the system refused it: kvlint's failure, not the file's.
WRITE_FAILURE = "cannot be written to a temporary folder"
_MAX_NAME_BYTES = 255  # one path component on Linux and macOS
_GIT_TIMEOUT_S = 300
# A (trusted) user configuration that reformats the diff must not break its parsing; attributes come from
# the trees only, never from a global or system attributes file.
_GIT_CONFIG = (
    "-c", "core.quotepath=off",
    "-c", "core.fsmonitor=false",
    "-c", "core.hooksPath=/dev/null",  # no hook runs: update-index would run post-index-change
    "-c", "core.attributesFile=/dev/null",
    "-c", "diff.suppressBlankEmpty=false",
)  # fmt: skip
_GIT_ENVIRONMENT = {
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_OPTIONAL_LOCKS": "0",
    "GIT_ATTR_NOSYSTEM": "1",
    "GIT_NO_REPLACE_OBJECTS": "1",
}


def git(
    repo: Path, *arguments: str, input_bytes: bytes | None = None, environment: dict[str, str] | None = None
) -> bytes:
    """Run git in `repo` and return its stdout; a failure becomes a ReviewError with git's own first line."""
    completed = _run_git(repo, arguments, input_bytes, environment)
    if completed.returncode != 0:
        message = completed.stderr.decode("utf-8", "replace").strip().splitlines()
        first = next((line for line in message if line.strip()), f"exit status {completed.returncode}")
        raise ReviewError(f"git {arguments[0]} failed: {first.removeprefix('fatal: ')}")
    return completed.stdout


def git_lines(repo: Path, *arguments: str, environment: dict[str, str] | None = None) -> Iterator[bytes]:
    """git's stdout one line at a time (without its newline), never all of it in memory: a diff of large
    files costs one line. A failure (or git outliving its deadline) is a ReviewError, as with `git`."""
    deadline = time.monotonic() + _GIT_TIMEOUT_S
    command = ["git", "-C", str(repo), *_GIT_CONFIG, *arguments]
    with tempfile.TemporaryFile() as errors:
        try:
            process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=errors,
                env=_git_environment(environment),
            )
        except FileNotFoundError:
            raise ReviewError("git is not installed (kvlint review reads the pull request with git)") from None
        try:
            for line in process.stdout:
                if time.monotonic() > deadline:
                    raise ReviewError(f"git {arguments[0]} did not finish within {_GIT_TIMEOUT_S}s")
                yield line[:-1] if line.endswith(b"\n") else line
            returncode = process.wait(timeout=max(deadline - time.monotonic(), 1))
        except subprocess.TimeoutExpired:
            raise ReviewError(f"git {arguments[0]} did not finish within {_GIT_TIMEOUT_S}s") from None
        finally:
            process.kill()
            process.wait()
            process.stdout.close()
        if returncode != 0:
            errors.seek(0)
            message = errors.read(64 * 1024).decode("utf-8", "replace").strip().splitlines()
            first = next((line for line in message if line.strip()), f"exit status {returncode}")
            raise ReviewError(f"git {arguments[0]} failed: {first.removeprefix('fatal: ')}")


def _git_environment(environment: dict[str, str] | None) -> dict[str, str]:
    inherited = {k: v for k, v in os.environ.items() if k not in ("GIT_EXTERNAL_DIFF", "GIT_DIFF_OPTS")}
    return {**inherited, **_GIT_ENVIRONMENT, **(environment or {})}


def _run_git(
    repo: Path, arguments, input_bytes: bytes | None, environment: dict[str, str] | None
) -> subprocess.CompletedProcess:
    command = ["git", "-C", str(repo), *_GIT_CONFIG, *arguments]
    try:
        return subprocess.run(
            command,
            input=input_bytes,
            capture_output=True,
            timeout=_GIT_TIMEOUT_S,
            env=_git_environment(environment),
            check=False,
        )
    except FileNotFoundError:
        raise ReviewError("git is not installed (kvlint review reads the pull request with git)") from None
    except subprocess.TimeoutExpired:
        raise ReviewError(f"git {arguments[0]} did not finish within {_GIT_TIMEOUT_S}s") from None


def repository_root(start: Path) -> Path:
    try:
        output = git(start, "rev-parse", "--show-toplevel")
    except ReviewError as error:
        raise ReviewError(f"{start}: not inside a git checkout ({error})") from None
    return Path(output.decode("utf-8", "surrogateescape").strip()).resolve()


def resolve_commit(repo: Path, ref: str) -> str:
    if ref.startswith("-"):
        raise ReviewError(f"{ref!r} is not a git revision")
    try:
        output = git(repo, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}")
    except ReviewError:
        output = b""
    commit = output.decode().strip()
    if not ref or not commit:
        raise ReviewError(f"unknown git revision {ref!r}")
    return commit


def unborn_head(repo: Path) -> bool:
    """Whether HEAD names a branch with no commit yet (a repository before its first commit)."""
    try:
        git(repo, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
    except ReviewError:
        try:
            return bool(git(repo, "symbolic-ref", "--quiet", "HEAD").strip())
        except ReviewError:
            return False
    return False


def renamed_paths(repo: Path, old: str, new: str, environment: dict[str, str] | None = None) -> dict[str, str]:
    """new path -> old path of each file git finds renamed from tree-ish `old` to `new` (`--find-renames`)."""
    listing = git(
        repo, "diff-tree", "-r", "-z", "--find-renames", "--diff-filter=R", "--name-status", old, new,
        environment=environment,
    )  # fmt: skip
    fields = listing.split(b"\0")
    renames: dict[str, str] = {}
    for position in range(0, len(fields) - 2, 3):  # R<score>, old path, new path
        if fields[position].startswith(b"R"):
            renames[decoded_path(fields[position + 2])] = decoded_path(fields[position + 1])
    return renames


def merge_base(repo: Path, base_commit: str, head_commit: str) -> str:
    """Where the pull request branched off: GitHub diffs a pull request against it (`base...head`)."""
    try:
        output = git(repo, "merge-base", base_commit, head_commit)
    except ReviewError:
        output = b""
    found = output.decode().strip()
    if not found:
        raise ReviewError(f"{base_commit[:12]} and {head_commit[:12]} have no common ancestor")
    return found


def safe_relative_path(path: str) -> str | None:
    """Why `path` (as git names it) must not be read, or None when it stays inside the repository."""
    if not path or any(ord(c) < 0x20 or ord(c) == 0x7F for c in path):
        return "an unprintable path"
    if any(0xD800 <= ord(c) <= 0xDFFF for c in path):
        return "a file name that is not UTF-8"
    pure = PurePosixPath(path)
    if pure.is_absolute() or path.startswith("\\") or (len(path) > 1 and path[1] == ":"):
        return "an absolute path"
    if any(part in ("..", ".git") for part in pure.parts) or "\\" in path:
        return "a path that leaves the repository"
    if any(len(part.encode("utf-8")) > _MAX_NAME_BYTES for part in pure.parts):
        return f"a file name longer than {_MAX_NAME_BYTES} bytes"
    return None


def decoded_path(raw: bytes) -> str:
    # surrogateescape keeps undecodable bytes visible (and refusable) instead of failing here.
    return raw.decode("utf-8", "surrogateescape")


# --- blobs ------------------------------------------------------------------------------------------------


def too_large(path: str, size: int) -> str:
    """Why a blob of `size` bytes is not read, in the words the scan uses for a file on disk."""
    return describe(FileTooLarge(path, size, MAX_FILE_BYTES))


def read_blob(repo: Path, commit: str, path: str) -> bytes | None:
    """The regular file `path` of `commit` (no filter applied); None when it is not one there. Its size is
    read from the tree first: one over MAX_FILE_BYTES is a ReviewError, and not a byte of it is read."""
    try:
        listing = git(repo, "ls-tree", "-z", "-l", "--full-tree", commit, "--", path)
    except ReviewError:
        return None
    meta, _, _ = listing.partition(b"\t")
    parts = meta.decode("ascii", "replace").split()
    if len(parts) != 4 or parts[1] != "blob" or parts[0] not in ("100644", "100755") or not parts[3].isdigit():
        return None
    if int(parts[3]) > MAX_FILE_BYTES:
        raise ReviewError(f"{path} of {commit[:12]}: not read: {too_large(path, int(parts[3]))}")
    try:
        data = git(repo, "cat-file", "blob", parts[2])
    except ReviewError:
        return None
    if len(data) > MAX_FILE_BYTES:  # not the blob the tree listed
        raise ReviewError(f"{path} of {commit[:12]}: not read: {too_large(path, len(data))}")
    return data


def materialise_python_tree(repo: Path, commit: str, destination: Path) -> list[tuple[str, str]]:
    """Write every Python source of `commit` under `destination` (regular blobs of at most MAX_FILE_BYTES,
    by the size the tree lists, checked before the blob is read); returns (path, why) for each one refused.

    The whole tree is needed, not only the changed files: the cross-file analysis reads the spec hierarchy,
    the resolver and the scheduler's sizing path from wherever the tree defines them.
    """
    listing = git(repo, "ls-tree", "-r", "-z", "-l", "--full-tree", commit)
    wanted: list[tuple[str, str]] = []
    refused: list[tuple[str, str]] = []
    for entry in listing.split(b"\0"):
        if not entry:
            continue
        meta, _, raw_path = entry.partition(b"\t")
        mode, kind, sha, size = meta.decode("ascii", "replace").split()
        path = decoded_path(raw_path)
        if kind != "blob" or not path.endswith(".py"):
            continue
        why = safe_relative_path(path)
        if why is None and mode == SYMLINK_MODE:
            why = SYMLINK_REFUSAL
        if why is None and not size.isdigit():
            why = "a blob whose size git does not list"
        if why is None and int(size) > MAX_FILE_BYTES:
            why = too_large(path, int(size))
        if why is not None:
            refused.append((path, why))
            continue
        wanted.append((path, sha))
    if wanted:
        refused += _write_blobs(repo, wanted, destination.resolve())
    return refused


def _write_blobs(repo: Path, wanted: list[tuple[str, str]], root: Path) -> list[tuple[str, str]]:
    """One `git cat-file --batch` for all blobs, read one blob at a time (never the whole tree in memory)."""
    refused: list[tuple[str, str]] = []
    deadline = time.monotonic() + _GIT_TIMEOUT_S
    with tempfile.TemporaryFile() as requests:
        requests.write("".join(f"{sha}\n" for _, sha in wanted).encode())
        requests.seek(0)
        command = ["git", "-C", str(repo), *_GIT_CONFIG, "cat-file", "--batch"]
        try:
            process = subprocess.Popen(
                command, stdin=requests, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=_git_environment(None)
            )
        except FileNotFoundError:
            raise ReviewError("git is not installed (kvlint review reads the pull request with git)") from None
        try:
            stream = process.stdout
            for path, sha in wanted:
                if time.monotonic() > deadline:
                    raise ReviewError(f"git cat-file did not finish within {_GIT_TIMEOUT_S}s")
                header = stream.readline().split()
                if len(header) != 3 or header[1] != b"blob" or not header[2].isdigit():
                    raise ReviewError(f"git cat-file could not read {sha}")
                if int(header[2]) > MAX_FILE_BYTES:  # the listing said it was smaller: stop, read nothing
                    raise ReviewError(f"git cat-file: {sha} is not the blob the tree listed")
                why = _write_one(root, path, _chunks(stream, int(header[2])))
                stream.read(1)  # the newline after each blob
                if why is not None:
                    refused.append((path, why))
        finally:
            process.kill()
            process.wait()
    return refused


def _chunks(stream, size: int, chunk: int = 1024 * 1024) -> Iterator[bytes]:
    """The next `size` bytes of `stream`, a chunk at a time: a blob is never held whole."""
    left = size
    while left > 0:
        data = stream.read(min(chunk, left))
        if not data:
            raise ReviewError("git cat-file ended in the middle of a blob")
        left -= len(data)
        yield data


def _write_one(root: Path, path: str, chunks: Iterator[bytes]) -> str | None:
    """Write the blob's chunks to root/path; why not, or None. The chunks are read to their end either way
    (the next blob follows them in git's stream)."""
    target = root / path
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.resolve().is_relative_to(root):
            raise _Refused("a path that leaves the repository")
        with open(target, "wb") as file:
            for data in chunks:
                file.write(data)
    except _Refused as refusal:
        for _ in chunks:
            pass
        return str(refusal)
    except OSError as error:
        for _ in chunks:
            pass
        return f"{WRITE_FAILURE} ({error.strerror or type(error).__name__})"
    return None


class _Refused(Exception):
    """A blob's path that must not be written."""
