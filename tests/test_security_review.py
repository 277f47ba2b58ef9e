"""Issue 12 for `kvlint review`: what a hostile pull request can put in the repository changes neither what
kvlint sees nor what it prints, and runs nothing. Each test builds a real git repository in tmp_path."""

from __future__ import annotations

import json
import re
import shutil

import pytest
from review_repos import MODULE, SCALED, comments, commit_file, git, make_repo, review

PR_CODES = {"KV102", "KV103"}


def _codes(run) -> set[str]:
    return {code for comment in comments(run) for code in re.findall(r"kvlint:(KV\d+):", comment["body"])}


@pytest.fixture
def repo(tmp_path):
    return make_repo(tmp_path)


# --- High 1: the pull request never decides how its own diff is read ---------------------------------------


@pytest.mark.parametrize(
    ("attributes_file", "line"),
    [(".gitattributes", "*.py -diff"), (".gitattributes", "*.py binary"), ("vllm/.gitattributes", "*.py binary"), (".gitattributes", "* -text diff=evil")],
)
@pytest.mark.parametrize("mode", ["head", "working-tree"])
def test_attributes_added_by_the_pull_request_hide_nothing_and_run_nothing(repo, tmp_path, attributes_file, line, mode):
    marker = tmp_path / "driver-ran"
    # A runner's own configuration may define drivers; the pull request may only point files at them.
    git(repo, "config", "diff.evil.textconv", f"touch {marker}; cat")
    git(repo, "config", "diff.evil.command", f"touch {marker}; true")
    git(repo, "config", "diff.evil.binary", "true")
    (repo / attributes_file).write_text(line + "\n")
    git(repo, "add", attributes_file)
    git(repo, "commit", "-qm", "pr: attributes")
    run = review(repo, head="pr" if mode == "head" else None)
    assert run.returncode == 1, run.stderr
    assert PR_CODES <= _codes(run), run.stdout
    assert all(c["path"] == MODULE for c in comments(run))
    assert not marker.exists()


def test_working_tree_review_runs_no_clean_filter_the_pull_request_selects(repo, tmp_path):
    (repo / ".gitattributes").write_text("*.py filter=evil\n")
    git(repo, "add", ".gitattributes")
    git(repo, "commit", "-qm", "pr: a filter for every Python file")
    marker = tmp_path / "filter-ran"
    git(repo, "config", "filter.evil.clean", f"touch {marker}; cat")
    git(repo, "config", "filter.evil.smudge", "cat")
    # An uncommitted edit: git would have to clean the file to compare it with the index.
    (repo / MODULE).write_text(SCALED + "\n\ndef more(spec, dcp_size):\n    return spec.block_size * dcp_size\n")
    run = review(repo, head=None)
    assert run.returncode == 1, run.stderr
    assert not marker.exists()
    assert {c["line"] for c in comments(run)} >= {2, 6}  # the committed and the uncommitted change


def test_working_tree_review_reads_files_as_they_are_on_disk(repo):
    """The snapshot kvlint builds is what is on disk: an uncommitted file added with `git add -N` counts, a
    deleted one does not break the review, and the repository's objects are not written to."""
    (repo / "vllm/new.py").write_text("def f(spec, dcp_size):\n    return spec.block_size * dcp_size\n")
    git(repo, "add", "-N", "vllm/new.py")
    objects_before = sorted(p.name for p in (repo / ".git/objects").rglob("*"))
    run = review(repo, head=None)
    assert run.returncode == 1, run.stderr
    assert {c["path"] for c in comments(run)} == {MODULE, "vllm/new.py"}
    assert sorted(p.name for p in (repo / ".git/objects").rglob("*")) == objects_before


def test_a_symlinked_folder_in_the_working_tree_is_not_followed(repo, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "sizing.py").write_text(SCALED)
    shutil.rmtree(repo / "vllm")
    (repo / "vllm").symlink_to(outside)
    run = review(repo, head=None)
    assert run.returncode in (0, 1), run.stderr
    assert f"{MODULE}: under a symbolic link" in run.stderr
    assert comments(run) == []


# --- Low: odd file names ----------------------------------------------------------------------------------


def test_a_path_holding_space_b_slash_is_reviewed(repo):
    odd = "vllm/odd b/sizing b/x.py"
    (repo / odd).parent.mkdir(parents=True)
    (repo / odd).write_text(SCALED)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "pr: an odd folder name")
    for head in ("pr", None):
        run = review(repo, head=head)
        assert run.returncode == 1, run.stderr
        assert {c["path"] for c in comments(run)} == {MODULE, odd}


@pytest.mark.parametrize("mode", ["head", "working-tree"])
def test_a_file_name_with_a_newline_cannot_inject_lines(repo, mode):
    name = "vllm/x\n::error file=a.py::pwned\n.py"
    commit_file(repo, name, SCALED.encode())
    git(repo, "checkout", "-q", "--", ".")
    for output_format in ("github-review", "markdown", "rdjson"):
        run = review(repo, "--format", output_format, head="pr" if mode == "head" else None)
        assert run.returncode == 1, run.stderr
        for line in (run.stdout + run.stderr).splitlines():
            assert not line.startswith("::error"), line
        assert "vllm/x\\n::error file=a.py::pwned\\n.py: an unprintable path" in run.stderr


@pytest.mark.parametrize("mode", ["head", "working-tree"])
def test_a_file_name_that_is_not_utf8_is_skipped_with_a_reason(repo, mode):
    commit_file(repo, b"vllm/caf\xe9.py", SCALED.encode())
    if mode == "working-tree":
        git(repo, "checkout", "-q", "--", ".")
    run = review(repo, head="pr" if mode == "head" else None)
    assert run.returncode == 1, run.stderr
    assert "vllm/caf\\xe9.py: a file name that is not UTF-8" in run.stderr
    assert {c["path"] for c in comments(run)} == {MODULE}
    assert "internal error" not in run.stderr


def test_a_file_name_this_system_cannot_hold_is_skipped_with_a_reason(repo):
    long_name = "vllm/" + "a" * 253 + ".py"  # a 256-byte component: fine in git, too long for Linux
    commit_file(repo, long_name, SCALED.encode())
    run = review(repo)
    assert run.returncode == 1, run.stderr
    assert f"{long_name}: a file name longer than 255 bytes" in run.stderr
    assert {c["path"] for c in comments(run)} == {MODULE}
    assert json.loads(run.stdout)["event"] == "COMMENT"
