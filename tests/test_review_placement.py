"""The review shows what a pull request causes, even on lines it does not change, and says why it is there.

Built like vLLM 0.29.0's offloading/config.py, where `spec_certifiable(group.kv_cache_spec)` (line 174)
makes the helper's `isinstance(spec, AttentionSpec)` (line 154) a KV101: on the base revision the call
passes a layer spec (no finding); the pull request changes only the call to pass the group's spec. The
KV101 then appears at the helper's line, which the pull request did not touch.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from kvlint.review.diff import ChangedFile
from kvlint.review.placement import AT_CALL, IN_FILE, IN_FUNCTION, new_findings, place
from kvlint.review.render import note_sentence
from kvlint.review.review import NOTE_KINDS, Note
from kvlint.review.saved import review_from_data
from kvlint.types import Finding
from mini_vllm import CONFIG_PATH, MINI_VLLM, write_tree
from review_repos import comments, git, kvlint, make_repo, review

INTERFACE = """\
class KVCacheSpec: pass
class AttentionSpec(KVCacheSpec): pass
class FullAttentionSpec(AttentionSpec): pass
class MambaSpec(KVCacheSpec): pass
class UniformTypeKVCacheSpecs(KVCacheSpec): pass
"""
CONNECTOR = "vllm/connector.py"
BASE = """\
from vllm.v1.kv_cache_interface import AttentionSpec


def spec_certifiable(spec):
    \"\"\"Whether the pages of this spec can be shared across ranks.\"\"\"
    if not isinstance(spec, AttentionSpec):
        return False
    return spec.block_size > 0


def is_parallelism_agnostic(kv_cache_config):
    return all(
        spec_certifiable(layer_spec)
        for group in kv_cache_config.kv_cache_groups
        for layer_spec in iter_layer_specs(group.kv_cache_spec)
    )
"""
CHECK_LINE = 6  # `if not isinstance(spec, AttentionSpec):`, never changed
CALL = "        spec_certifiable(layer_spec)\n        for group in kv_cache_config.kv_cache_groups\n        for layer_spec in iter_layer_specs(group.kv_cache_spec)\n"
GROUP_CALL = "        spec_certifiable(group.kv_cache_spec)\n        for group in kv_cache_config.kv_cache_groups\n"
CALL_LINE = 13


def commit(repo: Path, text: str, message: str) -> None:
    (repo / CONNECTOR).write_text(text)
    git(repo, "commit", "-qam", message)


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    """main: the call passes a layer spec; `pr`: it passes the group's spec (a KV101 at the helper);
    `pr-old`: base already passes the group's spec, and the pull request only edits the call's comment."""
    repo = tmp_path_factory.mktemp("placement") / "repo"
    (repo / "vllm" / "v1").mkdir(parents=True)
    (repo / "vllm" / "v1" / "kv_cache_interface.py").write_text(INTERFACE)
    (repo / CONNECTOR).write_text(BASE)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base: layer specs only")
    git(repo, "checkout", "-qb", "pr")
    commit(repo, BASE.replace(CALL, GROUP_CALL), "pr: certify each group's spec")
    git(repo, "checkout", "-qb", "old-base", "main")
    commit(repo, BASE.replace(CALL, GROUP_CALL), "the finding is already there")
    git(repo, "checkout", "-qb", "pr-old")
    commit(repo, BASE.replace(CALL, GROUP_CALL).replace("all(\n", "all(  # every group\n"), "pr: a comment")
    git(repo, "checkout", "-q", "main")
    return repo


def test_the_base_revision_has_no_finding_and_the_head_has_one_at_an_unchanged_line(repo, tmp_path):
    """The premise: what the review must not hide."""
    for revision, expected in (("main", []), ("pr", [CHECK_LINE])):
        (tmp_path / revision).mkdir()
        git(repo, "--work-tree", str(tmp_path / revision), "checkout", revision, "--", ".")
        run = kvlint("check", "--no-cache", "--format", "json", "--select", "KV101", ".", cwd=tmp_path / revision)
        assert [f["line"] for f in json.loads(run.stdout)] == expected, run.stderr
    assert added_lines(repo, "main", "pr") == {CALL_LINE}  # the pull request changes the call, nothing else


def added_lines(repo: Path, base: str, head: str) -> set[int]:
    """The head lines `git diff` adds or changes, from its hunk headers (`@@ -a,b +c,d @@`)."""
    added = set()
    for line in git(repo, "diff", "-U0", base, head).splitlines():
        match = re.match(r"@@ -\S+ \+(\d+)(?:,(\d+))? @@", line)
        if match:
            first, count = int(match.group(1)), int(match.group(2) or 1)
            added.update(range(first, first + count))
    return added


@pytest.fixture(scope="module")
def pr_review(repo):
    # The finding is a warning (no counterexample this tree can build): --fail-on warning makes it fail the run.
    return review(repo, "--select", "KV101", "--fail-on", "warning")


def test_a_new_finding_on_an_unchanged_line_is_commented_on_the_changed_call_that_causes_it(pr_review):
    run = pr_review
    assert run.returncode == 1, run.stderr  # the pull request's doing: the review fails on it
    [comment] = comments(run)
    assert (comment["path"], comment["line"]) == (CONNECTOR, CALL_LINE)
    body = comment["body"]
    assert "KV101" in body and "`spec_certifiable()`" in body
    assert f"The finding at line {CHECK_LINE} sits on a line this pull request does not change" in body
    assert "the base revision does not have it" in body and "this changed line calls the function it is in" in body
    summary = json.loads(run.stdout)["body"]
    assert "KV101 container-isinstance | 1" in summary and "not commented" not in summary


def test_markdown_and_rdjson_place_it_on_the_call_too(repo):
    markdown = review(repo, "--select", "KV101", "--format", "markdown")
    assert f"line {CALL_LINE}" in markdown.stdout and f"The finding at line {CHECK_LINE}" in markdown.stdout
    rdjson = json.loads(review(repo, "--select", "KV101", "--format", "rdjson").stdout)
    [diagnostic] = rdjson["diagnostics"]
    assert diagnostic["location"]["range"] == {"start": {"line": CALL_LINE}}  # reviewdog shows changed lines only
    assert f"The finding at line {CHECK_LINE}" in diagnostic["message"]


def test_a_finding_the_base_already_had_stays_in_the_summary(repo):
    run = kvlint("review", "--base", "old-base", "--head", "pr-old", "--select", "KV101", cwd=repo)
    assert run.returncode == 0, run.stderr
    assert comments(run) == []
    assert "does not touch; they are not commented" in json.loads(run.stdout)["body"]


def test_the_saved_review_keeps_the_placement_note(repo):
    """Stage two of the fork-safe workflow renders notes from data: the new kinds must survive it."""
    run = review(repo, "--select", "KV101", "--format", "review-data")
    data = json.loads(run.stdout)
    assert data["comments"][0]["notes"][0]["kind"] == AT_CALL
    [comment] = review_from_data(data).comments
    assert comment.line == CALL_LINE and comment.notes == [Note(AT_CALL, line=CHECK_LINE)]


def test_a_whole_function_finding_on_its_first_changed_line_says_so(tmp_path):
    """review_repos' pull request changes the second line of `tokens`: its KV103 (on the function, line 1)
    is shown on line 2. KV103 alone: with KV102 its root cause is the scaling on line 2, which holds it."""
    run = review(make_repo(tmp_path), "--select", "KV103")
    kv103 = [c for c in comments(run) if "KV103" in c["body"]]
    assert [c["line"] for c in kv103] == [2]
    assert "the whole-function finding at line 1, where the function starts" in kv103[0]["body"]
    assert "function's first changed line" in kv103[0]["body"]


def test_review_says_its_phases_on_stderr_unless_quiet(repo, pr_review):
    run = pr_review
    phases = [line for line in run.stderr.splitlines() if line.endswith("…")]
    assert phases[0] == "kvlint: reading what the pull request changes…"
    assert "kvlint: reviewing 1 changed Python file…" in phases
    assert any("base revision" in line for line in phases)
    json.loads(run.stdout)  # stdout is the review alone
    quiet = review(repo, "--select", "KV101", "--quiet")
    assert not [line for line in quiet.stderr.splitlines() if line.endswith("…")]
    assert quiet.stdout == run.stdout


# ------------------------------------------------------------------------------ placement, line by line

HELPER_FILE = """\
def helper(spec):
    if isinstance(spec, AttentionSpec):
        return 1
    return 0


def caller(groups):
    x = 1
    return [helper(
        group.kv_cache_spec) for group in groups]
"""


def finding(line: int, message: str = "m", code: str = "KV101", path: str = "a.py") -> Finding:
    return Finding(
        path=path,
        line=line,
        column=1,
        end_line=line,
        end_column=2,
        code=code,
        name="container-isinstance",
        message=message,
    )


def test_a_changed_argument_line_of_a_multi_line_call_is_its_call():
    placement = place(finding(2), ChangedFile("a.py", added={10}), HELPER_FILE)
    assert placement.line == 10 and placement.note == Note(AT_CALL, line=2)


def test_without_a_changed_call_the_nearest_changed_line_of_the_function_then_of_the_file():
    in_function = place(finding(2), ChangedFile("a.py", added={4, 8}), HELPER_FILE)
    assert (in_function.line, in_function.note.kind) == (4, IN_FUNCTION)
    in_file = place(finding(2), ChangedFile("a.py", added={8}), HELPER_FILE)
    assert (in_file.line, in_file.note.kind) == (8, IN_FILE)


def test_new_findings_are_counted_by_what_they_say_not_where():
    base_text = "x = 1\nif isinstance(s, A): pass\nif isinstance(s, A): pass\n"
    head_text = "y = 0\nx = 1\nif isinstance(s, A): pass\nif isinstance(s, A): pass\nif isinstance(s, A): pass\n"
    base = [finding(2), finding(3)]
    head = [finding(3), finding(4), finding(5), finding(5, message="other")]
    new = new_findings(head, {"a.py": head_text}, base, {"a.py": base_text})
    assert [(f.line, f.message) for f in new] == [(5, "m"), (5, "other")]  # two were already there


def test_every_placement_note_is_a_kind_the_saved_review_accepts_and_worded():
    for kind in (AT_CALL, IN_FUNCTION, IN_FILE, "function-first-change"):
        assert kind in NOTE_KINDS
        sentence = note_sentence(Note(kind, line=7), "a.py")
        assert "line 7" in sentence and "\n" not in sentence


def test_a_changed_line_that_is_part_of_an_old_root_cause_is_commented_and_says_so(tmp_path):
    """A root cause is reported once, at its primary line, with the rest of it as related locations. A pull
    request that edits only a related line (here the signature of the function whose sizing path diverges,
    KV103, folded into the KV102 scaling four lines below) still gets the finding on the line it edits."""
    repo = write_tree(tmp_path / "repo", MINI_VLLM)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base: the hand-written span")
    git(repo, "checkout", "-qb", "pr")
    config = repo / CONFIG_PATH
    lines = config.read_text().splitlines(keepends=True)
    assert lines[2].startswith("def build_offloading_config(vllm_config, kv_cache_config):")
    lines[2] = "def build_offloading_config(vllm_config, kv_cache_config, *, unused=None):\n"
    config.write_text("".join(lines))
    git(repo, "commit", "-qam", "pr: touch only the signature")

    run = review(repo)
    [comment] = comments(run)
    assert (comment["path"], comment["line"]) == (CONFIG_PATH, 3)
    assert "KV102" in comment["body"]
    assert "This changed line is part of the finding at line 6" in comment["body"]
    markdown = review(repo, "--format", "markdown").stdout
    assert "This changed line is part of the finding at line 6" in markdown
