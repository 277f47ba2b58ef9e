"""The engine never raises: bad input becomes one KV000 finding naming the cause; suppression comments."""

from __future__ import annotations

import pytest

from kvlint.analysis.hierarchy import BUILTIN_BASES, SpecHierarchy
from kvlint.analysis.tree_index import TreeIndex
from kvlint.engine.lint import LintRequest, line_offsets, lint_bytes
from kvlint.engine.registry import all_rules, rule_by_code
from kvlint.engine.source import decode_source

PROJECT = TreeIndex(
    root=None,
    hierarchy=SpecHierarchy(bases=dict(BUILTIN_BASES)),
    resolver_module="vllm.v1.core.kv_cache_utils",
    resolver_layer_classes=frozenset({"AttentionSpec"}),
)
CONNECTOR = "vllm/distributed/kv_transfer/kv_connector/v1/x/config.py"
BUGGY = (
    "def spans(kv_cache_config, dcp):\n"
    "    return [\n"
    "        g.kv_cache_spec.block_size * (dcp if isinstance(g.kv_cache_spec, AttentionSpec) else 1)\n"
    "        for g in kv_cache_config.kv_cache_groups\n"
    "    ]\n"
)


# The rules this module's fixtures are about; the cross-file rules have tests of their own.
RULES = tuple(r for r in all_rules() if r.CODE in ("KV000", "KV101", "KV102"))


def lint(data: bytes, path: str = CONNECTOR):
    return lint_bytes(LintRequest(path, path, PROJECT, RULES), data)


@pytest.mark.parametrize("example", rule_by_code("KV000").INVALID, ids=["syntax", "nul"])
def test_kv000_examples(example):
    result = lint(example.source.encode())
    assert [f.code for f in result.findings] == ["KV000"]


@pytest.mark.parametrize(
    "data,cause",
    [
        (b"def broken(:\n    isinstance(kv_cache_groups, AttentionSpec)\n", "syntax error"),
        (b"x = 1\x00\n", "NUL bytes"),
        (b"x = '\xff\xfe'\n", "cannot decode as utf-8"),
        (b"# -*- coding: klingon -*-\nx = 1\n", "bad encoding declaration"),
        (b"x = 1\n" * (2 * 1024 * 1024), "too large"),
    ],
)
def test_bad_input_is_one_line_naming_the_cause(data, cause):
    result = lint(data)
    assert len(result.findings) == 1
    finding = result.findings[0]
    assert finding.code == "KV000" and cause in finding.message and "\n" not in finding.message


def test_empty_file_is_clean():
    assert lint(b"").findings == ()


def test_modern_syntax_parses():
    source = b"type Alias = list[int]\nclass Box[T]:\n    pass\nmatch x:\n    case 1:\n        pass\nf'{f\"{x}\"}'\n"
    findings = lint(source + BUGGY.encode()).findings
    assert [(f.code, [r.code for r in f.related]) for f in findings] == [("KV102", ["KV101"])]


def test_crlf_bom_and_tabs_keep_positions():
    crlf = BUGGY.replace("\n", "\r\n").replace("    ", "\t")
    result = lint(b"\xef\xbb\xbf" + crlf.encode())
    found = {(f.code, f.line) for f in result.findings} | {(r.code, r.line) for f in result.findings for r in f.related}
    assert found == {("KV101", 3), ("KV102", 3)}
    text = decode_source(b"\xef\xbb\xbf" + crlf.encode()).text
    for finding in result.findings:
        for edit in finding.fix.edits:
            assert text[edit.start : edit.end].startswith("g.kv_cache_spec.block_size")


def test_line_offsets_split_like_libcst():
    assert line_offsets("a\r\nb\rc\nd") == [0, 3, 5, 7]


def test_suppression_comment_on_the_line():
    suppressed = BUGGY.replace("else 1)\n", "else 1)  # kvlint: ignore[KV101]\n", 1)
    result = lint(suppressed.encode())
    assert [f.code for f in result.findings] == ["KV102"]
    assert result.suppressed == 1
    everything = BUGGY.replace("else 1)\n", "else 1)  # kvlint: ignore\n", 1)
    assert lint(everything.encode()).findings == ()


def test_suppression_text_inside_a_string_does_not_count():
    tricky = BUGGY.replace("else 1)\n", "else 1) + len('# kvlint: ignore')\n", 1)
    findings = lint(tricky.encode()).findings
    assert {f.code for f in findings} | {r.code for f in findings for r in f.related} == {"KV101", "KV102"}


def test_prefilter_skips_files_that_cannot_match():
    result = lint(b"import os\nprint(os.getcwd())\n")
    assert result.skipped_by_prefilter and result.findings == ()


def test_scheduler_side_code_is_not_flagged_for_containers():
    for path in ("vllm/v1/core/kv_cache_coordinator.py", "vllm/distributed/kv_transfer/kv_connector/v1/x/scheduler.py"):
        assert [f.code for f in lint(BUGGY.encode(), path).findings] == ["KV102"]
