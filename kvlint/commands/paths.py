"""`kvlint paths`: the sizing-path matrix of a vLLM tree — spec kinds × every sizing path or predicate found.

Nothing is imported from the tree; kvlint/reporters/sizing_matrix.py says what the cells mean. The matrix
comes from the same scan `kvlint check` runs on the tree (same configuration, same result cache), so every
cell `check` reports a finding for is marked, and those findings are printed as `check` prints them. A file
the analysis could not read, or a step of it that failed, is said on stderr (`kvlint: error: cross-file
analysis incomplete: …`) and the command exits 2, as `check` does.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from kvlint.analysis.sizing.results import SizingAnalysis
from kvlint.commands.options import tree_format_option, vllm_tree_target
from kvlint.engine.summary import EXIT_CLEAN, EXIT_ERROR
from kvlint.errors import TargetError
from kvlint.escaping import printable
from kvlint.reporters.sizing_matrix import in_paths, render_json, render_text, reported_cells
from kvlint.reporters.text import finding_lines
from kvlint.scan.config import find_pyproject, load_config
from kvlint.scan.runner import scan
from kvlint.scan.storage import cache_root


@click.command("paths")
@click.argument("path", required=False, type=click.Path())
@click.option(
    "--vllm-release",
    "release",
    metavar="VERSION",
    help="Fetch this vLLM release's sources from PyPI and show its matrix.",
)
@tree_format_option
def paths(path, release, output_format):
    """Show the sizing-path matrix: spec kinds x every sizing path (`module:function`), each cell the DCP factor."""
    target, root = vllm_tree_target(path, release, quiet=output_format == "json")
    config = load_config(find_pyproject(Path.cwd()))  # as `check` reads it: roles follow scheduler-only-paths
    package = Path(root) / "vllm"
    result = scan([package if package.is_dir() else Path(root)], config, None, [], cache_dir=cache_root() / "results")
    index = result.project
    if isinstance(index.sizing, SizingAnalysis):
        spans = function_spans(index.sizing, root)
        reported = reported_cells(index.sizing, str(root), result.findings, spans)
        if output_format == "json":
            click.echo(render_json(index.sizing, str(root), reported), nl=False)
        else:
            shown = in_paths(index.sizing, str(root), result.findings, spans)
            lines = [line for f in shown for line in [*finding_lines(f, Path(root)), ""]]
            click.echo(render_text(index.sizing, str(root), reported, lines[:-1]), nl=False)
    elif not index.failures:
        raise TargetError(f"{root}: the sizing paths could not be analysed")
    # As in `check`: what the analysis could not read or do is said, and a matrix it may lack paths of exits 2.
    for line in index.failures:
        click.echo(f"kvlint: error: {printable(line)}", err=True)
    sys.exit(EXIT_ERROR if index.failures else EXIT_CLEAN)


def function_spans(analysis: SizingAnalysis, root: str) -> dict[int, tuple[int, int]]:
    """Each path's function as (first line, last line), read with `ast` from its module (never imported)."""
    import ast

    from kvlint.filesystem import read_regular_file

    spans: dict[int, tuple[int, int]] = {}
    trees: dict[str, ast.Module | None] = {}
    for column, path in enumerate(analysis.paths):
        if path.module_path not in trees:
            try:
                trees[path.module_path] = ast.parse(read_regular_file(Path(root) / path.module_path))
            except (OSError, SyntaxError, ValueError):
                trees[path.module_path] = None
        tree = trees[path.module_path]
        functions = (
            [] if tree is None else [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
        )
        match = next((f for f in functions if f.lineno == path.line), None)
        if match is not None:
            spans[column] = (match.lineno, match.end_lineno or match.lineno)
    return spans
