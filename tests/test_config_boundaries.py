"""The configuration is input (a checkout's own `pyproject.toml` when `check` runs on it): one that switches
every rule off is said on stderr, as an `exclude` that leaves nothing is; one nested past what the TOML
parser survives is a one-line configuration error naming the file, never an internal error."""

from __future__ import annotations

import pytest

from tests.kvlint_runner import run_kvlint
from tests.mini_vllm import MINI_VLLM, write_tree


@pytest.fixture
def tree(tmp_path):
    return write_tree(tmp_path / "tree", MINI_VLLM)


def check(tree, settings: str, *more: str):
    (tree / "pyproject.toml").write_text(f"[tool.kvlint]\n{settings}\n", encoding="utf-8")
    return run_kvlint("check", "--no-cache", *more, "vllm", cwd=tree)


@pytest.mark.parametrize(
    ("settings", "said"),
    [
        ('ignore = ["KV"]', "the configuration's `ignore` ({pyproject}) switches every rule off"),
        ("select = []", "the configuration's `select` ({pyproject}) switches every rule off"),
        ('select = ["KV000"]', "the configuration's `select` ({pyproject}) switches every rule but KV000 off"),
        (
            'per-file-ignores = {"*" = ["KV"]}',
            "the configuration's `per-file-ignores` ({pyproject}) switches every rule off",
        ),
        (
            'per-file-ignores = {"*" = ["KV1"]}',
            "the configuration's `per-file-ignores` ({pyproject}) switches every rule but KV000 off",
        ),
    ],
)
def test_a_configuration_that_switches_every_rule_off_says_so(tree, settings, said):
    assert check(tree, "").returncode == 1  # the tree has findings
    result = check(tree, settings)
    line = f"kvlint: {said.format(pyproject=tree / 'pyproject.toml')}: nothing checked"
    assert line in result.stderr.splitlines(), result.stderr
    assert result.returncode == 0 and result.stdout == ""


def test_the_command_line_that_switches_every_rule_off_is_named(tree):
    result = check(tree, "", "--ignore", "KV")
    assert "kvlint: `--ignore` switches every rule off: nothing checked" in result.stderr.splitlines()


@pytest.mark.parametrize("settings", ['ignore = ["KV101"]', 'per-file-ignores = {"vllm/v1/*" = ["KV"]}'])
def test_a_rule_left_on_somewhere_is_not_said(tree, settings):
    result = check(tree, settings)
    assert "switches every rule" not in result.stderr and result.returncode == 1


@pytest.mark.parametrize(
    "nested",
    ["select = " + "[" * 5000 + "]" * 5000, "[tool.other]\nx = " + "{a = " * 5000 + "1" + "}" * 5000],
)
def test_a_configuration_nested_too_deeply_is_one_line_naming_the_file(tree, nested):
    result = check(tree, nested)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"kvlint: error: {tree / 'pyproject.toml'}: invalid TOML: arrays or inline tables nested too deeply to read"
    ], result.stderr
