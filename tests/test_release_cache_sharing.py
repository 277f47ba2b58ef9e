"""A cache folder another account can write gets nothing of theirs signed, scanned or run (issue 27, item 3).

The attack on 20fb3b5: the fetch staged inside the shared `releases/` folder; another account renamed the
staging folder away and put its own, whose `tests` was a link to their tree (a conftest.py, a torch.py); this
user's key signed it, the rename put the link in place, and `verify --upstream-tests` ran their files. Here
the other account is played by a hook at the moment of the swap (the fetch's own `extract_python` and
`download`, wrapped), by a second numeric uid (`os.chown`, as root) and by modes that let others write. Each
fetch comes from the fake package index of test_releases on 127.0.0.1.
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest

from kvlint.errors import KvlintError, ReleaseError
from kvlint.scan import releases
from kvlint.scan.release_manifest import MANIFEST
from kvlint.scan.releases import release_sources, release_tests
from kvlint_runner import run_kvlint
from other_accounts import OTHER_UID, needs_another_uid
from test_releases import (
    KEPT_SOURCES,
    KEPT_TESTS,
    SDIST_NAME,
    SOURCES,
    TOP,
    VERSION,
    files_under,
    index,  # noqa: F401  (the fake package index fixture)
    make_sdist,
)

needs_root = needs_another_uid


@pytest.fixture
def cache(index, tmp_path, monkeypatch):  # noqa: F811
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    index.publish({SDIST_NAME: make_sdist(SOURCES)})
    return tmp_path / "cache"


@pytest.fixture
def planted(tmp_path) -> Path:
    """The other account's tree: what they want this user to sign and run."""
    tree = tmp_path / "theirs"
    (tree / "tests").mkdir(parents=True)
    (tree / "tests" / "conftest.py").write_text("import os\nos.system('touch /tmp/kvlint-pwned')\n")
    (tree / "tests" / "torch.py").write_text("raise SystemExit('planted torch')\n")
    (tree / "vllm").mkdir()
    (tree / "vllm" / "__init__.py").write_text("")
    (tree / "vllm" / "torch.py").write_text("raise SystemExit('planted torch')\n")
    return tree


def _swap_after_extraction(monkeypatch, swap) -> None:
    """Run `swap(scratch)` right after the fetch unpacked the archive into its staging folder `scratch`."""
    real = releases.extract_python

    def extract_then_swap(archive, selections, *args, **kwargs):
        counts = real(archive, selections, *args, **kwargs)
        swap(next(iter(selections.values())).parent.parent)
        return counts

    monkeypatch.setattr(releases, "extract_python", extract_then_swap)


def _link_instead(folder: Path, target: Path) -> None:
    os.replace(folder, folder.parent / f"{folder.name}-moved-away")
    os.symlink(target, folder)


SWAPS = {
    "tests-folder-a-link": lambda scratch, theirs: _link_instead(scratch / "tests", theirs),
    "sources-folder-a-link": lambda scratch, theirs: _link_instead(scratch / "sources", theirs),
    "a-link-inside": lambda scratch, theirs: os.symlink(
        theirs / "tests" / "conftest.py", scratch / "tests/tests/conftest2.py"
    ),
    "a-file-added": lambda scratch, theirs: shutil.copy(
        theirs / "vllm" / "torch.py", scratch / "sources/vllm/torch.py"
    ),
    "a-file-replaced": lambda scratch, theirs: os.replace(
        shutil.copy(theirs / "tests" / "conftest.py", scratch / "planted"), scratch / "tests/tests/conftest.py"
    ),
}


@pytest.mark.parametrize("swap", list(SWAPS))
def test_what_was_swapped_into_the_staging_folder_is_never_signed(index, cache, planted, monkeypatch, swap):  # noqa: F811
    """The issue's attack, at the moment it needed: after extraction, before signing. Nothing is signed or put in
    place; the fetch ends in one line. On 20fb3b5 the links were signed and moved into place (or a Mismatch
    escaped as an internal error), and the added and replaced files were signed as kvlint's."""
    _swap_after_extraction(monkeypatch, lambda scratch: SWAPS[swap](scratch, planted))
    fetch = release_sources if swap.startswith("sources") or swap == "a-file-added" else release_tests
    with pytest.raises(ReleaseError) as refused:
        fetch(VERSION, quiet=True, cache_dir=cache)
    message = str(refused.value)
    assert "\n" not in message and "refused" in message, message
    kept = cache / "releases"
    assert not any(path.is_symlink() for path in kept.rglob("*")), "a link was put in the cache"
    assert not list(kept.rglob("torch.py")) and not list(kept.rglob("conftest2.py"))
    for manifest in kept.rglob(MANIFEST):  # only the untouched sources may have been signed before the tests
        assert manifest.parent.name == f"vllm-{VERSION}" and files_under(manifest.parent) == KEPT_SOURCES


def test_the_archive_unpacked_is_the_one_whose_digest_was_checked(index, cache, monkeypatch):  # noqa: F811
    """Another sdist put at the archive's name right after its digest was checked is never read: the fetch unpacks
    the descriptor it wrote and hashed. On 20fb3b5 the archive was opened again by its name."""
    real = releases.download
    evil = make_sdist({**SOURCES, f"{TOP}/vllm/torch.py": b"raise SystemExit('planted')\n"})

    def download_then_swap(*args, **kwargs):
        received = real(*args, **kwargs)
        for archive in (cache / "releases").glob("kvlint-fetch-*/release.tar.gz"):
            swapped = archive.with_name("swapped")
            swapped.write_bytes(evil)
            os.replace(swapped, archive)
        return received

    monkeypatch.setattr(releases, "download", download_then_swap)
    assert files_under(release_sources(VERSION, quiet=True, cache_dir=cache)) == KEPT_SOURCES


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda releases: releases.chmod(0o777), id="writable-by-all"),
        pytest.param(lambda releases: releases.chmod(0o775), id="writable-by-group"),
        pytest.param(lambda releases: releases.chmod(0o1777), id="sticky-is-no-excuse"),
        pytest.param(lambda releases: os.chown(releases, OTHER_UID, -1), id="owned-by-another-uid", marks=needs_root),
        pytest.param(
            lambda releases: (releases.rename(releases.with_name("private")), releases.symlink_to("private")),
            id="a-link",
        ),
    ],
)
def test_a_releases_folder_another_account_can_write_is_refused_in_one_line(index, cache, make):  # noqa: F811
    releases_folder = cache / "releases"
    releases_folder.mkdir(parents=True)
    make(releases_folder)
    with pytest.raises(ReleaseError) as refused:
        release_sources(VERSION, quiet=True, cache_dir=cache)
    message = str(refused.value)
    assert message.startswith(f"{releases_folder}: refused to keep releases in it: it is ") and "\n" not in message
    assert index.requests == []  # refused before anything is fetched


@pytest.mark.parametrize(("mode", "refused"), [(0o777, True), (0o1777, False), (0o755, False)])
def test_the_cache_folder_above_is_checked_with_the_sticky_excuse(index, cache, mode, refused):  # noqa: F811
    """Above `releases/`, a folder all may write lets them rename `releases/` away, unless it is sticky (/tmp)."""
    cache.mkdir()
    cache.chmod(mode)
    if refused:
        with pytest.raises(ReleaseError, match=r"refused to keep releases in it: it is writable by group and others"):
            release_sources(VERSION, quiet=True, cache_dir=cache)
    else:
        assert files_under(release_sources(VERSION, quiet=True, cache_dir=cache)) == KEPT_SOURCES


def test_the_command_line_says_the_refused_folder_in_one_line(index, cache):  # noqa: F811
    (cache / "releases").mkdir(parents=True)
    (cache / "releases").chmod(0o777)
    result = run_kvlint("check", "--vllm-release", VERSION, "--cache-dir", str(cache), cwd=cache.parent)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"kvlint: error: {cache / 'releases'}: refused to keep releases in it: it is writable by group and others"
        " (mode 777), so another account could swap what kvlint fetches and signs there"
    ]


def _move_to(folder: Path, elsewhere: Path) -> Path:
    shutil.copytree(folder, elsewhere, symlinks=True)
    return elsewhere


@pytest.mark.parametrize(
    "tamper",
    [
        pytest.param(
            lambda folder, aside: (shutil.rmtree(folder), folder.symlink_to(aside)), id="release-folder-a-link"
        ),
        pytest.param(
            lambda folder, aside: (shutil.rmtree(folder / "tests"), (folder / "tests").symlink_to(aside / "tests")),
            id="tests-folder-a-link",
        ),
    ],
)
def test_a_linked_release_or_tests_folder_in_the_cache_is_refused_and_fetched_again(index, cache, capsys, tamper):  # noqa: F811
    """A link to a faithful copy (the same bytes, the same signed manifest) is still refused: its target is
    not this user's to keep. On 20fb3b5 the linked release folder was accepted as it stood."""
    folder = release_tests(VERSION, quiet=True, cache_dir=cache)
    aside = _move_to(folder, cache.parent / "their-copy")
    tamper(folder, aside)
    assert release_tests(VERSION, quiet=False, cache_dir=cache) == folder
    assert not folder.is_symlink() and not (folder / "tests").is_symlink()
    assert files_under(folder) == KEPT_TESTS and len(index.downloads()) == 2
    assert f"kvlint: {folder}: not used, it is not what kvlint extracted (" in capsys.readouterr().err


@needs_root
@pytest.mark.parametrize(
    "tamper",
    [
        pytest.param(lambda folder: os.chown(folder, OTHER_UID, -1), id="folder-owned-by-another-uid"),
        pytest.param(lambda folder: os.chown(folder / "vllm/__init__.py", OTHER_UID, -1), id="file-of-another-uid"),
        pytest.param(lambda folder: (folder / "vllm/v1").chmod(0o777), id="a-folder-inside-writable-by-all"),
        pytest.param(lambda folder: (folder / "vllm/__init__.py").chmod(0o664), id="a-file-writable-by-group"),
    ],
)
def test_a_cached_release_another_account_can_change_is_refused_and_fetched_again(index, cache, capsys, tamper):  # noqa: F811
    """Its bytes still match, but another account could change them between the check and the scan. On 20fb3b5
    it was used."""
    folder = release_sources(VERSION, quiet=True, cache_dir=cache)
    tamper(folder)
    assert release_sources(VERSION, quiet=False, cache_dir=cache) == folder
    assert len(index.downloads()) == 2
    assert folder.stat().st_uid == os.geteuid() and not any(
        path.lstat().st_uid != os.geteuid() or path.lstat().st_mode & 0o022 for path in folder.rglob("*")
    )
    assert "not used, it is not what kvlint extracted (" in capsys.readouterr().err


def test_the_staging_folder_is_private_and_everything_kept_is_this_users_alone(index, cache, monkeypatch):  # noqa: F811
    """Under a umask of 0 as under any other: a private staging folder, nothing group- or world-writable kept."""
    seen = []
    _swap_after_extraction(monkeypatch, lambda scratch: seen.append(stat.S_IMODE(scratch.lstat().st_mode)))
    old = os.umask(0)
    try:
        folder = release_tests(VERSION, quiet=True, cache_dir=cache)
    finally:
        os.umask(old)
    assert seen == [0o700]
    kept = [cache / "releases", *(cache / "releases").rglob("*")]
    assert not [path for path in kept if path.lstat().st_mode & 0o022], "something kept is writable by others"
    assert files_under(folder) == KEPT_TESTS


def test_a_link_swapped_in_right_before_the_rename_is_not_put_in_place(index, cache, planted, monkeypatch):  # noqa: F811
    """The last moment: after signing, before the rename. The rename's source is checked again by lstat."""
    from kvlint.scan import release_store

    real = release_store.write_manifest

    def sign_then_swap(folder, *args, **kwargs):
        identity = real(folder, *args, **kwargs)
        _link_instead(folder, planted / "tests" if folder.name == "tests" else planted)
        return identity

    monkeypatch.setattr(release_store, "write_manifest", sign_then_swap)
    with pytest.raises(KvlintError, match="refused, it is not the folder kvlint checked") as refused:
        release_sources(VERSION, quiet=True, cache_dir=cache)
    assert "\n" not in str(refused.value)
    assert not any(path.is_symlink() for path in (cache / "releases").rglob("*"))


def test_a_cache_folder_kvlint_made_under_a_group_umask_still_holds_releases(index, cache):  # noqa: F811
    """The results cache makes the cache folder first (`check` before `check --vllm-release`): under a umask of
    002 it must not come out group-writable, or the releases beside it would be refused."""
    from kvlint.scan.storage import save_record

    old = os.umask(0o002)
    try:
        assert save_record(cache / "results" / "manifest-x.json", "manifest", "x", {"a": 1})
    finally:
        os.umask(old)
    assert not cache.stat().st_mode & 0o022 and not (cache / "results").stat().st_mode & 0o022
    assert files_under(release_sources(VERSION, quiet=True, cache_dir=cache)) == KEPT_SOURCES


def test_a_link_swapped_in_after_the_last_check_is_set_aside_not_used(index, cache, planted, monkeypatch):  # noqa: F811
    """Between the last lstat and the rename (the narrowest window, only the user's own processes can reach it
    in a private folder): the rename moves the link, the lstat after it sees it, and it is set aside."""
    from kvlint.scan import release_store

    real = release_store._check_is

    def check_then_swap(path, identity):
        real(path, identity)
        if path.parent.name.startswith("kvlint-fetch-"):  # the staging folder, right before its rename
            _link_instead(path, planted)

    monkeypatch.setattr(release_store, "_check_is", check_then_swap)
    with pytest.raises(KvlintError, match="refused, it is not the folder kvlint checked"):
        release_sources(VERSION, quiet=True, cache_dir=cache)
    assert not any(path.is_symlink() for path in (cache / "releases").rglob("*"))
    assert not (cache / "releases" / f"vllm-{VERSION}").exists()
