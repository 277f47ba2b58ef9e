"""KV101's fix everywhere fixes go, on a miniature vLLM with a Mooncake-like worker check: `fix --diff` (a
patch `git apply` takes), `fix` (compiles, nothing left, a second run changes nothing), SARIF `fixes`, and a
review suggestion on the pull request that adds the check."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from kvlint_runner import run_kvlint  # noqa: E402
from mini_vllm import MINI_VLLM, write_tree  # noqa: E402

WORKER = "vllm/distributed/kv_transfer/kv_connector/v1/mooncake/worker.py"
CHECK = """
from vllm.v1.kv_cache_interface import MambaSpec


def expand(kv_cache_config, block_ids):
    group_specs = kv_cache_config.kv_cache_groups
    return [
        group  # a state group keeps its ids
        if isinstance(group_specs[i].kv_cache_spec, MambaSpec)
        else [block * 2 for block in group]
        for i, group in enumerate(block_ids)
    ]
"""
REWRITTEN = """        if all(
            isinstance(spec, MambaSpec)
            for spec in iter_layer_specs(group_specs[i].kv_cache_spec)
        )
"""


def git(repo: Path, *arguments: str) -> str:
    command = ["git", "-C", str(repo), "-c", "user.email=t@example.com", "-c", "user.name=t", *arguments]
    return subprocess.run(command, check=True, capture_output=True, text=True).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = write_tree(tmp_path / "repo", MINI_VLLM)
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "base")
    write_tree(root, {WORKER: CHECK})
    git(root, "checkout", "-qb", "pr")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "pr: a worker that checks a group spec for MambaSpec")
    return root


def kv101(repo: Path) -> list[dict]:
    run = run_kvlint("check", "--no-cache", "--select", "KV101", "--format", "json", WORKER, cwd=repo)
    return json.loads(run.stdout)


def test_fix_diff_applies_and_the_fix_leaves_nothing(repo):
    [finding] = kv101(repo)
    assert finding["fix"]["applicability"] == "safe"  # no composition mixes Mamba with other layers
    diff = run_kvlint("fix", "--no-cache", "--diff", WORKER, cwd=repo)
    assert diff.stdout.startswith("--- a/"), diff.stderr
    subprocess.run(["git", "apply", "--check", "-"], input=diff.stdout, text=True, cwd=repo, check=True)
    fixed = run_kvlint("fix", "--no-cache", WORKER, cwd=repo)
    assert fixed.returncode == 0, fixed.stderr
    text = (repo / WORKER).read_text()
    assert REWRITTEN in text and "from vllm.v1.kv_cache_interface import MambaSpec, iter_layer_specs\n" in text
    assert "group  # a state group keeps its ids\n" in text  # the comment beside the check is kept
    compile(text, WORKER, "exec")
    subprocess.run(["git", "apply", "-R", "--check", "-"], input=diff.stdout, text=True, cwd=repo, check=True)
    assert kv101(repo) == []
    again = run_kvlint("fix", "--no-cache", "--diff", WORKER, cwd=repo)
    assert again.stdout == ""


def test_sarif_carries_the_fix_as_replacements(repo):
    run = run_kvlint("check", "--no-cache", "--select", "KV101", "--format", "sarif", WORKER, cwd=repo)
    [result] = json.loads(run.stdout)["runs"][0]["results"]
    [fix] = result["fixes"]
    assert "iter_layer_specs" in fix["description"]["text"]
    [change] = fix["artifactChanges"]
    [replacement] = change["replacements"]
    region = replacement["deletedRegion"]
    lines = (repo / WORKER).read_text().splitlines(keepends=True)
    start = sum(len(line) for line in lines[: region["startLine"] - 1]) + region["startColumn"] - 1
    end = sum(len(line) for line in lines[: region["endLine"] - 1]) + region["endColumn"] - 1
    text = "".join(lines)
    assert text[start:end] == "isinstance(group_specs[i].kv_cache_spec, MambaSpec)"
    assert replacement["insertedContent"]["text"] == REWRITTEN.strip().removeprefix("if ")


def test_review_suggests_the_rewrite(repo):
    run = run_kvlint("review", "--base", "main", "--head", "pr", cwd=repo)
    payload = json.loads(run.stdout)
    bodies = [c["body"] for c in payload["comments"] if c["path"] == WORKER]
    suggestions = [
        m.group(2) for b in bodies for m in [re.search(r"^(`{3,})suggestion\n(.*?)\n\1$", b, re.S | re.M)] if m
    ]
    assert any("for spec in iter_layer_specs(group_specs[i].kv_cache_spec)" in s for s in suggestions), bodies
