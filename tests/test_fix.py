"""`kvlint fix`: rewrites to the shared resolver as upstream did, safely, idempotently, atomically."""

from __future__ import annotations

import json
import os
import py_compile

import pytest

from conftest import OFFLOADING_CONFIG
from kvlint.errors import FixError
from kvlint.fixing.write import write_atomically
from kvlint_runner import run_kvlint
from test_cli import BUGGY, make_tree

UPSTREAM_CALL = (
    "tokens_per_block=resolve_dcp_kv_block_size(\n"
    "                group.kv_cache_spec,\n"
    "                parallel_config.decode_context_parallel_size,\n"
    "            ),"
)


SIMPLE_OFFLOAD_MANAGER = "vllm/v1/simple_kv_offload/manager.py"
MANAGER_FA_CALL = (
    "self.fa_block_size: int = resolve_dcp_kv_block_size(\n"
    "            self.cpu_kv_cache_config.kv_cache_groups[self.fa_gidx].kv_cache_spec,\n"
    "            self.cp_world_size,\n"
    "        )"
)
# What one `kvlint fix vllm` changes in 0.29.0 (test_upstream_tests checks `verify --upstream-tests` says so).
FIXED_IN_0_29_0 = sorted(
    [
        OFFLOADING_CONFIG,
        SIMPLE_OFFLOAD_MANAGER,
        "vllm/v1/worker/cpu_model_runner.py",
        "vllm/v1/worker/gpu_model_runner.py",
    ]
)


def kvlint(*args, cwd=None):
    return run_kvlint(*args, cwd=cwd or os.getcwd())


def snapshot(root):
    """Every .py under root: its path relative to root -> its bytes."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*.py")}


@pytest.mark.slow
def test_fix_029_matches_upstream_and_is_idempotent(vllm_release, fixed_029):
    tree, first = fixed_029.tree, fixed_029.run
    # Findings remain (unsafe or unfixable). The errors left are the simple offload manager's Mamba spans (a
    # Mamba group scaled by the DCP size, which upstream fixed in 0.30.0): their fix changes what a Mamba group
    # gets, so it waits for --unsafe-fixes, and like ruff's `--fix` the run exits 1 while an error is left.
    assert first.returncode == 1 and " finding(s) left." in first.stderr, first.stderr
    left = json.loads(kvlint("check", "--no-cache", "--output-format", "json", "vllm", cwd=tree).stdout)
    errors = [f for f in left if f["severity"] == "error"]
    assert errors, "the Mamba spans of the simple offload manager are errors the safe fix leaves"
    for error in errors:
        assert (error["code"], error["path"], error["kinds"]) == ("KV102", SIMPLE_OFFLOAD_MANAGER, ["MambaSpec"])
        assert error["fix"]["applicability"] == "unsafe", error
    before, after = snapshot(vllm_release("0.29.0")), snapshot(tree)
    assert sorted(before) == sorted(after), "the fix added or removed a file"
    changed = sorted(path for path in before if before[path] != after[path])
    # the resolver calls (KV102) and the container-blind checks whose unwrapping is safe (KV101)
    assert changed == FIXED_IN_0_29_0
    fixed = (tree / OFFLOADING_CONFIG).read_text()
    assert UPSTREAM_CALL in fixed
    assert (
        "from vllm.v1.core.kv_cache_utils import (\n"
        "    resolve_dcp_kv_block_size,\n"
        "    resolve_kv_cache_block_sizes,\n"
        ")"
    ) in fixed
    # The simple offload manager's hand-scaled spans (KV102, since the census of issue 26): its
    # `cp_world_size` is the DCP size (manager.py:90-91), and the resolver gives `block_size * dcp` for an
    # attention spec, so a plain spec's span is the same; a container of attention layers now scales too.
    manager = (tree / SIMPLE_OFFLOAD_MANAGER).read_text()
    assert "from vllm.v1.core.kv_cache_utils import resolve_dcp_kv_block_size\n" in manager
    assert MANAGER_FA_CALL in manager
    assert "block_size = resolve_dcp_kv_block_size(spec, cp_world_size)\n" in manager
    assert "spec.block_size * cp_world_size" not in manager
    for path in changed:
        py_compile.compile(str(tree / path), doraise=True)
    # Run again on the fixed tree (warm: the first run's cache; test_cache_and_workers proves warm == cold).
    second = kvlint("fix", "--cache-dir", str(fixed_029.cache), "vllm", cwd=tree)
    assert snapshot(tree) == after, "a second run changed something"
    assert "fixed 0 file(s)" in second.stderr


@pytest.mark.slow
def test_fix_diff_writes_nothing(vllm_copy):
    tree = vllm_copy("0.29.0")
    target = tree / OFFLOADING_CONFIG
    before = target.read_bytes()
    result = kvlint("fix", "--no-cache", "--diff", str(target))
    assert result.returncode == 1
    assert target.read_bytes() == before
    assert "+            tokens_per_block=resolve_dcp_kv_block_size(" in result.stdout


@pytest.mark.slow
def test_fix_027_changes_nothing_and_says_why(vllm_copy):
    tree = vllm_copy("0.27.1")
    before = snapshot(tree / "vllm" / "distributed")
    result = kvlint("fix", "--no-cache", str(tree / "vllm" / "distributed"))
    assert snapshot(tree / "vllm" / "distributed") == before
    assert result.returncode == 1
    # each finding a block (as `check` prints it): the reason it was left on its own `note:` line
    # (ruff's full layout: the headline `KV102 error: …` opens the block; a long note wraps at a space)
    blocks = [
        " ".join(block.split())
        for block in result.stdout.split("\n\n")
        if "offloading/config.py" in block and block.startswith("KV102 ")
    ]
    assert blocks and all("note: no fix: this tree defines no shared `resolve_dcp_kv_block_size`" in b for b in blocks)


@pytest.fixture
def tree(tmp_path):
    make_tree(tmp_path)
    return tmp_path


def test_crlf_bom_and_tabs_survive_byte_for_byte_outside_the_edit(tree):
    original = (
        "# keep 'quotes'  \r\n" + BUGGY.replace("\n", "\r\n").replace("    ", "\t") + "x = 1  # tail\r\n"
    ).encode()
    path = tree / "pkg" / "buggy.py"
    path.write_bytes(b"\xef\xbb\xbf" + original)
    os.chmod(path, 0o640)
    result = kvlint("fix", "--no-cache", str(path))
    assert result.returncode == 0, result.stdout + result.stderr
    data = path.read_bytes()
    assert data.startswith(b"\xef\xbb\xbf# keep 'quotes'  \r\n")
    assert data.endswith(b"x = 1  # tail\r\n")
    assert b"\n" not in data.replace(b"\r\n", b"")  # no bare LF introduced
    assert b"resolve_dcp_kv_block_size(g.kv_cache_spec, dcp)" in data
    assert oct(path.stat().st_mode & 0o777) == oct(0o640)
    py_compile.compile(str(path), doraise=True)


def test_file_changed_between_read_and_write_is_not_overwritten(tmp_path):
    path = tmp_path / "f.py"
    path.write_bytes(b"new content from the user\n")
    with pytest.raises(FixError, match="changed on disk"):
        write_atomically(path, original=b"old content kvlint read\n", new=b"kvlint's rewrite\n")
    assert path.read_bytes() == b"new content from the user\n"
    assert [p.name for p in tmp_path.iterdir()] == ["f.py"], "temporary file left behind"


def test_unwritable_folder_is_a_clear_error_and_loses_nothing(tmp_path, monkeypatch):
    # Tests run as root, which ignores folder permissions: simulate the refusal where it happens, at the
    # creation of the temporary file.
    real_open = os.open

    def refuse(name, flags, *args, **kwargs):
        if flags & os.O_CREAT:
            raise PermissionError(13, "Permission denied")
        return real_open(name, flags, *args, **kwargs)

    path = tmp_path / "f.py"
    path.write_bytes(b"old\n")
    monkeypatch.setattr(os, "open", refuse)
    with pytest.raises(FixError, match="cannot write in .*Permission denied; left unchanged"):
        write_atomically(path, original=b"old\n", new=b"new\n")
    assert path.read_bytes() == b"old\n"


def test_unsafe_fixes_only_on_request(tree):
    path = tree / "pkg" / "unsafe.py"
    path.write_text("def span(spec, dcp):\n    return spec.block_size * dcp\n")
    # the finding left is a warning here (no counterexample in this lone file): --fail-on warning counts it
    result = kvlint("fix", "--no-cache", "--fail-on", "warning", str(path))
    assert result.returncode == 1 and "use --unsafe-fixes" in result.stdout
    assert "spec.block_size * dcp" in path.read_text()
    result = kvlint("fix", "--no-cache", "--unsafe-fixes", str(path))
    assert result.returncode == 0
    assert "return resolve_dcp_kv_block_size(spec, dcp)" in path.read_text()
