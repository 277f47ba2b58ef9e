"""One exit-code table for every command (kvlint.engine.summary): `check` and `review` of the same pull request
exit alike under the base's `fail-on`, and `--fail-on` on the command line overrides it for both."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvlint.engine.summary import EXIT_CLEAN, EXIT_ERROR, EXIT_FINDINGS, exit_code
from review_repos import git, kvlint, review

# Alone in its tree (no resolver to compare with), the hand scaling is one KV102 warning, nothing more.
WARNED = "def span(spec, dcp):\n    return spec.block_size * dcp\n"
CLEAN = "def span(spec, dcp):\n    return spec.block_size\n"
MODULE = "vllm/span.py"


def pull_request(root: Path, fail_on: str) -> Path:
    """`main`: a clean module and `fail-on = FAIL_ON`; `pr` (checked out): the module gains one KV102 warning."""
    repo = root / "repo"
    (repo / "vllm").mkdir(parents=True)
    (repo / MODULE).write_text(CLEAN)
    (repo / "pyproject.toml").write_text(f'[tool.kvlint]\nfail-on = "{fail_on}"\n')
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    git(repo, "checkout", "-qb", "pr")
    (repo / MODULE).write_text(WARNED)
    git(repo, "commit", "-qam", "pr: scale by hand")
    return repo


def check(repo: Path, *extra: str):
    return kvlint("check", "--no-cache", *extra, "vllm", cwd=repo)


def in_diff(run) -> list[tuple[str, str]]:
    return [(c["path"], c["body"]) for c in json.loads(run.stdout)["comments"]]


def test_a_warning_passes_check_and_review_under_fail_on_error(tmp_path):
    repo = pull_request(tmp_path, "error")
    checked = check(repo)
    assert checked.returncode == EXIT_CLEAN, checked.stderr
    assert "KV102 warning:" in checked.stdout and "none fails the run (--fail-on error)" in checked.stderr
    reviewed = review(repo)
    assert reviewed.returncode == EXIT_CLEAN, reviewed.stderr
    # The warning is still reviewed: it does not fail the run, it is not dropped.
    [(path, body)] = in_diff(reviewed)
    assert path == MODULE and "KV102" in body and "(warning)" in body
    assert (
        "kvlint: 1 finding(s) on changed lines in 1 file(s); none fails the run (--fail-on error)." in reviewed.stderr
    )


def test_fail_on_warning_fails_both_from_the_command_line(tmp_path):
    repo = pull_request(tmp_path, "error")
    assert check(repo, "--fail-on", "warning").returncode == EXIT_FINDINGS
    reviewed = review(repo, "--fail-on", "warning")
    assert reviewed.returncode == EXIT_FINDINGS, reviewed.stderr
    assert "none fails the run" not in reviewed.stderr
    assert review(repo, "--fail-on", "warning", "--exit-zero").returncode == EXIT_CLEAN


def test_fail_on_warning_in_the_base_fails_both_and_the_command_line_wins(tmp_path):
    repo = pull_request(tmp_path, "warning")
    assert check(repo).returncode == EXIT_FINDINGS
    assert review(repo).returncode == EXIT_FINDINGS
    assert check(repo, "--fail-on", "error").returncode == EXIT_CLEAN
    assert review(repo, "--fail-on", "error").returncode == EXIT_CLEAN


def test_a_pull_request_cannot_lower_the_bar_for_itself(tmp_path):
    """The review reads the base revision's configuration: a pull request that says `fail-on = "error"` in its
    own pyproject.toml still fails where the base says warning."""
    repo = pull_request(tmp_path, "warning")
    (repo / "pyproject.toml").write_text('[tool.kvlint]\nfail-on = "error"\n')
    git(repo, "commit", "-qam", "pr: lower the bar")
    assert review(repo).returncode == EXIT_FINDINGS


def test_a_bad_fail_on_is_a_usage_error_in_review(tmp_path):
    repo = pull_request(tmp_path, "error")
    run = review(repo, "--fail-on", "fatal")
    assert run.returncode == EXIT_ERROR and "Invalid value for '--fail-on'" in run.stderr


@pytest.mark.parametrize(
    ("failed", "exit_zero", "error", "expected"),
    [
        ([], False, False, EXIT_CLEAN),
        (["a finding"], False, False, EXIT_FINDINGS),
        (True, False, False, EXIT_FINDINGS),
        (["a finding"], True, False, EXIT_CLEAN),
        ([], False, True, EXIT_ERROR),
        (["a finding"], True, True, EXIT_ERROR),  # an incomplete analysis is an error whatever --exit-zero says
    ],
)
def test_the_table(failed, exit_zero, error, expected):
    assert exit_code(failed, exit_zero=exit_zero, error=error) == expected
