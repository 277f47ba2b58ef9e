"""A cached release folder is used only while it holds what kvlint extracted: its manifest, signed with the
user's cache key, is checked before the folder is scanned, imported (`verify`) or tested (`--upstream-tests`)
(issue 21, item 2). Each test fetches a release from the fake package index of test_releases, then plays the
one who can write the cache folder: a planted file, a replaced one, a conftest.py added, the whole folder
swapped for a planted package, a manifest signed under another key. kvlint notices and fetches it again.
"""

from __future__ import annotations

import os
import shutil

import pytest
from click.testing import CliRunner

from kvlint.scan.release_manifest import MANIFEST
from kvlint.scan.releases import release_sources, release_tests
from kvlint_runner import run_kvlint
from test_releases import (
    KEPT_SOURCES,
    KEPT_TESTS,
    SDIST_NAME,
    SOURCES,
    VERSION,
    files_under,
    index,  # noqa: F401  (the fake package index fixture)
    make_sdist,
)


@pytest.fixture
def cache(index, tmp_path, monkeypatch):  # noqa: F811
    """A published release and an empty cache, with a cache key of this test's own."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    index.publish({SDIST_NAME: make_sdist(SOURCES)})
    return tmp_path / "cache"


def test_an_untouched_release_is_fetched_once(index, cache):  # noqa: F811
    first = release_sources(VERSION, quiet=True, cache_dir=cache)
    assert release_sources(VERSION, quiet=True, cache_dir=cache) == first
    assert release_tests(VERSION, quiet=True, cache_dir=cache) == cache / "releases" / f"vllm-{VERSION}-tests"
    assert len(index.downloads()) == 1
    assert (first / MANIFEST).is_file() and (first / MANIFEST).stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize(
    "tamper",
    [
        pytest.param(lambda folder: (folder / "vllm" / "planted.py").write_text("x = 1\n"), id="plant-a-file"),
        pytest.param(  # the same size: only the digest tells
            lambda folder: (folder / "vllm/v1/kv_cache_interface.py").write_text("class KVCacheSpec:\n    pas5\n"),
            id="replace-a-file-same-size",
        ),
        pytest.param(lambda folder: (folder / "vllm/v1/kv_cache_interface.py").unlink(), id="remove-a-file"),
        pytest.param(lambda folder: (folder / "vllm" / "evil").mkdir(), id="add-a-folder"),
        pytest.param(lambda folder: os.symlink("/etc/passwd", folder / "vllm" / "passwd.py"), id="plant-a-link"),
        pytest.param(lambda folder: (folder / MANIFEST).unlink(), id="remove-the-manifest"),
    ],
)
def test_a_tampered_release_is_noticed_and_fetched_again(index, cache, capsys, tamper):  # noqa: F811
    folder = release_sources(VERSION, quiet=True, cache_dir=cache)
    tamper(folder)
    assert release_sources(VERSION, quiet=False, cache_dir=cache) == folder
    assert len(index.downloads()) == 2
    assert files_under(folder) == KEPT_SOURCES
    assert (folder / "vllm/v1/kv_cache_interface.py").read_text() == "class KVCacheSpec:\n    pass\n"
    assert f"kvlint: {folder}: not used, it is not what kvlint extracted (" in capsys.readouterr().err


def test_a_conftest_added_to_the_cached_tests_is_noticed(index, cache):  # noqa: F811
    tests = release_tests(VERSION, quiet=True, cache_dir=cache)
    (tests / "tests" / "v1" / "conftest.py").write_text("import os\nos.system('touch /tmp/pwned')\n")
    assert release_tests(VERSION, quiet=True, cache_dir=cache) == tests
    assert len(index.downloads()) == 2 and files_under(tests) == KEPT_TESTS


def test_a_planted_release_is_not_scanned(index, cache):  # noqa: F811
    """The issue's attack: the whole folder replaced by one harmless module, so `check` found nothing."""
    folder = release_sources(VERSION, quiet=True, cache_dir=cache)
    shutil.rmtree(folder)
    (folder / "vllm").mkdir(parents=True)
    (folder / "vllm" / "__init__.py").write_text("")
    result = run_kvlint("check", "--vllm-release", VERSION, "--cache-dir", str(cache), cwd=cache.parent)
    assert "not used, it is not what kvlint extracted" in result.stderr
    assert "2 files checked" in result.stdout + result.stderr
    assert len(index.downloads()) == 2


def test_a_manifest_signed_under_another_key_is_not_trusted(index, cache, tmp_path, monkeypatch):  # noqa: F811
    release_sources(VERSION, quiet=True, cache_dir=cache)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "another-user"))
    release_sources(VERSION, quiet=True, cache_dir=cache)
    assert len(index.downloads()) == 2


def test_a_restored_copy_with_the_same_bytes_is_kept_and_signed_again(index, cache):  # noqa: F811
    """A CI cache restored from an earlier run of the same user: new inodes, the same bytes, no new download."""
    folder = release_sources(VERSION, quiet=True, cache_dir=cache)
    signed = (folder / MANIFEST).read_bytes()
    shutil.copytree(folder, cache / "copy")
    shutil.rmtree(folder)
    os.replace(cache / "copy", folder)
    assert release_sources(VERSION, quiet=True, cache_dir=cache) == folder
    assert len(index.downloads()) == 1
    assert (folder / MANIFEST).read_bytes() != signed  # the new inodes are signed: the next check only stats
    assert release_sources(VERSION, quiet=True, cache_dir=cache) == folder and len(index.downloads()) == 1


def test_without_a_usable_key_the_release_is_fetched_each_time_and_said(index, cache, tmp_path, monkeypatch, capsys):  # noqa: F811
    state = tmp_path / "open-state" / "kvlint"
    state.mkdir(parents=True)
    (state / "cache-key").write_text("00" * 32 + "\n")
    (state / "cache-key").chmod(0o644)  # readable by others: not a secret, not used
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "open-state"))
    release_sources(VERSION, quiet=True, cache_dir=cache)
    folder = release_sources(VERSION, quiet=False, cache_dir=cache)
    assert len(index.downloads()) == 2 and files_under(folder) == KEPT_SOURCES
    assert "not used, there is no usable cache key" in capsys.readouterr().err


@pytest.mark.slow
def test_verify_leaves_the_release_as_its_manifest_lists_it(vllm_release, vllm_runtime_env):
    """`verify --vllm-release` imports the release: it must write no bytecode into it, or the next use would
    find `__pycache__` added and fetch the release again."""
    from kvlint.commands.verify import verify
    from kvlint.scan.release_manifest import check_manifest
    from kvlint.scan.signing import cache_key

    folder = vllm_release("0.29.0")
    result = CliRunner().invoke(verify, ["--python", str(vllm_runtime_env.python), "--vllm-release", "0.29.0"])
    assert result.exit_code in (0, 1), result.output
    assert not list(folder.rglob("__pycache__")), "verify wrote bytecode into the cached release"
    check_manifest(folder, cache_key())  # raises on any difference
