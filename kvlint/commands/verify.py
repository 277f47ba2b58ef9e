"""`kvlint verify`: prove at runtime that every sizing path computes the same span.

The vLLM tree is imported only in a child interpreter (child.py, run with ``-I``), never
in kvlint's own process. Exit codes: 0 every cell agrees, 1 some cell disagrees,
2 the tree cannot be imported or the harness failed (one line on stderr).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import click

from kvlint.verify.matrix import ReportError, VerifyReport, parse_report, render_json, render_text

CHILD_SCRIPT = Path(__file__).parent.parent / "verify" / "child.py"
DEFAULT_TIMEOUT_S = 600
EXIT_ERROR = 2


class VerifyError(Exception):
    """Verify could not produce a matrix; the message is one line for stderr."""


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


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def run_child(run: ChildRun) -> VerifyReport:
    """Run child.py in a fresh interpreter and return its report, or raise VerifyError."""
    if run.vllm_path is not None and not (run.vllm_path / "vllm" / "__init__.py").is_file():
        raise VerifyError(
            f"cannot import vLLM: {run.vllm_path} holds no vllm package "
            f"(expected {run.vllm_path / 'vllm' / '__init__.py'})"
        )
    with tempfile.TemporaryDirectory(prefix="kvlint-verify-") as scratch:
        out_path = Path(scratch) / "result.json"
        # -I: neither kvlint's folder, the working directory nor PYTHONPATH reach sys.path.
        command = [run.python, "-I", str(CHILD_SCRIPT), "--out", str(out_path)]
        if run.vllm_path is not None:
            command += ["--vllm", str(run.vllm_path.resolve())]
        if run.dcp_sizes:
            command += ["--dcp", ",".join(str(size) for size in run.dcp_sizes)]
        try:
            completed = subprocess.run(
                command,
                cwd=scratch,  # a stray ./vllm folder must not shadow the tree under test
                env=child_environment(),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
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
    try:
        return parse_report(raw)
    except ReportError as error:
        raise VerifyError(str(error)) from None


RENDERERS = {"text": render_text, "json": render_json}


@click.command("verify")
@click.option(
    "--vllm",
    "vllm_path",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Directory that contains the vllm package (put on sys.path). Default: the installed vllm.",
)
@click.option(
    "--python",
    "python",
    default=sys.executable,
    show_default="this interpreter",
    help="Interpreter that imports the vLLM tree (it needs torch and vLLM's requirements).",
)
@click.option(
    "--format",
    "output_format",
    type=click.Choice(sorted(RENDERERS)),
    default="text",
    show_default=True,
)
@click.option(
    "--dcp",
    "dcp_sizes",
    type=click.IntRange(min=1),
    multiple=True,
    help="DCP size to check (repeatable). Default: 1, 2, 4, 8.",
)
@click.option(
    "--timeout",
    "timeout_s",
    type=click.FloatRange(min=1),
    default=DEFAULT_TIMEOUT_S,
    show_default=True,
    help="Seconds the child may run.",
)
def verify(
    vllm_path: Path | None,
    python: str,
    output_format: str,
    dcp_sizes: tuple[int, ...],
    timeout_s: float,
) -> None:
    """Check at runtime that scheduler, managers and connectors agree on each block's span.

    Imports the vLLM tree in a child interpreter, builds KV cache configurations for
    every group kind x DCP size, and prints each sizing path's token span per block.
    Exit 0 when every cell agrees, 1 when any disagrees, 2 when the tree cannot be
    imported.
    """
    run = ChildRun(python=python, vllm_path=vllm_path, dcp_sizes=dcp_sizes, timeout_s=timeout_s)
    try:
        report = run_child(run)
    except VerifyError as error:
        click.echo(f"kvlint verify: {error}", err=True)
        click.get_current_context().exit(EXIT_ERROR)
    click.echo(RENDERERS[output_format](report))
    if not report.compared:
        click.echo(f"kvlint verify: no cell could be compared in vLLM {report.vllm_version}", err=True)
    click.get_current_context().exit(report.exit_code)


if __name__ == "__main__":
    verify()
