"""Fetch a vLLM release's Python sources, and vLLM's own tests, from the package index without installing it.

The source distribution is preferred (vllm-0.29.0.tar.gz is 41 MB, its wheel 316 MB): it is read from the
index pip is configured to use (see package_index), verified against the digest the index publishes, and
only `vllm/**/*.py` and `tests/**/*.py` are kept (see archives for the guards). When the index lists no
sdist for the release, the wheel is fetched with `pip download` instead (sources only: a wheel holds no
tests), with the same guards and caps.

Under <cache root>/releases/ (the cache root: the `cache_dir` given, else $KVLINT_CACHE_DIR, else
~/.cache/kvlint):
    vllm-<version>/vllm/...          the sources kvlint scans, and nothing else
    vllm-<version>-tests/tests/...   vLLM's own tests (from the sdist only)
Each folder appears by one atomic rename of a complete, private staging folder that holds a manifest signed
with this user's cache key (see release_store, release_manifest); a cached folder is used only when it matches
its manifest, else it is fetched again; a `releases/` folder another account could write is refused (see
release_store: the fetch would sign what they put there).
A folder that an earlier kvlint extracted from the wheel stays valid: the sdist's `vllm/**/*.py` are
byte-identical to the wheel's (checked on 0.29.0 and 0.34.0), the wheel only adds vendored kernels
(vllm_flash_attn/cute, third_party/...) in which no rule finds anything.

A version is read as PEP 440 says: `0.29` and `0.29.0` name the same release and share one folder, named as
the index spells the release's files.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO
from urllib.parse import urlsplit

from kvlint.errors import ReleaseError
from kvlint.scan.archives import MB, Written, extract_python
from kvlint.scan.package_index import (
    IndexFile,
    PipSettings,
    download,
    pip_settings,
    project_files,
    redact,
)
from kvlint.scan.release_store import install, releases_folder, staging_folder, untrusted
from kvlint.scan.versions import normalize, release_key

SDIST_LIMIT_BYTES = 200 * MB  # 0.34.0's sdist: 51 MB
WHEEL_LIMIT_BYTES = 1_000 * MB  # 0.29.0's x86_64 wheel: 316 MB
TIME_LIMIT_S = 1_200  # the whole fetch: index page, download, unpacking


def release_sources(version: str, quiet: bool = False, cache_dir: Path | None = None) -> Path:
    """The folder holding `vllm/…/*.py` of release `version`, fetched and cached on first use.
    `cache_dir` is kvlint's cache root (what `--cache-dir` names): releases go to its `releases/`."""
    spelled, key = _checked(version)
    releases = releases_folder(cache_dir)
    found = _cached(releases, spelled, key, "", _holds_sources, quiet)
    if found is None:
        found = _fetch(spelled, key, releases, quiet, need_tests=False)[""]
    if found is None:
        raise ReleaseError(f"vllm {spelled} was fetched but its sources are not in {releases}")
    return found


def release_tests(version: str, quiet: bool = False, cache_dir: Path | None = None) -> Path:
    """The folder holding vLLM's own `tests/…/*.py` of release `version` (from its sdist), fetched on first use."""
    spelled, key = _checked(version)
    releases = releases_folder(cache_dir)
    found = _cached(releases, spelled, key, "-tests", _holds_tests, quiet)
    if found is None:
        found = _fetch(spelled, key, releases, quiet, need_tests=True)["-tests"]
    if found is None:
        raise ReleaseError(f"the source distribution of vllm {spelled} holds no tests/ folder")
    return found


def _checked(version: str) -> tuple[str, str]:
    try:
        return normalize(version), release_key(version)
    except ValueError:
        raise ReleaseError(f"not a version number: {version!r}") from None


def _holds_sources(folder: Path) -> bool:
    return (folder / "vllm" / "__init__.py").is_file()


def _holds_tests(folder: Path) -> bool:
    return (folder / "tests").is_dir()


def _cached(
    releases: Path, spelled: str, key: str, suffix: str, whole: Callable[[Path], bool], quiet: bool
) -> Path | None:
    """The cached folder of this release, whichever PEP 440 spelling named it (the exact one first), if it
    holds what kvlint extracted there; one that does not is said (unless quiet) and left to be fetched again."""
    exact = releases / f"vllm-{spelled}{suffix}"
    candidates = [exact] if whole(exact) else []
    if not candidates and releases.is_dir():
        for folder in sorted(releases.iterdir()):
            name = folder.name
            spelling = name[len("vllm-") : len(name) - len(suffix)]
            if name.startswith("vllm-") and name.endswith(suffix) and _key_or_none(spelling) == key and whole(folder):
                candidates.append(folder)
    for folder in candidates:
        problem = untrusted(folder)
        if problem is None:
            return folder
        if not quiet:
            print(f"kvlint: {folder}: not used, {problem}; fetching it again", file=sys.stderr)
    return None


def _key_or_none(text: str) -> str | None:
    try:
        return release_key(text)
    except ValueError:
        return None


def _fetch(spelled: str, key: str, releases: Path, quiet: bool, need_tests: bool) -> dict[str, Path | None]:
    """Fetch and install the release; the folders now in place by suffix ("" sources, "-tests" tests)."""
    deadline = time.monotonic() + TIME_LIMIT_S
    with staging_folder(releases) as scratch:
        settings = pip_settings(scratch)
        sdist = _find_sdist(settings, spelled, key, deadline)
        if sdist is not None:
            return _fetch_sdist(settings, sdist, scratch, releases, quiet, deadline)
        if need_tests:
            index = redact(settings.index_url)
            raise ReleaseError(
                f"{index} lists no source distribution of vllm {spelled}, the only file that holds its tests"
            )
        return {"": _fetch_wheel(spelled, key, scratch, releases, quiet, deadline), "-tests": None}


def _find_sdist(settings: PipSettings, spelled: str, key: str, deadline: float) -> IndexFile | None:
    """The release's sdist the index lists; None when it lists only wheels of it. A release the index lists
    no file of is said here, in one line, before any download (pip's own answer came after a "downloading")."""
    if urlsplit(settings.index_url).scheme not in ("http", "https"):
        return None  # e.g. a file:// index: pip reads it, the wheel route below goes through pip
    listed = project_files(settings, "vllm", deadline)
    of_release = [file for file in listed if _key_or_none(_file_version(file.filename)) == key]
    if not of_release:
        keys = {_key_or_none(_file_version(file.filename)) for file in listed} - {None}
        raise ReleaseError(
            f"{redact(settings.index_url)} has no vllm {spelled} among the {len(keys)} release(s) of vllm it lists: "
            "check the version number"
        )
    sdists = [file for file in of_release if file.filename.endswith(".tar.gz")]
    return min(sdists, key=lambda file: file.filename, default=None)


def _file_version(filename: str) -> str:
    """The version a distribution file's name gives (`vllm-V.tar.gz`, `vllm-V-tags.whl`); "" for another name."""
    if not filename.startswith("vllm-"):
        return ""
    if filename.endswith(".tar.gz"):
        return filename[len("vllm-") : -len(".tar.gz")]
    if filename.endswith(".whl"):
        return filename.split("-")[1]
    return ""


def _sdist_version(sdist: IndexFile) -> str:
    return sdist.filename[len("vllm-") : -len(".tar.gz")]


def _fetch_sdist(
    settings: PipSettings, sdist: IndexFile, scratch: Path, releases: Path, quiet: bool, deadline: float
) -> dict[str, Path | None]:
    spelled = normalize(_sdist_version(sdist))
    top = sdist.filename[: -len(".tar.gz")] + "/"  # an sdist holds one folder, vllm-<version>/
    if not quiet:
        size = f"{sdist.size / 1e6:.1f} MB, " if sdist.size else ""
        host = urlsplit(sdist.url).hostname
        print(f"kvlint: downloading vllm {spelled} ({size}its source distribution, from {host})…", file=sys.stderr)
    archive = scratch / "release.tar.gz"  # not the index's file name: that is not ours to trust
    sources, tests = scratch / "sources", scratch / "tests"
    written: dict[str, Written] = {}
    # Unpacked from the descriptor the download was written and hashed through, never opened by name again.
    with _new_file(archive) as stream:
        download(settings, sdist, stream, SDIST_LIMIT_BYTES, deadline)
        selections = {top + "vllm/": sources / "vllm", top + "tests/": tests / "tests"}
        counts = extract_python(archive, selections, source=stream, record=written)
    archive.unlink()
    if not _holds_sources(sources):
        raise ReleaseError(f"{sdist.filename}: no {top}vllm/__init__.py inside")
    installed: dict[str, Path | None] = {"": install(sources, releases / f"vllm-{spelled}", written, _holds_sources)}
    installed["-tests"] = None
    if counts[top + "tests/"]:
        installed["-tests"] = install(tests, releases / f"vllm-{spelled}-tests", written, _holds_tests)
    if not quiet:
        kept = f"{counts[top + 'vllm/']:,} source and {counts[top + 'tests/']:,} test files"
        print(f"kvlint: kept {kept} of vllm {spelled}", file=sys.stderr)
    return installed


def _fetch_wheel(spelled: str, key: str, scratch: Path, releases: Path, quiet: bool, deadline: float) -> Path:
    if not quiet:
        line = f"kvlint: no source distribution of vllm {spelled} found; downloading its wheel with pip…"
        print(line, file=sys.stderr)
    wheel = _pip_download_wheel(spelled, scratch, deadline)
    found = wheel.name.split("-")
    if len(found) < 2 or _key_or_none(found[1]) != key:
        raise ReleaseError(f"pip downloaded {wheel.name!r}, not vllm {spelled}")
    sources = scratch / "sources"
    written: dict[str, Written] = {}
    with open(wheel, "rb", opener=_no_link) as stream:  # pip's file, opened once, never through a link
        if not stat.S_ISREG(os.fstat(stream.fileno()).st_mode):
            raise ReleaseError(f"{wheel.name}: not a regular file")
        extract_python(wheel, {"vllm/": sources / "vllm"}, source=stream, record=written)
    if not _holds_sources(sources):
        raise ReleaseError(f"{wheel.name}: no vllm package inside")
    return install(sources, releases / f"vllm-{normalize(found[1])}", written, _holds_sources)


def _pip_download_wheel(spelled: str, scratch: Path, deadline: float) -> Path:
    """`pip download` the wheel into `scratch`, run isolated from `scratch`; stopped past the size cap or deadline."""
    destination, pip_temp = scratch / "wheel", scratch / "pip-temp"
    destination.mkdir()
    pip_temp.mkdir()
    command = [sys.executable, "-I", "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--no-cache-dir"]
    command += ["--progress-bar", "off", "--dest", str(destination), f"vllm=={spelled}"]
    # pip's partial downloads go to TMPDIR: inside the scratch folder they count against the size cap.
    environment = {**os.environ, "TMPDIR": str(pip_temp)}
    log_path = scratch / "pip.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            command, cwd=scratch, env=environment, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT
        )
        try:
            while True:
                try:
                    returncode = process.wait(timeout=0.5)
                    break
                except subprocess.TimeoutExpired:
                    pass
                if _size_of(scratch) > WHEEL_LIMIT_BYTES:
                    raise ReleaseError(
                        f"the wheel of vllm {spelled} is over the {WHEEL_LIMIT_BYTES // MB} MB limit: stopped"
                    )
                if time.monotonic() > deadline:
                    raise ReleaseError(
                        f"gave up fetching the wheel of vllm {spelled}: over the {TIME_LIMIT_S} s time limit"
                    )
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    if returncode != 0:
        tail = log_path.read_text(encoding="utf-8", errors="replace").strip().splitlines()
        reason = " ".join(tail[-1].split())[:300] if tail else "unknown error"
        raise ReleaseError(f"pip could not download vllm=={spelled}: {reason}")
    wheels = sorted(destination.glob("vllm-*.whl"))
    if not wheels:
        raise ReleaseError(f"pip downloaded no wheel for vllm=={spelled}")
    if wheels[0].stat().st_size > WHEEL_LIMIT_BYTES:
        raise ReleaseError(f"{wheels[0].name}: over the {WHEEL_LIMIT_BYTES // MB} MB limit")
    return wheels[0]


def _size_of(folder: Path) -> int:
    total = 0
    for parent, _, names in os.walk(folder):
        for name in names:
            try:
                total += os.lstat(os.path.join(parent, name)).st_size
            except OSError:
                pass  # a file pip just moved or removed
    return total


def _new_file(path: Path) -> BinaryIO:
    """A file made new at `path` (never an existing one, never through a link), open for writing and reading."""
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    return os.fdopen(os.open(path, flags, 0o600), "w+b")


def _no_link(path: str, flags: int) -> int:
    return os.open(path, flags | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
