"""Fetching a release: the sdist from pip's package index, verified, unpacked with guards; the wheel when
there is no sdist; PEP 440 spellings of one release share a folder.

A fake package index on 127.0.0.1 (PEP 691 JSON, files made here) stands in for PyPI, reached through
PIP_INDEX_URL as a user would configure it; pip's configuration files are switched off (PIP_CONFIG_FILE
set to the null device) so that the machine's own index settings cannot leak in. Only the slow test at
the end goes to the real PyPI.
"""

from __future__ import annotations

import hashlib
import http.server
import io
import json
import os
import select
import socket
import stat
import subprocess
import sys
import tarfile
import threading
import time
import zipfile
from pathlib import Path

import pytest

from kvlint.errors import KvlintError
from kvlint.scan import releases
from kvlint.scan.archives import ArchiveError, Limits, extract_python
from kvlint.scan.package_index import pip_settings
from kvlint.scan.release_manifest import MANIFEST
from kvlint.scan.releases import release_sources, release_tests
from kvlint.scan.versions import normalize, release_key

VERSION = "0.29.0"
TOP = f"vllm-{VERSION}"
SOURCES = {
    f"{TOP}/vllm/__init__.py": b"",
    f"{TOP}/vllm/v1/kv_cache_interface.py": b"class KVCacheSpec:\n    pass\n",
    f"{TOP}/tests/conftest.py": b"",
    f"{TOP}/tests/v1/test_kv.py": b"def test_kv():\n    pass\n",
    # Not kept: not Python, or Python outside vllm/ and tests/.
    f"{TOP}/tests/data/prompt.txt": b"hello\n",
    f"{TOP}/csrc/attention.cu": b"// kernel\n",
    f"{TOP}/setup.py": b"raise SystemExit('never run')\n",
    f"{TOP}/PKG-INFO": b"Metadata-Version: 2.1\nName: vllm\nVersion: 0.29.0\n",
}
KEPT_SOURCES = {"vllm/__init__.py", "vllm/v1/kv_cache_interface.py"}
KEPT_TESTS = {"tests/conftest.py", "tests/v1/test_kv.py"}


# ------------------------------------------------------------------------------------------ archives made here


def make_sdist(members: dict[str, bytes], specials: tuple[tarfile.TarInfo, ...] = ()) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for info in specials:  # first: a link must already be there when a member is written below it
            tar.addfile(info)
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def special(name: str, kind: bytes, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, link
    return info


def make_wheel(members: dict[str, bytes], links: dict[str, str] | None = None) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as wheel:
        for name, data in members.items():
            wheel.writestr(name, data)
        for name, target in (links or {}).items():
            info = zipfile.ZipInfo(name)
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            wheel.writestr(info, target)
        info_dir = f"vllm-{VERSION}.dist-info"
        wheel.writestr(f"{info_dir}/METADATA", f"Metadata-Version: 2.1\nName: vllm\nVersion: {VERSION}\n")
        wheel.writestr(
            f"{info_dir}/WHEEL",
            "Wheel-Version: 1.0\nGenerator: kvlint-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        )
        wheel.writestr(f"{info_dir}/RECORD", "")
    return buffer.getvalue()


WHEEL_MEMBERS = {
    "vllm/__init__.py": b"",
    "vllm/v1/kv_cache_interface.py": b"class KVCacheSpec:\n    pass\n",
    "vllm/_C.abi3.so": b"\x7fELF",
}
WHEEL_NAME = f"vllm-{VERSION}-py3-none-any.whl"
SDIST_NAME = f"vllm-{VERSION}.tar.gz"


# ---------------------------------------------------------------------------------------- the fake index


class FakeIndex:
    """A PEP 691 index on 127.0.0.1: `publish` lists files on /simple/vllm/ and serves them from /files/."""

    def __init__(self) -> None:
        self.routes: dict[str, object] = {}
        self.requests: list[tuple[str, dict]] = []
        index = self

        class Handler(http.server.BaseHTTPRequestHandler):
            timeout = 10  # a stuck client cannot hold a server thread for long

            def do_GET(self):
                index.requests.append((self.path, dict(self.headers)))
                route = index.routes.get(self.path)
                if callable(route):
                    return route(self)
                if route is None:
                    self.send_error(404)
                    return
                content_type, body = route
                self.send_response(200)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/simple"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def publish(self, files: dict[str, bytes], wrong_digest: bool = False) -> None:
        entries = []
        for name, data in files.items():
            digest = hashlib.sha256(data if not wrong_digest else data + b"tampered").hexdigest()
            entries.append(
                {"filename": name, "url": f"../../files/{name}", "hashes": {"sha256": digest}, "size": len(data)}
            )
            self.routes[f"/files/{name}"] = ("application/octet-stream", data)
        page = {"meta": {"api-version": "1.0"}, "name": "vllm", "files": entries}
        self.routes["/simple/vllm/"] = ("application/vnd.pypi.simple.v1+json", json.dumps(page).encode())

    def downloads(self) -> list[str]:
        return [path for path, _ in self.requests if path.startswith("/files/")]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


@pytest.fixture
def index(monkeypatch):
    fake = FakeIndex()
    monkeypatch.setenv("PIP_INDEX_URL", fake.url)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)  # pip reads no configuration file
    for name in ("PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "PIP_NO_INDEX", "KVLINT_CACHE_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    monkeypatch.setenv("no_proxy", "127.0.0.1")
    monkeypatch.setattr(releases, "TIME_LIMIT_S", 30)  # every fetch here ends within 30 s, whatever the server does
    yield fake
    fake.close()


def files_under(folder: Path) -> set[str]:
    """The files kept in a release folder, besides kvlint's signed manifest of them."""
    return {path.relative_to(folder).as_posix() for path in folder.rglob("*") if not path.is_dir()} - {MANIFEST}


# --------------------------------------------------------------------------------------------- the sdist path


def test_the_sdist_is_fetched_and_its_sources_and_tests_are_kept_apart(index, tmp_path):
    index.publish({SDIST_NAME: make_sdist(SOURCES), WHEEL_NAME: make_wheel(WHEEL_MEMBERS)})
    sources = release_sources(VERSION, quiet=True, cache_dir=tmp_path)
    tests = release_tests(VERSION, quiet=True, cache_dir=tmp_path)
    assert sources == tmp_path / "releases" / f"vllm-{VERSION}"
    assert files_under(sources) == KEPT_SOURCES  # the scanned tree holds vllm/ only
    assert tests == tmp_path / "releases" / f"vllm-{VERSION}-tests"
    assert files_under(tests) == KEPT_TESTS
    assert index.downloads() == [f"/files/{SDIST_NAME}"]  # once, and never the wheel
    assert {p.name for p in (tmp_path / "releases").iterdir()} == {
        f"vllm-{VERSION}",
        f"vllm-{VERSION}-tests",
    }  # no scratch left


def test_a_digest_mismatch_is_refused_in_one_line_and_nothing_is_kept(index, tmp_path):
    index.publish({SDIST_NAME: make_sdist(SOURCES)}, wrong_digest=True)
    with pytest.raises(KvlintError) as refused:
        release_sources(VERSION, quiet=True, cache_dir=tmp_path)
    assert "sha256 mismatch" in str(refused.value) and "\n" not in str(refused.value)
    assert list((tmp_path / "releases").iterdir()) == []


def test_the_command_line_reports_a_refused_download_in_one_line(index, tmp_path):
    index.publish({SDIST_NAME: make_sdist(SOURCES)}, wrong_digest=True)
    completed = subprocess.run(
        [sys.executable, "-m", "kvlint", "check", "--vllm-release", VERSION],
        cwd=tmp_path,
        env={**os.environ, "KVLINT_CACHE_DIR": str(tmp_path / "cache")},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    errors = [line for line in completed.stderr.splitlines() if "error" in line]
    assert completed.returncode == 2, completed.stderr
    assert len(errors) == 1 and errors[0].startswith("kvlint: error: ") and "sha256 mismatch" in errors[0], (
        completed.stderr
    )


@pytest.mark.parametrize("name", [f"{TOP}/vllm/../../escaped.py", "/tmp/kvlint-absolute.py", f"{TOP}/vllm/a\nb.py"])
def test_a_member_name_that_could_leave_the_folder_refuses_the_archive(index, tmp_path, name):
    index.publish({SDIST_NAME: make_sdist({**SOURCES, name: b"x = 1\n"})})
    with pytest.raises(ArchiveError, match="refused, it holds a member named"):
        release_sources(VERSION, quiet=True, cache_dir=tmp_path / "cache")
    assert not (tmp_path / "cache" / "escaped.py").exists() and not Path("/tmp/kvlint-absolute.py").exists()
    assert list((tmp_path / "cache" / "releases").iterdir()) == []


def test_links_devices_and_fifos_are_skipped(index, tmp_path):
    specials = (
        special(f"{TOP}/vllm/passwd.py", tarfile.SYMTYPE, "/etc/passwd"),
        special(f"{TOP}/vllm/hard.py", tarfile.LNKTYPE, f"{TOP}/vllm/__init__.py"),
        special(f"{TOP}/vllm/fifo.py", tarfile.FIFOTYPE),
        special(f"{TOP}/vllm/null.py", tarfile.CHRTYPE),
        special(f"{TOP}/vllm/linked", tarfile.SYMTYPE, "/"),  # a folder link a later member could write through
    )
    index.publish({SDIST_NAME: make_sdist({**SOURCES, f"{TOP}/vllm/linked/x.py": b"x = 1\n"}, specials)})
    sources = release_sources(VERSION, quiet=True, cache_dir=tmp_path)
    assert files_under(sources) == KEPT_SOURCES | {"vllm/linked/x.py"}
    assert not any(path.is_symlink() for path in sources.rglob("*"))
    assert not Path("/x.py").exists()


def test_a_small_archive_that_unpacks_beyond_the_cap_is_refused(index, tmp_path):
    bomb = make_sdist({**SOURCES, f"{TOP}/vllm/huge.py": b"\0" * (9 * 1_000_000)})  # one file over 8 MB
    assert len(bomb) < 100_000
    index.publish({SDIST_NAME: bomb})
    with pytest.raises(ArchiveError, match=r"'vllm-0.29.0/vllm/huge.py' unpacks to more than 8 MB"):
        release_sources(VERSION, quiet=True, cache_dir=tmp_path)
    assert list((tmp_path / "releases").iterdir()) == []


def test_every_extraction_cap_holds(tmp_path):
    many = {f"{TOP}/vllm/m{i}.py": b"#" * 400_000 for i in range(4)}
    archive = tmp_path / "release.tar.gz"
    archive.write_bytes(make_sdist({**many, f"{TOP}/csrc/big.bin": b"\0" * 3_000_000}))

    def selection(name: str) -> dict[str, Path]:  # a fresh folder each time, as a fetch's scratch folder is
        return {f"{TOP}/vllm/": tmp_path / name / "vllm"}

    with pytest.raises(ArchiveError, match="Python files unpack to more than 1 MB"):
        extract_python(archive, selection("a"), Limits(kept_bytes=1_000_000))
    with pytest.raises(ArchiveError, match="more than 2 Python files"):
        extract_python(archive, selection("b"), Limits(kept_files=2))
    with pytest.raises(ArchiveError, match="it unpacks to more than 3 MB"):  # the whole stream, kept or not
        extract_python(archive, selection("c"), Limits(stream_bytes=3_000_000))
    assert extract_python(archive, selection("d")) == {f"{TOP}/vllm/": 4}


def test_a_wheel_gets_the_same_guards(tmp_path):
    archive = tmp_path / WHEEL_NAME
    archive.write_bytes(make_wheel(WHEEL_MEMBERS, links={"vllm/passwd.py": "/etc/passwd"}))
    assert extract_python(archive, {"vllm/": tmp_path / "ok" / "vllm"}) == {"vllm/": 2}
    assert files_under(tmp_path / "ok") == KEPT_SOURCES  # the link is skipped, not written as a file
    for name in ("vllm/../../escaped.py", "/vllm/absolute.py", "vllm\\..\\escaped.py"):
        archive.write_bytes(make_wheel({**WHEEL_MEMBERS, name: b"x = 1\n"}))
        with pytest.raises(ArchiveError, match="refused, it holds a member named"):
            extract_python(archive, {"vllm/": tmp_path / name.replace("/", "_").replace("\\", "_") / "vllm"})
    archive.write_bytes(make_wheel({**WHEEL_MEMBERS, "vllm/huge.py": b"\0" * 9_000_000}))
    with pytest.raises(ArchiveError, match="unpacks to more than 8 MB"):
        extract_python(archive, {"vllm/": tmp_path / "bomb" / "vllm"})


def test_a_fetch_that_drips_ends_at_the_time_limit(index, tmp_path, monkeypatch):
    def drip(handler):
        handler.send_response(200)
        handler.send_header("Content-Length", "1000000")
        handler.end_headers()
        for _ in range(200):  # a byte every 0.05 s: each read is quick, the whole never ends in time
            try:
                handler.wfile.write(b"\0")
                handler.wfile.flush()
            except OSError:
                return
            time.sleep(0.05)

    index.publish({SDIST_NAME: make_sdist(SOURCES)})
    index.routes[f"/files/{SDIST_NAME}"] = drip
    monkeypatch.setattr(releases, "TIME_LIMIT_S", 1)
    started = time.monotonic()
    with pytest.raises(KvlintError, match="time limit"):
        release_sources(VERSION, quiet=True, cache_dir=tmp_path)
    assert time.monotonic() - started < 6


def test_credentials_in_the_index_url_are_sent_but_never_shown(index, tmp_path, monkeypatch):
    monkeypatch.setenv("PIP_INDEX_URL", index.url.replace("http://", "http://reader:s3cret@"))
    with pytest.raises(KvlintError) as refused:  # nothing published: the page is a 404
        release_sources(VERSION, quiet=True, cache_dir=tmp_path)
    assert "HTTP 404" in str(refused.value) and "s3cret" not in str(refused.value)
    assert index.requests[0][1].get("Authorization") == "Basic cmVhZGVyOnMzY3JldA=="


# ------------------------------------------------------------------------------------------- the wheel path


def test_the_wheel_is_fetched_with_pip_when_the_index_lists_no_sdist(index, tmp_path):
    index.publish({WHEEL_NAME: make_wheel(WHEEL_MEMBERS)})
    sources = release_sources(VERSION, quiet=True, cache_dir=tmp_path)
    assert sources == tmp_path / "releases" / f"vllm-{VERSION}"
    assert files_under(sources) == KEPT_SOURCES
    assert index.downloads() == [f"/files/{WHEEL_NAME}"]
    with pytest.raises(KvlintError, match="lists no source distribution of vllm 0.29.0"):
        release_tests(VERSION, quiet=True, cache_dir=tmp_path)


def test_sources_cached_from_a_wheel_stay_and_the_tests_come_from_the_sdist(index, tmp_path):
    vendored = "vllm/vllm_flash_attn/cute/kernel.py"  # only wheels carry vendored kernels
    index.publish({WHEEL_NAME: make_wheel({**WHEEL_MEMBERS, vendored: b"x = 1\n"})})
    sources = release_sources(VERSION, quiet=True, cache_dir=tmp_path)
    index.publish({SDIST_NAME: make_sdist(SOURCES), WHEEL_NAME: make_wheel(WHEEL_MEMBERS)})
    assert files_under(release_tests(VERSION, quiet=True, cache_dir=tmp_path)) == KEPT_TESTS
    assert release_sources(VERSION, quiet=True, cache_dir=tmp_path) == sources
    assert files_under(sources) == KEPT_SOURCES | {vendored}  # the earlier extraction is kept as it was


def test_pip_runs_isolated_outside_the_working_folder(index, tmp_path, monkeypatch):
    """A `pip/` package in the working folder or on PYTHONPATH must not run instead of pip."""
    planted = tmp_path / "checkout"
    (planted / "pip").mkdir(parents=True)
    marker = tmp_path / "planted-pip-ran"
    (planted / "pip" / "__init__.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    (planted / "pip" / "__main__.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    monkeypatch.chdir(planted)
    monkeypatch.setenv("PYTHONPATH", f"{planted}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    index.publish({WHEEL_NAME: make_wheel(WHEEL_MEMBERS)})  # the wheel route: pip config, then pip download
    assert files_under(release_sources(VERSION, quiet=True, cache_dir=tmp_path / "cache")) == KEPT_SOURCES
    assert not marker.exists()


# ------------------------------------------------------------------------------------------------ versions


def test_two_spellings_of_one_release_share_one_folder(index, tmp_path):
    index.publish({SDIST_NAME: make_sdist(SOURCES)})
    short = release_sources("0.29", quiet=True, cache_dir=tmp_path)
    assert short == tmp_path / "releases" / "vllm-0.29.0"  # named as the index spells the file
    assert release_sources("0.29.0", quiet=True, cache_dir=tmp_path) == short
    assert release_sources("v0.29.00", quiet=True, cache_dir=tmp_path) == short
    assert release_tests("0.29", quiet=True, cache_dir=tmp_path) == tmp_path / "releases" / "vllm-0.29.0-tests"
    assert len(index.downloads()) == 1


@pytest.mark.parametrize(
    "version",
    ["0.29.0\n", " 0.29.0", "0.29.0 ", "0.29.0; echo", "../0.29.0", "0.29.0/..", "", "latest", "0.29.0\u212a"],
)
def test_what_is_not_a_version_is_refused_before_any_request(index, tmp_path, version):
    with pytest.raises(KvlintError, match="not a version number"):
        release_sources(version, quiet=True, cache_dir=tmp_path)
    assert index.requests == []


@pytest.mark.parametrize(
    ("text", "normal", "key"),
    [
        ("0.29", "0.29", "0.29"),
        ("0.29.0", "0.29.0", "0.29"),
        ("V0.29.00", "0.29.0", "0.29"),
        ("0.9.0.1", "0.9.0.1", "0.9.0.1"),
        ("0.8.5.post1", "0.8.5.post1", "0.8.5.post1"),
        ("0.8.5-1", "0.8.5.post1", "0.8.5.post1"),
        ("1.0-RC_2", "1.0rc2", "1rc2"),
        ("1.0.0alpha", "1.0.0a0", "1a0"),
        ("1.0.dev3", "1.0.dev3", "1.dev3"),
        ("1!2.0+CU121-x", "1!2.0+cu121.x", "1!2+cu121.x"),
    ],
)
def test_versions_are_read_as_pep_440_says(text, normal, key):
    assert (normalize(text), release_key(text)) == (normal, key)


# ------------------------------------------------------------------------------------------ pip's settings


def test_the_index_url_is_pips_own(tmp_path, monkeypatch):
    config = tmp_path / "pip.conf"
    config.write_text(
        "[global]\nindex-url = https://global.example/simple\n[download]\nindex-url = https://download.example/simple\n"
    )
    monkeypatch.setenv("PIP_CONFIG_FILE", str(config))
    monkeypatch.delenv("PIP_INDEX_URL", raising=False)
    assert pip_settings(tmp_path).index_url == "https://download.example/simple"  # as `pip download` reads it
    monkeypatch.setenv("PIP_INDEX_URL", "https://env.example/simple")
    assert pip_settings(tmp_path).index_url == "https://env.example/simple"
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.delenv("PIP_INDEX_URL")
    assert pip_settings(tmp_path).index_url == "https://pypi.org/simple"


# ---------------------------------------------------------------------------------------- the real release


class _CountingProxy(http.server.BaseHTTPRequestHandler):
    """An HTTPS (CONNECT) proxy that counts the bytes it relays to the client."""

    timeout = 60

    def do_CONNECT(self):
        host, _, port = self.path.rpartition(":")
        with socket.create_connection((host, int(port)), timeout=60) as upstream:
            self.send_response(200, "Connection established")
            self.end_headers()
            peers = {self.connection: upstream, upstream: self.connection}
            while True:
                readable, _, _ = select.select(list(peers), [], [], 60)
                if not readable:
                    return
                for end in readable:
                    data = end.recv(1 << 16)
                    if not data:
                        return
                    peers[end].sendall(data)
                    if end is upstream:
                        with self.server.lock:
                            self.server.received += len(data)

    def log_message(self, *args):
        pass


@pytest.mark.slow
def test_0_34_0_comes_in_under_60_mb_and_scans_like_the_wheel(tmp_path):
    proxy = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _CountingProxy)
    proxy.daemon_threads, proxy.lock, proxy.received = True, threading.Lock(), 0
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    address = f"http://127.0.0.1:{proxy.server_address[1]}"
    environment = {
        key: value for key, value in os.environ.items() if key.lower() not in ("no_proxy", "http_proxy", "all_proxy")
    }
    environment.update(KVLINT_CACHE_DIR=str(tmp_path / "cache"), https_proxy=address, HTTPS_PROXY=address)
    environment.pop("PIP_INDEX_URL", None)
    try:
        completed = subprocess.run(
            [sys.executable, "-m", "kvlint", "check", "--no-cache", "--format", "json", "--vllm-release", "0.34.0"],
            cwd=tmp_path,
            env=environment,
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
    finally:
        proxy.shutdown()
        proxy.server_close()
    assert completed.returncode in (0, 1), completed.stderr
    print(f"downloaded {proxy.received:,} bytes")
    assert 40_000_000 < proxy.received < 60_000_000  # the 51 MB sdist, and not the 239 MB wheel
    release = tmp_path / "cache" / "releases" / "vllm-0.34.0"
    assert set(os.listdir(release)) == {"vllm", MANIFEST}  # the sources, and their signed manifest
    golden = (Path(__file__).parent / "golden" / "check-json-0.34.0.txt").read_text(encoding="utf-8")
    assert completed.stdout.replace(f"{release}{os.sep}", "") == golden


def test_a_release_the_index_does_not_list_is_said_in_one_line_before_any_download(index, tmp_path):
    """Issue 29: `--vllm-release 9.9.9` said "downloading its wheel with pip…" before pip's error."""
    index.publish({SDIST_NAME: make_sdist(SOURCES), WHEEL_NAME: make_wheel(WHEEL_MEMBERS)})
    completed = subprocess.run(
        [sys.executable, "-m", "kvlint", "check", "--vllm-release", "9.9.9"],
        cwd=tmp_path,
        env={**os.environ, "KVLINT_CACHE_DIR": str(tmp_path / "cache")},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 2, completed.stderr
    [line] = completed.stderr.splitlines()
    assert line == (
        f"kvlint: error: {index.url} has no vllm 9.9.9 among the 1 release(s) of vllm it lists: check the version number"
    )
    assert index.downloads() == []
