"""A pull request that causes hundreds of findings on lines it does not change (issue 21, item 4): the file
is parsed once to place them all, not once per finding, and they are spread over comments that GitHub
(65,536 characters a body) and stage two (50 findings a comment) both accept, none lost.

Counts, not timings: the test counts the parses placing makes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvlint.review import placement
from kvlint.review.saved import review_from_data
from review_repos import comments, git, review
from test_review_placement import CONNECTOR, INTERFACE

MANY = 300
HELPER = """\

def spec_certifiable_{i}(spec):
    if not isinstance(spec, AttentionSpec):
        return False
    return spec.block_size > {i}
"""


def connector(argument: str) -> str:
    """MANY helpers, each a KV101 when called with a group's spec, all called on one line."""
    calls = " and ".join(f"spec_certifiable_{i}({argument})" for i in range(MANY))
    return (
        "from vllm.v1.kv_cache_interface import AttentionSpec\n\n"
        + "".join(HELPER.format(i=i) for i in range(MANY))
        + "\n\ndef is_parallelism_agnostic(kv_cache_config):\n    return all(\n"
        + f"        {calls}\n"
        + "        for group in kv_cache_config.kv_cache_groups\n"
        + "        for layer_spec in iter_layer_specs(group.kv_cache_spec)\n    )\n"
    )


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    """main: the helpers are called with layer specs; `pr`: with the group's spec, on one changed line, which
    makes each helper's check a KV101 on a line the pull request does not change."""
    repo = tmp_path_factory.mktemp("many") / "repo"
    (repo / "vllm" / "v1").mkdir(parents=True)
    (repo / "vllm" / "v1" / "kv_cache_interface.py").write_text(INTERFACE)
    (repo / CONNECTOR).write_text(connector("layer_spec"))
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    git(repo, "checkout", "-qb", "pr")
    (repo / CONNECTOR).write_text(connector("group.kv_cache_spec"))
    git(repo, "commit", "-qam", "pr: certify each group's spec")
    return repo


def test_hundreds_of_new_findings_are_placed_with_one_parse_of_the_file(repo, monkeypatch):
    getattr(placement, "_outline", None) and placement._outline.cache_clear()  # (absent before issue 21)
    head = connector("group.kv_cache_spec")
    parses: list[str] = []
    real_parse = placement.ast.parse  # the ast module's: what placing parses with, and the rest of kvlint too
    monkeypatch.setattr(placement.ast, "parse", lambda text, *a, **k: parses.append(text) or real_parse(text, *a, **k))
    run = review(repo, "--select", "KV101", "--fail-on", "warning")  # its findings are warnings (unsettled reach)
    assert run.returncode == 1, run.stderr
    posted = comments(run)
    markers = sum(comment["body"].count("<!-- kvlint:KV101") for comment in posted)
    assert markers == MANY, "every finding is in a comment"
    count = sum(text == head for text in parses)
    assert count <= 3, f"the file was parsed {count} times for {MANY} findings placed (once is placing's share)"


def test_the_comments_fit_github_and_stage_two(repo):
    posted = comments(review(repo, "--select", "KV101"))
    assert len(posted) > 1
    assert all(len(comment["body"]) <= 65_536 for comment in posted), max(len(c["body"]) for c in posted)
    data = json.loads(review(repo, "--select", "KV101", "--format", "review-data").stdout)
    saved = review_from_data(data)  # stage two: refused above 50 findings a comment
    assert sum(len(comment.findings) for comment in saved.comments) == MANY
