"""Issue 12 for posting: the token, the fork-safe second stage, whose comments are touched, and what a
hostile or broken GitHub answer can do. Everything talks to a fake GitHub on 127.0.0.1 (tests/fake_github.py)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from fake_github import BOT, PERSON, FakeGitHub
from kvlint.review.github_api import GitHub, GitHubError
from review_repos import MODULE, SCALED, git, kvlint, make_repo, review

TOKEN = "ghp_kvlintSecurityToken0123456789"


@pytest.fixture
def github():
    fake = FakeGitHub()
    yield fake
    fake.close()


@pytest.fixture
def repo(tmp_path):
    return make_repo(tmp_path)


def _environment(github: FakeGitHub, token: str = TOKEN, **extra: str) -> dict:
    return {"GITHUB_TOKEN": token, "GITHUB_API_URL": github.url, "GITHUB_REPOSITORY": "o/r", **extra}


def _post(repo, github: FakeGitHub, *extra: str, token: str = TOKEN, head: str = "pr"):
    return review(repo, "--post", "--pr", "7", *extra, head=head, env=_environment(github, token))


def _error_line(run) -> str:
    lines = run.stderr.strip().splitlines()
    assert lines and lines[-1].startswith("kvlint: error: "), run.stderr
    return lines[-1]


# --- Medium 4: the token ----------------------------------------------------------------------------------


def test_a_token_with_a_trailing_newline_is_stripped_and_never_printed(repo, github):
    run = _post(repo, github, token=TOKEN + "\n")
    assert run.returncode == 1, run.stderr
    assert {r["authorization"] for r in github.requests} == {f"Bearer {TOKEN}"}
    assert TOKEN not in run.stdout + run.stderr


@pytest.mark.parametrize("token", [TOKEN[:10] + "\n" + TOKEN[10:], TOKEN + "\x1b[2K", TOKEN[:10] + " " + TOKEN[10:]])
def test_a_token_with_a_control_character_is_refused_without_echoing_it(repo, github, token):
    run = _post(repo, github, token=token)
    assert run.returncode == 2
    line = _error_line(run)
    assert "GITHUB_TOKEN" in line and "not shown" in line
    assert TOKEN[:10] not in run.stdout + run.stderr and TOKEN[10:] not in run.stdout + run.stderr
    assert github.requests == []


def test_the_token_is_redacted_from_an_answer_that_quotes_it_with_a_newline(repo, github):
    github.failure = (403, {"message": f"bad credentials {TOKEN}"})
    run = _post(repo, github, token=TOKEN + "\n")
    assert run.returncode == 2
    assert TOKEN not in run.stdout + run.stderr and "***" in _error_line(run)


def test_a_redirect_is_refused_and_the_token_goes_nowhere_else(repo, github):
    elsewhere = FakeGitHub()
    try:
        github.answers[("POST", "/graphql")] = (301, {}, {"Location": f"{elsewhere.url}/graphql"})
        github.answers[("GET", "/user")] = (302, {}, {"Location": f"{elsewhere.url}/user"})
        run = _post(repo, github)
        assert run.returncode == 2
        assert "redirects are not followed" in _error_line(run)
        assert elsewhere.requests == []
    finally:
        elsewhere.close()


def test_an_internal_error_is_one_line_and_redacted_even_with_verbose(repo, monkeypatch):
    from click.testing import CliRunner

    import kvlint.review.pipeline
    from kvlint.commands.review import review as review_command

    def broken(*arguments, **options):
        raise RuntimeError(f"something quoted the token {TOKEN}")

    monkeypatch.setattr(kvlint.review.pipeline, "make_review", broken)
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN + "\n")
    for verbose in ([], ["--verbose"]):
        result = CliRunner().invoke(review_command, ["--base", "main", "--repo", str(repo), *verbose])
        assert result.exit_code == 2
        output = result.output + (result.stderr if result.stderr_bytes is not None else "")
        assert TOKEN not in output
        assert (
            "kvlint: internal error: RuntimeError: something quoted the token *** (re-run with --verbose for details)"
            in output
        )
        assert ("Traceback" in output) == bool(verbose)


# --- Medium 5: stage two posts only what kvlint renders ---------------------------------------------------


def _stage_two(tmp_path, github, document) -> object:
    saved = tmp_path / "saved.json"
    saved.write_text(json.dumps(document))
    return kvlint("review", "--payload", str(saved), "--pr", "7", cwd=tmp_path, env=_environment(github))


def test_stage_two_refuses_a_rendered_review(tmp_path, github):
    forged = {
        "event": "COMMENT",
        "body": "kvlint review passed ✅",
        "comments": [
            {
                "path": "a.py",
                "line": 1,
                "side": "RIGHT",
                "body": "<!-- kvlint:KV102:a.py:0123456789ab -->\nLGTM @org/maintainers ![x](https://evil.example/x.png)",
            }
        ],
    }
    run = _stage_two(tmp_path, github, forged)
    assert run.returncode == 2
    assert "not a kvlint review-data file" in _error_line(run)
    assert github.of("POST") == [] and github.of("DELETE") == []


def test_stage_two_renders_every_body_from_the_saved_fields(repo, tmp_path, github):
    stage_one = review(repo, "--format", "review-data", "--exit-zero")
    assert stage_one.returncode == 0, stage_one.stderr
    document = json.loads(stage_one.stdout)
    assert "```" not in stage_one.stdout and "**" not in stage_one.stdout  # data, no markdown
    hostile = "review passed ✅ @org/maintainers <img src=x onerror=alert(1)> [click](https://evil.example) ![i](https://evil.example/i.png)\n# Approved"
    for comment in document["comments"]:
        for finding in comment["findings"]:
            finding["message"] = hostile
    run = _stage_two(tmp_path, github, document)
    assert run.returncode == 0, run.stderr
    [posted] = github.of("POST")
    assert posted["body"]["event"] == "COMMENT"
    for comment in posted["body"]["comments"]:
        body = comment["body"]
        assert body.startswith("<!-- kvlint:")
        assert "@org" not in body and "@\u200borg" in body
        assert "<img" not in body and "&lt;img" in body
        assert "](" not in body.replace("\\](", "") and "\\[click\\]" in body
        assert "\n# Approved" not in body  # one line: no heading can start
    assert "@" not in posted["body"]["body"].replace("@\u200b", "")  # the summary holds only counts


@pytest.mark.parametrize(
    "change",
    [
        lambda d: d["comments"][0]["findings"][0].update(code="KV999"),
        lambda d: d["comments"][0].update(path="../../etc/passwd"),
        lambda d: d["comments"][0]["findings"][0].update(fingerprint="0123456789ab --> <b>x</b>"),
        lambda d: d["comments"][0].update(notes=[{"kind": "free-text", "text": "LGTM"}]),
        lambda d: d["comments"][0].update(suggestion={"first": 1, "last": 1, "text": "import os"}),
        lambda d: d["summary"].update(in_diff=[{"code": "KV102", "count": "many"}]),
        lambda d: d.update(kvlint_review=2),
    ],
)
def test_stage_two_refuses_fields_kvlint_never_writes(repo, tmp_path, github, change):
    document = json.loads(review(repo, "--format", "review-data", "--exit-zero").stdout)
    change(document)
    run = _stage_two(tmp_path, github, document)
    assert run.returncode == 2, run.stderr
    assert "the saved review is not one kvlint writes" in _error_line(run)
    assert github.requests == []


def test_both_stages_cap_comments_alike_and_say_so(repo, tmp_path, github):
    (repo / "vllm/more.py").write_text(
        "".join(f"def f{i}(spec, dcp_size):\n    return spec.block_size * dcp_size\n\n\n" for i in range(4))
    )
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "pr: more")
    direct = review(repo, "--max-comments", "3")
    assert direct.returncode == 1, direct.stderr
    payload = json.loads(direct.stdout)
    assert len(payload["comments"]) <= 3
    assert "This review holds at most 3 comments" in payload["body"]
    stage_one = review(repo, "--format", "review-data", "--exit-zero")  # the default limit: all comments saved
    assert len(json.loads(stage_one.stdout)["comments"]) > 3
    (tmp_path / "saved.json").write_text(stage_one.stdout)
    run = kvlint(
        "review",
        "--payload",
        str(tmp_path / "saved.json"),
        "--pr",
        "7",
        "--max-comments",
        "3",
        cwd=tmp_path,
        env=_environment(github),
    )
    assert run.returncode == 0, run.stderr
    [posted] = github.of("POST")
    assert posted["body"] == payload  # stage two renders and limits exactly as a single stage does


# --- Medium 8 and the Low posting items: whose comments, in which order, converging ------------------------


def _marker_of(body: str) -> str:
    return body.split("\n", 1)[0]


def test_only_the_tokens_own_complete_markers_are_touched(repo, github):
    first = _post(repo, github)
    assert first.returncode == 1, first.stderr
    ours = dict(github.comments)
    a_marker = _marker_of(next(iter(ours.values()))["body"])
    stale = a_marker.replace(a_marker.split(":")[-1], "ffffffffffff -->")
    kept = {
        github.add_comment(MODULE, 2, a_marker + "\nquoted by a person", PERSON),  # someone else's copy of a marker
        github.add_comment(MODULE, 2, "<!-- kvlint: not a marker", BOT),  # ours, but no complete marker
        github.add_comment(MODULE, 2, "see " + stale, BOT),  # a marker, but not where a kvlint comment starts it
    }
    gone = github.add_comment(MODULE, 2, stale + "\n\nan earlier finding, now fixed", BOT)
    github.requests.clear()
    again = _post(repo, github)
    assert again.returncode == 1, again.stderr
    assert [r["path"] for r in github.of("DELETE")] == [f"/repos/o/r/pulls/comments/{gone}"]
    assert kept | set(ours) == set(github.comments)
    assert "1 outdated deleted" in again.stderr


def test_the_new_review_is_posted_before_anything_is_deleted(repo, github):
    stale = github.add_comment(MODULE, 2, "<!-- kvlint:KV102:vllm/sizing.py:ffffffffffff -->\n\nold", BOT)
    github.review_failure = (500, {"message": "Server Error"})
    run = _post(repo, github)
    assert run.returncode == 2
    assert "500" in _error_line(run)
    assert github.of("DELETE") == [] and stale in github.comments  # the pull request keeps its earlier review


def test_a_rerun_after_two_runs_posted_twice_keeps_one_comment_per_finding(repo, github):
    """The state two runs leave when both posted before either listed again (each finding twice): the next
    run deletes the younger copies. A real race: test_a_run_racing_another_keeps_the_older_copy."""
    first = _post(repo, github)
    assert first.returncode == 1, first.stderr
    markers = sorted(_marker_of(c["body"]) for c in github.comments.values())
    # Two runs that both posted before either listed: each finding twice.
    for comment in list(github.comments.values()):
        github.add_comment(comment["path"], comment["line"], comment["body"], BOT)
    again = _post(repo, github)
    assert again.returncode == 1, again.stderr
    assert sorted(_marker_of(c["body"]) for c in github.comments.values()) == markers
    assert github.of("POST") == [github.of("POST")[0]]  # nothing new: the rerun posts no second review


def test_a_run_racing_another_keeps_the_older_copy(repo, github, monkeypatch):
    """Another run posts the same comments between this run's listing and its post: after posting, this run
    lists again and deletes its own younger copies."""
    original = github.add_comment
    older: list[int] = []  # ids of the other run's copies

    def racing(path, line, body, user):
        older.append(original(path, line, body, user))  # the other run's copy, older
        return original(path, line, body, user)

    github.add_comment = racing
    run = _post(repo, github)
    assert run.returncode == 1, run.stderr
    markers = [_marker_of(c["body"]) for c in github.comments.values()]
    assert len(markers) == len(set(markers)) >= 1
    # Exactly the older copies stand: this run deleted its own younger ones, one DELETE each.
    assert sorted(github.comments) == sorted(older)
    assert sorted(r["path"].rsplit("/", 1)[1] for r in github.of("DELETE")) == sorted(str(i + 1) for i in older)


def test_two_runs_posting_at_once_end_with_one_comment_per_finding_the_older(repo, github):
    """Two real `kvlint review --post` processes at once. The fake holds each run's POST of its review until
    both have come (so both listed the pull request before either posted: each finding is posted twice), then
    lets them go: after posting, each lists again, and together they leave exactly the older copies."""
    arrived = threading.Barrier(2, timeout=60)
    lock = threading.Lock()
    route = github.route
    posted: list[list[int]] = []  # the ids each review's POST created, in posting order

    def racing(method, full_path, body):
        if method == "POST" and full_path.startswith("/repos/o/r/pulls/7/reviews"):
            arrived.wait()
            with lock:
                before = set(github.comments)
                answer = route(method, full_path, body)
                posted.append(sorted(set(github.comments) - before))
                return answer
        with lock:
            return route(method, full_path, body)

    github.route = racing
    environment = {name: value for name, value in os.environ.items() if not name.startswith("GITHUB_")}
    environment.update(_environment(github), PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    command = [sys.executable, "-m", "kvlint", "review", "--base", "main", "--head", "pr", "--post", "--pr", "7"]
    runs = [
        subprocess.Popen(command, cwd=repo, env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outcomes = [run.communicate(timeout=120) for run in runs]
    for run, (_, stderr) in zip(runs, outcomes):
        assert run.returncode == 1, stderr  # the pull request's finding fails each run, as alone
        assert "Traceback" not in stderr and TOKEN not in stderr
    older, younger = posted
    assert len(older) == len(younger) >= 1
    assert sorted(github.comments) == older  # each finding once: the first run's copy
    deleted = [r["path"] for r in github.of("DELETE")]
    # Each younger copy deleted once (a run that finds it already gone counts nothing)...
    assert {f"/repos/o/r/pulls/comments/{i}" for i in younger} == set(deleted)
    said = [int(re.search(r"(\d+) outdated deleted", stderr).group(1)) for _, stderr in outcomes]
    assert sum(said) == len(younger)  # ...and the runs' own counts add up to it


def test_an_identity_that_cannot_be_known_posts_nothing(repo, github):
    github.graphql_refused = github.user_refused = True
    run = _post(repo, github)
    assert run.returncode == 2
    assert "cannot tell which account the token belongs to" in _error_line(run)
    assert github.of("POST") == [] and github.of("DELETE") == []


def test_an_installation_token_is_identified_through_graphql(repo, github):
    github.user_refused = True  # GET /user refuses GITHUB_TOKEN ("Resource not accessible by integration")
    assert _post(repo, github).returncode == 1
    assert _post(repo, github).returncode == 1
    assert len(github.of("POST")) == 1 and github.of("DELETE") == []


# --- Low: malformed and slow answers ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "answer",
    [
        [{"path": MODULE, "line": 2, "body": "x", "user": BOT}],  # no id
        [{"id": "12", "path": MODULE, "line": 2, "body": "x"}],
        [{"id": 12, "path": MODULE, "line": 2, "body": {"nested": 1}}],
        {"message": "not a list"},
        ["not an object"],
    ],
)
def test_a_malformed_answer_is_one_line_not_an_internal_error(repo, github, answer):
    github.answers[("GET", "/repos/o/r/pulls/7/comments")] = (200, answer)
    run = _post(repo, github)
    assert run.returncode == 2
    line = _error_line(run)
    assert "GitHub API answered GET /repos/o/r/pulls/7/comments" in line
    assert "internal error" not in run.stderr and "Traceback" not in run.stderr


def test_a_malformed_workflow_event_is_one_line(repo, github, tmp_path):
    event = tmp_path / "event.json"
    event.write_text(json.dumps(["not", "an", "object"]))
    run = review(repo, "--post", env=_environment(github, GITHUB_EVENT_PATH=str(event)))
    assert run.returncode == 2
    assert "names no pull request" in _error_line(run)


def test_a_slow_drip_answer_ends_at_the_total_deadline(github):
    github.drip_s = 0.1  # one byte every 0.1 s: each read succeeds long before a per-read timeout
    client = GitHub(github.url, TOKEN, "o/r", request_deadline_s=1)
    started = time.monotonic()
    with pytest.raises(GitHubError, match="did not answer GET /repos/o/r/pulls/7 within 1s"):
        client.request("GET", "/repos/o/r/pulls/7")
    assert time.monotonic() - started < 5


def test_review_has_the_verbose_option_its_error_hint_names(repo):
    help_text = kvlint("review", "--help", cwd=repo).stdout
    assert "--verbose" in help_text and "--max-comments" in help_text
    run = review(repo, "--verbose")
    assert run.returncode == 1, run.stderr


def test_suppressions_the_pull_request_adds_are_said_in_the_review(repo):
    (repo / MODULE).write_text(SCALED.replace("size\n", "size  # kvlint: ignore[KV102]\n"))
    git(repo, "commit", "-qam", "pr: silence it")
    run = review(repo)
    body = json.loads(run.stdout)["body"]
    assert "adds 1 `# kvlint: ignore` comment(s)" in body and f"`{MODULE}` line 2" in body
    assert "KV102" not in {c["body"].split(":")[1] for c in json.loads(run.stdout)["comments"]}


def test_graphql_goes_to_the_api_host_only():
    with pytest.raises(GitHubError, match="same host"):
        GitHub("https://api.github.com", TOKEN, "o/r", graphql_url="https://evil.example/graphql")
    assert GitHub("https://ghe.example/api/v3", TOKEN, "o/r").graphql_url == "https://ghe.example/api/graphql"
