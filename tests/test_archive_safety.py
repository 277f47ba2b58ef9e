"""A release archive writes nothing outside its destination, whatever its members are named or typed (issue 21).

Real .tar.gz and .whl archives are built here; the property test tries member names made of the parts an
attacker would use (`..`, `.`, empty parts as in `a//b`, absolute paths into a folder beside the destination,
backslashes, drives) and every member type (files, folders, symbolic and hard links, FIFOs), and checks that
every file under the sandbox afterwards is the archive itself or lies inside the destination.
"""

from __future__ import annotations

import io
import os
import stat
import struct
import tarfile
import tempfile
import zipfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvlint.scan.archives import ArchiveError, Limits, extract_python
from kvlint.scan.releases import release_sources
from test_releases import (
    SDIST_NAME,
    SOURCES,
    TOP,
    VERSION,
    index,  # noqa: F401  (the fake package index fixture)
    make_sdist,
    make_wheel,
)


def files_outside(sandbox: Path, destination: Path, *allowed: Path) -> list[str]:
    """Every entry under `sandbox` that is not `allowed` and not inside `destination` (folders above it aside)."""
    stray = []
    for parent, folders, names in os.walk(sandbox):
        for name in [*folders, *names]:
            path = Path(parent, name)
            if path in allowed or path.is_relative_to(destination) or destination.is_relative_to(path):
                continue
            stray.append(str(path))
    return stray


def test_a_double_slash_member_cannot_reach_an_absolute_path_from_the_sdist(index, tmp_path):  # noqa: F811
    outside = tmp_path / "outside"
    outside.mkdir()
    planted = outside / "sitecustomize.py"
    index.publish({SDIST_NAME: make_sdist({**SOURCES, f"{TOP}/vllm/{planted}": b"import os\n"})})
    with pytest.raises(ArchiveError, match="refused, it holds a member named"):
        release_sources(VERSION, quiet=True, cache_dir=tmp_path / "cache")
    assert not planted.exists() and list(outside.iterdir()) == []
    assert list((tmp_path / "cache" / "releases").iterdir()) == []


def test_a_double_slash_member_cannot_reach_an_absolute_path_from_a_wheel(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    archive = tmp_path / f"vllm-{VERSION}-py3-none-any.whl"
    archive.write_bytes(make_wheel({"vllm/__init__.py": b"", f"vllm/{outside}/sitecustomize.py": b"import os\n"}))
    with pytest.raises(ArchiveError, match="refused, it holds a member named"):
        extract_python(archive, {"vllm/": tmp_path / "out" / "vllm"})
    assert list(outside.iterdir()) == []


@pytest.mark.parametrize("name", [f"{TOP}/./vllm/x.py", f"{TOP}/vllm/./x.py", f"{TOP}/vllm/a//x.py", "C:/x.py"])
def test_dot_and_empty_parts_and_drives_refuse_the_archive(tmp_path, name):
    archive = tmp_path / "release.tar.gz"
    archive.write_bytes(make_sdist({**SOURCES, name: b"x = 1\n"}))
    with pytest.raises(ArchiveError, match="refused, it holds a member named"):
        extract_python(archive, {f"{TOP}/vllm/": tmp_path / "out" / "vllm"})


def test_a_member_held_twice_refuses_the_archive(tmp_path):
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for data in (b"first = 1\n", b"second = 2\n"):
            info = tarfile.TarInfo(f"{TOP}/vllm/x.py")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    archive = tmp_path / "release.tar.gz"
    archive.write_bytes(buffer.getvalue())
    with pytest.raises(ArchiveError, match="holds 'x.py' twice"):
        extract_python(archive, {f"{TOP}/vllm/": tmp_path / "out" / "vllm"})


def test_too_many_members_refuse_the_archive_kept_or_not(tmp_path):
    members = {f"{TOP}/csrc/m{i}.cu": b"" for i in range(30)}
    sdist, wheel = tmp_path / "release.tar.gz", tmp_path / f"vllm-{VERSION}-py3-none-any.whl"
    sdist.write_bytes(make_sdist({**SOURCES, **members}))
    wheel.write_bytes(make_wheel({"vllm/__init__.py": b"", **{f"vllm/m{i}.so": b"" for i in range(30)}}))
    for archive, prefix in ((sdist, f"{TOP}/vllm/"), (wheel, "vllm/")):
        with pytest.raises(ArchiveError, match="refused, it holds more than 20 members"):
            extract_python(archive, {prefix: tmp_path / f"x-{archive.name}" / "vllm"}, Limits(members=20))
        assert extract_python(archive, {prefix: tmp_path / f"ok-{archive.name}" / "vllm"})[prefix] >= 1


def _patched_wheel(tmp_path: Path, local_offset: int, central_offset: int, value: int) -> Path:
    """A wheel whose member vllm/x.py has a 2-byte header field (flags or compression method) set to `value`."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as wheel:
        wheel.writestr("vllm/x.py", b"x = 1\n")
    data = bytearray(buffer.getvalue())
    for signature, offset in ((b"PK\x03\x04", local_offset), (b"PK\x01\x02", central_offset)):
        start = data.index(signature)
        data[start + offset : start + offset + 2] = struct.pack("<H", value)
    archive = tmp_path / f"vllm-{VERSION}-{value}-py3-none-any.whl"
    archive.write_bytes(bytes(data))
    return archive


def test_encrypted_or_unknown_compression_members_are_the_archive_error(tmp_path):
    encrypted = _patched_wheel(tmp_path, 6, 8, 0x1)  # general purpose flag bit 0: encrypted
    with pytest.raises(ArchiveError, match="refused, member 'vllm/x.py' is encrypted"):
        extract_python(encrypted, {"vllm/": tmp_path / "a" / "vllm"})
    unknown = _patched_wheel(tmp_path, 8, 10, 97)  # compression method 97 (WavPack): zipfile cannot read it
    with pytest.raises(ArchiveError, match="cannot unpack it"):
        extract_python(unknown, {"vllm/": tmp_path / "b" / "vllm"})


# ------------------------------------------------------------------------------------------ the property

# `OUTSIDE` is the absolute path of a folder beside the destination, so `vllm/OUTSIDE` is `vllm//tmp/…`: the
# attack, twice as often. No bare empty part: run against an extractor without the fix, `vllm//x.py` would
# write /x.py, outside the sandbox.
PARTS = ["vllm", "..", ".", "sub", "C:", "a\\..\\b", "link", "OUTSIDE", "OUTSIDE"]
KINDS = ["file", "dir", "symlink", "hardlink", "fifo"]


def _name(parts: list[str], outside: Path, kind: str) -> str:
    """The parts joined with `/`, `OUTSIDE` as the absolute path of that folder (`vllm//tmp/…`); a file's ends in .py."""
    name = "/".join(str(outside) if part == "OUTSIDE" else part for part in parts)
    return name + "/x.py" if kind == "file" else name


members = st.lists(
    st.tuples(
        st.lists(st.sampled_from(PARTS), min_size=0, max_size=4),
        st.sampled_from(KINDS),
        st.booleans(),  # the name starts with `/`
        st.sampled_from(["/", "..", "OUTSIDE", "vllm/x.py", "x.py"]),  # a link's target
    ),
    min_size=1,
    max_size=6,
)


def _tar_member(name: str, kind: str, target: str) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    data = b"planted = 1\n" if kind == "file" else b""
    info.type = {
        "file": tarfile.REGTYPE,
        "dir": tarfile.DIRTYPE,
        "symlink": tarfile.SYMTYPE,
        "hardlink": tarfile.LNKTYPE,
        "fifo": tarfile.FIFOTYPE,
    }[kind]
    info.size, info.linkname = len(data), target
    return info, data


def _zip_member(name: str, kind: str) -> tuple[zipfile.ZipInfo, bytes]:
    info = zipfile.ZipInfo(name + ("/" if kind == "dir" and not name.endswith("/") else ""))
    mode = {"file": stat.S_IFREG, "dir": stat.S_IFDIR, "symlink": stat.S_IFLNK, "hardlink": stat.S_IFREG}
    info.external_attr = (mode.get(kind, stat.S_IFIFO) | 0o644) << 16
    return info, b"planted = 1\n" if kind != "dir" else b""


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(members=members, wheel=st.booleans())
def test_nothing_is_ever_written_outside_the_destination(members, wheel):
    with tempfile.TemporaryDirectory() as folder:
        sandbox = Path(folder)
        outside, destination = sandbox / "outside", sandbox / "out" / "vllm"
        outside.mkdir()
        archive = sandbox / (f"vllm-{VERSION}-py3-none-any.whl" if wheel else "release.tar.gz")
        buffer = io.BytesIO()
        if wheel:
            with zipfile.ZipFile(buffer, "w") as zipped:
                for parts, kind, rooted, _ in members:
                    info, data = _zip_member(("/" if rooted else "") + _name(["vllm", *parts], outside, kind), kind)
                    zipped.writestr(info, data)
        else:
            with tarfile.open(fileobj=buffer, mode="w:gz", format=tarfile.PAX_FORMAT) as tar:
                for parts, kind, rooted, target in members:
                    name = ("/" if rooted else "") + _name(["vllm", *parts], outside, kind)
                    info, data = _tar_member(name, kind, str(outside) if target == "OUTSIDE" else target)
                    tar.addfile(info, io.BytesIO(data))
        archive.write_bytes(buffer.getvalue())
        prefix = "vllm/"
        try:
            extract_python(archive, {prefix: destination})
        except ArchiveError:
            pass
        assert files_outside(sandbox, destination, archive, outside) == []
        assert not any(path.is_symlink() for path in destination.rglob("*"))
