"""A plain-http package index is read only where pip would read it: on this machine, or on a host pip's
`trusted-host` names (issue 21, item 8). Before, any http index was read (and a release from it logged as
"from PyPI"); a network attacker between kvlint and such an index chooses the archive and its digest.
"""

from __future__ import annotations

import http.server
import os
import socket
import threading

import pytest

from kvlint.scan import releases
from kvlint.scan.package_index import PackageIndexError
from kvlint.scan.releases import release_sources


def outward_address() -> str | None:
    """This machine's own address on its network (not loopback), found without sending a packet."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("10.255.255.255", 1))
            address = probe.getsockname()[0]
        except OSError:
            return None
    return None if address.startswith("127.") else address


@pytest.fixture
def plain_index(monkeypatch):
    """An index on this machine's outward address over plain http, answering 404 and counting requests."""
    address = outward_address()
    if address is None:
        pytest.skip("no non-loopback address on this machine to serve a plain-http index from")
    requests: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            requests.append(self.path)
            self.send_error(404)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer((address, 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    monkeypatch.setenv("PIP_INDEX_URL", f"http://{address}:{server.server_address[1]}/simple")
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    for name in ("PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "PIP_NO_INDEX", "PIP_TRUSTED_HOST"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", address)
    monkeypatch.setenv("no_proxy", address)
    monkeypatch.setattr(releases, "TIME_LIMIT_S", 20)
    yield address, requests
    server.shutdown()
    server.server_close()


def test_a_plain_http_index_pip_does_not_trust_is_refused_before_any_request(plain_index, tmp_path):
    address, requests = plain_index
    with pytest.raises(PackageIndexError, match=f"refused, plain http to {address}, which pip's `trusted-host`"):
        release_sources("0.29.0", quiet=True, cache_dir=tmp_path)
    assert requests == []


def test_a_trusted_host_is_read_as_pip_reads_it(plain_index, tmp_path, monkeypatch):
    address, requests = plain_index
    monkeypatch.setenv("PIP_TRUSTED_HOST", address)
    with pytest.raises(PackageIndexError, match="HTTP 404"):
        release_sources("0.29.0", quiet=True, cache_dir=tmp_path)
    assert requests == ["/simple/vllm/"]
