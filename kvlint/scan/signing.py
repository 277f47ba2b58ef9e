"""The secret that makes the caches kvlint's own: every cache file is signed (HMAC-SHA256) with a key only
this user can read, kept outside the cache folder.

Why a secret: a cache entry says "this file, with this content, under this kvlint and configuration, has
these findings". Binding an entry to the file's content digest and kvlint's source digest is not enough,
because both are public: anyone who can write the cache folder (another user sharing it, a cache that CI
restored from a pull request's run) could write an entry claiming "no findings" for the exact content of a
file that has some. A signature they cannot compute closes that: an entry kvlint did not write itself is
"not cached", and the file is linted again.

The key: 32 random bytes (hex) in `$XDG_STATE_HOME/kvlint/cache-key` (default `~/.local/state/kvlint/`),
created on first use with mode 0600 in a 0700 folder. It is used only when it is a regular file, owned by
this user, with no hard link and no permission for group or others, in a folder owned by this user that no one
else can write — all read from the one descriptor the key's bytes come from; otherwise — or when it cannot be
created (a read-only home) — the caches are neither read nor written (a slower scan, the same findings), and
a key that is there but not trusted is said once on stderr, with why.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import stat
import sys
from functools import lru_cache

from kvlint.scan.ownership import others_may_write

TYPE_CHECKING = False  # typing's, without importing typing: a replayed run (kvlint.scan.replay) needs none of it
if TYPE_CHECKING:
    from pathlib import Path

KEY_BYTES = 32
# The layout of a signed record file; bumped when it changes (older files are then "not cached").
RECORD_FORMAT = 1
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
# Never through a link, never waiting (a FIFO named like the key is refused by its fstat, not waited on).
_KEY_FLAGS = (
    os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | _CLOEXEC | getattr(os, "O_NOCTTY", 0)
)


def key_file() -> str:
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(base, "kvlint", "cache-key")


def key_path() -> Path:
    from pathlib import Path  # not at the top: a replayed run (kvlint.scan.replay) never needs pathlib

    return Path(key_file())


def sign(key: bytes, *parts: bytes) -> str:
    """The signature of `parts` (their lengths are part of it: no two splits of the same bytes collide)."""
    mac = hmac.new(key, digestmod=hashlib.sha256)
    for part in parts:
        mac.update(len(part).to_bytes(8, "big"))
        mac.update(part)
    return mac.hexdigest()


def verify(key: bytes, signature: bytes, *parts: bytes) -> bool:
    return hmac.compare_digest(signature, sign(key, *parts).encode())


def signed_record(secret: bytes, kind: str, key: str, document: bytes) -> bytes:
    """A record file's bytes: a header line with the signature of `document` for this kind and key, then it."""
    signature = sign(secret, kind.encode(), key.encode(), document)
    return f"kvlint-cache {RECORD_FORMAT} {signature}\n".encode() + document


def signed_document(secret: bytes, kind: str, key: str, data: bytes) -> bytes | None:
    """The document of a record file's bytes `data` when this kvlint signed it for this kind and key, else None."""
    header, _, document = data.partition(b"\n")
    words = header.split(b" ")
    if len(words) != 3 or words[0] != b"kvlint-cache" or words[1] != str(RECORD_FORMAT).encode():
        return None
    return document if verify(secret, words[2], kind.encode(), key.encode(), document) else None


def cache_key() -> bytes | None:
    """This user's cache key (created on first use); None when there is no trustworthy one."""
    return _cache_key(key_file())


@lru_cache(maxsize=4)
def _cache_key(path: str) -> bytes | None:
    key, problem = _read_key(path)
    if key is None and not problem:  # none yet, in a folder only this user can write: make one
        _create_key(path)
        key, problem = _read_key(path)
    if key is None and problem:  # once a process (and its forked workers): the caches are off, and why
        print(f"kvlint: the cache key {path} is not used ({problem}): caching is off", file=sys.stderr)
    return key


def _read_key(path: str) -> tuple[bytes | None, str]:
    """The key, or None and why it is not trusted ("" when there is none yet in a trusted folder).

    One open of the key, relative to the one open of its folder: the owner, mode and links checked are those
    of the descriptor the bytes are read from (a check by path, then a read by path, could be told apart by
    a swap in between), and the folder is one no one else can write (else they could swap the key)."""
    folder, name = os.path.split(path)
    try:
        folder_descriptor = os.open(folder or ".", os.O_RDONLY | _DIRECTORY | _CLOEXEC)
    except FileNotFoundError:
        return None, ""
    except OSError as error:
        return None, f"its folder cannot be opened: {error.strerror or type(error).__name__}"
    try:
        problem = others_may_write(os.fstat(folder_descriptor))
        if problem:
            return None, f"its folder is {problem}"
        return _read_key_in(folder_descriptor, name)
    finally:
        os.close(folder_descriptor)


def _read_key_in(folder_descriptor: int, name: str) -> tuple[bytes | None, str]:
    try:
        descriptor = os.open(name, _KEY_FLAGS, dir_fd=folder_descriptor)
    except FileNotFoundError:
        return None, ""
    except OSError as error:
        try:
            if stat.S_ISLNK(os.lstat(name, dir_fd=folder_descriptor).st_mode):
                return None, "a symbolic link"
        except OSError:
            pass
        return None, f"unreadable: {error.strerror or type(error).__name__}"
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            return None, "not a regular file"
        if info.st_uid != os.geteuid():
            return None, "owned by another user"
        if info.st_nlink != 1:
            return None, f"{info.st_nlink} hard links"
        if info.st_mode & 0o077:  # readable or writable by others: not a secret any more
            return None, f"mode {stat.S_IMODE(info.st_mode):o}: others may read or write it"
        text = os.read(descriptor, 4 * KEY_BYTES + 1)
        key = bytes.fromhex(text.strip().decode("ascii"))
    except (OSError, ValueError) as error:
        return None, f"unreadable: {getattr(error, 'strerror', None) or type(error).__name__}"
    finally:
        os.close(descriptor)
    return (key, "") if len(key) == KEY_BYTES else (None, f"not {KEY_BYTES} bytes of hex")


def _create_key(path: str) -> None:
    """Write a new key; two processes creating it at once agree on one (a link is made only if absent)."""
    folder = os.path.dirname(path)
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        temporary = f"{path}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
        try:
            with os.fdopen(descriptor, "w") as stream:
                stream.write(os.urandom(KEY_BYTES).hex() + "\n")  # the OS's CSPRNG, as `secrets` uses
                stream.flush()
                os.fsync(stream.fileno())
            os.link(temporary, path)  # fails when another process got there first: its key is the key
        finally:
            os.unlink(temporary)
    except OSError:
        return
