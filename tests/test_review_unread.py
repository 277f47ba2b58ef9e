"""A pull request's files kvlint does not read do not silence the review (issue 21, item 10).

A fork's pull request adding, under vllm/, a module whose name holds a tab, one whose name is not UTF-8 and
one over 10 MiB made stage one exit 2 ("cross-file analysis incomplete"): the fork-safe workflow's second
stage runs only after a successful first, so the check was red and the bot silent. Now the review lists
what it could not read and why (escaped), says its cross-file findings may be missing, reviews the rest,
and exits by the one table: 1 (as for a finding; 0 with --exit-zero). Stage two accepts the saved review
and renders the same list. `check` still says the index failure and exits 2. Real git repositories.
"""

from __future__ import annotations

import json
import os

import pytest

from kvlint.review.render import summary_body
from kvlint.review.saved import review_from_data, with_limit
from kvlint_runner import run_kvlint, run_kvlint_child
from review_repos import commit_file, git
from test_security_leftovers import RESOLVER_HOME, vllm_repo

BIG = b"x = 1\n" * (11 * 1024 * 1024 // 6)  # 11.0 MiB
UNREAD = [
    ("vllm/a\\tb.py", "an unprintable path"),
    ("vllm/big.py", "too large (11.0 MiB > 10 MiB)"),
    ("vllm/caf\\xe9.py", "a file name that is not UTF-8"),
]


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    """The miniature vLLM's pull request (a KV102 in pkg/buggy.py), plus three modules kvlint does not read."""
    repo = vllm_repo(tmp_path_factory.mktemp("unread"))
    commit_file(repo, "vllm/a\tb.py", b"x = 1\n")
    commit_file(repo, b"vllm/caf\xe9.py", b"x = 1\n")
    commit_file(repo, "vllm/big.py", BIG)
    git(repo, "checkout", "-qf", "pr")
    return repo


def review(repo, *extra: str, head: str | None = "pr"):
    arguments = ("review", "--base", "main", *(["--head", head] if head else []), "--jobs", "1", *extra)
    # The checkout holds an 11 MiB file: read from disk in a child with a deadline and a memory cap.
    return run_kvlint(*arguments, cwd=repo) if head else run_kvlint_child(*arguments, cwd=repo)


def test_stage_one_lists_what_it_could_not_read_reviews_the_rest_and_does_not_exit_2(repo):
    saved = review(repo, "--format", "review-data", "--exit-zero")
    assert saved.returncode == 0, saved.stderr  # what the fork-safe stage one runs: its artifact gets posted
    said = saved.stderr.splitlines()
    assert [line for line in said if line.startswith("kvlint: not read: ")] == [
        f"kvlint: not read: {path}: {why}" for path, why in UNREAD
    ]
    assert not [line for line in said if "error" in line], saved.stderr
    data = json.loads(saved.stdout)
    assert data["summary"]["not_read"] == [{"path": path, "why": why} for path, why in UNREAD]
    assert data["summary"]["analysis_unread"] == 3 and data["summary"]["incomplete"] == 0
    assert [c["path"] for c in data["comments"]] == ["pkg/buggy.py", "pkg/buggy.py"], "the rest is reviewed"
    # Without --exit-zero: 1, as for a finding, never 2; --fail-on does not hide files left unread.
    plain = review(repo, "--fail-on", "error")
    assert plain.returncode == 1, plain.stderr
    body = json.loads(plain.stdout)["body"]
    assert "Not read: 3 path(s)" in body
    assert "- `vllm/a\\tb.py`: an unprintable path" in body  # the tab escaped: no line, cell or code span breaks
    assert "- `vllm/caf\\xe9.py`: a file name that is not UTF-8" in body
    assert "- `vllm/big.py`: too large (11.0 MiB &gt; 10 MiB)" in body
    assert "**The cross-file analysis did not read 3 of these file(s)**" in body
    assert "\t" not in body


def test_stage_two_accepts_the_saved_review_and_renders_the_same_list(repo):
    single = json.loads(review(repo).stdout)["body"]
    saved = review_from_data(json.loads(review(repo, "--format", "review-data").stdout))
    summary, comments = with_limit(saved, 50)
    assert summary_body(summary) == single
    assert len(comments) == 2


@pytest.mark.parametrize(
    "not_read",
    [
        [{"path": "vllm/a\tb.py", "why": "x"}],  # a control character: stage one escapes every name
        [{"path": "vllm/a.py", "why": "x\n**y**"}],
        [{"path": "vllm/a.py"}],
        [{"path": f"vllm/{i}.py", "why": "x"} for i in range(11)],  # more than stage one writes
        "vllm/a.py",
    ],
)
def test_stage_two_refuses_a_list_stage_one_would_not_write(not_read):
    data = {"kvlint_review": 1, "commit": None, "summary": {"refused": 1, "not_read": not_read}, "comments": []}
    with pytest.raises(Exception, match="summary.not_read"):
        review_from_data(data)


def test_the_working_tree_review_lists_them_too(repo):
    run = review(repo, "--format", "review-data", head=None)
    assert run.returncode == 1, run.stderr
    assert "kvlint: not read: vllm/big.py: too large (11.0 MiB > 10 MiB)" in run.stderr.splitlines()
    assert json.loads(run.stdout)["summary"]["analysis_unread"] == 1  # the index reads the other two from disk


def test_check_still_says_the_index_failure_and_exits_2(repo):
    run = run_kvlint_child("check", "--no-cache", ".", cwd=repo)
    assert run.returncode == 2, run.stderr
    assert "kvlint: error: cross-file analysis incomplete: vllm/big.py not read: too large (11.0 MiB > 10 MiB)" in (
        run.stderr.splitlines()
    )


def test_an_analysis_that_fails_for_another_reason_is_still_an_error(tmp_path, monkeypatch):
    """A file the index cannot read for a reason of the system's (not what the file is) is exit 2, said in
    the body as before. Root reads any file, so the system's refusal is injected where the index reads."""
    import kvlint.analysis.tree_files as tree_files

    repo = vllm_repo(tmp_path)
    real = tree_files.read_regular_file

    def refuse_the_resolver(path, *args, **kwargs):
        if os.fspath(path).endswith(RESOLVER_HOME):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(tree_files, "read_regular_file", refuse_the_resolver)
    run = review(repo, "--exit-zero")
    assert run.returncode == 2, run.stderr
    assert f"kvlint: error: cross-file analysis incomplete: {RESOLVER_HOME} not read: Permission denied" in (
        run.stderr.splitlines()
    )
    assert "**The cross-file analysis is incomplete**: 1 file(s) or step(s)" in json.loads(run.stdout)["body"]
