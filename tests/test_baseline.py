"""`kvlint check --baseline-commit REF`: only the root causes REF does not have, on real git repositories.

A finding is matched by rule, file, function and flagged code (kvlint.scan.baseline), never by its line: a
comment edited above old findings or a function moved leaves them old; a new defect, a defect the change
causes in a file it does not touch, and a new finding folded into an old root cause are new.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvlint.scan.baseline import file_code
from mini_vllm import CONFIG_PATH, MINI_VLLM, write_tree
from review_repos import git, kvlint

MODULE = "pkg/sizing.py"
OLD = """\
# Block sizes for the offloading connector.


def tokens_per_block(group, dcp_size):
    return group.kv_cache_spec.block_size * dcp_size


def blocks_for(spec, dcp):
    return spec.block_size * dcp
"""
NEW_DEFECT = """

def tokens_for_offload(group, parallel_config):
    return group.kv_cache_spec.block_size * parallel_config.decode_context_parallel_size
"""


@pytest.fixture
def repo(tmp_path) -> Path:
    """`main` holds a module with two old root causes, committed; the working tree is what a test makes it."""
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / MODULE).write_text(OLD)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "old findings")
    return repo


def check(repo: Path, *extra: str, ref: str = "HEAD"):
    return kvlint("check", "pkg", "--quiet", "--baseline-commit", ref, *extra, cwd=repo)


def test_a_comment_edit_in_a_file_with_old_findings_exits_0(repo):
    (repo / MODULE).write_text(OLD.replace("# Block sizes", "# The block sizes"))
    assert kvlint("check", "pkg", "--quiet", cwd=repo).returncode == 1  # the old findings are there
    run = check(repo)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout == ""
    assert run.stderr.strip() == "kvlint: 1 files checked, no findings; 2 finding(s) present at HEAD not shown."


def test_a_new_finding_exits_1_and_is_the_only_one_reported(repo):
    (repo / MODULE).write_text(OLD + NEW_DEFECT)
    run = check(repo, "--output-format", "concise", ref="main")
    assert run.returncode == 1
    [line] = run.stdout.splitlines()
    assert line.startswith(f"{MODULE}:12:1: KV103") and "tokens_for_offload" in line
    assert run.stderr.strip().endswith("; 2 finding(s) present at main not shown.")


def test_json_and_sarif_are_filtered_alike(repo):
    (repo / MODULE).write_text(OLD + NEW_DEFECT)
    reported = json.loads(check(repo, "--output-format", "json").stdout)
    assert [(f["code"], f["line"]) for f in reported] == [("KV103", 12)]
    sarif = json.loads(check(repo, "--output-format", "sarif").stdout)
    results = sarif["runs"][0]["results"]
    assert [(r["ruleId"], r["locations"][0]["physicalLocation"]["region"]["startLine"]) for r in results] == [
        ("KV103", 12)
    ]


def test_a_moved_function_keeps_its_old_finding_old(repo):
    """Moved below the other, documented, commented, its expression reflowed in parentheses: the same code."""
    moved = """\
# Block sizes for the offloading connector.


def blocks_for(spec, dcp):
    return spec.block_size * dcp


def tokens_per_block(group, dcp_size):
    \"\"\"Tokens in one block of this group.\"\"\"
    # scaled by hand, as it always was
    return (
        group.kv_cache_spec.block_size
        * dcp_size
    )
"""
    (repo / MODULE).write_text(moved)
    run = check(repo)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "2 finding(s) present at HEAD not shown" in run.stderr


def test_a_renamed_file_keeps_its_old_findings_old_and_a_copy_does_not(repo):
    git(repo, "mv", MODULE, "pkg/block_sizes.py")
    assert check(repo).returncode == 0
    (repo / "pkg" / "copy.py").write_text(OLD)  # a second copy of the old defects is two new ones
    run = check(repo, "--output-format", "concise")
    assert run.returncode == 1
    assert sorted(line.split(":")[0] for line in run.stdout.splitlines()) == ["pkg/copy.py", "pkg/copy.py"]


def test_a_change_to_the_flagged_code_is_new(repo):
    """`blocks_for` scales by another name now: its finding (a warning) is new, and shown."""
    (repo / MODULE).write_text(OLD.replace("dcp):", "dcp_world_size):").replace("* dcp\n", "* dcp_world_size\n"))
    run = check(repo, "--output-format", "concise")
    assert run.returncode == 0  # a warning does not fail the run
    assert [line.split(": ")[1] for line in run.stdout.splitlines()] == ["KV102 warning"]
    assert "1 finding(s) present at HEAD not shown" in run.stderr


def test_a_finding_a_change_causes_in_a_file_it_does_not_touch_is_new(tmp_path):
    """REF: the resolver scales every kind, so the offloading config's unconditional scaling only restates it.
    The change gates the resolver; the config (unchanged) now diverges from it: its root cause is new."""
    repo = write_tree(tmp_path / "repo", MINI_VLLM)
    resolver = repo / "vllm/v1/core/kv_cache_utils.py"
    gate = "if len(layer_specs) > 0 and all(isinstance(s, AttentionSpec) for s in layer_specs):"
    resolver.write_text(resolver.read_text().replace(gate, "if True:"))
    (repo / CONFIG_PATH).write_text(
        "def build_offloading_config(vllm_config, kv_cache_config):\n"
        "    dcp = vllm_config.parallel_config.decode_context_parallel_size\n"
        "    return [group.kv_cache_spec.block_size * dcp for group in kv_cache_config.kv_cache_groups]\n"
    )
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "the resolver scales every kind")
    config_folder = str(Path(CONFIG_PATH).parent)
    unchanged = kvlint("check", config_folder, "-q", "--baseline-commit", "HEAD", cwd=repo)
    assert unchanged.returncode == 0 and "1 finding(s) present at HEAD not shown" in unchanged.stderr
    resolver.write_text(resolver.read_text().replace("if True:", gate))
    run = kvlint("check", config_folder, "-q", "--output-format", "json", "--baseline-commit", "HEAD", cwd=repo)
    assert run.returncode == 1
    [finding] = json.loads(run.stdout)
    assert finding["path"] == CONFIG_PATH and finding["severity"] == "error"


def test_before_the_first_commit_every_finding_is_new(tmp_path):
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / MODULE).write_text(OLD)
    git(repo, "init", "-q")
    run = check(repo)
    assert run.returncode == 1
    assert "0 finding(s) present at HEAD not shown" in run.stderr


def test_refs_tree_is_read_without_hooks_or_filters(repo, tmp_path):
    """REF's blobs come through `git cat-file` and a rename through the review's snapshot (`hash-object
    --no-filters`): a filter or hook the repository configures never runs."""
    (repo / ".gitattributes").write_text("*.py filter=evil\n")
    git(repo, "add", ".gitattributes")
    git(repo, "commit", "-qm", "a filter")
    marker = tmp_path / "ran"
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    for name in ("post-checkout", "post-index-change", "reference-transaction", "fsmonitor-watchman"):
        (hooks / name).write_text(f"#!/bin/sh\ntouch {marker}\n")
        (hooks / name).chmod(0o755)
    git(repo, "config", "core.hooksPath", str(hooks))
    git(repo, "config", "filter.evil.smudge", f"touch {marker}; cat")
    git(repo, "config", "filter.evil.clean", f"touch {marker}; cat")
    git(repo, "config", "filter.evil.required", "true")
    (repo / MODULE).rename(repo / "pkg" / "moved.py")  # a file missing at REF: the rename is looked for
    git(repo, "rm", "-q", "--cached", MODULE)
    git(repo, "update-index", "--add", "--info-only", "pkg/moved.py")
    marker.unlink(missing_ok=True)
    run = check(repo)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "2 finding(s) present at HEAD not shown" in run.stderr
    assert not marker.exists()


@pytest.mark.parametrize(
    ("ref", "in_repo", "said"),
    [
        ("no-such-branch", True, "kvlint: error: unknown git revision 'no-such-branch'"),
        ("--output=/tmp/x", True, "kvlint: error: '--output=/tmp/x' is not a git revision"),
        ("HEAD", False, "kvlint: error: {folder}/pkg: not inside a git checkout"),
    ],
)
def test_a_bad_ref_or_place_is_one_line_and_exit_2(repo, tmp_path, ref, in_repo, said):
    folder = repo if in_repo else tmp_path / "elsewhere"
    if not in_repo:
        (folder / "pkg").mkdir(parents=True)
        (folder / MODULE).write_text(OLD)
    run = check(folder, ref=ref)
    assert run.returncode == 2
    assert run.stdout == ""
    [line] = run.stderr.splitlines()
    assert line.startswith(said.format(folder=folder)), line


def test_a_missing_path_is_said_before_git_is_asked(repo):
    run = kvlint("check", "nowhere.py", "--baseline-commit", "HEAD", cwd=repo.parent)
    assert (run.returncode, run.stderr) == (2, "kvlint: error: nowhere.py: no such file or directory\n")


def test_a_release_has_no_commit_to_compare_with(repo):
    run = kvlint("check", "--vllm-release", "0.29.0", "--baseline-commit", "HEAD", cwd=repo)
    assert run.returncode == 2
    assert run.stderr.startswith(
        "kvlint: error: --baseline-commit compares with a git commit: give PATHs, not --vllm-release"
    )


@pytest.mark.parametrize(
    ("before", "after", "same"),
    [
        ("x = a * b  # scaled\n", "x = (\n    a\n    * b\n)\n", True),
        ("def f(a):\n    return a * 2\n", 'def f(a):\n    """Doc."""\n    # why\n    return a * 2\n', True),
        ("x = a * b\n", "x = a * c\n", False),
        ("x = a * b\n", "x = b * a\n", False),
    ],
)
def test_the_flagged_code_is_read_without_its_layout(before, after, same):
    def code(text: str) -> str:
        lines = text.splitlines()
        return file_code(text.encode()).code_in((1, 0), (len(lines), len(lines[-1])))

    assert (code(before) == code(after)) is same


def test_code_that_is_not_whole_is_compared_by_its_tokens():
    """A flagged range that is not code alone (an `if` header) is read as tokens, its comment left out; a file
    that does not parse has no function to name."""
    commented, plain = file_code(b"if a:  # why\n    pass\n"), file_code(b"if a:\n    x = 1\n")
    assert commented.code_in((1, 0), (1, 12)) == plain.code_in((1, 0), (1, 5)) == "if a :"
    broken = file_code(b"def f(:\n    return a * b\n")
    assert broken.function_at(2) == ""
