"""README.md is true because it is checked: its generated blocks are what kvlint prints now
(scripts/readme_numbers.py writes them; the slow test reruns it), its configuration table is
kvlint/scan/config.py's, and its GitHub Action and pre-commit snippets work as written."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from kvlint.analysis.vocabulary import DEFAULT_SCHEDULER_ONLY_PATHS
from kvlint.scan.config import KNOWN_KEYS, Config
from test_precommit import hook_repo, pre_commit_home  # noqa: F401 - fixtures: a local kvlint repo, pre-commit's home
from test_text_layout import located

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def load_script():
    spec = importlib.util.spec_from_file_location("readme_numbers", ROOT / "scripts" / "readme_numbers.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def fenced(marker: str, language: str) -> str:
    """The ```language block that holds `marker`, else the first one after it."""
    at = README.index(marker)
    opening = README.rfind(f"```{language}\n", 0, at)
    if opening == -1 or "```\n" in README[opening + 4 + len(language) : at]:  # `marker` is outside that block
        opening = README.index(f"```{language}\n", at)
    body = opening + len(language) + 4
    return README[body : README.index("```", body)]


# ------------------------------------------------------------------------------------------ configuration


def config_table() -> dict[str, list[str]]:
    start = README.index("<!-- config-reference")
    rows = {}
    for line in README[start:].splitlines()[3:]:
        if not line.startswith("| `"):
            break
        cells = [cell.strip() for cell in line.strip("|").split(" | ")]
        rows[cells[0].strip("`")] = cells[1:]
    return rows


def test_the_configuration_table_has_every_key_and_its_default():
    table = config_table()
    assert set(table) == KNOWN_KEYS
    defaults = Config()
    assert defaults.select is None and table["select"][1] == "every rule"
    for key, value in (("ignore", defaults.ignore), ("exclude", defaults.exclude)):
        assert value == [] and table[key][1] == "`[]`"
    assert defaults.per_file_ignores == {} and table["per-file-ignores"][1] == "`{}`"
    assert table["fail-on"][1] == f'`"{defaults.fail_on.value}"`'
    assert defaults.scheduler_only_paths == list(DEFAULT_SCHEDULER_ONLY_PATHS)
    assert f"`{DEFAULT_SCHEDULER_ONLY_PATHS[0]}`" in table["scheduler-only-paths"][1]


def test_the_configuration_example_loads(tmp_path):
    from kvlint.scan.config import load_config

    (tmp_path / "pyproject.toml").write_text(fenced("## Configuration", "toml"), encoding="utf-8")
    config = load_config(tmp_path / "pyproject.toml")
    assert config.ignore == ["KV104"] and config.per_file_ignores == {"vllm/v1/worker/*": ["KV101"]}


# ------------------------------------------------------------------------------------------ CI snippets


def test_the_workflow_uses_the_action_pinned_to_a_commit_and_only_its_inputs():
    workflow = yaml.safe_load(fenced("# .github/workflows/kvlint.yml", "yaml"))
    inputs = set(yaml.safe_load((ROOT / "action.yml").read_text())["inputs"])
    steps = workflow["jobs"]["review"]["steps"]
    [action] = [step for step in steps if "kvlint@" in step.get("uses", "")]
    assert re.fullmatch(r"OWNER/kvlint@[0-9a-f]{40}", action["uses"])
    assert set(action.get("with", {})) <= inputs
    assert workflow["permissions"]["pull-requests"] == "write"


def precommit_entry() -> dict:
    return yaml.safe_load(fenced("# .pre-commit-config.yaml", "yaml"))


def test_the_precommit_entry_names_the_shipped_hook():
    [repo] = precommit_entry()["repos"]
    hooks = {hook["id"] for hook in yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())}
    assert [hook["id"] for hook in repo["hooks"]] == ["kvlint"] and "kvlint" in hooks
    assert repo["rev"] == "main"


@pytest.mark.skipif(importlib.util.find_spec("pre_commit") is None, reason="pre-commit is not installed")
def test_the_precommit_entry_runs_as_written(tmp_path, hook_repo, pre_commit_home):  # noqa: F811
    """The README's entry, its repository replaced by a local copy of this checkout whose branch is `main`:
    the real pre-commit accepts `rev: main`, installs the hook and fails on a finding."""
    from test_precommit import BUGGY, _git, _pre_commit

    repo, _ = hook_repo
    if "main" not in _git(repo, "branch", "--list", "main"):
        _git(repo, "branch", "main")
    entry = precommit_entry()
    entry["repos"][0]["repo"] = str(repo)
    project = tmp_path / "project"
    (project / "pkg").mkdir(parents=True)
    (project / "pkg" / "sizing.py").write_text(BUGGY)
    (project / ".pre-commit-config.yaml").write_text(yaml.safe_dump(entry))
    _git(project, "init", "-q")
    _git(project, "add", "-A")
    run = _pre_commit(project, pre_commit_home)
    output = run.stdout + run.stderr
    assert run.returncode == 1 and "kvlint" in output and "Failed" in output, output
    assert "pkg/sizing.py:1:1 KV103" in located(output)


# ------------------------------------------------------------------------------------------ generated blocks


def test_every_generated_block_is_there_once():
    script = load_script()
    names = [match.group("name") for match in script.BLOCK.finditer(README)]
    assert sorted(names) == ["costs", "fast-loop", "first-screen", "newest-kv101", "releases", "summary-029"]
    assert script.rewrite(README, {}) == README


def test_the_fast_loops_count_is_what_pytest_collects_now():
    """The measured block says how many tests the fast loop runs; a test added or removed since makes it stale."""
    said = re.search(r"The fast loop runs ([\d,]+) tests", README)
    assert said, "README.md has no measured fast loop: python scripts/readme_numbers.py --measure-tests"
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", "not slow", "-p", "no:cacheprovider"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    collected = re.search(r"(\d+)(?:/\d+)? tests? collected", run.stdout)
    assert collected, run.stdout[-500:]
    assert int(said.group(1).replace(",", "")) == int(collected.group(1)), (
        "README.md's fast loop count is stale: python scripts/readme_numbers.py --measure-tests"
    )


def test_the_first_screen_is_a_terminals_width_and_shows_whole_findings():
    script = load_script()
    block = script.current(README)["first-screen"].splitlines()
    assert max(map(len, block)) <= script.SCREEN_COLUMNS == 120 and len(block) <= script.SCREEN_ROWS + 2
    # The arrow is indented to the width of the frame's line numbers.
    assert re.match(r"KV10\d (\[[^\]]+\] )?(error|warning): ", block[3]) and any(
        re.match(r" +--> vllm/", line) for line in block
    )
    assert any(set(line.partition(" | ")[2].strip()) == {"^"} for line in block)  # carets in the source frame
    assert any(line.startswith("help: ") and "…" not in line for line in block)


@pytest.mark.slow
def test_the_readme_shows_what_kvlint_prints_now(vllm_release):
    for version in load_script().RELEASES:
        vllm_release(version)  # fetched (once) before the script reads the release cache
    script = load_script()
    now = script.blocks()
    written = script.current(README)
    for name, body in now.items():
        assert written[name] == body, f"README.md's {name} block is stale: run python scripts/readme_numbers.py"


@pytest.mark.slow
def test_the_first_screen_reads_well_and_its_summary_stands_in_the_readme(vllm_release):
    vllm_release("0.29.0")
    completed = subprocess.run(
        [sys.executable, "-m", "kvlint", "check", "--vllm-release", "0.29.0"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert completed.returncode == 1, completed.stderr
    lines = completed.stdout.splitlines()
    assert lines and not any(line.startswith(("/", "~")) for line in lines)
    assert max(map(len, lines)) <= 100  # stdout is no terminal here: 100 columns
    summary = completed.stderr.splitlines()[-1]
    assert summary.startswith("kvlint: ") and "files checked" in summary
    assert f"\n{summary}\n" in README
