"""The same folder means the same thing: every command takes the vllm package folder or the folder that holds it."""

from __future__ import annotations

import sys

import pytest
from click.testing import CliRunner

from kvlint.cli import main
from kvlint.commands.verify import verify
from kvlint.verify.run import package_parent
from mini_vllm import MINI_VLLM, write_tree
from test_upstream_tests import make_runner


@pytest.fixture
def tree(tmp_path):
    write_tree(tmp_path / "tree", MINI_VLLM)
    (tmp_path / "tree" / "vllm" / "__init__.py").write_text("raise RuntimeError('imported from this tree')\n")
    return tmp_path / "tree"


def invoke(*arguments: str):
    return CliRunner().invoke(main, list(arguments), catch_exceptions=False)


def test_check_takes_both(tree):
    parent, package = invoke("check", "--no-cache", str(tree)), invoke("check", "--no-cache", str(tree / "vllm"))
    assert parent.exit_code == package.exit_code == 1
    assert " KV103 " in parent.output and parent.output == package.output


def test_paths_takes_both(tree):
    parent, package = invoke("paths", str(tree)), invoke("paths", str(tree / "vllm"))
    assert parent.exit_code == package.exit_code == 0
    assert parent.output.splitlines()[0] == f"kvlint paths: {tree}"
    assert parent.output == package.output


def test_verify_takes_both(tree):
    assert package_parent(tree) == package_parent(tree / "vllm") == tree
    results = [
        make_runner().invoke(verify, ["--vllm", str(folder), "--python", sys.executable])
        for folder in (tree, tree / "vllm")
    ]
    for result in results:
        assert result.exit_code == 2  # the tree's vllm/__init__.py raises: it was the one imported
        assert f"cannot import vLLM from {tree}: RuntimeError: imported from this tree" in result.stderr
    assert results[0].stderr == results[1].stderr


def test_a_folder_named_vllm_without_a_package_is_not_taken_for_one(tmp_path):
    (tmp_path / "vllm").mkdir()
    assert package_parent(tmp_path / "vllm") == tmp_path / "vllm"  # and verify then says it holds no package
