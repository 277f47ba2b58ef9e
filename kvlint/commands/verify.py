"""`kvlint verify`: prove at runtime that every sizing path computes the same span.

The vLLM tree is imported only in a child interpreter (child.py, run with ``-I``), never
in kvlint's own process. Exit codes: 0 every cell agrees, 1 some cell disagrees,
2 the tree cannot be imported or the harness failed (one line on stderr).
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from kvlint.engine.summary import EXIT_ERROR
from kvlint.errors import VerifyError
from kvlint.verify.matrix import render_json, render_text
from kvlint.verify.run import DEFAULT_TIMEOUT_S, ChildRun, run_child

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
