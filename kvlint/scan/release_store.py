"""Where fetched releases are kept: a `releases/` folder only this user can write, a private staging folder
inside it, and one rename of the very folder that was checked and signed.

Why each: anyone who can write `releases/` can rename the staging folder away and put theirs in its place
(its `sources` a link to their tree), to be signed with this user's key and run by `verify --upstream-tests`.
So `releases/` must be owned by this user and writable by no one else (a sticky bit does not excuse it: others
could still plant names in it), and so must the cache folder holding it (there a sticky bit does: others
cannot rename this user's `releases/` away); the staging folder is made by `mkdtemp` (0700); what is signed is
walked without following a link (release_manifest); and right before the rename the staging folder is
checked again by lstat to be that same folder, not a link.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from kvlint.errors import ReleaseError
from kvlint.scan.archives import Written
from kvlint.scan.ownership import make_folders, others_may_write
from kvlint.scan.release_manifest import Mismatch, check_manifest, write_manifest
from kvlint.scan.signing import cache_key, key_path
from kvlint.scan.storage import cache_root


def releases_folder(cache_dir: Path | None) -> Path:
    """`<cache root>/releases`, made if missing; ReleaseError (one line, naming it) when another account could
    write it or the cache folder holding it. The path is resolved: no link on it can be turned elsewhere later."""
    root = Path(os.path.realpath(cache_dir if cache_dir else cache_root()))
    releases = root / "releases"
    try:
        make_folders(releases)
        root_info, info = os.stat(root), os.lstat(releases)
    except OSError as error:
        raise ReleaseError(f"{releases}: cannot be made or read ({error.strerror or type(error).__name__})") from None
    problem = others_may_write(root_info, sticky_excuses=True, root_may_own=True)
    if problem:
        raise ReleaseError(
            f"{root}: refused to keep releases in it: it is {problem}, so another account could swap them"
        )
    if not stat.S_ISDIR(info.st_mode):
        kind = "a symbolic link" if stat.S_ISLNK(info.st_mode) else "not a folder"
        raise ReleaseError(f"{releases}: refused to keep releases in it: it is {kind}")
    problem = others_may_write(info)
    if problem:
        raise ReleaseError(
            f"{releases}: refused to keep releases in it: it is {problem}, so another account could swap"
            " what kvlint fetches and signs there"
        )
    return releases


@contextmanager
def staging_folder(releases: Path) -> Iterator[Path]:
    """A new folder in `releases` only this user can enter (mkdtemp: 0700), removed afterwards with all it holds."""
    scratch = Path(tempfile.mkdtemp(prefix="kvlint-fetch-", dir=releases))
    try:
        info = os.lstat(scratch)
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o077:
            raise ReleaseError(f"{scratch}: the staging folder is not this user's alone")
        yield scratch
    finally:
        shutil.rmtree(scratch, ignore_errors=True)  # never through a link: rmtree opens folders without following


def install(staging: Path, target: Path, extracted: Mapping[str, Written], whole: Callable[[Path], bool]) -> Path:
    """Sign the complete `staging` folder (exactly the files `extracted` wrote, by their paths) and put it in
    place as `target` in one rename (a concurrent fetch may win: its folder is kept when it checks out)."""
    secret = cache_key()
    home = os.fspath(staging.resolve()) + os.sep
    written = {
        path[len(home) :].replace(os.sep, "/"): file for path, file in extracted.items() if path.startswith(home)
    }
    try:
        identity = write_manifest(staging, secret, target.name, written)
    except Mismatch as mismatch:
        raise ReleaseError(f"{staging}: refused to sign it: {mismatch}") from None
    except OSError as error:
        raise ReleaseError(f"cannot sign the release in {staging}: {error.strerror or error}") from None
    _check_is(staging, identity)
    try:
        os.replace(staging, target)
        return _placed(target, identity, staging)
    except OSError:
        if secret is not None and whole(target) and untrusted(target) is None:
            return target  # another fetch finished first with the same release
    try:  # a folder that is incomplete or not as kvlint made it: set it aside in the scratch folder, which goes away
        os.replace(target, staging.parent / f"stale-{target.name}")
        _check_is(staging, identity)
        os.replace(staging, target)
    except OSError as error:
        raise ReleaseError(f"cannot store the release in {target}: {error.strerror or error}") from None
    return _placed(target, identity, staging)


def _placed(target: Path, identity: tuple[int, int], staging: Path) -> Path:
    """`target`, once lstat shows the rename put the checked folder there (and not what was swapped in between
    the last check and the rename, which goes back to the scratch folder to be removed)."""
    try:
        _check_is(target, identity)
    except ReleaseError:
        os.replace(target, staging.parent / f"refused-{target.name}")
        raise
    return target


def untrusted(folder: Path) -> str | None:
    """Why the cached `folder` cannot be trusted, or None when it matches its signed manifest."""
    secret = cache_key()
    if secret is None:
        return f"there is no usable cache key ({key_path()}) to check it with"
    try:
        check_manifest(folder, secret)
    except Mismatch as mismatch:
        return f"it is not what kvlint extracted ({mismatch})"
    except OSError as error:
        return f"it cannot be checked ({error.strerror or type(error).__name__})"
    return None


def _check_is(staging: Path, identity: tuple[int, int]) -> None:
    """Right before the rename: `staging` is still the folder that was checked (lstat: not a link, same inode)."""
    try:
        info = os.lstat(staging)
    except OSError as error:
        raise ReleaseError(f"{staging}: the staging folder is gone ({error.strerror})") from None
    if not stat.S_ISDIR(info.st_mode) or (info.st_dev, info.st_ino) != identity:
        raise ReleaseError(f"{staging}: refused, it is not the folder kvlint checked (swapped for a link or another)")
