"""Deep nesting never reaches libcst's native parser, which crashes (SIGSEGV) or blows up on it (issue 21,
item 3): such a file is one KV000 line naming it and the cause, and every other file keeps its findings.

The crash inputs of the issue (6,000 nested parentheses, a 20,000-long attribute chain, 8,000 subscripts, a
nested ternary of 12,000 levels) and their disguises (a chain spread over lines inside brackets or joined by
backslashes, inside an f-string's braces, brackets hidden behind string closers) run in a child process with
a deadline and a memory cap (tests/kvlint_runner.py), through `check` with worker processes, `check -j 1`
and `review`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kvlint.engine import parse_guard
from kvlint.engine.parse_guard import TooNested, check_parsable
from kvlint_runner import run_kvlint_child
from review_repos import MODULE, SCALED, git, make_repo
from test_text_layout import blocks, located

# Every attack names what the rules look for, so the prefilter hands it to the parser.
HEADER = "# kv_cache_spec block_size decode_context_parallel_size\n"
ATTACKS = {
    "parens": "x = " + "(" * 6000 + "1" + ")" * 6000 + "\n",
    "attribute_chain": "x = a" + ".a" * 20000 + "\n",
    "subscripts": "x = a" + "[0]" * 8000 + "\n",
    "ternary": "x = " + "a if b else " * 12000 + "c\n",
    "chain_over_lines": "x = (a\n" + "    .a\n" * 20000 + ")\n",
    "backslashes": "x = a \\\n" + "    .a \\\n" * 20000 + "    .a\n",
    "fstring": 'x = f"{a' + ".a" * 20000 + '}"\n',
    "hidden_brackets": "x = " + '(")"\n' * 3000 + "1" + ")" * 3000 + "\n",
}


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_every_attack_is_refused_before_libcst(name):
    with pytest.raises(TooNested, match="nested too deeply to parse"):
        check_parsable(HEADER + ATTACKS[name])


def test_ordinary_code_is_not_even_measured(monkeypatch):
    """kvlint's own sources, long expressions and big flat literals included: the cheap scan passes them all."""
    monkeypatch.setattr(parse_guard.ast, "parse", lambda *_: pytest.fail("a file was measured"))
    root = Path(__file__).resolve().parent.parent
    for path in [*root.joinpath("kvlint").rglob("*.py"), *root.joinpath("rules").rglob("*.py")]:
        check_parsable(path.read_text(encoding="utf-8"))
    check_parsable("x = [\n" + "    1,\n" * 50000 + "]\n")  # a flat literal of any length
    check_parsable("x = " + " + ".join(["a"] * 200) + "\n")  # a long but shallow sum


def test_a_syntax_error_in_a_suspect_file_is_reported_as_python_reports_it():
    with pytest.raises(SyntaxError):
        check_parsable("x = a" + ".a" * 1000 + " +\n")


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    """A tree with a real finding (vllm/sizing.py, KV102) and one file per attack."""
    root = tmp_path_factory.mktemp("deep")
    (root / "vllm").mkdir()
    (root / MODULE).write_text(SCALED)
    for name, text in ATTACKS.items():
        (root / "vllm" / f"{name}.py").write_text(HEADER + text)
    return root


def assert_one_line_per_attack_and_the_finding_kept(output: str) -> None:
    for name in ATTACKS:  # one finding each, its source line (thousands of brackets) cut to the width
        [block] = [block for block in blocks(output) if located("\n".join(block))[0].startswith(f"vllm/{name}.py:")]
        assert block[0].startswith("KV000 ") and "nested too deeply to parse" in " ".join(block), (name, block)
        assert max(map(len, block)) <= 100, (name, block)
    assert "vllm/sizing.py" in output and "KV102" in output
    assert "BrokenProcessPool" not in output


@pytest.mark.parametrize("jobs", ["2", "1"])
def test_check_reports_each_attack_in_one_line_and_keeps_the_rest(tree, jobs):
    result = run_kvlint_child("check", "--no-cache", "-j", jobs, "--format", "text", ".", cwd=tree, timeout=120)
    assert result.returncode == 1, result.stderr[-2000:]
    assert_one_line_per_attack_and_the_finding_kept(result.stdout)


def test_review_reports_each_attack_and_keeps_the_rest(tmp_path):
    repo = make_repo(tmp_path)
    for name, text in ATTACKS.items():
        (repo / "vllm" / f"{name}.py").write_text(HEADER + text)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "pr: deep files")
    result = run_kvlint_child("review", "--base", "main", "--head", "pr", cwd=repo, timeout=120)
    assert result.returncode in (0, 1), (result.returncode, result.stderr[-2000:])
    for name in ATTACKS:
        assert f"vllm/{name}.py" in result.stdout and "nested too deeply to parse" in result.stdout, name
    assert "KV102" in result.stdout
