"""Stage two posts only to the pull request stage one reviewed: the head commit, and also the head branch and
repository of the `workflow_run` (issue 21, item 7). Before, a pull request whose head was the same commit,
from another branch or repository, got the review."""

from __future__ import annotations

import json

import pytest

from fake_github import FakeGitHub
from review_repos import git, make_repo
from test_review import TOKEN, _kvlint


@pytest.fixture
def github():
    fake = FakeGitHub()
    yield fake
    fake.close()


def test_stage_two_ties_the_pull_request_to_the_runs_head_branch_and_repository(tmp_path, github):
    repo = make_repo(tmp_path)
    stage_one = _kvlint("review", "--base", "main", "--head", "pr", "--exit-zero", "--format", "review-data", cwd=repo)
    assert stage_one.returncode == 0, stage_one.stderr
    saved = tmp_path / "review.json"
    saved.write_text(stage_one.stdout)
    head = git(repo, "rev-parse", "pr")
    event = tmp_path / "event.json"
    run = {"head_sha": head, "head_branch": "pr", "head_repository": {"full_name": "fork/r"}, "pull_requests": []}
    event.write_text(json.dumps({"workflow_run": run}))
    environment = {
        "GITHUB_TOKEN": TOKEN,
        "GITHUB_API_URL": github.url,
        "GITHUB_REPOSITORY": "o/r",
        "GITHUB_EVENT_PATH": str(event),
    }
    github.head_sha = head
    for ref, repository, what in (("other", "fork/r", "branch (pr)"), ("pr", "someone/r", "repository (fork/r)")):
        github.head_ref, github.head_repository = ref, repository
        refused = _kvlint("review", "--payload", str(saved), "--pr", "7", cwd=tmp_path, env=environment)
        assert refused.returncode == 2 and f"is not from the reviewed {what}: not posting" in refused.stderr
        assert github.of("POST") == []
    github.head_ref, github.head_repository = "pr", "fork/r"
    posted = _kvlint("review", "--payload", str(saved), "--pr", "7", cwd=tmp_path, env=environment)
    assert posted.returncode == 0, posted.stderr
    assert len(github.of("POST")) == 1
