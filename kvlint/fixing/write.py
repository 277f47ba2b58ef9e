"""Write a fixed file so that nothing is lost: same encoding, owner and mode, a temp file in the same folder,
then a rename that happens only if the file still holds what kvlint read.

What is refused, with a one-line reason (the file is left as it is):
- a symbolic link: kvlint never writes through a link (a link in a pull request could point anywhere); the
  walk never yields a link whose target is outside the scanned folder, and the fix is made on the target
  when it is scanned itself;
- a file with more than one hard link: the rename would split the links (the other names keep the old
  text), and writing in place instead would give up atomicity (a crash could leave every linked copy
  half-written; a store that shares files by hard links, such as a package cache, would be edited too);
- a file whose owner or group kvlint cannot give the new file (owned by another user): the rewritten file
  would change owner;
- a file whose extended attributes (POSIX ACLs are one: `system.posix_acl_access`) kvlint cannot give the new
  file (an attribute it may not set): the rewritten file would lose them. Where the filesystem holds no
  extended attributes (ENOTSUP), or the platform has no xattr calls, there is nothing to keep;
- anything that is not a regular file.
"""

from __future__ import annotations

import errno
import os
import re
import stat
import tempfile
import time
from pathlib import Path

from kvlint.errors import FixError
from kvlint.escaping import printable
from kvlint.filesystem import describe, file_kind, read_regular_file

TEMP_SUFFIX = ".kvlint-tmp"
# A live run holds its temp file for the time of one write, fsync and rename; one this old was left by a
# killed run. Age, not a pid, decides: a run in another container or on another NFS client has pids we can't see.
STALE_TEMP_AGE_S = 600
# What os.listxattr/setxattr raise where a filesystem (or one attribute namespace) holds no extended attributes.
_NO_XATTRS = frozenset({errno.ENOTSUP, getattr(errno, "EOPNOTSUPP", errno.ENOTSUP)})


def read_original(path: Path) -> bytes:
    """The bytes of a file to fix: a regular file of at most 10 MiB, read without blocking (a FIFO swapped in
    since the scan is refused, not waited on); FixError saying why not."""
    try:
        return read_regular_file(path)
    except OSError as error:
        raise FixError(f"cannot read: {describe(error)}") from None


def writable_target(path: Path) -> os.stat_result:
    """The file's own stat (not a link's target) when kvlint may replace it; FixError saying why not."""
    try:
        info = os.lstat(path)
    except OSError as error:
        raise FixError(f"cannot stat: {error.strerror}") from None
    if stat.S_ISLNK(info.st_mode):
        raise FixError("is a symbolic link: not written (kvlint never writes through a link)")
    if not stat.S_ISREG(info.st_mode):
        raise FixError(f"is not a regular file ({file_kind(info.st_mode)}): not written")
    if info.st_nlink > 1:
        raise FixError(
            f"has {info.st_nlink} hard links: not written (a rename would split them, an in-place write is not"
            " atomic); apply `kvlint fix --diff` by hand"
        )
    return info


def write_atomically(path: Path, original: bytes, new: bytes) -> None:
    """Replace `path` with `new` only if it still holds `original`; temp file in the same folder, then rename."""
    folder = path.parent
    before = writable_target(path)
    try:
        handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=TEMP_SUFFIX, dir=folder)
    except OSError as error:
        raise FixError(f"cannot write in {folder}: {error.strerror}; left unchanged") from None
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(new)
            stream.flush()
            _keep_owner_and_mode(stream.fileno(), before, path)
            os.fsync(stream.fileno())
        try:
            current = read_regular_file(path, follow_symlinks=False)
            now = writable_target(path)
        except OSError as error:
            raise FixError(f"cannot re-read before writing: {describe(error)}; left unchanged") from None
        if current != original or (now.st_dev, now.st_ino) != (before.st_dev, before.st_ino):
            raise FixError("changed on disk since kvlint read it; left unchanged")
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise
    remove_stale_temporaries(path)


def _keep_owner_and_mode(descriptor: int, before: os.stat_result, path: Path) -> None:
    """Give the new file the old one's owner, group, extended attributes and mode (the mode last: a chown
    clears set-id bits, and an ACL sets the group bits, which the mode then sets back to the old file's)."""
    mine = os.fstat(descriptor)
    if (mine.st_uid, mine.st_gid) != (before.st_uid, before.st_gid):
        try:
            os.fchown(descriptor, before.st_uid, before.st_gid)
        except OSError:
            raise FixError("is owned by another user or group: not written (the new file would change owner)") from None
    _keep_extended_attributes(descriptor, path)
    os.fchmod(descriptor, stat.S_IMODE(before.st_mode))


def _keep_extended_attributes(descriptor: int, path: Path) -> None:
    """Make the new file's extended attributes the old file's: one the new file got that the old lacks (a
    folder's default ACL) removed first, then each of the old file's copied (ACLs included). FixError when
    one cannot be kept."""
    if not hasattr(os, "listxattr"):  # not Linux: no xattr calls in Python
        return
    try:
        wanted = {
            name: os.getxattr(path, name, follow_symlinks=False) for name in os.listxattr(path, follow_symlinks=False)
        }
        present = {name: os.getxattr(descriptor, name) for name in os.listxattr(descriptor)}
    except OSError as error:
        if error.errno in _NO_XATTRS:
            return  # a filesystem without extended attributes: none to keep
        raise FixError(f"cannot read its extended attributes ({error.strerror}): not written") from None
    for name in present.keys() - wanted.keys():
        try:
            os.removexattr(descriptor, name)
        except OSError:
            pass  # one the system sets itself (a security label): not the user's data
    for name, value in wanted.items():
        if present.get(name) == value:
            continue  # e.g. a security label the new file already has: nothing to set (and no permission needed)
        try:
            os.setxattr(descriptor, name, value)
        except OSError as error:
            if error.errno in _NO_XATTRS:
                continue  # this filesystem holds no such attribute on a new file: nothing can keep it
            raise FixError(
                f"cannot give the new file its extended attribute {printable(name)} ({error.strerror}): not written"
            ) from None


def remove_stale_temporaries(path: Path) -> None:
    """Delete `path`'s own temp files (`.<name>.<mkstemp chars>.kvlint-tmp`) that a SIGKILLed run left behind.

    Only regular files of exactly that shape, older than STALE_TEMP_AGE_S; best effort, never fails a fix.
    """
    shape = re.compile(rf"\.{re.escape(path.name)}\.[a-z0-9_]+{re.escape(TEMP_SUFFIX)}")
    now = time.time()
    try:
        with os.scandir(path.parent) as listing:
            entries = [e for e in listing if shape.fullmatch(e.name)]
    except OSError:
        return
    for entry in entries:
        try:
            info = entry.stat(follow_symlinks=False)
            if stat.S_ISREG(info.st_mode) and now - info.st_mtime > STALE_TEMP_AGE_S:
                os.unlink(entry.path)
        except OSError:
            pass


def encode_like(text: str, encoding: str) -> bytes:
    """Encode back exactly as read: same codec, BOM kept (utf-8-sig writes it)."""
    return text.encode(encoding)
