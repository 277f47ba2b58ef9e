"""The shipped pre-commit hook, run by the real `pre-commit` tool from a local git copy of kvlint, offline.

pre-commit clones the hook repository and pip-installs it into a virtualenv of its own; here that
virtualenv sees this interpreter's copies of kvlint's dependencies through PYTHONPATH and pip may not
use an index, so nothing is downloaded.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from test_text_layout import located

ROOT = Path(__file__).resolve().parents[1]
BUGGY = "def tokens_per_block(group, dcp_size):\n    return group.kv_cache_spec.block_size * dcp_size\n"
CLEAN = "def double(value):\n    return value * 2\n"

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("pre_commit") is None, reason="pre-commit is not installed (pip install -e '.[test]')"
)


def _git(repo: Path, *arguments: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "-c", "user.email=t@example.com", "-c", "user.name=t", *arguments],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def test_hook_manifest_declares_kvlint_check():
    [hook] = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    assert hook["id"] == "kvlint" and hook["entry"] == "kvlint check --baseline-commit HEAD"
    assert hook["language"] == "python" and hook["types"] == ["python"]


@pytest.fixture(scope="module")
def hook_repo(tmp_path_factory) -> tuple[Path, str]:
    """A git repository holding this checkout's kvlint as it is on disk (committed or not)."""
    repo = tmp_path_factory.mktemp("hook") / "kvlint"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build")
    for name in ("kvlint", "rules"):
        shutil.copytree(ROOT / name, repo / name, ignore=ignore)
    for name in ("pyproject.toml", "README.md", ".pre-commit-hooks.yaml"):
        shutil.copyfile(ROOT / name, repo / name)
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "kvlint")
    return repo, _git(repo, "rev-parse", "HEAD")


def _project(tmp_path: Path, hook_repo: tuple[Path, str], files: dict[str, str]) -> Path:
    project = tmp_path / "project"
    for name, text in files.items():
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        (project / name).write_text(text)
    repo, rev = hook_repo
    (project / ".pre-commit-config.yaml").write_text(
        f"repos:\n  - repo: {repo}\n    rev: {rev}\n    hooks:\n      - id: kvlint\n"
    )
    _git(project, "init", "-q")
    _git(project, "add", "-A")
    return project


def _dependency_shim(folder: Path) -> Path:
    """A folder linking kvlint's installed runtime dependencies (and theirs), nothing else.

    On PYTHONPATH it lets pip in the hook's virtualenv see them as installed without shadowing that
    virtualenv's own setuptools, so the hook installs offline.
    """
    from importlib import metadata

    from packaging.requirements import Requirement

    folder.mkdir(exist_ok=True)
    pending = ["libcst", "click", "unidiff", "packaging"]
    if sys.version_info < (3, 11):  # kvlint reads its configuration with tomli there
        pending.append("tomli")
    if sys.version_info >= (3, 12):  # virtualenv seeds no setuptools there, and the hook builds kvlint with it
        pending.append("setuptools")
    seen: set[str] = set()
    while pending:
        name = pending.pop()
        if name.lower() in seen:
            continue
        seen.add(name.lower())
        try:
            distribution = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        for entry in {str(file).split("/")[0] for file in distribution.files or ()} - {".."}:
            source = Path(distribution.locate_file(entry))
            if source.exists() and not (folder / entry).exists():
                (folder / entry).symlink_to(source)
        for requirement in map(Requirement, distribution.requires or ()):
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                pending.append(requirement.name)
    return folder


def _pre_commit(project: Path, home: Path) -> subprocess.CompletedProcess:
    environment = {
        **os.environ,
        "PRE_COMMIT_HOME": str(home),
        "PYTHONPATH": str(_dependency_shim(home / "dependencies")),
        "PIP_NO_INDEX": "1",  # offline: everything the hook needs is already installed here
        "PIP_NO_BUILD_ISOLATION": "0",  # (sic) pip reads "0" as "do not isolate the build"
    }
    command = [sys.executable, "-m", "pre_commit", "run", "--all-files"]
    return subprocess.run(command, cwd=project, capture_output=True, text=True, env=environment, timeout=600)


@pytest.fixture(scope="module")
def pre_commit_home(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("pre-commit-home")


def test_hook_fails_on_a_finding_and_names_it(tmp_path, hook_repo, pre_commit_home):
    project = _project(tmp_path, hook_repo, {"pkg/sizing.py": BUGGY, "pkg/other.py": CLEAN})
    run = _pre_commit(project, pre_commit_home)
    output = run.stdout + run.stderr
    assert run.returncode == 1, output
    assert "kvlint" in output and "Failed" in output
    # The root cause on the function, the scaling in it as its related location (a line of the same file).
    assert "pkg/sizing.py:1:1 KV103" in located(output) and "\nrelated: line 2: KV102" in output
    assert "pkg/other.py" not in output.replace("files checked", "")


def test_an_old_finding_never_blocks_an_unrelated_commit(tmp_path, hook_repo, pre_commit_home):
    """The file's findings are committed: editing its comment passes; a new defect in it fails, alone."""
    project = _project(tmp_path, hook_repo, {"pkg/sizing.py": "# sizing\n" + BUGGY})
    _git(project, "commit", "-qm", "old findings")
    (project / "pkg/sizing.py").write_text("# sizing, by hand\n" + BUGGY)
    _git(project, "add", "-A")
    run = _pre_commit(project, pre_commit_home)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Passed" in run.stdout
    (project / "pkg/sizing.py").write_text("# sizing\n" + BUGGY + "\n\n" + BUGGY.replace("tokens_per_block", "more"))
    _git(project, "add", "-A")
    run = _pre_commit(project, pre_commit_home)
    output = run.stdout + run.stderr
    assert run.returncode == 1, output
    assert located(output) == ["pkg/sizing.py:6:1 KV103"]  # the new finding alone, the old one not shown
    assert "1 finding(s) present at HEAD not shown" in output


def test_hook_passes_on_clean_files(tmp_path, hook_repo, pre_commit_home):
    project = _project(tmp_path, hook_repo, {"pkg/other.py": CLEAN, "notes.txt": "block_size * dcp\n"})
    run = _pre_commit(project, pre_commit_home)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Passed" in run.stdout
