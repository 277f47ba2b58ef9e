"""docs/rules/ is generated from the rules (scripts/rule_docs.py) and must be up to date; the rule links in
SARIF and rdjson never point at the PyPI name `kvlint`, which belongs to an unrelated project."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from kvlint.cli import main
from kvlint.engine.registry import all_rules
from kvlint.reporters.sarif import SarifReporter

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def rule_docs():
    spec = importlib.util.spec_from_file_location("rule_docs", ROOT / "scripts" / "rule_docs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_docs_rules_is_up_to_date(rule_docs):
    assert rule_docs.stale() == [], "docs/rules/ is out of date: run python scripts/rule_docs.py"


def test_each_page_is_what_kvlint_explain_prints(rule_docs):
    for rule in all_rules():
        explained = CliRunner().invoke(main, ["explain", rule.CODE]).stdout
        assert (ROOT / "docs" / "rules" / f"{rule.CODE}.md").read_text() == rule_docs.GENERATED + explained


def test_a_stale_missing_or_extra_page_is_found(rule_docs, tmp_path):
    rule_docs.write(tmp_path)
    assert rule_docs.stale(tmp_path) == []
    (tmp_path / "KV101.md").write_text("old text\n")
    (tmp_path / "KV102.md").unlink()
    (tmp_path / "KV999.md").write_text("a rule that is gone\n")
    assert rule_docs.stale(tmp_path) == ["KV101.md", "KV102.md", "KV999.md"]
    check = subprocess.run([sys.executable, str(ROOT / "scripts" / "rule_docs.py"), "--check"], capture_output=True)
    assert check.returncode == 0, check.stderr  # the repository's own pages


def test_sarif_carries_the_rule_documentation_and_no_link_to_another_project():
    rules = tuple(all_rules())
    document = json.loads(SarifReporter().render([], rules))
    driver = document["runs"][0]["tool"]["driver"]
    assert "informationUri" not in driver
    for rule, descriptor in zip(rules, driver["rules"]):
        assert "helpUri" not in descriptor  # SARIF wants an absolute URI, and kvlint has no published home
        assert descriptor["help"]["markdown"] == rule.documentation()
    assert "pypi.org/project/kvlint" not in json.dumps(document)


def test_the_distribution_is_not_named_kvlint():
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert '\nname = "vllm-kvlint"\n' in pyproject and 'kvlint = "kvlint.launch:main"' in pyproject
    readme = (ROOT / "README.md").read_text()
    assert "`vllm-kvlint`" in readme and "do not `pip install kvlint`" in readme
    assert readme.count("pip install kvlint") == 1  # that warning, never an instruction
