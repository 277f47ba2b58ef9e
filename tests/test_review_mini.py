"""`kvlint review` in the fast loop, on small real git repositories: the suggestions a review offers
(kvlint.review.suggestions), the findings a change to the resolver causes in an untouched connector
(kvlint.review.crossfile), and the second stage's guard on the head it posts for. The same on real releases:
tests/test_review.py (slow)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from fake_github import FakeGitHub
from mini_vllm import CONFIG_PATH, MINI_VLLM, write_tree
from review_repos import git, kvlint, make_repo

UTILS = "vllm/v1/core/kv_cache_utils.py"
# The connector as a fixed tree has it: through the shared resolver.
RESOLVED_CONFIG = """
    from vllm.v1.core.kv_cache_utils import resolve_dcp_kv_block_size

    def build_offloading_config(vllm_config, kv_cache_config):
        dcp = vllm_config.parallel_config.decode_context_parallel_size
        return [
            resolve_dcp_kv_block_size(group.kv_cache_spec, dcp)
            for group in kv_cache_config.kv_cache_groups
        ]
    """
GATE = "isinstance(s, AttentionSpec)"
TOKEN = "ghp_kvlintMiniToken0123456789"


def mini_repo(root: Path, config: str) -> Path:
    """`main`: the miniature vLLM with `config` as its offloading connector."""
    repo = write_tree(root / "repo", {**MINI_VLLM, CONFIG_PATH: config})
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    return repo


def branch(repo: Path, name: str, files: dict[str, str], start: str = "main") -> None:
    git(repo, "checkout", "-qb", name, start)
    write_tree(repo, files)
    git(repo, "commit", "-qam", name)


def review_json(repo: Path, head: str, *extra: str):
    run = kvlint("review", "--base", "main", "--head", head, *extra, cwd=repo)
    return run, json.loads(run.stdout) if run.stdout else None


def apply_suggestions(text: str, comments: list[dict]) -> str:
    """The file as GitHub leaves it once every suggestion is committed (each replaces its comment's lines)."""
    lines = text.splitlines(keepends=True)
    blocks = []
    for comment in comments:
        match = re.search(r"```suggestion\n(.*?)```", comment["body"], re.S)
        if match:
            blocks.append((comment.get("start_line") or comment["line"], comment["line"], match.group(1)))
    for first, last, replacement in sorted(blocks, reverse=True):
        lines[first - 1 : last] = replacement.splitlines(keepends=True)
    return "".join(lines)


# --- suggestions ------------------------------------------------------------------------------------------


def test_committing_every_suggestion_gives_what_kvlint_fix_writes(tmp_path):
    """A pull request that scales by hand where the base called the resolver: the review's suggestions (the
    edit, and the import in a comment of its own) together are exactly `kvlint fix`'s rewrite."""
    repo = mini_repo(tmp_path, RESOLVED_CONFIG)
    branch(repo, "pr", {CONFIG_PATH: MINI_VLLM[CONFIG_PATH]})
    run, payload = review_json(repo, "pr")
    assert run.returncode == 1, run.stderr
    comments = payload["comments"]
    assert {c["path"] for c in comments} == {CONFIG_PATH}
    suggested = [c for c in comments if "```suggestion" in c["body"]]
    assert len(suggested) == 2 and any("+imports" in c["body"] for c in suggested)
    fixed = tmp_path / "fixed"
    shutil.copytree(repo, fixed, ignore=shutil.ignore_patterns(".git"))
    assert kvlint("fix", "--no-cache", str(fixed / CONFIG_PATH), cwd=fixed).returncode == 0
    head_text = (repo / CONFIG_PATH).read_text()
    after = apply_suggestions(head_text, comments)
    assert after != head_text
    assert after == (fixed / CONFIG_PATH).read_text()
    assert "resolve_dcp_kv_block_size(group.kv_cache_spec, dcp)" in after


def test_a_fix_whose_import_is_outside_the_diff_says_so_in_its_comment(tmp_path):
    """The base already imports something else at the top; the pull request changes only the scaling line:
    the import's line is not in the diff, so the suggestion says what else the fix needs."""
    hand_written = MINI_VLLM[CONFIG_PATH]
    repo = mini_repo(tmp_path, hand_written.replace("block_size * (dcp", "block_size * (1"))
    branch(repo, "pr", {CONFIG_PATH: hand_written})
    run, payload = review_json(repo, "pr")
    assert run.returncode == 1, run.stderr
    bodies = [c["body"] for c in payload["comments"]]
    assert any("```suggestion" in body and "resolve_dcp_kv_block_size(" in body for body in bodies), bodies
    assert any("`from vllm.v1.core.kv_cache_utils import resolve_dcp_kv_block_size`" in body for body in bodies)


# --- cross-file: a change to the resolver -----------------------------------------------------------------


@pytest.fixture
def resolver_repo(tmp_path):
    """`main`: the connector scales by hand (as vLLM 0.29.0 did); `narrow`: the resolver shards MLA only;
    `doc`: a comment added to the resolver."""
    repo = mini_repo(tmp_path, MINI_VLLM[CONFIG_PATH])
    utils = MINI_VLLM[UTILS]
    assert utils.count(GATE) == 1
    narrowed = utils.replace(GATE, "isinstance(s, MLAAttentionSpec)").replace(
        "import AttentionSpec,", "import AttentionSpec, MLAAttentionSpec,"
    )
    branch(repo, "narrow", {UTILS: narrowed})
    branch(
        repo,
        "doc",
        {UTILS: utils.replace("            if len", "            # every layer must shard\n            if len")},
    )
    return repo


def test_narrowing_the_resolver_reports_the_untouched_connector_on_the_resolver(resolver_repo):
    run, payload = review_json(resolver_repo, "narrow")
    assert run.returncode == 1, run.stderr
    [comment] = payload["comments"]
    assert comment["path"] == UTILS  # on the changed resolver, not on the connector the pull request left alone
    changed = git(resolver_repo, "diff", "-U0", "main", "narrow", "--", UTILS)
    added = {
        int(start) + offset
        for start, count in re.findall(r"^@@ -\S+ \+(\d+)(?:,(\d+))? @@", changed, re.M)
        for offset in range(int(count or 1))
    }
    assert comment["line"] in added
    assert f"{CONFIG_PATH}:6" in comment["body"] and "shared resolver" in comment["body"]


def test_a_resolver_edit_that_decides_the_same_reports_nothing_old(resolver_repo):
    """The connector's divergences stand in the base already: a comment in the resolver brings none new."""
    run, payload = review_json(resolver_repo, "doc")
    assert run.returncode == 0, run.stderr
    assert payload["comments"] == []


# --- the second stage posts only for the head it reviewed -------------------------------------------------


@pytest.fixture
def github():
    fake = FakeGitHub()
    yield fake
    fake.close()


def test_stage_two_posts_the_saved_review_only_for_the_head_it_reviewed(tmp_path, github):
    repo = make_repo(tmp_path)
    head = git(repo, "rev-parse", "pr")
    stage_one = kvlint("review", "--base", "main", "--head", "pr", "--exit-zero", "--format", "review-data", cwd=repo)
    assert stage_one.returncode == 0, stage_one.stderr
    saved = json.loads(stage_one.stdout)
    assert saved["commit"] == head
    rendered = kvlint("review", "--base", "main", "--head", "pr", "--exit-zero", cwd=repo)
    # Stage two runs in the workflow_run that stage one's run started: its event names the reviewed head.
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"workflow_run": {"head_sha": head, "pull_requests": []}}))
    environment = {
        "GITHUB_TOKEN": TOKEN,
        "GITHUB_API_URL": github.url,
        "GITHUB_REPOSITORY": "o/r",
        "GITHUB_EVENT_PATH": str(event),
    }

    def stage_two(document: dict):
        path = tmp_path / "saved.json"
        path.write_text(json.dumps(document))
        return kvlint("review", "--payload", str(path), "--pr", "7", cwd=tmp_path, env=environment)

    github.head_sha = "0" * 40  # the pull request moved on since stage one ran
    moved = stage_two(saved)
    assert moved.returncode == 2 and "not posting" in moved.stderr, moved.stderr
    github.head_sha = head
    forged = stage_two({**saved, "commit": "1" * 40})  # a saved review that claims another commit
    assert forged.returncode == 2 and "not posting" in forged.stderr, forged.stderr
    assert github.of("POST") == [] and github.of("DELETE") == []
    posted = stage_two(saved)
    assert posted.returncode == 0, posted.stderr
    [review] = github.of("POST")
    assert review["body"] == json.loads(rendered.stdout)  # what stage two renders is what one stage would post
    assert TOKEN not in moved.stderr + forged.stderr + posted.stderr
