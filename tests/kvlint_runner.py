"""Run `kvlint` as a user's shell would — its arguments, a working folder, an environment, stdout and stderr
apart, an exit code — but inside the test process, through click's CliRunner.

A fresh `python -m kvlint` costs 0.3–0.9 s before it does anything (the interpreter, click, libcst and its
matchers); most CLI tests run a command on a tree of a few files, so that start dominated the fast loop.
The command's own code is the same either way: `main` is the object `python -m kvlint` calls.
A test about the process itself — signals and Ctrl-C, worker pools, two runs at once, `python -I`,
pre-commit — starts a real process; one where kvlint could hang uses `run_kvlint_child`, which kills it.
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
from pathlib import Path
from typing import IO

import pytest
from click.testing import CliRunner

from kvlint.cli import main


def _inherited(name: str) -> bool:
    """The parent's proxies and GitHub variables never reach a command under test; a test passes its own."""
    return not name.lower().endswith("_proxy") and not name.startswith("GITHUB_")


def run_kvlint(
    *arguments: str, cwd: Path | str, env: dict[str, str] | None = None, binary: bool = False
) -> subprocess.CompletedProcess:
    """`kvlint ARGUMENTS` from the folder `cwd` -> a CompletedProcess (stdout/stderr as text, or as bytes
    with binary=True). An exception that escapes kvlint's own handlers fails the test with its traceback."""
    environment: dict[str, str | None] = {name: None for name in os.environ if not _inherited(name)}
    environment.update(env or {})
    previous_folder, previous_argv = os.getcwd(), sys.argv
    os.chdir(cwd)
    sys.argv = ["kvlint", *arguments]  # kvlint reads --verbose from argv when an internal error reaches the top
    try:
        result = CliRunner().invoke(main, list(arguments), env=environment, catch_exceptions=False)
    finally:
        os.chdir(previous_folder)
        sys.argv = previous_argv
    stdout, stderr = result.stdout_bytes, result.stderr_bytes or b""
    if not binary:
        return subprocess.CompletedProcess(
            ["kvlint", *arguments], result.exit_code, stdout.decode(errors="replace"), stderr.decode(errors="replace")
        )
    return subprocess.CompletedProcess(["kvlint", *arguments], result.exit_code, stdout, stderr)


# A child that reads /dev/zero or a sparse file whole hits this at once, instead of the machine's memory.
CHILD_MEMORY_CAP = 3 * 1024**3
_CHECKOUT = Path(__file__).resolve().parent.parent


def _cap_memory() -> None:  # pragma: no cover - runs in the child, before exec
    resource.setrlimit(resource.RLIMIT_AS, (CHILD_MEMORY_CAP, CHILD_MEMORY_CAP))


def run_kvlint_child(
    *arguments: str, cwd: Path | str, timeout: float = 60, stdin: int | IO = subprocess.DEVNULL
) -> subprocess.CompletedProcess:
    """`python -m kvlint ARGUMENTS` in a child process of its own session, with a memory cap, for a test in
    which kvlint could hang or read without end (links to /dev/zero, FIFOs): one that outlives `timeout` is
    killed with its workers, and the test fails."""
    environment = {name: value for name, value in os.environ.items() if _inherited(name)}
    environment["PYTHONPATH"] = os.pathsep.join(filter(None, [str(_CHECKOUT), os.environ.get("PYTHONPATH")]))
    child = subprocess.Popen(
        [sys.executable, "-m", "kvlint", *arguments],
        cwd=cwd,
        stdin=stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=environment,
        start_new_session=True,
        preexec_fn=_cap_memory,
    )
    try:
        out, err = child.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        child.communicate()
        pytest.fail(f"kvlint {' '.join(arguments)} did not finish within {timeout:.0f} s")
    return subprocess.CompletedProcess(child.args, child.returncode, out.decode(errors="replace"), err.decode())
