"""A wheel's member cap holds before zipfile reads its directory (issue 27, item 14).

zipfile reads a zip's whole central directory and makes an object of every entry (about 400 bytes each)
before anything can count them: on 20fb3b5 the 100,000-member cap was checked after that, so a wheel of a
million tiny entries cost ~400 MB first. The archives here are directories only, built byte by byte: an end
record that claims more entries than the cap (Zip64), one that claims one entry over a directory holding more,
and one that claims a directory of a terabyte.
"""

from __future__ import annotations

import re
import struct
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from kvlint.scan.archives import ArchiveError, Limits, extract_python
from test_releases import VERSION

CAP = Limits().members


def _entry() -> bytes:
    name = b"vllm/x.txt"
    fields = (20, 3, 20, 0, 0, 0, 0, 0, 0, 0, 0, len(name), 0, 0, 0, 0, 0, 0)
    return struct.pack(zipfile.structCentralDir, zipfile.stringCentralDir, *fields) + name


def _zip(entries: int, claimed: int, directory_size: int | None = None) -> bytes:
    """A zip of `entries` directory entries (no member data) whose end records claim `claimed` entries and a
    directory of `directory_size` bytes (the real size when None); Zip64 records when a value needs them."""
    directory = _entry() * entries
    size = len(directory) if directory_size is None else directory_size
    if claimed < 0xFFFF and size < 0xFFFFFFFF:
        end = struct.pack(zipfile.structEndArchive, zipfile.stringEndArchive, 0, 0, claimed, claimed, size, 0, 0)
        return directory + end
    zip64_at = len(directory)
    zip64 = struct.pack(
        zipfile.structEndArchive64, zipfile.stringEndArchive64, 44, 45, 45, 0, 0, claimed, claimed, size, 0
    )
    locator = struct.pack(zipfile.structEndArchive64Locator, zipfile.stringEndArchive64Locator, 0, zip64_at, 1)
    end = struct.pack(
        zipfile.structEndArchive, zipfile.stringEndArchive, 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0
    )
    return directory + zip64 + locator + end


# Run in a child for its own peak memory: VmHWM is this process image's high-water mark (ru_maxrss would carry
# pytest's own peak across fork and exec).
_CHILD = """
import sys
from pathlib import Path
from kvlint.scan.archives import ArchiveError, extract_python
try:
    extract_python(Path(sys.argv[1]), {"vllm/": Path(sys.argv[2])})
except ArchiveError as error:
    print(error)
with open("/proc/self/status") as status:
    print(next(line for line in status if line.startswith("VmHWM:")), end="")
"""


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads the peak memory from /proc")
@pytest.mark.parametrize(
    ("entries", "claimed", "size", "said"),
    [
        pytest.param(1, 10**12, None, f"refused, it holds more than {CAP:,} members", id="claims-a-trillion"),
        pytest.param(4 * CAP, 1, None, f"refused, it holds more than {CAP:,} members", id="claims-one-holds-more"),
        pytest.param(1, 1, 2**40, "refused, its directory is 1,099,511,627,776 bytes", id="claims-a-terabyte"),
    ],
)
def test_a_zip_over_the_member_cap_is_refused_before_its_directory_is_read(tmp_path, entries, claimed, size, said):
    """The interpreter and kvlint's import take ~30 MB; a directory of 400,000 entries read whole, as zipfile
    reads it, adds ~150 MB (and 1.5 s)."""
    wheel = tmp_path / f"vllm-{VERSION}-py3-none-any.whl"
    wheel.write_bytes(_zip(entries, claimed, size))
    started = time.monotonic()
    completed = subprocess.run(
        [sys.executable, "-c", _CHILD, str(wheel), str(tmp_path / "out" / "vllm")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert time.monotonic() - started < 10
    refused, peak = completed.stdout.splitlines()
    assert re.search(said, refused), completed.stdout + completed.stderr
    peak_mb = int(peak.split()[1]) / 1024
    assert peak_mb < 70, f"peak {peak_mb:.0f} MB: the directory was read whole"


def test_a_zip_at_the_cap_is_read_as_before(tmp_path):
    """The count is zipfile's own: a directory of exactly `members` entries passes, one more does not."""
    wheel = tmp_path / f"vllm-{VERSION}-py3-none-any.whl"
    wheel.write_bytes(_zip(20, 20))
    assert extract_python(wheel, {"vllm/": tmp_path / "a" / "vllm"}, Limits(members=20)) == {"vllm/": 0}
    wheel.write_bytes(_zip(21, 20))
    with pytest.raises(ArchiveError, match="refused, it holds more than 20 members"):
        extract_python(wheel, {"vllm/": tmp_path / "b" / "vllm"}, Limits(members=20))
    wheel.write_bytes(_zip(2, 1, 1_000))  # a directory that claims more bytes than the file holds
    with pytest.raises(ArchiveError, match="cannot unpack it"):
        extract_python(wheel, {"vllm/": tmp_path / "c" / "vllm"}, Limits(members=20))


def test_a_real_wheel_with_data_before_it_is_still_read(tmp_path):
    """A zip with bytes prepended (zipfile's "concat") is found where zipfile finds it."""
    buffer = Path(tmp_path / "w.zip")
    with zipfile.ZipFile(buffer, "w") as wheel:
        wheel.writestr("vllm/__init__.py", b"")
        wheel.writestr("vllm/x.py", b"x = 1\n")
    prefixed = tmp_path / f"vllm-{VERSION}-py3-none-any.whl"
    prefixed.write_bytes(b"#!/bin/sh\n" * 100 + buffer.read_bytes())
    assert extract_python(prefixed, {"vllm/": tmp_path / "out" / "vllm"}, Limits(members=2)) == {"vllm/": 2}
    with pytest.raises(ArchiveError, match="more than 1 members"):
        extract_python(prefixed, {"vllm/": tmp_path / "out2" / "vllm"}, Limits(members=1))
