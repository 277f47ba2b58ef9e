"""`kvlint paths`: the sizing-path matrix of a vLLM tree — spec kinds × every sizing path or predicate found.

Nothing is imported from the tree; kvlint/reporters/sizing_matrix.py says what the cells mean. A file the
analysis could not read, or a step of it that failed, is said on stderr (`kvlint: error: cross-file analysis
incomplete: …`) and the command exits 2, as `check` does.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from kvlint.analysis.sizing.results import SizingAnalysis
from kvlint.analysis.tree_root import find_tree_root
from kvlint.engine.summary import EXIT_CLEAN, EXIT_ERROR
from kvlint.errors import TargetError
from kvlint.escaping import printable
from kvlint.reporters.sizing_matrix import render_json, render_text
from kvlint.scan.config import find_pyproject, load_config
from kvlint.scan.index_cache import build_project_index


@click.command("paths")
@click.argument("path", required=False, type=click.Path())
@click.option(
    "--vllm-release",
    "release",
    metavar="VERSION",
    help="Fetch this vLLM release's sources from PyPI and show its matrix.",
)
@click.option("--format", "output_format", type=click.Choice(["text", "json"]), default="text", show_default=True)
def paths(path, release, output_format):
    """Show the sizing-path matrix: spec kinds x every sizing path (`module:function`), each cell the DCP factor."""
    target = _target(path, release, quiet=output_format == "json")
    if not target.exists():
        raise TargetError(f"{target}: no such file or directory")
    root = find_tree_root(target)
    if root is None:
        raise TargetError(f"{target}: not in a vLLM tree (no vllm/v1/kv_cache_interface.py found)")
    config = load_config(find_pyproject(Path.cwd()))  # as `check` reads it: roles follow scheduler-only-paths
    index = build_project_index([target], scheduler_only_paths=tuple(config.scheduler_only_paths))
    if isinstance(index.sizing, SizingAnalysis):
        render = render_json if output_format == "json" else render_text
        click.echo(render(index.sizing, str(root)), nl=False)
    elif not index.failures:
        raise TargetError(f"{root}: the sizing paths could not be analysed")
    # As in `check`: what the analysis could not read or do is said, and a matrix it may lack paths of exits 2.
    for line in index.failures:
        click.echo(f"kvlint: error: {printable(line)}", err=True)
    sys.exit(EXIT_ERROR if index.failures else EXIT_CLEAN)


def _target(path: str | None, release: str | None, quiet: bool) -> Path:
    if path and release:
        raise click.UsageError("give either PATH or --vllm-release, not both")
    if release:
        from kvlint.scan.releases import release_sources

        return release_sources(release, quiet=quiet)
    if path:
        return Path(path)
    from kvlint.scan.targets import default_target

    target, line = default_target(Path.cwd())
    click.echo(line, err=True)
    return target
