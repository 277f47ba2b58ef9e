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

Never outside the scanned tree, even while someone swaps a folder on the file's path for a link: the file's
folder is opened once, from the tree's root, one folder at a time with O_NOFOLLOW (a folder link inside the
tree is resolved first and its target opened the same way), and every later step — the lstat, the temp file,
the re-read, the rename — is made relative to that descriptor (`dir_fd`), never through the path again.
"""

from __future__ import annotations

import errno
import os
import re
import stat
import time
from pathlib import Path

from kvlint.errors import FixError
from kvlint.escaping import printable
from kvlint.filesystem import MAX_FILE_BYTES, describe, file_kind, is_inside, read_regular_file

TEMP_SUFFIX = ".kvlint-tmp"
# A live run holds its temp file for the time of one write, fsync and rename; one this old was left by a
# killed run. Age, not a pid, decides: a run in another container or on another NFS client has pids we can't see.
STALE_TEMP_AGE_S = 600
# What os.listxattr/setxattr raise where a filesystem (or one attribute namespace) holds no extended attributes.
_NO_XATTRS = frozenset({errno.ENOTSUP, getattr(errno, "EOPNOTSUPP", errno.ENOTSUP)})
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_FOLDER_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)
_READ_FLAGS = os.O_RDONLY | _NOFOLLOW | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


def read_original(path: Path) -> bytes:
    """The bytes of a file to fix: a regular file of at most 10 MiB, read without blocking (a FIFO swapped in
    since the scan is refused, not waited on); FixError saying why not."""
    try:
        return read_regular_file(path)
    except OSError as error:
        raise FixError(f"cannot read: {describe(error)}") from None


def open_folder(path: Path, root: str | None) -> int:
    """A descriptor of `path`'s folder, opened from `root` (the tree's root, as the user named it) one folder
    at a time without following a link; a folder not under `root` (a file the user named) as it is named."""
    real = os.path.realpath(path.parent)  # folder links inside the tree resolved; checked below, opened without links
    base = os.path.realpath(root) if root else real
    if not is_inside(real, base):
        if root and is_inside(os.path.abspath(path.parent), os.path.abspath(root)):
            raise FixError("its folder now leads out of the scanned tree: not written")
        base = real  # named by the user outside the tree: its folder is theirs to choose
    parts = [part for part in os.path.relpath(real, base).split(os.sep) if part not in ("", ".")]
    try:
        descriptor = os.open(base, _FOLDER_FLAGS)
    except OSError as error:
        raise FixError(f"cannot open its folder: {error.strerror}") from None
    for part in parts:
        try:
            inner = os.open(part, _FOLDER_FLAGS | _NOFOLLOW, dir_fd=descriptor)
        except OSError as error:
            reason = (
                "a folder on its path became a symbolic link"
                if error.errno in (errno.ELOOP, errno.ENOTDIR)
                else error.strerror
            )
            raise FixError(f"cannot open its folder ({reason}): not written") from None
        finally:
            os.close(descriptor)
        descriptor = inner
    return descriptor


def writable_target(name: str, folder: int) -> os.stat_result:
    """The stat of `name` in the folder `folder` (not a link's target) when kvlint may replace it; FixError
    saying why not."""
    try:
        info = os.stat(name, dir_fd=folder, follow_symlinks=False)
    except OSError as error:
        raise FixError(f"cannot stat: {error.strerror}") from None
    if stat.S_ISLNK(info.st_mode):
        raise FixError("is a symbolic link: not written (kvlint never writes through a link)")
    if not stat.S_ISREG(info.st_mode):
        raise FixError(f"is not a regular file ({file_kind(info.st_mode)}): not written")
    if not info.st_mode & 0o222:
        # as ruff does: a file nobody may write is one its owner said not to edit (root could, kvlint won't)
        raise FixError("is read-only: not written (make it writable to let kvlint fix it)")
    if info.st_nlink > 1:
        raise FixError(
            f"has {info.st_nlink} hard links: not written (a rename would split them, an in-place write is not"
            " atomic); apply `kvlint fix --diff` by hand"
        )
    return info


def write_atomically(path: Path, original: bytes, new: bytes, root: str | None = None) -> None:
    """Replace `path` with `new` only if it still holds `original`: a temp file in the same folder, then a
    rename, every step relative to the folder's descriptor (see open_folder)."""
    folder = open_folder(path, root)
    try:
        _write_in(folder, path, original, new)
        remove_stale_temporaries(path, folder)
    finally:
        os.close(folder)


def _write_in(folder: int, path: Path, original: bytes, new: bytes) -> None:
    name = path.name
    before = writable_target(name, folder)
    temporary = f".{name}.{os.urandom(6).hex()}{TEMP_SUFFIX}"
    try:
        handle = os.open(
            temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=folder
        )
    except OSError as error:
        raise FixError(f"cannot write in {path.parent}: {error.strerror}; left unchanged") from None
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(new)
            stream.flush()
            _keep_owner_and_mode(stream.fileno(), before, name, folder)
            os.fsync(stream.fileno())
        try:
            current = _read_in(name, folder)
            now = writable_target(name, folder)
        except OSError as error:
            raise FixError(f"cannot re-read before writing: {describe(error)}; left unchanged") from None
        if current != original or (now.st_dev, now.st_ino) != (before.st_dev, before.st_ino):
            raise FixError("changed on disk since kvlint read it; left unchanged")
        os.replace(temporary, name, src_dir_fd=folder, dst_dir_fd=folder)
    except BaseException:
        try:
            os.unlink(temporary, dir_fd=folder)
        except OSError:
            pass
        raise


def _read_in(name: str, folder: int) -> bytes:
    """The bytes of the regular file `name` in `folder`, never through a link, never blocking, capped."""
    descriptor = os.open(name, _READ_FLAGS, dir_fd=folder)
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_FILE_BYTES:
            raise FixError("changed on disk since kvlint read it; left unchanged")
        with os.fdopen(os.dup(descriptor), "rb") as stream:
            return stream.read(MAX_FILE_BYTES + 1)
    finally:
        os.close(descriptor)


def _keep_owner_and_mode(descriptor: int, before: os.stat_result, name: str, folder: int) -> None:
    """Give the new file the old one's owner, group, extended attributes and mode (the mode last: a chown
    clears set-id bits, and an ACL sets the group bits, which the mode then sets back to the old file's)."""
    mine = os.fstat(descriptor)
    if (mine.st_uid, mine.st_gid) != (before.st_uid, before.st_gid):
        try:
            os.fchown(descriptor, before.st_uid, before.st_gid)
        except OSError:
            raise FixError("is owned by another user or group: not written (the new file would change owner)") from None
    _keep_extended_attributes(descriptor, name, folder)
    os.fchmod(descriptor, stat.S_IMODE(before.st_mode))


def _keep_extended_attributes(descriptor: int, name: str, folder: int) -> None:
    """Make the new file's extended attributes the old file's: one the new file got that the old lacks (a
    folder's default ACL) removed first, then each of the old file's copied (ACLs included). FixError when
    one cannot be kept."""
    if not hasattr(os, "listxattr"):  # not Linux: no xattr calls in Python
        return
    try:
        old = os.open(name, _READ_FLAGS, dir_fd=folder)  # the old file itself, in the folder already opened
        try:
            wanted = {attribute: os.getxattr(old, attribute) for attribute in os.listxattr(old)}
        finally:
            os.close(old)
        present = {attribute: os.getxattr(descriptor, attribute) for attribute in os.listxattr(descriptor)}
    except OSError as error:
        if error.errno in _NO_XATTRS:
            return  # a filesystem without extended attributes: none to keep
        raise FixError(f"cannot read its extended attributes ({error.strerror}): not written") from None
    for attribute in present.keys() - wanted.keys():
        try:
            os.removexattr(descriptor, attribute)
        except OSError:
            pass  # one the system sets itself (a security label): not the user's data
    for attribute, value in wanted.items():
        if present.get(attribute) == value:
            continue  # e.g. a security label the new file already has: nothing to set (and no permission needed)
        try:
            os.setxattr(descriptor, attribute, value)
        except OSError as error:
            if error.errno in _NO_XATTRS:
                continue  # this filesystem holds no such attribute on a new file: nothing can keep it
            raise FixError(
                f"cannot give the new file its extended attribute {printable(attribute)} ({error.strerror}): not written"
            ) from None


def remove_stale_temporaries(path: Path, folder: int | None = None) -> None:
    """Delete `path`'s own temp files (`.<name>.<random chars>.kvlint-tmp`) that a SIGKILLed run left behind,
    in `folder` (a descriptor of its folder) when given.

    Only regular files of exactly that shape, older than STALE_TEMP_AGE_S; best effort, never fails a fix.
    """
    shape = re.compile(rf"\.{re.escape(path.name)}\.[a-z0-9_]+{re.escape(TEMP_SUFFIX)}")
    now = time.time()
    try:
        with os.scandir(folder if folder is not None else path.parent) as listing:
            names = [e.name for e in listing if shape.fullmatch(e.name)]
    except OSError:
        return
    where = {"dir_fd": folder} if folder is not None else {}
    for name in names:
        target = name if folder is not None else os.path.join(path.parent, name)
        try:
            info = os.stat(target, follow_symlinks=False, **where)
            if stat.S_ISREG(info.st_mode) and now - info.st_mtime > STALE_TEMP_AGE_S:
                os.unlink(target, **where)
        except OSError:
            pass


def encode_like(text: str, encoding: str) -> bytes:
    """Encode back exactly as read: same codec, BOM kept (utf-8-sig writes it)."""
    return text.encode(encoding)
