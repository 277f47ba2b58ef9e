"""Run the verify harness (child.py) in a fresh interpreter and read back its report.

The vLLM tree is imported only in that child, run with ``-I``, never in kvlint's own process.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from kvlint.errors import VerifyError
from kvlint.verify.matrix import ReportError, VerifyReport, parse_report

CHILD_SCRIPT = Path(__file__).parent / "child.py"
DEFAULT_TIMEOUT_S = 600


@dataclass(frozen=True)
class ChildRun:
    python: str
    vllm_path: Path | None
    dcp_sizes: Sequence[int] | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S


def child_environment() -> dict[str, str]:
    environment = dict(os.environ)
    # vLLM logs to stdout at INFO; only its warnings and errors are worth keeping.
    environment.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    # Never reach for a hub: the harness builds its configs without a checkpoint.
    environment.setdefault("HF_HUB_OFFLINE", "1")
    return environment


def package_parent(path: Path) -> Path:
    """The folder to put on sys.path for `path`, which names either the vllm package folder or the folder
    that holds it: both mean the same tree, as they do for `kvlint check` and `kvlint paths`."""
    if not (path / "vllm" / "__init__.py").is_file() and path.name == "vllm" and (path / "__init__.py").is_file():
        return path.parent
    return path


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def run_child(run: ChildRun) -> VerifyReport:
    """Run child.py in a fresh interpreter and return its report, or raise VerifyError."""
    raw = run_child_raw(run)
    try:
        return parse_report(raw)
    except ReportError as error:
        raise VerifyError(str(error)) from None


def run_child_raw(run: ChildRun, extra: Sequence[str] = (), script: Path = CHILD_SCRIPT) -> dict:
    """child.py's JSON document (`extra`: more of its arguments; `script`: another child, e.g. census_child.py,
    that takes --out and --vllm alike), or VerifyError when it has none."""
    if run.vllm_path is not None and not (run.vllm_path / "vllm" / "__init__.py").is_file():
        raise VerifyError(
            f"cannot import vLLM: {run.vllm_path} holds no vllm package "
            f"(expected {run.vllm_path / 'vllm' / '__init__.py'})"
        )
    with tempfile.TemporaryDirectory(prefix="kvlint-verify-") as scratch:
        out_path = Path(scratch) / "result.json"
        # -I: neither kvlint's folder, the working directory nor PYTHONPATH reach sys.path.
        # -B: no bytecode written into the tree imported (a release folder must stay as its manifest lists it).
        command = [run.python, "-I", "-B", str(script), "--out", str(out_path)]
        if run.vllm_path is not None:
            command += ["--vllm", str(run.vllm_path.resolve())]
        if run.dcp_sizes:
            command += ["--dcp", ",".join(str(size) for size in run.dcp_sizes)]
        command += list(extra)
        try:
            completed = subprocess.run(
                command,
                cwd=scratch,  # a stray ./vllm folder must not shadow the tree under test
                env=child_environment(),
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                errors="replace",
                timeout=run.timeout_s,
                check=False,
            )
        except FileNotFoundError:
            raise VerifyError(f"cannot run the child interpreter {run.python!r}") from None
        except subprocess.TimeoutExpired:
            raise VerifyError(f"the verify child ran past {run.timeout_s:g}s and was stopped") from None
        if not out_path.is_file():
            detail = _last_line(completed.stderr) or f"exit status {completed.returncode}"
            raise VerifyError(f"the verify child wrote no result: {detail}")
        try:
            raw = json.loads(out_path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            raise VerifyError(f"the verify child wrote an unreadable result: {error}") from None
    if "import_error" in raw:
        where = run.vllm_path if run.vllm_path is not None else "the installed vllm"
        raise VerifyError(f"cannot import vLLM from {where}: {raw['import_error']}")
    if "internal_error" in raw:
        raise VerifyError(f"internal error in the verify harness: {raw['internal_error']}")
    return raw
