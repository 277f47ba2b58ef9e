"""A review's memory does not grow with the size of the pull request's files (issue 21, item 9).

A pull request of five ~9.9 MB modules (each just under the 10 MiB read limit) in a real git repository,
reviewed by a real `kvlint review` child process; its peak resident memory is the kernel's (`wait4`'s
rusage of that child and what it waited for: git included). 53e5324 held the whole patch split into lines
and every changed line number as an int in two sets: 437 MB here (1.5 GB with 6-byte lines); now the diff
is read one line at a time, changed lines are runs, and texts are read when needed: 88 MB.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvlint_runner import CHILD_MEMORY_CAP
from review_repos import git, make_repo

MODULES = 5
MODULE_BYTES = int(9.9 * 1024 * 1024)
# Measured (Python 3.11, Linux): 437 MB before, 88 MB after, in both modes; the bound leaves a wide margin.
PEAK_BOUND_MB = 200
DEADLINE_S = 120


def five_big_modules(root: Path) -> Path:
    """`main`: a small module; `pr`: its KV102, plus five modules of ~9.9 MB each under vllm/."""
    repo = make_repo(root)
    line = "    total = total + item.size\n"  # 30 bytes: about the length of a line of vLLM
    body = line * (MODULE_BYTES // len(line))
    for index in range(MODULES):
        (repo / "vllm" / f"big_{index}.py").write_text(body)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "pr: five large modules")
    return repo


# A small launcher starts the review and reports its peak: a process started from this test inherits this
# (large) pytest's resident size as its own peak, through fork and exec alike; one started from the launcher,
# fresh after its own exec, does not.
LAUNCHER = """
import os, resource, subprocess, sys
resource.setrlimit(resource.RLIMIT_AS, (int(sys.argv[2]), int(sys.argv[2])))
review = subprocess.Popen([sys.executable, "-m", "kvlint", *sys.argv[3:]])
_, status, usage = os.wait4(review.pid, 0)  # that child's own rusage (and what it waited for: git included)
with open(sys.argv[1], "w") as peak:
    peak.write(str(usage.ru_maxrss))
sys.exit(os.waitstatus_to_exitcode(status))
"""


def peak_of_review(repo: Path, *extra: str) -> tuple[subprocess.CompletedProcess, float]:
    """`kvlint review --base main …` in a child process (memory capped, killed past DEADLINE_S) ->
    (its result, its peak resident memory in MB, from the kernel's rusage of that process)."""
    out, err, peak = repo.parent / "review.out", repo.parent / "review.err", repo.parent / "review.peak"
    review = ["review", "--base", "main", "--jobs", "1", *extra]
    arguments = [sys.executable, "-c", LAUNCHER, str(peak), str(CHILD_MEMORY_CAP), *review]
    environment = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    with out.open("wb") as stdout, err.open("wb") as stderr:
        child = subprocess.Popen(
            arguments, cwd=repo, stdout=stdout, stderr=stderr, env=environment, start_new_session=True
        )
    try:
        child.wait(timeout=DEADLINE_S)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
        pytest.fail(f"kvlint review did not finish within {DEADLINE_S} s")
    run = subprocess.CompletedProcess(arguments, child.returncode, out.read_text(), err.read_text())
    return run, int(peak.read_text()) / 1024  # kB on Linux


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="ru_maxrss is in kB on Linux (bytes on macOS)")
@pytest.mark.parametrize("mode", ["head", "working tree"])
def test_five_large_modules_cost_a_review_little_memory(tmp_path, mode):
    repo = five_big_modules(tmp_path)
    run, peak_mb = peak_of_review(repo, *(["--head", "pr"] if mode == "head" else []))
    assert run.returncode == 1, run.stderr  # the pull request's KV102 is reviewed; the large modules are read
    assert "not read" not in run.stderr, run.stderr
    assert "in 6 file(s)" in run.stderr.splitlines()[-1], run.stderr
    assert peak_mb < PEAK_BOUND_MB, f"peak resident memory of the review: {peak_mb:.0f} MB"


@given(st.sets(st.integers(1, 80), max_size=40), st.integers(0, 82), st.integers(0, 82), st.integers(0, 82))
def test_line_runs_answer_as_the_set_of_lines_would(lines, first, last, target):
    from kvlint.review.line_runs import LineRuns

    runs, added_in_order = LineRuns(lines), LineRuns()
    for line in sorted(lines):
        added_in_order.add(line)
    inside = sorted(line for line in lines if first <= line <= last)
    assert runs == added_in_order == lines and len(runs) == len(lines) and list(runs) == sorted(lines)
    assert all((line in runs) == (line in lines) for line in range(0, 83))
    assert runs.first_within(first, last) == (inside[0] if inside else None)
    assert runs.last_within(first, last) == (inside[-1] if inside else None)
    assert list(runs.within(first, last)) == inside
    closest = min(inside, key=lambda line: (abs(line - target), line)) if inside else None
    assert runs.nearest(target, first, last) == closest
