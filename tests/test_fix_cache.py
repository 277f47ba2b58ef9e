"""A repeated `kvlint fix --diff` answered from the cache (kvlint/fixing/fix_cache.py, the fixed tree's index in
kvlint/scan/index_cache.py, the re-linted results in kvlint/fixing/after.py): byte for byte what a fix without a
cache says, nothing linted or built again, an edit fixed again, and a record kvlint did not write not believed
(docs/security.md §3)."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from kvlint.fixing import fix_file
from kvlint.scan import index_cache
from kvlint.scan import jobs as scan_jobs
from kvlint_runner import run_kvlint
from mini_vllm import CONFIG_PATH, MINI_VLLM, write_tree


@pytest.fixture(autouse=True)
def own_cache_key(tmp_path_factory, monkeypatch):
    """Each test signs its caches with a key of its own (scan/signing.py), never the user's."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("state")))


@pytest.fixture
def tree(tmp_path) -> Path:
    root = tmp_path / "tree"
    write_tree(root, MINI_VLLM)
    return root


# The scan's progress lines: when the index is built (and what is parsed) is the cache's to decide.
PROGRESS = (b"kvlint: indexing the tree", b"kvlint: linting ", b"kvlint: parsing ")


def fix_diff(tree: Path, cache: Path | None) -> tuple[int, bytes, list[bytes]]:
    """(exit code, the patch, stderr's lines but the progress)."""
    where = ("--cache-dir", str(cache)) if cache is not None else ("--no-cache",)
    completed = run_kvlint("fix", "--diff", *where, "vllm", cwd=tree, binary=True)
    said = [line for line in completed.stderr.splitlines() if not line.startswith(PROGRESS)]
    return completed.returncode, completed.stdout, said


def nothing_is_computed_again(monkeypatch) -> None:
    """Fixing a file, building an index and linting a file each fail the test from now on."""

    def refuse(*_args, **_kwargs):
        raise AssertionError("computed again: not answered from the cache")

    monkeypatch.setattr(fix_file, "compute_fix", refuse)
    monkeypatch.setattr(index_cache, "_build_index", refuse)
    monkeypatch.setattr(scan_jobs, "lint_unfiltered", refuse)


def test_a_repeated_fix_diff_is_answered_from_the_cache_byte_for_byte(tree, tmp_path, monkeypatch):
    reference = fix_diff(tree, None)
    assert reference[0] == 1 and b"resolve_dcp_kv_block_size" in reference[1], reference
    cache = tmp_path / "cache"
    assert fix_diff(tree, cache) == reference  # cold: fills the cache
    nothing_is_computed_again(monkeypatch)
    assert fix_diff(tree, cache) == reference
    assert list((cache / "results").glob("fixes-*.json")) and list((cache / "results").glob("project-fixed-*.json"))


def test_an_edited_file_is_fixed_again(tree, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    fix_diff(tree, cache)
    target = tree / CONFIG_PATH
    target.write_text(target.read_text().replace("\n", "\n\n", 1))  # every line below moves
    computed = []
    real = fix_file.compute_fix
    monkeypatch.setattr(fix_file, "compute_fix", lambda *args: computed.append(args[1]) or real(*args))
    again = fix_diff(tree, cache)
    assert computed == [CONFIG_PATH]  # the one file edited, not the others
    assert again == fix_diff(tree, None)


def forge(record: Path) -> None:
    """Keep the signature line, change what it signed: every kept patch and fixed text says `forged`."""
    header, _, document = record.read_bytes().partition(b"\n")
    data = json.loads(document)
    for value in data.get("entries", {}).values():
        if "diff" in value:
            value["diff"] = value["fixed"] = base64.b64encode(b"forged\n").decode()
    record.write_bytes(header + b"\n" + json.dumps(data).encode())


def test_a_tampered_fix_record_is_not_believed(tree, tmp_path):
    reference = fix_diff(tree, None)
    cache = tmp_path / "cache"
    fix_diff(tree, cache)
    records = list((cache / "results").glob("fixes-*.json"))
    assert records
    for record in records:
        forge(record)
    assert fix_diff(tree, cache) == reference


def test_a_fix_record_signed_by_another_key_is_not_believed(tree, tmp_path, monkeypatch):
    """Another user's record (or one restored from a CI cache, under another key) is fixed again, and what
    it claims is never shown."""
    reference = fix_diff(tree, None)
    cache = tmp_path / "cache"
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "their-state"))
    fix_diff(tree, cache)
    for record in (cache / "results").glob("fixes-*.json"):
        forge(record)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "my-state"))
    computed = []
    real = fix_file.compute_fix
    monkeypatch.setattr(fix_file, "compute_fix", lambda *args: computed.append(args[1]) or real(*args))
    assert fix_diff(tree, cache) == reference
    assert computed, "the other key's record was believed"
