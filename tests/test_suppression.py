"""One rule for suppression (kvlint.engine.suppress): suppressing the finding shown — by a line comment, the
configuration's `ignore` or `per-file-ignores`, or `--ignore` — suppresses its root cause, the related
locations folded into it included; a related location is suppressed on its own line (or by its code) and
leaves the finding standing.

The tree is the miniature vLLM: its offloading config's hand-written span is one root cause, a KV102 finding
(line 6) with a KV103 on the function's def (line 3), a KV101 check and a KV105 predicate (line 6) folded
into it. Before this rule, suppressing the KV102 promoted the KV105 to a finding of its own."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvlint_runner import run_kvlint
from mini_vllm import CONFIG_PATH, MINI_VLLM, write_tree

SCALING_LINE = "group.kv_cache_spec.block_size * (dcp if isinstance(group.kv_cache_spec, AttentionSpec) else 1)"
DEF_LINE = "def build_offloading_config(vllm_config, kv_cache_config):"


def tree(root: Path, *, scaling_comment: str = "", def_comment: str = "", pyproject: str = "") -> Path:
    files = dict(MINI_VLLM)
    files[CONFIG_PATH] = (
        files[CONFIG_PATH]
        .replace(SCALING_LINE, SCALING_LINE + scaling_comment)
        .replace(DEF_LINE, DEF_LINE + def_comment)
    )
    if pyproject:
        files["pyproject.toml"] = pyproject
    return write_tree(root, files)


def check(root: Path, *arguments: str) -> list[dict]:
    completed = run_kvlint("check", "--no-cache", "--format", "json", *arguments, "vllm", cwd=root)
    assert completed.returncode in (0, 1), completed.stderr
    return json.loads(completed.stdout)


def shape(findings: list[dict]) -> list[tuple[str, int, list[str]]]:
    return [(f["code"], f["line"], sorted(r["code"] for r in f["related"])) for f in findings]


def test_the_unsuppressed_root_cause(tmp_path):
    assert shape(check(tree(tmp_path))) == [("KV102", 6, ["KV101", "KV103", "KV105"])]


@pytest.mark.parametrize("comment", ["  # kvlint: ignore[KV102]", "  # kvlint: ignore[KV1]", "  # kvlint: ignore"])
def test_a_comment_on_the_finding_shown_suppresses_its_root_cause(tmp_path, comment):
    assert check(tree(tmp_path, scaling_comment=comment)) == []


@pytest.mark.parametrize(
    "pyproject",
    [
        '[tool.kvlint]\nignore = ["KV102"]\n',
        f'[tool.kvlint]\nper-file-ignores = {{ "{CONFIG_PATH}" = ["KV102"] }}\n',
        '[tool.kvlint]\nper-file-ignores = { "vllm/distributed/*" = ["KV10"] }\n',
    ],
)
def test_the_configuration_ignoring_the_finding_shown_suppresses_its_root_cause(tmp_path, pyproject):
    assert check(tree(tmp_path, pyproject=pyproject)) == []


def test_ignore_on_the_command_line_suppresses_the_root_cause_too(tmp_path):
    assert check(tree(tmp_path), "--ignore", "KV102") == []


def test_a_related_location_is_suppressed_on_its_own_line(tmp_path):
    # KV103 sits on the def (line 3): a comment there takes it out of the related locations only.
    root = tree(tmp_path, def_comment="  # kvlint: ignore[KV103]")
    assert shape(check(root)) == [("KV102", 6, ["KV101", "KV105"])]


def test_a_comment_for_a_related_code_on_the_findings_line_leaves_the_finding(tmp_path):
    # KV101 and KV105 share the finding's line: ignoring them there keeps the KV102 and its KV103.
    root = tree(tmp_path, scaling_comment="  # kvlint: ignore[KV101, KV105]")
    assert shape(check(root)) == [("KV102", 6, ["KV103"])]


def test_ignoring_a_related_code_in_the_configuration_leaves_the_finding(tmp_path):
    root = tree(tmp_path, pyproject='[tool.kvlint]\nignore = ["KV103"]\n')
    assert shape(check(root)) == [("KV102", 6, ["KV101", "KV105"])]


def test_fix_leaves_a_suppressed_root_cause_alone(tmp_path):
    root = tree(tmp_path, pyproject='[tool.kvlint]\nignore = ["KV102"]\n')
    before = (root / CONFIG_PATH).read_bytes()
    completed = run_kvlint("fix", "--no-cache", "vllm", cwd=root)
    assert completed.returncode == 0, completed.stderr
    assert (root / CONFIG_PATH).read_bytes() == before


# ------------------------------------------------------------------ the suppression table, record by record
# (each test below names the mutant of kvlint/engine/suppress.py it was written for, from scripts/mutation.py)

from kvlint.engine.suppress import ALL, suppress_root_causes, suppressions  # noqa: E402
from kvlint.types import Finding, RelatedLocation  # noqa: E402


def finding(line: int, end_line: int, code: str = "KV101", related: tuple = ()) -> Finding:
    return Finding("m.py", line, 1, end_line, 9, code, "name", "message", related=related)


def location(line: int, end_line: int, code: str) -> RelatedLocation:
    return RelatedLocation("m.py", line, 1, end_line, 9, code, "message")


def test_only_real_comments_are_directives():
    # mutants: `if token.type != COMMENT: continue` never taken; `if match is None: continue` never taken
    source = 's = "# kvlint: ignore[KV101]"\n# kvlint is run in CI\nx = 1  # kvlint: ignore[kv101, KV102]\n'
    assert suppressions(source) == {3: frozenset({"KV101", "KV102"})}
    assert suppressions("y = 1  # kvlint: ignore\n") == {1: ALL}


def test_an_ignore_on_any_line_of_a_multi_line_finding_suppresses_it_and_no_line_after_it():
    # mutants: the range's end `end_line + 1` → `+ 2` (a comment below the finding would suppress it)
    first, last, below = ({line: frozenset({"KV101"})} for line in (3, 5, 6))
    assert suppress_root_causes([finding(3, 5)], first) == ([], 1)
    assert suppress_root_causes([finding(3, 5)], last) == ([], 1)
    kept, suppressed = suppress_root_causes([finding(3, 5)], below)
    assert (len(kept), suppressed) == (1, 0)


def test_the_suppressed_count_is_each_finding_and_its_related_locations():
    # mutants: `suppressed = 0` → 1; `1 + len(related)` → `2 + …`; a related location's `end_line + 1` → `+ 2`
    root = finding(10, 10, "KV102", related=(location(10, 10, "KV105"), location(8, 8, "KV103")))
    assert suppress_root_causes([root], {10: frozenset({"KV102"})}) == ([], 3)
    other = finding(20, 21, "KV102", related=(location(20, 20, "KV101"), location(23, 23, "KV101")))
    # the comment on line 21 is below the related location on line 20: it stays
    kept, suppressed = suppress_root_causes([other], {21: frozenset({"KV101"})})
    assert suppressed == 0 and [r.line for r in kept[0].related] == [20, 23]
    kept, suppressed = suppress_root_causes([other], {23: frozenset({"KV101"})})
    assert suppressed == 1 and [r.line for r in kept[0].related] == [20]
    assert suppress_root_causes([finding(1, 1)], {}) == ([finding(1, 1)], 0)
