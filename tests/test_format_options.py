"""One name for the output format in every command (issue 29, item 7): `--output-format` everywhere, and
`--format` still taking every value `--output-format` takes."""

from __future__ import annotations

import json

import pytest

from kvlint_runner import run_kvlint
from mini_vllm import MINI_VLLM, write_tree


@pytest.fixture
def tree(tmp_path):
    return write_tree(tmp_path / "tree", MINI_VLLM)


@pytest.mark.parametrize("name", ["full", "concise", "json"])
def test_check_format_takes_every_output_format(tree, name):
    by_new = run_kvlint("check", "--no-cache", "--output-format", name, ".", cwd=tree)
    by_old = run_kvlint("check", "--no-cache", "--format", name, ".", cwd=tree)
    assert by_old.returncode == by_new.returncode == 1, by_old.stderr
    assert by_old.stdout == by_new.stdout


def test_paths_takes_output_format(tree):
    by_new = run_kvlint("paths", "--output-format", "json", ".", cwd=tree)
    by_old = run_kvlint("paths", "--format", "json", ".", cwd=tree)
    assert by_new.returncode == 0, by_new.stderr
    assert json.loads(by_new.stdout) == json.loads(by_old.stdout)


def test_containers_takes_output_format(tree):
    # the miniature tree has no model registry: the same one-line answer by either name, not a usage error
    by_new = run_kvlint("containers", "--output-format", "json", ".", cwd=tree)
    by_old = run_kvlint("containers", "--format", "json", ".", cwd=tree)
    assert (by_new.returncode, by_new.stderr) == (by_old.returncode, by_old.stderr)
    assert "no model registry found" in by_new.stderr
