"""The cache key checked is the key read, in a folder only this user can write (issue 27, item 15).

On 20fb3b5 the key's owner and mode came from one `lstat`, its bytes from a second open by path, and its folder
was never looked at: in a state folder others can write, a key swapped between the two was read (205 times in
1.8 M reads). Here the swap is pinned to the moment after that `lstat` (a hook), raced by a real thread, and
the folder is made writable by others or given to another uid (os.chown, as root).
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from kvlint.scan import signing
from other_accounts import needs_another_uid

OURS = "11" * 32 + "\n"
THEIRS = "ee" * 32 + "\n"


@pytest.fixture
def state(tmp_path, monkeypatch) -> Path:
    """A state folder holding a good key (0600, ours), in a 0700 folder."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    folder = tmp_path / "state" / "kvlint"
    folder.mkdir(parents=True, mode=0o700)
    key = folder / "cache-key"
    key.write_text(OURS)
    key.chmod(0o600)
    signing._cache_key.cache_clear()
    yield folder
    signing._cache_key.cache_clear()


def _theirs(folder: Path, name: str) -> Path:
    """Another account's key as they would plant it: readable by all (they could not make it 0600 and ours)."""
    planted = folder / name
    planted.write_text(THEIRS)
    planted.chmod(0o644)
    return planted


def test_a_good_key_in_a_private_folder_is_read(state):
    assert signing.cache_key() == bytes.fromhex(OURS)


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        pytest.param(lambda folder: folder.chmod(0o777), "writable by group and others (mode 777)", id="by-all"),
        pytest.param(lambda folder: folder.chmod(0o770), "writable by group (mode 770)", id="by-group"),
        pytest.param(lambda folder: folder.chmod(0o1777), "writable by group and others (mode 1777)", id="sticky"),
        pytest.param(
            lambda folder: os.chown(folder, 12345, -1),
            "owned by another user (uid 12345)",
            id="another-uid",
            marks=needs_another_uid,
        ),
    ],
)
def test_a_key_in_a_folder_others_can_write_is_not_used_and_said(state, capsys, make, reason):
    make(state)
    assert signing.cache_key() is None
    assert capsys.readouterr().err == (
        f"kvlint: the cache key {state / 'cache-key'} is not used (its folder is {reason}): caching is off\n"
    )


def test_no_key_is_made_in_a_folder_others_can_write(state):
    (state / "cache-key").unlink()
    state.chmod(0o777)
    assert signing.cache_key() is None
    assert not (state / "cache-key").exists()


def test_the_key_swapped_right_after_its_check_is_not_read(state, monkeypatch):
    """The swap pinned to the moment 20fb3b5 lost: right after the key's owner and mode were looked up by path.
    Now they are the open descriptor's: nothing is looked up by path before the read."""
    path = str(state / "cache-key")
    real_lstat, real_stat = os.lstat, os.stat
    swapped = []

    def swap_after(real):
        def looked_up(name, *args, **kwargs):
            info = real(name, *args, **kwargs)
            if os.fspath(name) == path and not swapped:
                swapped.append(True)
                os.replace(_theirs(state, "planted"), path)
            return info

        return looked_up

    monkeypatch.setattr(os, "lstat", swap_after(real_lstat))
    monkeypatch.setattr(os, "stat", swap_after(real_stat))
    key, _ = signing._read_key(path)
    assert key != bytes.fromhex(THEIRS)


def test_a_key_swapped_back_and_forth_by_another_thread_is_never_theirs(state):
    """A real race, bounded to half a second: whatever is read is the good key or nothing, never theirs."""
    path = state / "cache-key"
    stop = time.monotonic() + 0.5
    errors: list[BaseException] = []

    def swap() -> None:
        try:
            while time.monotonic() < stop:
                os.replace(_theirs(state, "theirs.tmp"), path)
                descriptor = os.open(state / "ours.tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                os.write(descriptor, OURS.encode())
                os.close(descriptor)
                os.replace(state / "ours.tmp", path)
        except BaseException as error:  # noqa: BLE001  (said by the assertion below)
            errors.append(error)

    swapper = threading.Thread(target=swap)
    swapper.start()
    read = set()
    while time.monotonic() < stop:
        read.add(signing._read_key(str(path))[0])
    swapper.join(timeout=5)
    assert not errors
    assert bytes.fromhex(THEIRS) not in read
