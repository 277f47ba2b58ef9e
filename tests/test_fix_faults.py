"""Faults during `kvlint fix`: killed at random moments, or racing another run — no file is ever half-written."""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kvlint_runner import run_kvlint
from test_cli import BUGGY, make_tree
from test_text_layout import located

FILES = 40
RACING_FILES = 12  # enough for the two runs' writes to interleave: they start together and write in one order
KILLS = int(os.environ.get("KVLINT_FAULT_KILLS", "6"))


def kvlint_fix(tree: Path, capture: bool = False) -> subprocess.Popen:
    output = subprocess.PIPE if capture else subprocess.DEVNULL
    return subprocess.Popen(
        [sys.executable, "-m", "kvlint", "fix", "--no-cache", "-j", "1", "--select", "KV101,KV102", str(tree / "pkg")],
        stdout=output,
        stderr=output,
        text=capture,
    )


@pytest.fixture(scope="module")
def expected(tmp_path_factory):
    """(old bytes, new bytes) of one buggy module, new as `kvlint fix` writes it."""
    root = tmp_path_factory.mktemp("reference")
    make_tree(root)
    run_kvlint("fix", "--no-cache", str(root / "pkg" / "buggy.py"), cwd=root)
    new = (root / "pkg" / "buggy.py").read_bytes()
    assert new != BUGGY.encode() and b"resolve_dcp_kv_block_size(" in new
    return BUGGY.encode(), new


def large_tree(root: Path, files: int = FILES) -> list[Path]:
    make_tree(root)
    paths = []
    for index in range(files):
        path = root / "pkg" / f"module_{index:03d}.py"
        path.write_text(BUGGY)
        paths.append(path)
    return paths


def assert_old_or_new(paths: list[Path], old: bytes, new: bytes) -> tuple[int, int]:
    counts = [0, 0]
    for path in paths:
        data = path.read_bytes()
        assert data in (old, new), f"{path.name} is neither the old nor the new file ({len(data)} bytes)"
        counts[data == new] += 1
    return counts[0], counts[1]


@pytest.mark.slow  # 6 runs, each given 1-6 s before the kill: twenty seconds of waiting by design
def test_killed_at_random_moments_leaves_every_file_old_or_new(tmp_path, expected):
    old, new = expected
    rng = random.Random(20261202)
    killed_mid_run = 0
    mixed = 0  # kills that landed between two file writes: some files new, some still old
    for attempt in range(KILLS):
        root = tmp_path / f"run{attempt}"
        paths = large_tree(root)
        process = kvlint_fix(root)
        time.sleep(rng.uniform(1.0, 6.0))
        if process.poll() is None:
            process.send_signal(signal.SIGKILL)
            killed_mid_run += 1
        process.wait()
        still_old, now_new = assert_old_or_new(paths, old, new)
        mixed += bool(still_old and now_new)
        # A second run completes the job from whatever state the kill left.
        subprocess.run([sys.executable, "-m", "kvlint", "fix", "--no-cache", str(root / "pkg")], capture_output=True)
        assert assert_old_or_new(paths, old, new) == (0, FILES)
    assert killed_mid_run >= KILLS // 2, "the kills mostly missed the run; widen the timing window"
    assert mixed >= 1, "no kill landed while files were being written"


FIXED = "fixed 1 finding(s) (KV102)"
# The other run's rename found at the last check, or while the file was being re-opened for it.
REFUSED = re.compile(
    r"not fixed: (changed on disk since kvlint read it|cannot re-read before writing: .*); left unchanged"
)


def test_two_runs_at_once_end_with_correct_files(tmp_path, expected):
    """Two runs racing on one tree: each file is fixed by one of them; the other, finding it changed since
    it read it, leaves it alone and says so. No third run tidies up: the files are right as the race left them."""
    old, new = expected
    paths = large_tree(tmp_path, RACING_FILES)
    runs = [kvlint_fix(tmp_path, capture=True), kvlint_fix(tmp_path, capture=True)]
    outcomes = [run.communicate(timeout=600) for run in runs]
    assert assert_old_or_new(paths, old, new) == (0, RACING_FILES)
    fixed_by: dict[str, list[int]] = {path.name: [] for path in paths}
    for index, (run, (stdout, stderr)) in enumerate(zip(runs, outcomes)):
        assert "Traceback" not in stderr and "internal error" not in stderr
        said = {}
        for line in stderr.splitlines():
            name, _, rest = line.rpartition("/")[2].partition(": ")
            if name in fixed_by:
                assert rest == FIXED or REFUSED.fullmatch(rest), line
                assert name not in said, f"{name} said twice: {line}"
                said[name] = rest
                if rest == FIXED:
                    fixed_by[name].append(index)
        # Its summary counts the files it wrote, racing or not (buggy.py of make_tree too).
        written = sum(1 for line in stderr.splitlines() if line.endswith(")") and ": fixed " in line)
        assert written >= len([r for r in said.values() if r == FIXED])
        summary = re.search(rf"^kvlint: fixed {written} file\(s\); (\d+) finding\(s\) left\.$", stderr, re.M)
        assert summary, stderr
        left = int(summary.group(1))
        # One headline per finding left; its detail lines are indented, findings apart by a blank line.
        assert len(located(stdout)) == left
        # A file left unchanged fails the run, as does an error left (every finding of this tree is one).
        assert run.returncode == (1 if any(rest != FIXED for rest in said.values()) or left else 0), stderr
    assert all(fixed_by.values()), f"files no run fixed: {[n for n, by in fixed_by.items() if not by]}"


def leftover(folder: Path, name: str, age_s: float = 0.0) -> Path:
    """A file as a SIGKILLed `kvlint fix` leaves it (or a look-alike), its mtime `age_s` in the past."""
    path = folder / name
    path.write_bytes(b"half of a rewrite")
    stamp = time.time() - age_s
    os.utime(path, (stamp, stamp))
    return path


def test_stale_temp_file_of_a_fixed_file_is_removed(tmp_path, expected):
    _, new = expected
    make_tree(tmp_path)
    pkg = tmp_path / "pkg"
    stale = leftover(pkg, ".buggy.py.k3x_9q2a.kvlint-tmp", age_s=3600)
    run_kvlint("fix", "--no-cache", str(pkg), cwd=tmp_path)
    assert not stale.exists()
    assert (pkg / "buggy.py").read_bytes() == new
    assert not list(pkg.glob("*.kvlint-tmp")), "the run left a temp file of its own"


def test_fresh_or_foreign_look_alikes_are_left_alone(tmp_path, expected):
    _, new = expected
    make_tree(tmp_path)
    pkg = tmp_path / "pkg"
    kept = [
        leftover(pkg, ".buggy.py.k3x_9q2a.kvlint-tmp"),  # fresh: a concurrent run may be about to rename it
        leftover(pkg, ".clean.py.k3x_9q2a.kvlint-tmp", age_s=3600),  # belongs to a file this run does not write
        leftover(pkg, ".buggy.py.kvlint-tmp", age_s=3600),  # not the shape kvlint writes
        leftover(pkg, "buggy.py.k3x_9q2a.kvlint-tmp", age_s=3600),
        leftover(pkg, ".buggy.py.k3x_9q2a.kvlint-tmp.bak", age_s=3600),
        leftover(pkg, ".buggy.py.k3x.9q2a.kvlint-tmp", age_s=3600),
    ]
    folder = pkg / ".buggy.py.dir00000.kvlint-tmp"  # the right name, but not a regular file
    folder.mkdir()
    os.utime(folder, (time.time() - 3600,) * 2)
    run_kvlint("fix", "--no-cache", str(pkg), cwd=tmp_path)
    assert (pkg / "buggy.py").read_bytes() == new
    assert [path.name for path in kept if not path.exists()] == []
    assert all(path.read_bytes() == b"half of a rewrite" for path in kept)
    assert folder.is_dir()
