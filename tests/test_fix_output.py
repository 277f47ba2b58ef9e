"""What `kvlint fix` gives back: a patch `git apply` takes, a "left" list equal to a fresh `check`, fixes in
files written in syntax newer than the running Python, and one position for a syntax error."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kvlint.analysis.hierarchy import builtin_hierarchy
from kvlint.analysis.tree_index import TreeIndex
from kvlint.engine.lint import LintRequest, lint_bytes
from kvlint.engine.registry import all_rules
from kvlint.errors import FixError
from kvlint.fixing.apply import check_compiles
from kvlint_runner import run_kvlint
from mini_vllm import CONFIG_PATH as OFFLOADING_CONFIG
from mini_vllm import MINI_VLLM, write_tree
from test_cli import BUGGY, make_tree
from test_text_layout import located


def kvlint(*arguments: str, cwd: Path) -> subprocess.CompletedProcess:
    return run_kvlint(*arguments, cwd=cwd)


def fix_diff(*arguments: str, cwd: Path) -> tuple[int, bytes, str]:
    """`kvlint fix --diff`: (exit code, stdout as bytes — a patch keeps the files' \\r\\n —, stderr)."""
    completed = run_kvlint("fix", "--no-cache", "--diff", *arguments, cwd=cwd, binary=True)
    return completed.returncode, completed.stdout, completed.stderr.decode()


def git(repo: Path, *arguments: str) -> subprocess.CompletedProcess:
    command = ["git", "-c", "user.email=t@example.com", "-c", "user.name=t", *arguments]
    return subprocess.run(command, cwd=repo, capture_output=True, text=True, check=False)


def findings(text: str) -> list[str]:
    """Each finding as `path:line:column code` (`check` and `fix` word the rest differently)."""
    return located(text)


def left_count(stderr: str) -> int:
    return int(re.search(r"(\d+) finding\(s\) left", stderr).group(1))


@pytest.fixture
def repo(tmp_path):
    """A git repository holding a miniature vLLM tree: the sizing fixture of test_paths (a KV103 on the
    offloading connector that its own KV101/KV102 fix removes), the per-file fixture of test_cli, and a
    fixable file with CRLF line ends and no newline at its end, and a finding whose fix is unsafe (left)."""
    root = tmp_path / "repo"
    root.mkdir()
    make_tree(root)
    write_tree(root, MINI_VLLM)  # its interface and resolver say more than make_tree's
    (root / "pkg" / "crlf.py").write_bytes(BUGGY.replace("\n", "\r\n").rstrip("\r\n").encode())
    (root / "pkg" / "unsafe.py").write_text("def span(spec, dcp):\n    return spec.block_size * dcp\n")  # stays
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "base")
    return root


def fixed_copy(repo: Path, destination: Path) -> dict[str, bytes]:
    """What `kvlint fix` writes, on a copy: the reference the patch must reproduce."""
    shutil.copytree(repo, destination)
    completed = kvlint("fix", "--no-cache", ".", cwd=destination)
    assert completed.returncode in (0, 1), completed.stderr
    return {str(p.relative_to(destination)): p.read_bytes() for p in destination.rglob("*.py")}


def test_diff_is_a_pure_patch_that_git_apply_takes_from_the_working_folder(repo, tmp_path):
    expected = fixed_copy(repo, tmp_path / "reference")
    code, patch_bytes, stderr = fix_diff(".", cwd=repo)
    assert code == 1  # files would change
    patch = patch_bytes.decode()
    assert patch.startswith("--- a/"), patch[:200]
    assert findings(patch) == [] and "finding(s) left" not in patch  # the rest is on stderr
    headers = [line for line in patch.splitlines() if line.startswith(("--- ", "+++ "))]
    assert "--- a/pkg/buggy.py" in headers and "+++ b/pkg/buggy.py" in headers
    assert f"--- a/{OFFLOADING_CONFIG}" in headers
    assert all(not line[4:].startswith(("a//", "b//", "a/" + str(tmp_path))) for line in headers)
    assert findings(stderr)
    (tmp_path / "x.patch").write_bytes(patch_bytes)
    checked = git(repo, "apply", "--check", str(tmp_path / "x.patch"))
    assert checked.returncode == 0, checked.stderr
    assert git(repo, "apply", str(tmp_path / "x.patch")).returncode == 0
    applied = {str(p.relative_to(repo)): p.read_bytes() for p in repo.rglob("*.py")}
    assert applied == expected, "the patch must give what `kvlint fix` writes, byte for byte"


def test_patch_paths_are_relative_to_the_working_folder_whatever_the_arguments(repo, tmp_path):
    # Absolute arguments, and a working folder below the tree's root: still the paths `git diff` would give.
    _, patch, _ = fix_diff(str(repo / "pkg" / "buggy.py"), cwd=repo / "pkg")
    headers = [line for line in patch.decode().splitlines() if line.startswith(("--- ", "+++ "))]
    assert headers == ["--- a/buggy.py", "+++ b/buggy.py"]
    (tmp_path / "x.patch").write_bytes(patch)
    assert git(repo / "pkg", "apply", "--check", str(tmp_path / "x.patch")).returncode == 0
    # From outside the tree (as for a fetched release): relative to the tree's root, which stderr names.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    _, patch, stderr = fix_diff(str(repo / "pkg" / "buggy.py"), cwd=elsewhere)
    assert patch.decode().splitlines()[:2] == ["--- a/pkg/buggy.py", "+++ b/pkg/buggy.py"]
    assert f"the patch's paths are relative to {repo}: apply it there" in stderr
    (tmp_path / "y.patch").write_bytes(patch)
    assert git(repo, "apply", "--check", str(tmp_path / "y.patch")).returncode == 0


def test_left_is_what_a_fresh_check_reports(repo):
    before = json.loads(kvlint("check", "--no-cache", "--output-format", "json", ".", cwd=repo).stdout)
    # a cross-file finding the fix takes away (a finding, or a related location of the same root cause)
    places = [(f["code"], f["path"]) for f in before] + [(r["code"], r["path"]) for f in before for r in f["related"]]
    assert any(code == "KV103" and path.endswith(OFFLOADING_CONFIG) for code, path in places), places
    fixed = kvlint("fix", "--no-cache", ".", cwd=repo)
    fresh = kvlint("check", "--no-cache", ".", cwd=repo)
    assert " KV103 " not in fresh.stdout
    assert findings(fixed.stdout) == findings(fresh.stdout)
    assert left_count(fixed.stderr) == len(findings(fresh.stdout))


def test_left_after_diff_is_what_a_check_of_the_patched_tree_reports_at_the_lines_on_disk(repo, tmp_path):
    # a fix that adds an import above a finding it leaves: every later line of the patched text moves
    (repo / "pkg" / "mixed.py").write_text(BUGGY + "\n\ndef span(spec, dcp):\n    return spec.block_size * dcp\n")
    on_disk = findings(kvlint("check", "--no-cache", ".", cwd=repo).stdout)
    _, patch, stderr = fix_diff(".", cwd=repo)
    (tmp_path / "x.patch").write_bytes(patch)
    assert git(repo, "apply", str(tmp_path / "x.patch")).returncode == 0
    fresh = findings(kvlint("check", "--no-cache", ".", cwd=repo).stdout)
    left = findings(stderr)
    assert left_count(stderr) == len(fresh) == len(left)
    # the same findings, where the user sees them: the patch is not applied, so at the lines on disk (a fix
    # that adds an import moves the later lines of its file)
    assert [entry.split(":")[0] + " " + entry.split(" ")[1] for entry in left] == [
        entry.split(":")[0] + " " + entry.split(" ")[1] for entry in fresh
    ]
    assert set(left) <= set(on_disk), (left, on_disk)
    assert set(left) != set(fresh), "a fix must move a finding left in its file"


@pytest.mark.slow
def test_left_after_fixing_0_29_0_is_a_fresh_check(fixed_029):
    tree, fixed = fixed_029.tree, fixed_029.run
    fresh = kvlint("check", "--no-cache", "vllm", cwd=tree)
    # what is left: warnings and the errors whose fix is unsafe (test_fix names them): both runs exit 1 alike
    assert fixed.returncode == fresh.returncode == 1, fixed.stderr
    assert findings(fixed.stdout) == findings(fresh.stdout)
    assert left_count(fixed.stderr) == len(findings(fresh.stdout))
    # The stale finding of old: the KV103 on the function the fix rewrote, which a fresh check does not report.
    assert not any(" KV103 " in line and "build_offloading_config" in line for line in fixed.stdout.splitlines())


# ------------------------------------------------------- syntax newer than the running Python

PEP_695 = textwrap.dedent(
    """\
    type Spans = list[int]


    class Box[T]:
        def get(self) -> T: ...


    def first[T](items: list[T]) -> T:
        return items[0]


    """
)


def test_fix_in_a_file_with_pep_695_syntax(tmp_path):
    make_tree(tmp_path)
    path = tmp_path / "pkg" / "modern.py"
    path.write_text(PEP_695 + BUGGY)
    completed = kvlint("fix", "--no-cache", str(path), cwd=tmp_path)
    assert completed.returncode == 0, completed.stdout + completed.stderr
    text = path.read_text()
    assert "resolve_dcp_kv_block_size(g.kv_cache_spec, dcp)" in text
    assert "\ntype Spans = list[int]\n" in text and "\nclass Box[T]:\n" in text and "def first[T](" in text
    if sys.version_info >= (3, 12):
        compile(text, str(path), "exec")


def test_the_compile_check_falls_back_to_libcst_only_when_python_cannot_compile_the_original():
    # `return` outside a function parses (libcst, ast) but no Python compiles it: it stands in, on every
    # version, for syntax newer than the running Python.
    uncompilable = "return 1\n"
    check_compiles("return 2\n", "m.py", original=uncompilable)  # libcst parses it: accepted
    with pytest.raises(FixError, match="does not parse"):
        check_compiles("return (2\n", "m.py", original=uncompilable)
    with pytest.raises(FixError, match="does not compile"):
        check_compiles("return 2\n", "m.py", original="x = 1\n")  # the original compiled: Python judges
    with pytest.raises(FixError, match="does not compile"):
        check_compiles("return 2\n", "m.py")


# ------------------------------------------------------- KV000: one position

KV000_RULES = tuple(rule for rule in all_rules() if rule.CODE in ("KV000", "KV101"))


@pytest.mark.parametrize(
    ("source", "line"),
    [
        ("import os\n\ndef broken(:\n    isinstance(kv_cache_groups, AttentionSpec)\n", 3),
        ("x = 1\nif kv_cache_groups:\n    y = isinstance(spec, Spec) *\n", 3),
        ("x = (isinstance(spec, Spec),\n  kv_cache_groups\ny = 2\n", 1),
    ],
    ids=["bad-def", "dangling-operator", "unclosed-bracket"],
)
def test_a_syntax_error_has_one_position(source, line):
    request = LintRequest("m.py", "m.py", TreeIndex(root=None, hierarchy=builtin_hierarchy()), KV000_RULES)
    [finding] = lint_bytes(request, source.encode()).findings
    assert finding.code == "KV000"
    stated = re.search(r"syntax error at (\d+):(\d+)", finding.message)
    assert stated, finding.message
    assert (int(stated.group(1)), int(stated.group(2))) == (finding.line, finding.column)
    assert finding.line == line  # where the mistake is, not where libcst gave up
    assert "error at" not in finding.message.replace("syntax error at", "")


def test_a_read_only_file_is_left_alone_in_one_line(repo):
    # ruff's reading of a read-only bit: do not edit. kvlint runs as root in CI, where the bit stops nothing.
    target = repo / "pkg" / "buggy.py"
    before = target.read_bytes()
    target.chmod(0o444)
    result = kvlint("fix", "--no-cache", "pkg/buggy.py", cwd=repo)
    assert target.read_bytes() == before
    assert oct(target.stat().st_mode & 0o777) == oct(0o444)
    said = [line for line in result.stderr.splitlines() if "read-only" in line]
    assert said == ["pkg/buggy.py: not fixed: is read-only: not written (make it writable to let kvlint fix it)"]
    assert result.returncode == 1 and "Traceback" not in result.stderr
    # --diff writes nothing, so it still shows what the fix would be
    code, patch, _ = fix_diff("pkg/buggy.py", cwd=repo)
    assert code == 1 and patch.startswith(b"--- a/pkg/buggy.py")
