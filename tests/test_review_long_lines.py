"""One long line degrades its own comment, never the review (issue 27, item 8).

Before, a check whose suggestion is over 65,000 characters, or whose message (quoting it) is over 4,000, was
written by stage one and refused whole by stage two, and single-stage posting sent a body over GitHub's
65,536 characters and got 422: nothing was posted for the pull request. The fake GitHub (127.0.0.1) answers
422 to a body over that limit, as GitHub does; the repositories are real git repositories; every kvlint run
is a child process with a deadline."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from fake_github import BODY_LIMIT, FakeGitHub
from mini_vllm import CONFIG_PATH, MINI_VLLM, write_tree
from review_repos import commit_file, git
from test_review_mini import mini_repo

PROBE = "vllm/distributed/kv_transfer/kv_connector/v1/probe.py"
TOKEN = "ghp_kvlintLongLineToken0123456789"
DEADLINE_S = 120
SOURCE = textwrap.dedent(
    f'''\
    from vllm.v1.kv_cache_interface import MambaSpec


    def enormous(kv_cache_config, names):
        for group in kv_cache_config.kv_cache_groups:
            if isinstance(group.kv_cache_spec, MambaSpec) and names == "{"n" * 70_000}":
                return True
        return False


    def quoted(kv_cache_config):
        return isinstance(kv_cache_config.kv_cache_groups[len("{"q" * 5_000}")].kv_cache_spec, MambaSpec)


    def plain(kv_cache_config):
        return [g for g in kv_cache_config.kv_cache_groups if isinstance(g.kv_cache_spec, MambaSpec)]
    '''
)
PLAIN_SUGGESTION = """\
```suggestion
    return [g for g in kv_cache_config.kv_cache_groups if all(
        isinstance(spec, MambaSpec) for spec in iter_layer_specs(g.kv_cache_spec)
    )]
```"""


def _kvlint(*arguments: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    environment = {"PATH": "/usr/bin:/bin", "HOME": str(cwd), "PYTHONPATH": str(Path(__file__).parent.parent)}
    environment.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "kvlint", *arguments],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=environment,
        timeout=DEADLINE_S,
    )


@pytest.fixture
def github():
    fake = FakeGitHub()
    yield fake
    fake.close()


@pytest.fixture
def repo(tmp_path):
    repo = mini_repo(tmp_path, MINI_VLLM[CONFIG_PATH])
    git(repo, "checkout", "-qb", "pr")
    write_tree(repo, {PROBE: SOURCE})
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "pr: three container-blind checks, two on long lines")
    return repo


def _environment(github: FakeGitHub) -> dict:
    return {"GITHUB_TOKEN": TOKEN, "GITHUB_API_URL": github.url, "GITHUB_REPOSITORY": "o/r"}


def _posted(github: FakeGitHub) -> dict:
    [review] = [r for r in github.of("POST") if r["path"].endswith("/reviews")]
    return review["body"]


def _check_degraded_per_comment(review: dict) -> None:
    """The review is whole: every body within GitHub's limit, the plain suggestion as it is, the long ones degraded."""
    assert len(review["body"]) <= BODY_LIMIT
    lines = SOURCE.splitlines()
    by_function = {}
    for comment in review["comments"]:
        assert len(comment["body"].encode("utf-16-le")) // 2 <= BODY_LIMIT
        if "the import part" in comment["body"]:
            continue
        line = lines[comment["line"] - 1]
        name = "enormous" if "n" * 100 in line else "quoted" if "q" * 100 in line else "plain"
        by_function[name] = comment["body"]
    assert set(by_function) == {"enormous", "quoted", "plain"}
    assert PLAIN_SUGGESTION in by_function["plain"]
    enormous = by_function["enormous"]
    assert "```suggestion" not in enormous
    assert "The suggestion is left out: it is longer than a GitHub comment holds; `kvlint fix " in enormous
    assert "Commit this together with the import suggestion" not in enormous
    quoted = by_function["quoted"]
    assert "shortened; kvlint check shows it whole" in quoted and "q" * 3_000 in quoted
    imports = [c for c in review["comments"] if "the import part" in c["body"]]
    assert all(re.search(r"line (\d+)\.", c["body"]).group(1) != str(_line_of("enormous")) for c in imports)


def _line_of(function: str) -> int:
    marker = {"enormous": "n" * 100, "quoted": "q" * 100}[function]
    return next(number for number, line in enumerate(SOURCE.splitlines(), 1) if marker in line)


def test_single_stage_posts_the_review_with_the_long_comments_degraded(repo, github):
    started = time.monotonic()
    run = _kvlint("review", "--base", "main", "--head", "pr", "--post", "--pr", "7", cwd=repo, env=_environment(github))
    assert run.returncode == 0, run.stderr  # warnings only; the review was posted
    assert "review posted" in run.stderr
    _check_degraded_per_comment(_posted(github))
    assert time.monotonic() - started < DEADLINE_S


def test_both_stages_post_the_review_with_the_long_comments_degraded(repo, github, tmp_path):
    started = time.monotonic()
    stage_one = _kvlint("review", "--base", "main", "--head", "pr", "--exit-zero", "--format", "review-data", cwd=repo)
    assert stage_one.returncode == 0, stage_one.stderr
    saved = tmp_path / "review.json"
    saved.write_text(stage_one.stdout)
    data = json.loads(stage_one.stdout)  # what stage one writes is within stage two's limits
    for comment in data["comments"]:
        assert all(len(f["message"]) <= 4_000 for f in comment["findings"])
        assert comment["suggestion"] is None or len(comment["suggestion"]["text"]) <= 65_000
    stage_two = _kvlint("review", "--payload", str(saved), "--pr", "7", cwd=tmp_path, env=_environment(github))
    assert stage_two.returncode == 0, stage_two.stderr
    two_stage = _posted(github)
    _check_degraded_per_comment(two_stage)
    github.requests.clear()
    github.comments.clear()
    single = _kvlint(
        "review", "--base", "main", "--head", "pr", "--post", "--pr", "7", cwd=repo, env=_environment(github)
    )
    assert single.returncode == 0, single.stderr
    assert [c["body"] for c in _posted(github)["comments"]] == [c["body"] for c in two_stage["comments"]]
    assert time.monotonic() - started < 2 * DEADLINE_S


def test_stage_two_degrades_a_saved_review_whose_bodies_github_would_refuse(repo, github, tmp_path):
    """A saved review within every field limit of stage two whose rendered bodies are still too long (many
    findings of 4,000 characters, each escaped to several times that) is posted degraded, not refused."""
    stage_one = _kvlint("review", "--base", "main", "--head", "pr", "--exit-zero", "--format", "review-data", cwd=repo)
    data = json.loads(stage_one.stdout)
    plain = next(
        c for c in data["comments"] if c["suggestion"] and c["companion_of"] is None and "q" * 100 not in json.dumps(c)
    )
    template = plain["findings"][0]
    plain["findings"] = [
        {**template, "message": "<&>" * 1_333, "fingerprint": f"{template['fingerprint'][:12]}-{i}"}
        for i in range(2, 40)
    ]
    saved = tmp_path / "forged.json"
    saved.write_text(json.dumps(data))
    stage_two = _kvlint("review", "--payload", str(saved), "--pr", "7", cwd=tmp_path, env=_environment(github))
    assert stage_two.returncode == 0, stage_two.stderr
    review = _posted(github)
    assert all(len(c["body"]) <= BODY_LIMIT for c in review["comments"])
    mains = sorted(c["line"] for c in data["comments"] if c["companion_of"] is None)
    assert sorted(c["line"] for c in review["comments"] if "the import part" not in c["body"]) == mains
    [forged] = [c for c in review["comments"] if c["line"] == plain["line"]]
    # Its suggestion made the body too long: left out (with its import part), the comment kept.
    assert "```suggestion" not in forged["body"] and "The suggestion is left out" in forged["body"]


def test_long_names_the_review_could_not_read_keep_its_body_within_the_limit(repo, github, tmp_path):
    """The review's body names the files it could not read: ten names of 20,000 unprintable characters (each
    shown as a 4-character escape) made a body of 800,000 characters, and stage two refused a name over 1,000."""
    for index in range(10):
        commit_file(repo, f"tools/{chr(1) * 20_000}{index}.py", b"x = 1\n")
    single = _kvlint(
        "review", "--base", "main", "--head", "pr", "--post", "--pr", "7", cwd=repo, env=_environment(github)
    )
    assert single.returncode == 0, single.stderr[-300:]
    body = _posted(github)["body"]
    assert len(body) <= BODY_LIMIT and body.count("shortened; kvlint check shows it whole") == 10
    stage_one = _kvlint("review", "--base", "main", "--head", "pr", "--exit-zero", "--format", "review-data", cwd=repo)
    saved = tmp_path / "review.json"
    saved.write_text(stage_one.stdout)
    github.requests.clear()
    github.comments.clear()
    stage_two = _kvlint("review", "--payload", str(saved), "--pr", "7", cwd=tmp_path, env=_environment(github))
    assert stage_two.returncode == 0, stage_two.stderr[-300:]
    assert _posted(github)["body"] == body
