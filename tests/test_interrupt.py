"""Ctrl-C during a cold scan: the worker processes stop at once and kvlint exits 130, not 1 ("findings").

A real `kvlint check` in a subprocess, a real SIGINT, on a generated tree big enough that its workers are
still parsing when the signal comes (each file holds the words the rules' prefilters look for, so every
file is parsed). Linux only: the workers are found through /proc.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="finds the workers through /proc")

# ~40 files of ~60 KB that every rule's prefilter accepts: tens of seconds of parsing on two workers.
FUNCTION = """
def span_{index}(kv_cache_config, dcp_world_size):
    sizes = []
    for group in kv_cache_config.kv_cache_groups:
        spec = group.kv_cache_spec
        if isinstance(spec, AttentionSpec) and next(iter(spec.kv_cache_specs)):
            sizes.append(spec.block_size * dcp_world_size)
        else:
            sizes.append(spec.block_size)
    return sizes
"""
FILES = 40
FUNCTIONS_PER_FILE = 200


def make_big_tree(root: Path) -> Path:
    package = root / "pkg"
    package.mkdir()
    header = "from vllm.v1.kv_cache_interface import AttentionSpec\n"
    body = "".join(FUNCTION.format(index=index) for index in range(FUNCTIONS_PER_FILE))
    for number in range(FILES):
        (package / f"module_{number}.py").write_text(header + body)
    return package


def children_of(pid: int) -> set[int]:
    """The processes whose parent is `pid`, read from /proc/*/stat."""
    found = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid ...: comm may hold spaces and parentheses, so split after the last ")"
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[1]) == pid:
            found.add(int(entry))
    return found


def running(pid: int) -> bool:
    """Whether `pid` is a live process (a zombie is not: it runs no code)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2 :].split()[0] != "Z"


def wait_for(condition, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


@pytest.mark.parametrize("to_the_group", [True, False], ids=["ctrl-c", "kill-int"])
def test_sigint_during_a_cold_scan_stops_every_worker_and_exits_130(tmp_path, to_the_group):
    """Ctrl-C at a terminal signals the whole process group; `kill -INT` only kvlint itself."""
    package = make_big_tree(tmp_path)
    command = [sys.executable, "-m", "kvlint", "check", "--no-cache", "--jobs", "2", str(package)]
    process = subprocess.Popen(
        command,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, as a shell's foreground job has
    )
    try:
        assert wait_for(lambda: len(children_of(process.pid)) >= 2, timeout=60), "no worker processes started"
        workers = children_of(process.pid)
        time.sleep(0.5)  # the workers are now inside a file
        assert process.poll() is None and all(running(pid) for pid in workers), "the scan ended before the signal"
        signalled = time.monotonic()
        if to_the_group:
            os.killpg(process.pid, signal.SIGINT)
        else:
            os.kill(process.pid, signal.SIGINT)
        stdout, stderr = process.communicate(timeout=10)
        exited_after = time.monotonic() - signalled
        assert wait_for(lambda: not any(running(pid) for pid in workers), timeout=2 - exited_after), (
            f"workers still running 2 s after SIGINT: {[pid for pid in workers if running(pid)]}"
        )
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    assert process.returncode == 130, stderr
    assert exited_after < 2
    assert stderr.rstrip().endswith("kvlint: interrupted") and "Traceback" not in stderr, stderr
    assert stdout == ""  # no partial report
