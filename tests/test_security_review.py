"""Issue 12 for `kvlint review`: what a hostile pull request can put in the repository changes neither what
kvlint sees nor what it prints, and runs nothing. Each test builds a real git repository in tmp_path."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from review_repos import (
    MODULE,
    SCALED,
    comments,
    commit_file,
    git,
    kvlint,
    make_repo,
    review,
)

PR_CODES = {"KV102", "KV103"}


def _codes(run) -> set[str]:
    """The rules the comments report: each comment's findings (its markers) and their related locations."""
    found = set()
    for comment in comments(run):
        found.update(re.findall(r"kvlint:(KV\d+):", comment["body"]))
        found.update(re.findall(r"^- `[^`\n]*` line \d+, (KV\d+):", comment["body"], re.MULTILINE))
    return found


@pytest.fixture
def repo(tmp_path):
    return make_repo(tmp_path)


# --- High 1: the pull request never decides how its own diff is read ---------------------------------------


@pytest.mark.parametrize(
    ("attributes_file", "line"),
    [
        (".gitattributes", "*.py -diff"),
        (".gitattributes", "*.py binary"),
        ("vllm/.gitattributes", "*.py binary"),
        (".gitattributes", "* -text diff=evil"),
    ],
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


def test_hooks_and_filters_never_run_in_head_mode(repo, tmp_path):
    (repo / ".gitattributes").write_text("*.py filter=evil\n")
    git(repo, "add", ".gitattributes")
    git(repo, "commit", "-qm", "pr: a filter")
    marker = tmp_path / "ran"
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    for name in ("post-checkout", "post-index-change", "pre-commit", "reference-transaction", "fsmonitor-watchman"):
        (hooks / name).write_text(f"#!/bin/sh\ntouch {marker}\n")
        (hooks / name).chmod(0o755)
    git(repo, "config", "core.hooksPath", str(hooks))
    git(repo, "config", "filter.evil.smudge", f"touch {marker}; cat")
    git(repo, "config", "filter.evil.clean", f"touch {marker}; cat")
    run = review(repo)
    assert run.returncode == 1, run.stderr
    assert not marker.exists()


# --- What held up: refs, configuration ---------------------------------------------------------------------


def test_option_like_revisions_are_refused(repo):
    for ref in ("--output=/tmp/kvlint-pwned", "-p"):
        run = kvlint("review", f"--base={ref}", cwd=repo)
        assert run.returncode == 2
        assert "is not a git revision" in run.stderr.strip().splitlines()[-1]


def test_configuration_comes_from_the_base_revision(repo):
    (repo / "pyproject.toml").write_text('[tool.kvlint]\nignore = ["KV1"]\nexclude = ["vllm"]\n')
    git(repo, "add", "pyproject.toml")
    git(repo, "commit", "-qm", "pr: switch kvlint off")
    for head in ("pr", None):
        run = review(repo, head=head)
        assert run.returncode == 1, run.stderr
        assert PR_CODES <= _codes(run)


# --- Medium 6: the action runs no Python from the checkout -------------------------------------------------


def _action_steps() -> list[dict]:
    import yaml

    return yaml.safe_load((Path(__file__).resolve().parents[1] / "action.yml").read_text())["runs"]["steps"]


def test_every_python_in_the_action_runs_isolated_outside_the_checkout():
    scripts = [step for step in _action_steps() if "run" in step]
    calls = [line for step in scripts for line in re.findall(r"(?:^|[\s(=])python3?\b[^\n]*", step["run"])]
    assert calls and all(re.search(r"python3? -I ", call) for call in calls), calls
    assert "kvlint review" not in " ".join(s["run"] for s in scripts).replace(
        "-m kvlint review", ""
    )  # no console script
    install = next(step for step in scripts if "pip install" in step["run"])
    assert install["working-directory"] == "${{ runner.temp }}"


def test_a_pip_package_in_the_checkout_does_not_run_instead_of_pip(tmp_path):
    checkout = tmp_path / "checkout"
    (checkout / "pip").mkdir(parents=True)
    marker = tmp_path / "planted-pip-ran"
    (checkout / "pip" / "__init__.py").write_text("")
    (checkout / "pip" / "__main__.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    install = next(step for step in _action_steps() if "pip install" in step.get("run", ""))
    environment = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "GITHUB_ACTION_PATH": str(tmp_path / "no-such-action"),
    }
    # Run in the checkout itself, the worst case: even where the working folder were ignored, -I keeps it off sys.path.
    run = subprocess.run(
        ["bash", "-c", install["run"]],
        cwd=checkout,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode != 0 and "no-such-action" in run.stderr  # the real pip, refusing a missing folder
    assert not marker.exists()


# --- Low: rdjson, and time linear in the findings ----------------------------------------------------------


def test_rdjson_messages_are_escaped_like_comments():
    from kvlint.review.diff import ChangedFile
    from kvlint.review.render import rdjson
    from kvlint.review.review import build_review
    from kvlint.types import Finding

    finding = Finding(
        "a.py",
        1,
        1,
        1,
        5,
        "KV102",
        "hand-rolled-dcp-scaling",
        "`x * dcp` scales <img src=y> for @octocat [a](b)\n# Heading",
    )
    result = build_review([finding], {"a.py": ChangedFile("a.py", {1}, {1})}, {"a.py": "x * dcp\n"}, [], 1)
    document = json.loads(json.dumps(rdjson(result, {"a.py": "x * dcp\n"})))
    [diagnostic] = document["diagnostics"]
    message = diagnostic["message"]
    assert message.startswith("`x * dcp` scales")
    assert "<img" not in message and "@octocat" not in message and "\\[a\\]" in message and "\n" not in message


def _connector(count: int, single_use: bool = False) -> str:
    gate = "".join(
        f"def size_{i}(group, parallel_config):\n"
        "    return group.kv_cache_spec.block_size * (\n"
        "        parallel_config.decode_context_parallel_size\n"
        "        if isinstance(group.kv_cache_spec, AttentionSpec)\n"
        "        else 1\n"
        "    )\n\n\n"
        for i in range(count)
    )
    keep = "" if single_use else "\n\ndef is_attention(spec):\n    return isinstance(spec, AttentionSpec)\n"
    return "from vllm.v1.kv_cache_interface import AttentionSpec\n\n\n" + gate + keep


@pytest.mark.slow
@pytest.mark.parametrize(("count", "single_use"), [(12, False), (1, True)])
def test_suggestions_cost_one_import_update_per_file_and_match_the_exact_ones(
    vllm_release, tmp_path, monkeypatch, count, single_use
):
    """A pull request with many fixable findings in one file used to apply each fix to the whole file through
    libcst (time quadratic in the findings); the import change is now computed once per file, the edit locally."""
    import kvlint.review.suggestions as suggestions
    from kvlint.review.diff import ChangedFile
    from kvlint.review.review import build_review
    from kvlint.scan.config import Config
    from kvlint.scan.runner import scan
    from kvlint.types import Applicability

    release = vllm_release("0.29.0")
    for path in ("vllm/v1/kv_cache_interface.py", "vllm/v1/core/kv_cache_utils.py"):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(release / path, tmp_path / path)
    connector = tmp_path / "vllm/conn.py"
    text = _connector(count, single_use)
    connector.write_text(text)
    findings = [f for f in scan([connector], Config(), None, [], jobs=1).findings if f.path.endswith("conn.py")]
    fixable = [f for f in findings if f.fix and f.fix.applicability is Applicability.SAFE]
    assert len(fixable) >= count
    calls: list[int] = []
    real = suggestions.apply_fixes
    monkeypatch.setattr(suggestions, "apply_fixes", lambda *a, **k: calls.append(1) or real(*a, **k))
    regions = suggestions.FixRegions(text)
    fast = [regions.of(f) for f in fixable]
    assert len(calls) <= 3  # the imports once, and the findings next to them exactly
    monkeypatch.setattr(suggestions, "apply_fixes", real)
    assert fast == [suggestions.exact_fix_regions(text, f) for f in fixable]
    lines = set(range(1, len(text.splitlines()) + 1))
    review_of = build_review(
        [f for f in findings],
        {findings[0].path: ChangedFile(findings[0].path, lines, lines)},
        {findings[0].path: text},
        [],
        1,
    )
    assert sum(1 for c in review_of.comments if c.suggestion is not None and c.companion_of is None) == count
