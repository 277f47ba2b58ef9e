"""Severity in every output (text, json, SARIF, GitHub annotations, review comments, rdjson), related
locations where each format has room for them, and `--fail-on`: which findings fail a run."""

from __future__ import annotations

import json

import jsonschema
import pytest
from click.testing import CliRunner

from kvlint.cli import main
from kvlint.engine.summary import EXIT_CLEAN, EXIT_FINDINGS, FixSummary, Summary
from kvlint.errors import ReviewError
from kvlint.reporters import load_reporter
from kvlint.review.render import comment_body, markdown, rdjson
from kvlint.review.review import Review, ReviewComment
from kvlint.scan.config import load_config
from kvlint.types import Finding, RelatedLocation, Severity
from test_cli import sarif_schema
from test_text_layout import located

CHECK = RelatedLocation("pkg/a.py", 5, 24, 5, 70, "KV101", "`isinstance(spec, AttentionSpec)` is False for a container")
ERROR = Finding(
    "pkg/a.py", 3, 1, 9, 10, "KV103", "divergent-sizing-paths", "`f` gives 16 tokens per block", related=(CHECK,)
)
WARNING = Finding(
    "pkg/b.py", 7, 5, 7, 40, "KV102", "hand-rolled-dcp-scaling", "agrees with the resolver today", Severity.WARNING
)


def render(name: str, findings) -> str:
    return load_reporter(name)().render(list(findings), ())


def test_text_says_the_severity_and_lists_related_locations():
    lines = render("full", [ERROR, WARNING]).splitlines()  # files that are not there: no source frame
    assert lines == [
        "KV103 error: `f` gives 16 tokens per block",
        "--> pkg/a.py:3:1",
        "related: line 5: KV101 `isinstance(spec, AttentionSpec)` is False for a container",
        "",
        "KV102 warning: agrees with the resolver today",
        "--> pkg/b.py:7:5",
    ]
    assert render("concise", [ERROR, WARNING]).splitlines() == [
        "pkg/a.py:3:1: KV103 error: `f` gives 16 tokens per block",
        "pkg/b.py:7:5: KV102 warning: agrees with the resolver today",
    ]


def test_json_has_severity_and_related():
    error, warning = json.loads(render("json", [ERROR, WARNING]))
    assert (error["severity"], warning["severity"]) == ("error", "warning")
    assert error["related"] == [
        {
            "code": "KV101",
            "message": CHECK.message,
            "path": "pkg/a.py",
            "line": 5,
            "column": 24,
            "end_line": 5,
            "end_column": 70,
            "kinds": [],
        }
    ]
    assert warning["related"] == []


def test_sarif_level_and_related_locations():
    document = json.loads(render("sarif", [ERROR, WARNING]))
    error, warning = document["runs"][0]["results"]
    assert (error["level"], warning["level"]) == ("error", "warning")
    [related] = error["relatedLocations"]
    assert related["id"] == 1 and related["message"]["text"].startswith("KV101: ")
    assert related["physicalLocation"]["region"] == {"startLine": 5, "startColumn": 24, "endLine": 5, "endColumn": 70}
    assert "relatedLocations" not in warning
    levels = {
        rule["id"]: rule["defaultConfiguration"]["level"] for rule in document["runs"][0]["tool"]["driver"]["rules"]
    }
    assert levels == {"KV103": "error", "KV102": "warning"}  # a rule's default: its most severe finding here
    jsonschema.validate(document, sarif_schema())


def test_github_annotations_are_errors_or_warnings():
    error, warning = render("github", [ERROR, WARNING]).splitlines()
    assert error.startswith("::error file=pkg/a.py,line=3,")
    assert error.endswith("::KV103 `f` gives 16 tokens per block%0Arelated: pkg/a.py:5:24: KV101 " + CHECK.message)
    assert warning.startswith("::warning file=pkg/b.py,line=7,")


def _review(*findings: Finding) -> Review:
    comments = [
        ReviewComment(f.path, f.line, None, [f], [f"<!-- kvlint:{f.code}:{f.path}:0123456789ab -->"]) for f in findings
    ]
    return Review(comments, list(findings), [], [], 2)


def test_review_comments_say_warning_or_error_and_hold_the_related_locations():
    error_body = comment_body(_review(ERROR).comments[0])
    assert "**kvlint KV103 divergent-sizing-paths** (error): " in error_body
    assert (
        "Same root cause, also reported at:\n- `pkg/a.py` line 5, KV101: `isinstance(spec, AttentionSpec)`"
        in error_body
    )
    warning_body = comment_body(_review(WARNING).comments[0])
    assert "(warning): agrees with the resolver today" in warning_body and "Same root cause" not in warning_body
    assert "(warning)" in markdown(_review(WARNING))


def test_rdjson_severity_per_diagnostic_and_overall():
    texts = {"pkg/a.py": "x\n" * 10, "pkg/b.py": "y\n" * 10}
    both = rdjson(_review(ERROR, WARNING), texts)
    assert [d["severity"] for d in both["diagnostics"]] == ["ERROR", "WARNING"] and both["severity"] == "ERROR"
    [related] = both["diagnostics"][0]["related_locations"]
    assert related["location"] == {
        "path": "pkg/a.py",
        "range": {"start": {"line": 5, "column": 2}, "end": {"line": 5, "column": 2}},
    }
    assert rdjson(_review(WARNING), texts)["severity"] == "WARNING"
    assert rdjson(_review(), texts)["severity"] == "INFO"


# --- what fails a run ------------------------------------------------------------------------------------


def test_summary_exit_codes_follow_fail_on():
    assert Summary([WARNING], 3).exit_code() == EXIT_CLEAN  # warnings alone pass by default
    assert Summary([WARNING], 3, Severity.WARNING).exit_code() == EXIT_FINDINGS
    assert Summary([ERROR, WARNING], 3).exit_code() == EXIT_FINDINGS
    assert Summary([ERROR], 3).exit_code(exit_zero=True) == EXIT_CLEAN
    assert Summary([], 3, Severity.WARNING).exit_code() == EXIT_CLEAN
    assert FixSummary(0, [WARNING], failed=False, diff_only=False).exit_code() == EXIT_CLEAN
    assert FixSummary(0, [WARNING], False, False, Severity.WARNING).exit_code() == EXIT_FINDINGS
    assert FixSummary(0, [], failed=True, diff_only=False).exit_code() == EXIT_FINDINGS


def test_summary_line_and_statistics_count_root_causes():
    line = Summary([WARNING], 3).line()
    assert (
        line == "kvlint: 1 finding(s) (0 errors, 1 warning) in 3 files checked; none fails the run (--fail-on error)."
    )
    assert "none fails" not in Summary([ERROR, WARNING], 3).line()
    assert Summary([ERROR, WARNING], 3).statistics() == [
        "     1  KV102 hand-rolled-dcp-scaling  warning",
        "     1  KV103 divergent-sizing-paths  error",
        "     2  root cause(s) (1 error, 1 warning); 1 more finding(s) folded into them as related locations",
    ]


@pytest.fixture
def warned_tree(tmp_path, monkeypatch):
    """A tiny tree whose real scan finds one warning: a hand-written DCP scaling, alone in its tree (no resolver
    to compare with, so no counterexample)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "b.py").write_text("def span(spec, dcp):\n    return spec.block_size * dcp\n")
    return tmp_path


def run_check(*args):
    return CliRunner().invoke(main, ["check", "--no-cache", *args, "pkg"])


def test_fail_on_from_the_command_line(warned_tree):
    default = run_check()
    assert default.exit_code == 0 and default.stdout.startswith("KV102 warning: ")
    assert located(default.stdout) == ["pkg/b.py:2:12 KV102"]  # one finding
    assert "none fails the run (--fail-on error)" in default.stderr
    assert run_check("--fail-on", "warning").exit_code == 1
    assert run_check("--fail-on", "error").exit_code == 0
    assert run_check("--fail-on", "fatal").exit_code == 2


def test_fail_on_from_the_configuration_and_the_command_line_wins(warned_tree):
    (warned_tree / "pyproject.toml").write_text('[tool.kvlint]\nfail-on = "warning"\n')
    assert run_check().exit_code == 1
    assert run_check("--fail-on", "error").exit_code == 0


@pytest.mark.parametrize("value", ['"fatal"', "1", '["error"]'])
def test_a_bad_fail_on_value_is_one_line_exit_two(warned_tree, value):
    (warned_tree / "pyproject.toml").write_text(f"[tool.kvlint]\nfail-on = {value}\n")
    result = run_check()
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert result.stderr.strip().count("\n") == 0 and "fail-on must be one of 'error', 'warning'" in result.stderr


def test_config_defaults_to_failing_on_errors(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.kvlint]\n")
    assert load_config(tmp_path / "pyproject.toml").fail_on is Severity.ERROR
    assert load_config(None).fail_on is Severity.ERROR


def test_check_help_documents_the_default():
    help_text = CliRunner().invoke(main, ["check", "--help"]).stdout
    assert "--fail-on [error|warning]" in help_text and "(the default" in help_text


def test_the_saved_review_keeps_severity_and_related_locations():
    """Stage two of the fork-safe workflow renders the same comments as one stage would post."""
    from kvlint.review.review import summarise
    from kvlint.review.saved import review_data, review_from_data

    review = _review(ERROR, WARNING)
    data = json.loads(json.dumps(review_data(review, summarise(review, 50))))
    saved = review_from_data(data)
    assert [comment_body(c) for c in saved.comments] == [comment_body(c) for c in review.comments]
    data["comments"][0]["findings"][0]["severity"] = "fatal"
    with pytest.raises(ReviewError, match="finding severity"):
        review_from_data(data)
    data["comments"][0]["findings"][0]["severity"] = "error"
    data["comments"][0]["findings"][0]["related"][0]["path"] = "../outside.py"
    with pytest.raises(ReviewError, match="path"):
        review_from_data(data)
