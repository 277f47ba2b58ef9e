"""A syntax error is reported in every file kvlint scans, as ruff reports it, not only in a file holding some
rule's trigger word (issue 29, item 7: a broken file without one was skipped in silence, exit 0).

Judged as a file a rule reads is judged: Python's parser first, then libcst, which may know syntax newer than
the running Python (a `type` statement on 3.11), so such a file is not reported.
"""

from __future__ import annotations

from pathlib import Path

from kvlint.analysis.hierarchy import BUILTIN_BASES, SpecHierarchy
from kvlint.analysis.tree_index import TreeIndex
from kvlint.engine.lint import LintRequest, lint_bytes
from kvlint.engine.registry import all_rules
from kvlint_runner import run_kvlint

BROKEN = b"def helper(:\n    return 1\n"  # no rule's trigger word in it
NEWER = b"type Alias = list[int]\n"  # Python 3.12's syntax, which libcst parses on any Python


def write(folder: Path, files: dict[str, bytes]) -> Path:
    for name, data in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
    return folder


def test_a_file_no_rule_reads_still_has_its_syntax_error_reported_by_the_engine():
    project = TreeIndex(root=None, hierarchy=SpecHierarchy(bases=dict(BUILTIN_BASES)))
    request = LintRequest("pkg/broken.py", "pkg/broken.py", project, all_rules())
    [finding] = lint_bytes(request, BROKEN).findings
    assert finding.code == "KV000" and (finding.line, finding.column) == (1, 12)
    assert finding.message == "cannot analyse this file: syntax error at 1:12: invalid syntax"
    assert lint_bytes(request, NEWER).findings == ()
    assert lint_bytes(request, NEWER).skipped_by_prefilter


def test_check_reports_the_broken_file_without_a_trigger_word_in_one_line_cold_and_warm(tmp_path):
    tree = write(tmp_path / "project", {"pkg/broken.py": BROKEN, "pkg/newer.py": NEWER, "pkg/fine.py": b"x = 1\n"})
    cache = str(tmp_path / "cache")
    for _ in ("cold", "warm"):  # the second answered from the cache, which keeps the finding
        done = run_kvlint("check", "--cache-dir", cache, "--output-format", "concise", ".", cwd=tree)
        assert done.returncode == 1, done.stderr
        message = "cannot analyse this file: syntax error at 1:12: invalid syntax"
        assert done.stdout.splitlines() == [f"pkg/broken.py:1:12: KV000 error: {message}"]
