"""Whether another account may change what a folder or file holds: the one test behind every cache folder,
release folder and key kvlint trusts.

A folder another account can write is one whose entries they can rename away and replace (a staging folder
swapped for theirs, a key swapped between its check and its read); a file they can write, they can change
after it was checked. So anything kvlint signs, or reads as signed, must be owned by this user and writable
by no one else. The sticky bit (as on /tmp) stops others renaming this user's entries, but not planting
names of their own; it excuses only the folders *above* kvlint's own (a cache root under /tmp).
"""

from __future__ import annotations

import os
import stat


def others_may_write(info: os.stat_result, *, sticky_excuses: bool = False, root_may_own: bool = False) -> str | None:
    """Why another account may write what `info` describes (owner, mode), or None when only this user can.
    `sticky_excuses`: a sticky folder writable by all is accepted (others cannot rename what is ours in it).
    `root_may_own`: owned by root is accepted (root can write anything of ours anyway)."""
    owner = info.st_uid
    if owner != os.geteuid() and not (root_may_own and owner == 0):
        return f"owned by another user (uid {owner})"
    mode = stat.S_IMODE(info.st_mode)
    if mode & 0o022 and not (sticky_excuses and stat.S_ISDIR(info.st_mode) and mode & stat.S_ISVTX):
        who = "group and others" if mode & 0o022 == 0o022 else "group" if mode & 0o020 else "others"
        return f"writable by {who} (mode {mode:o})"
    return None


def make_folders(path: str | os.PathLike) -> None:
    """`path` and the folders above it that are missing, each made 0755 at most whatever the umask (a umask
    of 002 would make them group-writable, and so not trusted, through `os.makedirs`)."""
    missing = []
    current = os.path.abspath(path)
    while not os.path.lexists(current):
        missing.append(current)
        current = os.path.dirname(current)
    for folder in reversed(missing):
        try:
            os.mkdir(folder, 0o755)
        except FileExistsError:
            pass  # made by a concurrent run meanwhile: checked like any other where it matters
