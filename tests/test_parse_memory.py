"""Memory under the parse guard's limits (issue 27, item 4): chains of operators libcst's native parser
descends into one level at a time (unary `-`, `**`, `lambda`) cost it memory growing with the square of
their length — lines of 990 unary minus signs, 56 MB per KB; under a 4 GB limit `review` aborted (SIGABRT).
The guard refuses such files (one KV000 line with the cause); a file that still takes a worker past its
memory cap becomes one KV000 line too, and every other file keeps its findings.

The scans run in a child process with a memory cap and a deadline (tests/kvlint_runner.py).
"""

from __future__ import annotations

import pytest

from kvlint.engine import parse_guard
from kvlint.engine.parse_guard import TooNested, check_parsable
from kvlint.scan.jobs import POOL_MIN_BYTES
from kvlint_runner import run_kvlint_child
from review_repos import MODULE, SCALED

HEADER = "# kv_cache_spec block_size decode_context_parallel_size\n"  # the prefilter hands it to the parser
UNARY = "x = " + "-" * 990 + "1\n"  # the line: 55 MB of libcst's memory each
CHAINS = {
    "unary_990": UNARY * 100,
    "unary_250": ("x = " + "-" * 250 + "1\n") * 20,
    "pow_200": ("x = " + "a ** " * 200 + "1\n") * 30,
    "lambda_200": ("x = " + "lambda: " * 200 + "1\n") * 30,
    "not_250": ("x = " + "not " * 250 + "1\n") * 20,
    "mixed": ("x = " + "-a ** " * 150 + "1\n") * 15,  # unary and `**` alternate: one chain
}


@pytest.mark.parametrize("name", sorted(CHAINS))
def test_long_operator_chains_are_refused_before_libcst(name):
    with pytest.raises(TooNested, match="nested too deeply|operator chains too long to parse safely"):
        check_parsable(HEADER + CHAINS[name])


def test_chains_under_the_budget_are_parsed_and_ordinary_code_is_not_measured(monkeypatch):
    check_parsable(("x = " + "-" * 100 + "1\n") * 5)  # Σ L² 50,000: parsed (a few MB)
    check_parsable("y = -x ** -2 + (not a) - ~b\n" * 20000)  # short chains, however many
    monkeypatch.setattr(parse_guard.ast, "parse", lambda *_: pytest.fail("a file was measured"))
    check_parsable("f = lambda: lambda: 1\ny = f(- -1, a ** b ** c)\n" * 3000)


def test_the_reason_names_the_chains():
    with pytest.raises(TooNested) as refused:
        check_parsable(CHAINS["unary_250"])
    assert "squared lengths sum to 1,250,000" in str(refused.value) and "the longest: 250" in str(refused.value)


@pytest.fixture
def tree(tmp_path):
    """A real finding (vllm/sizing.py, KV102), the issue's file of 990-long unary chains, and a file the guard
    lets through that takes more memory than a worker may (ordinary code, large)."""
    (tmp_path / "vllm").mkdir()
    (tmp_path / MODULE).write_text(SCALED)
    (tmp_path / "vllm" / "unary.py").write_text(HEADER + CHAINS["unary_990"])
    (tmp_path / "vllm" / "dense.py").write_text(HEADER + "x = a + b * c - d\n" * 9500)  # ~190 MB in libcst
    assert sum(len(p.read_bytes()) for p in tmp_path.rglob("*.py")) >= POOL_MIN_BYTES  # linted by the pool
    return tmp_path


def test_a_file_past_a_workers_memory_is_one_line_and_the_rest_keep_their_findings(tree, monkeypatch):
    monkeypatch.setenv("KVLINT_WORKER_MEMORY_MIB", "48")  # a worker may take 48 MiB more than it starts with
    result = run_kvlint_child("check", "--no-cache", "-j", "2", "--output-format", "concise", ".", cwd=tree)
    assert result.returncode == 1, result.stderr[-2000:]
    lines = result.stdout.splitlines()
    unary = [line for line in lines if "vllm/unary.py" in line]
    assert len(unary) == 1 and "KV000" in unary[0] and "nested too deeply to parse" in unary[0], unary
    dense = [line for line in lines if "vllm/dense.py" in line]
    assert len(dense) == 1 and "KV000" in dense[0], dense
    assert "too costly to parse: the worker process linting it died (out of its 48 MiB" in dense[0]
    assert any(line.startswith("vllm/sizing.py") and "KV10" in line for line in lines), lines
    assert "Traceback" not in result.stderr and "BrokenProcessPool" not in result.stdout
