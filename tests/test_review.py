"""`kvlint review` on a git repository built from real vLLM 0.29.0 files.

base: the offloading connector calls `resolve_dcp_kv_block_size` (made with `kvlint fix`), plus buggy files
the pull request never fixes. pr: reintroduces the hand-written isinstance scaling (the original 0.29.0
file) and touches an unrelated line of another buggy file. Posting goes to a fake GitHub on 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from unidiff import PatchSet

from fake_github import BOT, PERSON, FakeGitHub
from kvlint.review.diff import ReviewError, safe_relative_path
from kvlint.review.render import escape_message, escape_text, fence_for
from kvlint.review.saved import review_from_data

OFFLOADING = "vllm/distributed/kv_transfer/kv_connector/v1/offloading/config.py"
# A connector with a finding of its own (KV101, mooncake_connector.py:1401) that the pull request never touches.
MOONCAKE = "vllm/distributed/kv_transfer/kv_connector/v1/mooncake/mooncake_connector.py"
UNTOUCHED = "vllm/v1/worker/cpu_model_runner.py"  # buggy (KV101), never changed by the pull request
TREE_FILES = [OFFLOADING, "vllm/v1/kv_cache_interface.py", "vllm/v1/core/kv_cache_utils.py", MOONCAKE, UNTOUCHED]
TOKEN = "ghp_kvlintTestToken0123456789"


def _git(repo: Path, *arguments: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "-c", "user.email=t@example.com", "-c", "user.name=t", *arguments],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def _kvlint(*arguments: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    environment = {
        k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy") and not k.startswith("GITHUB_")
    }
    environment.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "kvlint", *arguments],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=environment,
        timeout=300,
    )


@pytest.fixture(scope="module")
def pr_repo(vllm_release, tmp_path_factory) -> Path:
    release = vllm_release("0.29.0")
    repo = tmp_path_factory.mktemp("review") / "repo"
    for path in TREE_FILES:
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(release / path, repo / path)
    fixed = _kvlint("fix", "--no-cache", OFFLOADING, cwd=repo)
    assert "fixed 1 file" in fixed.stderr, fixed.stderr
    assert "resolve_dcp_kv_block_size(" in (repo / OFFLOADING).read_text()
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "base: the connector goes through the resolver")
    _git(repo, "checkout", "-qb", "pr")
    shutil.copyfile(release / OFFLOADING, repo / OFFLOADING)
    mooncake = (repo / MOONCAKE).read_text().splitlines(keepends=True)
    mooncake.insert(2, "# A line the pull request adds, far from this file's own finding.\n")
    (repo / MOONCAKE).write_text("".join(mooncake))
    _git(repo, "commit", "-qam", "pr: hand-written DCP scaling in the offloading connector")
    # A later push that changes nothing kvlint cares about.
    _git(repo, "checkout", "-qb", "pr-push-unrelated")
    (repo / MOONCAKE).write_text((repo / MOONCAKE).read_text() + "\n# another unrelated line\n")
    _git(repo, "commit", "-qam", "unrelated push")
    # A later push that takes the maintainers' suggestion.
    _git(repo, "checkout", "-q", "pr")
    _git(repo, "checkout", "-qb", "pr-push-fixed")
    _git(repo, "checkout", "main", "--", OFFLOADING)
    _git(repo, "commit", "-qam", "use the resolver again")
    _git(repo, "checkout", "-q", "main")
    return repo


def _diff_lines(repo: Path, head: str) -> tuple[dict[str, set[int]], dict[str, set[int]]]:
    """(added lines, lines GitHub shows) per file, from git's own diff."""
    patch = PatchSet(
        subprocess.run(
            ["git", "-C", str(repo), "diff", "main..." + head], capture_output=True, text=True, check=True
        ).stdout
    )
    added: dict[str, set[int]] = {}
    shown: dict[str, set[int]] = {}
    for patched in patch:
        for hunk in patched:
            for line in hunk:
                if line.target_line_no is not None:
                    shown.setdefault(patched.path, set()).add(line.target_line_no)
                    if line.is_added:
                        added.setdefault(patched.path, set()).add(line.target_line_no)
    return added, shown


def _suggestion(body: str) -> str | None:
    match = re.search(r"^(`{3,})suggestion\n(.*?)\n\1$", body, re.MULTILINE | re.DOTALL)
    return match.group(2) if match else None


def _apply_suggestions(text: str, comments: list[dict]) -> str:
    lines = text.splitlines()
    for comment in sorted(comments, key=lambda c: c["line"], reverse=True):
        suggestion = _suggestion(comment["body"])
        if suggestion is None:
            continue
        first = comment.get("start_line", comment["line"])
        lines[first - 1 : comment["line"]] = suggestion.split("\n")
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def pr_review(pr_repo) -> tuple[dict, subprocess.CompletedProcess]:
    run = _kvlint("review", "--base", "main", "--head", "pr", cwd=pr_repo)
    assert run.returncode == 1, run.stderr
    return json.loads(run.stdout), run


@pytest.mark.slow
def test_review_comments_sit_inside_the_diff_with_a_suggestion_that_restores_the_resolver(pr_repo, pr_review):
    payload, run = pr_review
    assert payload["event"] == "COMMENT"
    assert payload["commit_id"] == _git(pr_repo, "rev-parse", "pr")
    added, shown = _diff_lines(pr_repo, "pr")
    comments = payload["comments"]
    assert comments, payload
    for comment in comments:
        assert (
            comment["path"] == OFFLOADING
        )  # nothing on the mooncake connector's untouched finding, nor on untouched files
        assert comment["side"] == "RIGHT"
        span = set(range(comment.get("start_line", comment["line"]), comment["line"] + 1))
        assert span <= shown[OFFLOADING] and span & added[OFFLOADING], comment
        assert comment["body"].startswith("<!-- kvlint:")
    main = next(c for c in comments if "```suggestion" in c["body"] and "resolve_dcp_kv_block_size(" in c["body"])
    assert main["start_line"] < main["line"]
    assert "resolve_dcp_kv_block_size(" in _suggestion(main["body"])
    # One root cause, one thread: the path (KV103) that diverges through the hand-rolled scaling (KV102), its
    # isinstance gate (KV101) and its predicate (KV105), the others as related locations of the first.
    reported = set(re.findall(r"kvlint:(KV\d+):", main["body"]))
    related = set(re.findall(r"^- `[^`\n]*` line \d+, (KV\d+):", main["body"], re.MULTILINE))
    assert {"KV101", "KV102", "KV103", "KV105"} <= reported | related and "Same root cause" in main["body"]
    # The suggestions, committed as they are, give back exactly the base revision's file.
    head_text = (pr_repo / ".git").exists() and _git(pr_repo, "show", f"pr:{OFFLOADING}") + "\n"
    base_text = _git(pr_repo, "show", f"main:{OFFLOADING}") + "\n"
    assert _apply_suggestions(head_text, comments) == base_text
    # Findings the pull request did not introduce are counted, not commented.
    assert "not touch" in payload["body"] and "KV101" in payload["body"]
    assert "1 finding(s) on changed lines" in run.stderr


@pytest.mark.slow
def test_working_tree_review_matches_the_head_commit(pr_repo, pr_review, tmp_path):
    payload, _ = pr_review
    checkout = tmp_path / "checkout"
    _git(pr_repo, "worktree", "add", "-q", str(checkout), "pr")
    try:
        run = _kvlint("review", "--base", "main", cwd=checkout)
        assert run.returncode == 1, run.stderr
        assert json.loads(run.stdout)["comments"] == payload["comments"]
    finally:
        _git(pr_repo, "worktree", "remove", "--force", str(checkout))


@pytest.mark.slow
def test_a_pull_request_that_touches_no_finding_gets_no_comment(pr_repo):
    run = _kvlint("review", "--base", "pr", "--head", "pr-push-unrelated", cwd=pr_repo)
    assert run.returncode == 0, run.stderr
    payload = json.loads(run.stdout)
    assert payload["comments"] == []
    assert "no KV-cache sizing issue" in payload["body"]
    assert "not touch" in payload["body"]  # the mooncake connector's own finding is mentioned, not commented


@pytest.mark.slow
def test_markdown_and_rdjson(pr_repo):
    markdown = _kvlint("review", "--base", "main", "--head", "pr", "--format", "markdown", cwd=pr_repo)
    assert markdown.returncode == 1
    assert "```suggestion" not in markdown.stdout and "```python" in markdown.stdout
    assert f"`{OFFLOADING}` line" in markdown.stdout
    rdjson = json.loads(_kvlint("review", "--base", "main", "--head", "pr", "--format", "rdjson", cwd=pr_repo).stdout)
    # No URL: kvlint has no published home (PyPI's `kvlint` is another project).
    assert rdjson["source"] == {"name": "kvlint"}
    codes = {d["code"]["value"] for d in rdjson["diagnostics"]}
    related = {r["message"].split(":")[0] for d in rdjson["diagnostics"] for r in d.get("related_locations", ())}
    assert {"KV101", "KV102", "KV103", "KV105"} <= codes | related
    for diagnostic in rdjson["diagnostics"]:
        assert diagnostic["location"]["path"] == OFFLOADING
        assert diagnostic["severity"] in ("ERROR", "WARNING", "INFO")
        start = diagnostic["location"]["range"]["start"]
        assert start["line"] >= 1 and start.get("column", 1) >= 1
    kv102 = next(d for d in rdjson["diagnostics"] if "suggestions" in d)  # the root cause holding KV102's fix
    assert any("resolve_dcp_kv_block_size(" in s["text"] for s in kv102["suggestions"])
    for suggestion in kv102["suggestions"]:
        assert suggestion["range"]["start"]["line"] <= suggestion["range"]["end"]["line"]


@pytest.mark.slow
def test_paths_that_leave_the_repository_are_refused(pr_repo, tmp_path):
    repo = tmp_path / "repo"
    shutil.copytree(pr_repo, repo, symlinks=True)
    _git(repo, "checkout", "-qb", "evil", "pr")
    (repo / "vllm" / "leak.py").symlink_to("/etc/hostname")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "a symlink out of the tree")
    for arguments in (["--head", "evil"], []):
        if not arguments:
            _git(repo, "checkout", "-q", "evil")
        run = _kvlint("review", "--base", "main", *arguments, cwd=repo)
        assert run.returncode == 1, run.stderr
        assert "vllm/leak.py" in run.stderr and "symbolic link" in run.stderr
        assert all(c["path"] != "vllm/leak.py" for c in json.loads(run.stdout)["comments"])
    assert (
        safe_relative_path("../outside.py") and safe_relative_path("/etc/passwd") and safe_relative_path("a/../../b.py")
    )
    assert safe_relative_path("vllm/ok.py") is None


@pytest.mark.slow
def test_bad_revision_is_one_line_and_exit_2(pr_repo):
    run = _kvlint("review", "--base", "no-such-branch", cwd=pr_repo)
    assert run.returncode == 2
    assert run.stderr.strip().count("\n") == 0 and "no-such-branch" in run.stderr


def test_quoted_content_is_escaped():
    rendered = escape_message(
        "`isinstance(x, <img src=y onerror=alert(1)>)` pings @octocat with <b>bold</b> *and* [a](b)"
    )
    assert rendered.startswith("`isinstance(x, <img src=y onerror=alert(1)>)`")  # a code span shows it literally
    assert "<b>" not in rendered and "&lt;b&gt;" in rendered
    assert "@octocat" not in rendered and "\\*and\\*" in rendered and "\\[a\\]" in rendered
    # An odd backtick cannot open a span that swallows the rest: everything is escaped as text.
    assert escape_message("a ` b <i>") == "a \\` b &lt;i&gt;"
    assert escape_text("# heading\nnext") == "\\# heading next"
    assert fence_for("x = '```'") == "````"


def test_saved_review_is_rebuilt_from_known_fields_only():
    finding = {
        "code": "KV102",
        "message": "`x * dcp` scales",
        "fingerprint": "0123456789ab",
        "safe_fix": False,
        "fix_title": None,
    }
    good = {
        "kvlint_review": 1,
        "commit": None,
        "summary": {"in_diff": [{"code": "KV102", "count": 1}], "files_checked": 1},
        "comments": [
            {
                "path": "a.py",
                "line": 3,
                "start_line": None,
                "companion_of": None,
                "findings": [finding],
                "suggestion": None,
                "notes": [],
                "extra": 1,
            }
        ],
    }
    [comment] = review_from_data(good).comments
    assert (comment.path, comment.line, comment.markers) == ("a.py", 3, ["<!-- kvlint:KV102:a.py:0123456789ab -->"])
    assert comment.findings[0].name == "hand-rolled-dcp-scaling"  # from kvlint's registry, not the file
    for bad in (
        {**good, "kvlint_review": 2},
        {**good, "comments": [{**good["comments"][0], "findings": [{**finding, "code": "XX1"}]}]},
        {**good, "comments": [{**good["comments"][0], "path": "../x.py"}]},
        {**good, "comments": [{**good["comments"][0], "findings": [{**finding, "fingerprint": "zz -->"}]}]},
        {"event": "COMMENT", "body": "b", "comments": []},  # a rendered review: markdown is never taken from the file
    ):
        with pytest.raises(ReviewError):
            review_from_data(bad)


# --- posting, against a fake GitHub on 127.0.0.1 ---------------------------------------------------------


@pytest.fixture
def github():
    fake = FakeGitHub()
    yield fake
    fake.close()


def _post(
    repo: Path, github: FakeGitHub, head: str, *extra: str, env: dict | None = None
) -> subprocess.CompletedProcess:
    environment = {"GITHUB_TOKEN": TOKEN, "GITHUB_API_URL": github.url, "GITHUB_REPOSITORY": "o/r", **(env or {})}
    return _kvlint("review", "--base", "main", "--head", head, "--post", "--pr", "7", *extra, cwd=repo, env=environment)


@pytest.mark.slow
def test_post_then_new_pushes_do_not_repeat_and_clean_up(pr_repo, github):
    github.comments[1] = {
        "id": 1,
        "path": OFFLOADING,
        "line": 44,
        "body": "A maintainer's own comment.",
        "in_reply_to_id": None,
        "user": PERSON,
    }
    first = _post(pr_repo, github, "pr")
    assert first.returncode == 1, first.stderr
    [review] = github.of("POST")
    assert review["path"] == "/repos/o/r/pulls/7/reviews"
    assert all(c["user"] == BOT for i, c in github.comments.items() if i != 1)
    assert review["authorization"] == f"Bearer {TOKEN}"
    assert review["body"] == json.loads(first.stdout)  # what is printed is what is posted
    posted = {c["body"] for c in review["body"]["comments"]}
    assert len(posted) == len(review["body"]["comments"]) >= 2

    github.requests.clear()
    again = _post(pr_repo, github, "pr-push-unrelated")
    assert again.returncode == 1, again.stderr
    assert github.of("POST") == [] and github.of("DELETE") == []  # the same findings: nothing repeated
    assert "0 new comment(s)" in again.stderr

    github.requests.clear()
    fixed = _post(pr_repo, github, "pr-push-fixed")
    assert fixed.returncode == 0, fixed.stderr
    assert github.of("POST") == []
    assert len(github.of("DELETE")) == len(posted)  # every kvlint comment on now-fixed lines is gone
    assert list(github.comments) == [1]  # the maintainer's comment stays
    for output in (first, again, fixed):
        assert TOKEN not in output.stdout + output.stderr


@pytest.mark.slow
def test_api_error_is_one_line_exit_2_without_the_token(pr_repo, github):
    github.failure = (403, {"message": f"Resource not accessible by integration (token {TOKEN})"})
    run = _post(pr_repo, github, "pr")
    assert run.returncode == 2
    assert TOKEN not in run.stdout + run.stderr
    [line] = [line for line in run.stderr.splitlines() if line.startswith("kvlint: error")]
    assert "403" in line and "Resource not accessible" in line
    assert run.stderr.strip().splitlines()[-1] == line


@pytest.mark.slow
def test_unreachable_api_is_one_line_exit_2(pr_repo):
    closed = FakeGitHub()
    closed.server.shutdown()
    closed.server.server_close()
    run = _post(pr_repo, closed, "pr")
    assert run.returncode == 2
    assert run.stderr.strip().splitlines()[-1].startswith("kvlint: error: cannot reach the GitHub API")
    assert TOKEN not in run.stdout + run.stderr


@pytest.mark.slow
def test_two_stage_workflow_posts_the_saved_review_for_the_reviewed_head(pr_repo, github, tmp_path):
    saved = tmp_path / "review.json"
    stage_one = _kvlint(
        "review", "--base", "main", "--head", "pr", "--exit-zero", "--format", "review-data", cwd=pr_repo
    )
    assert stage_one.returncode == 0
    saved.write_text(stage_one.stdout)
    rendered = _kvlint("review", "--base", "main", "--head", "pr", "--exit-zero", cwd=pr_repo)
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"workflow_run": {"head_sha": _git(pr_repo, "rev-parse", "pr"), "pull_requests": []}}))
    environment = {
        "GITHUB_TOKEN": TOKEN,
        "GITHUB_API_URL": github.url,
        "GITHUB_REPOSITORY": "o/r",
        "GITHUB_EVENT_PATH": str(event),
    }
    github.head_sha = "0" * 40  # the pull request moved on since stage one ran
    moved = _kvlint("review", "--payload", str(saved), "--pr", "7", cwd=tmp_path, env=environment)
    assert moved.returncode == 2 and "not posting" in moved.stderr and github.of("POST") == []
    github.head_sha = _git(pr_repo, "rev-parse", "pr")
    forged = tmp_path / "forged.json"
    forged.write_text(json.dumps({**json.loads(stage_one.stdout), "commit": "1" * 40}))
    refused = _kvlint("review", "--payload", str(forged), "--pr", "7", cwd=tmp_path, env=environment)
    assert refused.returncode == 2 and "not posting" in refused.stderr and github.of("POST") == []
    stage_two = _kvlint("review", "--payload", str(saved), "--pr", "7", cwd=tmp_path, env=environment)
    assert stage_two.returncode == 0, stage_two.stderr
    [review] = github.of("POST")
    assert review["body"] == json.loads(rendered.stdout)  # what stage two renders is what one stage would post


def test_action_is_composite_and_splices_nothing_into_its_scripts():
    import yaml

    action = yaml.safe_load((Path(__file__).resolve().parents[1] / "action.yml").read_text())
    assert action["runs"]["using"] == "composite"
    scripts = [step["run"] for step in action["runs"]["steps"] if "run" in step]
    assert any("kvlint review" in script and "--post" in script for script in scripts)
    assert all("${{" not in script for script in scripts)  # expressions reach scripts through env only


@pytest.fixture(scope="module")
def resolver_repo(vllm_release, tmp_path_factory) -> Path:
    """base: the original 0.29.0 files; `narrow`: the resolver scales FullAttentionSpec only; `doc`: a comment in it."""
    release = vllm_release("0.29.0")
    repo = tmp_path_factory.mktemp("resolver") / "repo"
    for path in TREE_FILES[:3]:
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(release / path, repo / path)
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "base")
    utils = repo / "vllm/v1/core/kv_cache_utils.py"
    original = utils.read_text()
    gate = "        isinstance(layer_spec, AttentionSpec) for layer_spec in layer_specs\n"
    assert original.count(gate) == 1
    for branch, text in (
        ("narrow", original.replace(gate, gate.replace("AttentionSpec", "FullAttentionSpec"))),
        ("doc", original.replace(gate, "        # every layer must be sharded\n" + gate)),
    ):
        _git(repo, "checkout", "-qb", branch, "main")
        utils.write_text(text)
        _git(repo, "commit", "-qam", branch)
    _git(repo, "checkout", "-q", "main")
    return repo


@pytest.mark.slow
def test_changing_the_resolver_reports_the_untouched_connector_it_makes_diverge(resolver_repo):
    run = _kvlint("review", "--base", "main", "--head", "narrow", cwd=resolver_repo)
    assert run.returncode == 1, run.stderr
    comments = json.loads(run.stdout)["comments"]
    [comment] = comments
    assert comment["path"] == "vllm/v1/core/kv_cache_utils.py"  # on the changed resolver, not the untouched connector
    added, _ = _diff_lines(resolver_repo, "narrow")
    assert comment["line"] in added["vllm/v1/core/kv_cache_utils.py"]
    assert f"`{OFFLOADING}:" in comment["body"] and "shared resolver" in comment["body"]


@pytest.mark.slow
def test_editing_the_resolver_without_changing_what_it_decides_reports_nothing_old(resolver_repo):
    run = _kvlint("review", "--base", "main", "--head", "doc", cwd=resolver_repo)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["comments"] == []


def _action_script() -> str:
    import yaml

    action = yaml.safe_load((Path(__file__).resolve().parents[1] / "action.yml").read_text())
    return next(step["run"] for step in action["runs"]["steps"] if "kvlint review" in step.get("run", ""))


def _isolated_python(folder: Path) -> Path:
    """A `python` for the action's script: it must be called as `python -I -m kvlint …` (else exit 99) from
    outside the pull request's checkout (else exit 98), and runs this checkout's kvlint isolated (-I ignores
    PYTHONPATH, which is how the tests import it)."""
    folder.mkdir(exist_ok=True)
    wrapper = folder / "python"
    checkout = Path(__file__).resolve().parents[1]
    wrapper.write_text(
        "#!/bin/sh\n"
        'case "$PWD/" in "$KVLINT_TEST_CHECKOUT"/*) echo "python run inside the checkout" >&2; exit 98 ;; esac\n'
        'if [ "$1" = "-I" ] && [ "$2" = "-m" ] && [ "$3" = "kvlint" ]; then\n'
        "  shift 3\n"
        f"  exec {sys.executable} -I -c 'import sys, runpy; sys.path.insert(0, sys.argv.pop(1)); "
        f'runpy.run_module("kvlint", run_name="__main__", alter_sys=True)\' {checkout} "$@"\n'
        "fi\n"
        'echo "python called without -I -m kvlint: $*" >&2\n'
        "exit 99\n"
    )
    wrapper.chmod(0o755)
    return folder


def _run_action(repo: Path, tmp_path: Path, **variables: str) -> subprocess.CompletedProcess:
    environment = {
        k: v for k, v in os.environ.items() if not k.startswith("GITHUB_") and not k.lower().endswith("_proxy")
    }
    environment["PATH"] = f"{_isolated_python(tmp_path / 'bin')}{os.pathsep}{environment.get('PATH', '')}"
    environment.update(
        {
            "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
            "RUNNER_TEMP": str(tmp_path),
            "KVLINT_TEST_CHECKOUT": str(repo),
            "KVLINT_BASE": "main",
            "KVLINT_HEAD": "pr",
            "KVLINT_POST": "auto",
            "KVLINT_OUTPUT": str(tmp_path / "kvlint-review.json"),
            "KVLINT_PAYLOAD": "",
            "KVLINT_PR": "7",
            "KVLINT_FAIL": "true",
            "KVLINT_ARGS": "",
            "KVLINT_FORK": "false",
            **variables,
        }
    )
    return subprocess.run(
        ["bash", "-c", _action_script()], cwd=repo, capture_output=True, text=True, env=environment, timeout=300
    )


@pytest.mark.slow
def test_action_script_for_a_fork_writes_the_review_for_the_second_stage(pr_repo, pr_review, tmp_path):
    run = _run_action(pr_repo, tmp_path, KVLINT_FORK="true")  # auto + fork: no token can post, so no --post
    assert run.returncode == 1, run.stderr
    saved = json.loads((tmp_path / "kvlint-review.json").read_text())
    assert saved["kvlint_review"] == 1 and len(saved["comments"]) == len(pr_review[0]["comments"])
    assert (tmp_path / "kvlint-review.json.pr").read_text().strip() == "7"
    assert "```python" in (tmp_path / "summary.md").read_text()
    assert "review posted" not in run.stderr


@pytest.mark.slow
def test_action_script_posts_same_repository_pull_requests(pr_repo, github, tmp_path):
    run = _run_action(
        pr_repo, tmp_path, KVLINT_FAIL="false", GITHUB_TOKEN=TOKEN, GITHUB_API_URL=github.url, GITHUB_REPOSITORY="o/r"
    )
    assert run.returncode == 0, run.stderr
    assert len(github.of("POST")) == 1
    second = _run_action(
        pr_repo,
        tmp_path,
        KVLINT_PAYLOAD=str(tmp_path / "kvlint-review.json"),
        KVLINT_PR="",
        GITHUB_TOKEN=TOKEN,
        GITHUB_API_URL=github.url,
        GITHUB_REPOSITORY="o/r",
    )
    assert second.returncode == 0, second.stderr  # the second stage: nothing new to post
    assert len(github.of("POST")) == 1


@pytest.fixture(scope="module")
def offloading_findings(vllm_release):
    """The real 0.29.0 connector's findings (scanned in its release tree) and its text."""
    from dataclasses import replace

    from kvlint.scan.config import Config
    from kvlint.scan.runner import scan

    release = vllm_release("0.29.0")
    result = scan([release / OFFLOADING], Config(), None, [], jobs=1)
    findings = [replace(f, path=OFFLOADING) for f in result.findings]
    return findings, (release / OFFLOADING).read_text()


def _review_of(findings, text, added, visible):
    from kvlint.review.diff import ChangedFile
    from kvlint.review.review import build_review

    return build_review(
        findings, {OFFLOADING: ChangedFile(OFFLOADING, set(added), set(visible))}, {OFFLOADING: text}, [], 1
    )


@pytest.mark.slow
def test_suggestion_whose_import_is_outside_the_diff_says_what_else_the_fix_needs(offloading_findings):
    from kvlint.review.render import comment_body

    findings, text = offloading_findings
    review = _review_of(findings, text, added=range(44, 50), visible=range(41, 53))
    [comment] = review.comments
    assert (comment.start_line, comment.line) == (43, 49)
    body = comment_body(comment)
    assert "```suggestion\n            tokens_per_block=resolve_dcp_kv_block_size(" in body
    assert "not the whole fix" in body and "`from vllm.v1.core.kv_cache_utils import resolve_dcp_kv_block_size`" in body


@pytest.mark.slow
def test_fix_reaching_past_the_shown_lines_is_described_not_suggested(offloading_findings):
    from kvlint.review.render import comment_body

    findings, text = offloading_findings
    review = _review_of(findings, text, added=[47], visible=range(44, 51))
    [comment] = review.comments
    assert comment.suggestion is None and comment.start_line is None and comment.line == 47
    body = comment_body(comment)
    assert "```suggestion" not in body and f"kvlint fix {OFFLOADING}" in body
