"""Whether this process can give a file to another numeric uid.

Being root is not enough: inside a user namespace (a CI container) root can only chown to the uids the namespace
maps, and any other uid fails with EINVAL. The tests that hand a cache folder to another account probe it once.
"""

from __future__ import annotations

import functools
import os
import tempfile

import pytest

OTHER_UID = 12345


@functools.cache
def can_give_files_away(uid: int = OTHER_UID) -> tuple[bool, str]:
    if os.geteuid() != 0:
        return False, "giving a file to another uid needs root"
    with tempfile.NamedTemporaryFile() as probe:
        try:
            os.chown(probe.name, uid, -1)
        except OSError as error:
            return (
                False,
                f"root here cannot give a file to uid {uid} ({error.strerror}: a user namespace maps no such uid)",
            )
    return True, ""


def _skip_unless_can_give_away() -> pytest.MarkDecorator:
    able, why = can_give_files_away()
    return pytest.mark.skipif(not able, reason=why or "can give files away")


needs_another_uid = _skip_unless_can_give_away()
