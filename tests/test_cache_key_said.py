"""A cache key kvlint does not trust turns the caches off, and says so once, with why (issue 21, item 11):
before, caching stopped in silence."""

from __future__ import annotations

import os

import pytest

from kvlint_runner import run_kvlint_child
from test_cli import make_tree


@pytest.mark.parametrize("kind", ["readable-by-others", "symlink"])
def test_an_untrusted_cache_key_is_said_once(tmp_path, monkeypatch, kind):
    tree = tmp_path / "tree"
    tree.mkdir()
    make_tree(tree)
    state = tmp_path / "state" / "kvlint"
    state.mkdir(parents=True)
    key = state / "cache-key"
    if kind == "symlink":
        (tmp_path / "elsewhere").write_text("00" * 32 + "\n")
        (tmp_path / "elsewhere").chmod(0o600)
        os.symlink(tmp_path / "elsewhere", key)
        reason = "a symbolic link"
    else:
        key.write_text("00" * 32 + "\n")
        key.chmod(0o644)
        reason = "mode 644: others may read or write it"
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    result = run_kvlint_child("check", "--cache-dir", str(tmp_path / "cache"), "-j", "2", ".", cwd=tree)
    said = [line for line in result.stderr.splitlines() if "cache key" in line]
    assert said == [f"kvlint: the cache key {key} is not used ({reason}): caching is off"], result.stderr
    assert not list((tmp_path / "cache").rglob("manifest-*")), "nothing cached without a trusted key"
