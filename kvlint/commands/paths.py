"""`kvlint paths`: the sizing-path matrix of a vLLM tree — spec kinds × every sizing path or predicate found.

Nothing is imported from the tree; kvlint/reporters/sizing_matrix.py says what the cells mean. The matrix
comes from the same scan `kvlint check` runs on the tree (same configuration, same result cache), so every
cell `check` reports a finding for is marked, and those findings are printed as `check` prints them. A file
the analysis could not read, or a step of it that failed, is said on stderr (`kvlint: error: cross-file
analysis incomplete: …`) and the command exits 2, as `check` does.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from kvlint.analysis.sizing.results import SizingAnalysis
from kvlint.analysis.tree_root import find_tree_root
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
    help="Fetch this vLLM release's sources from PyPI and show its matrix; with a PATH outside the vLLM tree, "
    "show its paths against it (a version, or a range such as '>=0.17,<0.31').",
)
@tree_format_option
def paths(path, release, output_format):
    """Show the sizing-path matrix: spec kinds x every sizing path (`module:function`), each cell the DCP factor.

    PATH outside the vLLM tree (a plugin): its paths against the vLLM it targets, chosen as `check` chooses
    (--vllm-release, [tool.kvlint] vllm, the project's requirement); a range gives a matrix per release."""
    config = load_config(find_pyproject(Path.cwd()))  # as `check` reads it: roles follow scheduler-only-paths
    if path and os.path.exists(path) and find_tree_root(Path(path)) is None:
        sys.exit(outside_paths(path, release, config, output_format))
    target, root = vllm_tree_target(path, release, quiet=output_format == "json")
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


def outside_paths(path: str, release: str | None, config, output_format: str) -> int:
    """The matrices of code outside the vLLM tree, one per release it is judged against; the exit code."""
    from kvlint.analysis.sizing.against_target import analyse_package_against_target
    from kvlint.commands.options import fetch_target
    from kvlint.filesystem import read_regular_file
    from kvlint.scan.jobs import module_path_of
    from kvlint.scan.targets import HOW_TO_CHOOSE, choose_target

    chosen = choose_target(release, config.vllm, config.source, [Path(path)])  # as `check` chooses
    if chosen is None:  # no built-in tree to show a matrix of
        raise TargetError(
            f"{path}: not in a vLLM tree: code outside it is shown against the vLLM it targets; {HOW_TO_CHOOSE}"
        )
    reference = fetch_target(chosen, quiet=False, cache_dir=None)
    documents, failures = [], []
    for root in reference["references"]:
        result = scan(
            [Path(path)],
            config,
            None,
            [],
            cache_dir=cache_root() / "results",
            reference=root,
            target=reference["target_names"],
        )
        index = result.project
        failures.extend(index.failures)
        if index.sizing is None:
            continue
        texts = {}
        for file in result.files:
            try:
                texts[module_path_of(file.path, index.root)] = read_regular_file(Path(file.path)).decode(
                    "utf-8", "replace"
                )
            except OSError:
                continue  # the scan says what it could not read
        analysis = analyse_package_against_target(texts, str(root), index.sizing, index.hierarchy)
        spans = function_spans(analysis, str(root), frozenset(texts))
        reported = reported_cells(analysis, str(root), result.findings, spans)
        if output_format == "json":
            documents.append(render_json(analysis, str(root), reported))
        else:
            shown = in_paths(analysis, str(root), result.findings, spans)
            lines = [line for f in shown for line in [*finding_lines(f, Path.cwd()), ""]]
            documents.append(render_text(analysis, str(root), reported, lines[:-1], shown_from=str(Path.cwd())))
    if output_format == "json" and len(documents) > 1:
        click.echo("[\n" + ",\n".join(d.rstrip("\n") for d in documents) + "\n]")
    else:
        click.echo("\n".join(documents), nl=False)
    for line in dict.fromkeys(failures):
        click.echo(f"kvlint: error: {printable(line)}", err=True)
    return EXIT_ERROR if failures else EXIT_CLEAN


def function_spans(
    analysis: SizingAnalysis, root: str, outside: frozenset[str] = frozenset()
) -> dict[int, tuple[int, int]]:
    """Each path's function as (first line, last line), read with `ast` from its module (never imported);
    `outside`: modules of code outside the tree, read where the scan read them."""
    import ast

    from kvlint.filesystem import read_regular_file

    spans: dict[int, tuple[int, int]] = {}
    trees: dict[str, ast.Module | None] = {}
    for column, path in enumerate(analysis.paths):
        if path.module_path not in trees:
            try:
                where = Path(path.module_path) if path.module_path in outside else Path(root) / path.module_path
                trees[path.module_path] = ast.parse(read_regular_file(where))
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
