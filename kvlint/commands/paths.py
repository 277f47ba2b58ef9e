"""`kvlint paths`: the sizing-path matrix of a vLLM tree — spec kinds × every sizing path or predicate found.

Each cell is the DCP factor that path applies to a group of that kind (`dcp`, `1`, or `?` when the code
cannot be evaluated statically); `*` marks a cell that disagrees with the scheduler (for paths) or with the
resolver (for predicates). Nothing is imported from the tree.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from kvlint.scan.config import find_pyproject, load_config
from kvlint.analysis.tree_index import find_tree_root
from kvlint.scan.index_cache import build_project_index
from kvlint.analysis.sizing.matrix import SizingAnalysis, SizingPath
from kvlint.rules._sizing_report import sizing_findings

EXIT_OK, EXIT_ERROR = 0, 2
_VIEW_TAGS = {"group": "w", "scheduler": "s", "single-group": "1g"}
_ROLE_NOTES = {
    "reference": "the scheduler (reference)",
    "resolver": "the shared resolver",
    "predicate": "predicate",
    "scheduler": "scheduler-side: sees flattened groups",
    "worker": "worker-side: sees containers",
    "both": "built for both roles: sees both",
}


def cell(path: SizingPath, index: int) -> str:
    values = [(view, factors[index]) for view, factors in path.views]
    if len({v for _, v in values}) == 1:
        return values[0][1]
    return "/".join(f"{_VIEW_TAGS.get(view, view)}:{value}" for view, value in values)


def render_text(analysis: SizingAnalysis, root: str) -> str:
    letters = [_letter(i) for i in range(len(analysis.paths))]
    lines = [
        f"kvlint paths: {root}",
        f"DCP factor each sizing path applies to a KV cache group of each kind (DCP={analysis.dcp}, block_size={analysis.block_size})",
        "",
    ]
    for letter, path in zip(letters, analysis.paths):
        lines.append(f"  [{letter}] {path.name}  (line {path.line}; {_ROLE_NOTES.get(path.role, path.role)})")
    lines.append("")
    rows = []
    for index, kind in enumerate(analysis.kinds):
        label = kind.label + (" †" if kind.rejected_under_dcp else "")
        cells = [cell(p, index) + ("*" if analysis.differs(p, index) else "") for p in analysis.paths]
        rows.append([label, *cells])
    header = ["kind", *letters]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines.append("  ".join(h.ljust(w) for h, w in zip(header, widths)).rstrip())
    lines.append("  ".join("-" * w for w in widths))
    for row in rows:
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
    lines.append("")
    lines.append("* disagrees with the scheduler's path (for paths) or with the resolver (for predicates)")
    lines.append("w: worker view (container as given), s: scheduler view (flattened to the first layer), 1g: single-group config")
    reasons = sorted({k.rejected_under_dcp for k in analysis.kinds if k.rejected_under_dcp})
    for reason in reasons:
        lines.append(f"† rejected under DCP: {reason}")
    if analysis.divergences:
        lines.append("")
        for issue in sorted(sizing_findings(analysis), key=lambda i: (i.module_path, i.line, i.code)):
            lines.append(f"{issue.module_path}:{issue.line}: {issue.code} [{issue.severity.value}] {issue.message}")
    return "\n".join(lines) + "\n"


def render_json(analysis: SizingAnalysis, root: str) -> str:
    document = {
        "tree": root,
        "dcp": analysis.dcp,
        "block_size": analysis.block_size,
        "reference": analysis.reference,
        "resolver": analysis.resolver,
        "kinds": [
            {"label": k.label, "container": k.is_container, "rejected_under_dcp": k.rejected_under_dcp}
            for k in analysis.kinds
        ],
        "paths": [
            {
                "name": p.name,
                "module_path": p.module_path,
                "function": p.qualname,
                "line": p.line,
                "role": p.role,
                "views": {view: list(factors) for view, factors in p.views},
                "cells": [cell(p, i) for i in range(len(analysis.kinds))],
                "differs": [analysis.differs(p, i) for i in range(len(analysis.kinds))],
            }
            for p in analysis.paths
        ],
        "findings": [
            {
                "code": i.code,
                "path": i.module_path,
                "function": i.qualname,
                "line": i.line,
                "column": i.column,
                "severity": i.severity.value,
                "message": i.message,
            }
            for i in sizing_findings(analysis)
        ],
    }
    return json.dumps(document, indent=2) + "\n"


def _letter(index: int) -> str:
    letters = ""
    index += 1
    while index:
        index, remainder = divmod(index - 1, 26)
        letters = chr(ord("A") + remainder) + letters
    return letters


@click.command("paths")
@click.argument("path", required=False, type=click.Path())
@click.option("--vllm-release", "release", metavar="VERSION", help="Fetch this vLLM release's sources from PyPI and show its matrix.")
@click.option("--format", "output_format", type=click.Choice(["text", "json"]), default="text", show_default=True)
def paths(path, release, output_format):
    """Show the sizing-path matrix: spec kinds x every sizing path (`module:function`), each cell the DCP factor."""
    if path and release:
        raise click.UsageError("give either PATH or --vllm-release, not both")
    if release:
        from kvlint.scan.releases import release_sources

        target = release_sources(release, quiet=output_format == "json")
    elif path:
        target = Path(path)
    else:
        from kvlint.scan.targets import default_target

        target, line = default_target(Path.cwd())
        click.echo(line, err=True)
    if not target.exists():
        click.echo(f"kvlint: error: {target}: no such file or directory", err=True)
        sys.exit(EXIT_ERROR)
    root = find_tree_root(target)
    if root is None:
        click.echo(f"kvlint: error: {target}: not in a vLLM tree (no vllm/v1/kv_cache_interface.py found)", err=True)
        sys.exit(EXIT_ERROR)
    config = load_config(find_pyproject(Path.cwd()))  # as `check` reads it: roles follow scheduler-only-paths
    analysis = build_project_index([target], scheduler_only_paths=tuple(config.scheduler_only_paths)).sizing
    if not isinstance(analysis, SizingAnalysis):
        click.echo(f"kvlint: error: {root}: the sizing paths could not be analysed", err=True)
        sys.exit(EXIT_ERROR)
    render = render_json if output_format == "json" else render_text
    click.echo(render(analysis, str(root)), nl=False)
    sys.exit(EXIT_OK)
