"""Read the package index pip is configured to use, and download one file from it, bounded and verified.

The index is pip's own (`index-url` from pip's configuration files or `PIP_INDEX_URL`, as `pip config list`
reports them; https://pypi.org/simple by default), and so are its CA bundle (`cert`) and proxy (`proxy`).
A project's page is read through the JSON API of PEP 691, or the HTML of PEP 503 from an index that only
speaks that. A download is capped in size and in total time, and refused unless its digest matches the
one the index published. Plain http is read only where pip reads it: on this machine (localhost, a loopback
address) or on a host pip's `trusted-host` names; elsewhere a network attacker would choose the digest too. Every message is one line and never shows the credentials an index URL may hold.
"""

from __future__ import annotations

import ast
import base64
import hashlib
import ipaddress
import json
import os
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import BinaryIO
from urllib.parse import unquote, urljoin, urlsplit, urlunsplit

from kvlint import __version__
from kvlint.errors import PackageIndexError

DEFAULT_INDEX = "https://pypi.org/simple"
_ACCEPT = "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.01"
_PAGE_LIMIT = 16_000_000  # vLLM's page is 0.13 MB
_READ_TIMEOUT_S = 60  # one read; the total is bounded by the caller's deadline
_CHUNK = 1 << 20
# Digests pip accepts from an index, strongest first.
_DIGESTS = ("sha512", "sha384", "sha256")


@dataclass(frozen=True)
class PipSettings:
    index_url: str
    cert: str | None = None
    proxy: str | None = None
    trusted_hosts: tuple[str, ...] = ()  # pip's `trusted-host`: hosts (or host:port) a plain-http index may be on


@dataclass(frozen=True)
class IndexFile:
    filename: str
    url: str
    hashes: dict
    size: int | None = None


def pip_settings(work_dir: Path) -> PipSettings:
    """pip's index URL, CA bundle and proxy for `pip download`, as `python -I -m pip config list` reports them.

    Run isolated (-I) from `work_dir` (a folder outside any checkout) so that no `pip/` package there runs
    instead of pip. Sections override as in pip: `global`, then `download`, then the PIP_* environment."""
    try:
        completed = subprocess.run(
            [sys.executable, "-I", "-m", "pip", "config", "list"],
            cwd=work_dir,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        lines = completed.stdout.splitlines() if completed.returncode == 0 else []
    except (OSError, subprocess.TimeoutExpired):
        lines = []
    if not lines:  # no pip in this environment: the environment variables still say what the user wants
        lines = [f":env:.{key[4:].lower()}={value!r}" for key, value in os.environ.items() if key.startswith("PIP_")]
    values: dict[str, str] = {}
    for section in ("global", "download", ":env:"):
        for line in lines:
            name, _, raw = line.partition("=")
            if name.startswith(section + "."):
                try:
                    value = ast.literal_eval(raw)
                except (ValueError, SyntaxError):
                    continue
                if isinstance(value, str):
                    values[name[len(section) + 1 :].replace("_", "-")] = value
    return PipSettings(
        index_url=values.get("index-url") or DEFAULT_INDEX,
        cert=values.get("cert") or None,
        proxy=values.get("proxy") or None,
        trusted_hosts=tuple(values.get("trusted-host", "").split()),
    )


def project_files(settings: PipSettings, project: str, deadline: float) -> list[IndexFile]:
    """Every file the index lists for `project` (PEP 691 JSON, or PEP 503 HTML)."""
    page_url = settings.index_url.rstrip("/") + f"/{project}/"
    with _open(settings, page_url, deadline, accept=_ACCEPT) as response:
        body = _read_capped(response, _PAGE_LIMIT, deadline, page_url)
        content_type = response.headers.get_content_type()
        final_url = response.geturl()
    try:
        if content_type.endswith("json"):
            return _files_from_json(json.loads(body), final_url)
        return _files_from_html(body.decode("utf-8", "replace"), final_url)
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise PackageIndexError(f"{redact(page_url)}: not a package index page ({type(error).__name__})") from None


def download(settings: PipSettings, file: IndexFile, sink: BinaryIO, max_bytes: int, deadline: float) -> int:
    """Write `file` into the open `sink`, hashing the bytes as they are written; refused when over `max_bytes`,
    past `deadline` or when its digest differs. The caller reads the archive back from that same open file
    (never by its name again), so what it unpacks is what was checked."""
    algorithm = next((name for name in _DIGESTS if file.hashes.get(name)), None)
    if algorithm is None:
        raise PackageIndexError(f"{file.filename}: the index publishes no sha256 for it, so it cannot be verified")
    if file.size is not None and file.size > max_bytes:
        raise PackageIndexError(f"{file.filename}: {file.size / 1e6:.0f} MB, over the {max_bytes / 1e6:.0f} MB limit")
    digest = hashlib.new(algorithm)
    received = 0
    with _open(settings, file.url, deadline) as response:
        while True:
            chunk = _read_chunk(response, deadline, file.url)
            if not chunk:
                break
            received += len(chunk)
            if received > max_bytes:
                raise PackageIndexError(f"{file.filename}: over the {max_bytes / 1e6:.0f} MB limit, download stopped")
            digest.update(chunk)
            sink.write(chunk)
    sink.flush()
    if digest.hexdigest() != str(file.hashes[algorithm]).lower():
        raise PackageIndexError(f"{file.filename}: {algorithm} mismatch, the download is not the file the index lists")
    return received


def redact(url: str) -> str:
    """`url` without the user name and password it may carry."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    return urlunsplit(parts._replace(netloc=host + (f":{parts.port}" if parts.port else "")))


def _files_from_json(page: dict, page_url: str) -> list[IndexFile]:
    files = []
    for entry in page["files"]:
        size = entry.get("size")  # PEP 700; absent from older indexes
        url = urljoin(page_url, entry["url"])
        hashes = dict(entry.get("hashes") or {})
        files.append(IndexFile(str(entry["filename"]), url, hashes, size if isinstance(size, int) else None))
    return files


class _Anchors(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag, attrs):
        href = dict(attrs).get("href")
        if tag == "a" and href:
            self.hrefs.append(href)


def _files_from_html(page: str, page_url: str) -> list[IndexFile]:
    parser = _Anchors()
    parser.feed(page)
    files = []
    for href in parser.hrefs:
        url = urljoin(page_url, href)
        parts = urlsplit(url)
        algorithm, _, value = parts.fragment.partition("=")  # PEP 503: `#sha256=<hex>`
        filename = unquote(parts.path.rsplit("/", 1)[-1])
        files.append(IndexFile(filename, urlunsplit(parts._replace(fragment="")), {algorithm: value} if value else {}))
    return files


class _HttpOnlyRedirects(urllib.request.HTTPRedirectHandler):
    """Follow redirects to http(s) only, never from https down to plain http, nor to a plain-http host pip
    would not read."""

    def __init__(self, trusted_hosts: tuple[str, ...] = ()) -> None:
        super().__init__()
        self.trusted_hosts = trusted_hosts

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        old, new = urlsplit(req.full_url).scheme, urlsplit(newurl).scheme
        plain = new == "http" and not _may_be_plain(urlsplit(newurl), self.trusted_hosts)
        if new not in ("http", "https") or (old == "https" and new != "https") or plain:
            raise PackageIndexError(f"{redact(req.full_url)}: refused a redirect to {redact(newurl)}")
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def _open(settings: PipSettings, url: str, deadline: float, accept: str = "*/*"):
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise PackageIndexError(f"{redact(url)}: only http(s) package indexes can be read")
    if parts.scheme == "http" and not _may_be_plain(parts, settings.trusted_hosts):
        raise PackageIndexError(
            f"{redact(url)}: refused, plain http to {parts.hostname}, which pip's `trusted-host` does not name"
            " (pip refuses it too)"
        )
    plain_url = redact(url)
    request = urllib.request.Request(plain_url, headers={"Accept": accept, "User-Agent": f"kvlint/{__version__}"})
    if parts.username is not None:
        # Credentials in the URL go to that host only: not forwarded when a redirect leaves it.
        token = base64.b64encode(f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()).decode()
        request.add_unredirected_header("Authorization", f"Basic {token}")
    try:
        tls = ssl.create_default_context(cafile=settings.cert)
        handlers: list = [_HttpOnlyRedirects(settings.trusted_hosts), urllib.request.HTTPSHandler(context=tls)]
        if settings.proxy:  # else urllib honours the https_proxy/no_proxy environment, as pip does
            proxy = settings.proxy if "://" in settings.proxy else f"http://{settings.proxy}"
            handlers.append(urllib.request.ProxyHandler({"http": proxy, "https": proxy}))
        return urllib.request.build_opener(*handlers).open(request, timeout=_timeout(deadline, url))
    except urllib.error.HTTPError as error:
        error.close()
        raise PackageIndexError(f"{plain_url}: HTTP {error.code} {_one_line(error.reason)}") from None
    except (urllib.error.URLError, OSError, ssl.SSLError, ValueError) as error:
        reason = getattr(error, "reason", error)
        raise PackageIndexError(f"{plain_url}: cannot be reached ({_one_line(reason)})") from None


def _may_be_plain(parts, trusted_hosts: tuple[str, ...]) -> bool:
    """Whether pip would read this plain-http URL: its host is this machine, or `trusted-host` names it."""
    host = parts.hostname or ""
    try:
        if host == "localhost" or ipaddress.ip_address(host).is_loopback:
            return True
    except ValueError:
        pass  # a name, not an address
    with_port = f"{host}:{parts.port}" if parts.port else host
    return any(trusted in (host, with_port) for trusted in trusted_hosts)


def _read_capped(response, limit: int, deadline: float, url: str) -> bytes:
    body = bytearray()
    while chunk := _read_chunk(response, deadline, url):
        body += chunk
        if len(body) > limit:
            raise PackageIndexError(f"{redact(url)}: the page is over {limit / 1e6:.0f} MB")
    return bytes(body)


def _read_chunk(response, deadline: float, url: str) -> bytes:
    _timeout(deadline, url)  # a slow drip ends at the deadline, not at the next read's timeout
    try:
        return response.read1(_CHUNK)  # what has arrived: read() would wait for a whole chunk
    except (OSError, ValueError) as error:
        raise PackageIndexError(f"{redact(url)}: the download broke off ({_one_line(error)})") from None


def _timeout(deadline: float, url: str) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise PackageIndexError(f"{redact(url)}: gave up, the fetch took longer than its time limit")
    return min(_READ_TIMEOUT_S, left)


def _one_line(value: object) -> str:
    return " ".join(str(value).split())[:200]
