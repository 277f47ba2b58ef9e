"""`kvlint containers`: which UniformTypeKVCacheSpecs containers the tree's models build, by which grouping
path, by default or under an opt-in setting (kvlint.analysis.census.compositions). Read statically, never imported.
A tree whose model registry cannot be found has no census: the command says so and exits 2."""

from __future__ import annotations

import sys

import click

from kvlint.commands.options import tree_format_option, vllm_tree_target
from kvlint.engine.summary import EXIT_CLEAN, EXIT_ERROR
from kvlint.errors import TargetError
from kvlint.escaping import printable
from kvlint.reporters.containers import render_json, render_text
from kvlint.scan.index_cache import build_project_index


@click.command("containers")
@click.argument("path", required=False, type=click.Path())
@click.option("--vllm-release", "release", metavar="VERSION", help="Fetch this vLLM release's sources from PyPI.")
@tree_format_option
def containers(path, release, output_format):
    """Show the container compositions the tree's models build, the path and setting that build each."""
    target, root = vllm_tree_target(path, release, quiet=output_format == "json")
    index = build_project_index([target])
    compositions = index.container_compositions()
    if compositions is None or index.census is None:
        raise TargetError(f"{root}: no model registry found: the tree's models cannot be read")
    if output_format == "json":
        click.echo(render_json(compositions), nl=False)
    else:
        census = index.census
        click.echo(render_text(compositions, len(census.models), len(census.layers), census.unread), nl=False)
    for line in index.failures:
        click.echo(f"kvlint: error: {printable(line)}", err=True)
    sys.exit(EXIT_ERROR if index.failures else EXIT_CLEAN)
